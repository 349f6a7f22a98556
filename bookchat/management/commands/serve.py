"""``manage.py serve``: what ``make run`` runs — migrate, admin login, index the bundled book, then
gunicorn and a django-q2 cluster until Ctrl-C, which stops them (and the embedded database if
this process started it). The database's data stays under the data directory.

Decisions (how gunicorn runs, ``gunicorn_command``; README, "Serving"; BENCHMARKS.md, "Streams held open"):
- Worker class ``gthread``: ``WEB_WORKERS`` processes of ``WEB_THREADS`` threads. A streamed answer holds
  whatever serves it for as long as the LLM writes (seconds); with sync workers two readers streaming
  blocked every other request, health checks included. A thread waiting on the LLM costs no CPU.
  Measured on 2 cores, LLM at 0.1 s a token, 2 × 32 threads: 5 to 40 streams started together all
  ended, health answered in ~5 ms (110 ms at worst) meanwhile; sync workers served the streams two
  at a time and health waited up to 10 s.
- Not gevent, though it held as many streams: the embedder's C code blocks the whole process (first
  token p50 2.9 s at 40 streams against 1.3 s), it patches the standard library under Django, psycopg,
  the openai client and OpenMP, and each request in flight is a greenlet with a database connection of
  its own (no bound, none reused), where threads hold at most ``WEB_WORKERS × WEB_THREADS``, reused.
- Threads, not more processes: a process loads the embedder and its own connections; a thread is all a
  waiting stream needs. CPU-bound work still runs on ``WEB_WORKERS`` processes, as many as the cores.
- ``--timeout``: with gthread the worker's main loop reports to the arbiter every second whatever its
  threads do, so a long stream never gets the worker killed; only a stuck main loop does.
- ``--graceful-timeout``: on Ctrl-C a worker stops accepting and lets requests in flight finish for that
  long; a stream lasts at most ``DEADLINE_SECONDS``, so one more second lets the open ones end.
- Keep-alive (gunicorn's 2 s): an idle kept-alive connection waits in the worker's poller, not on a
  thread.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

from bookchat import embedded_db
from bookchat.conf import setting
from bookchat.errors import BookchatError
from ingestion.indexing import index_book
from ingestion.jobs import sweep_stale_jobs
from ingestion.management.commands.ingest import ProgressBar


class Command(BaseCommand):
    help = "Migrate, create the admin login, index the bundled book and serve with gunicorn + a django-q2 worker."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--no-index", action="store_true", help="Don't index the bundled book first.")

    def handle(self, *args, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_admin")
        sweep_stale_jobs()  # upload jobs left "running" by a worker that died with the previous run
        self._check_connection_budget()
        if not options["no_index"]:
            self._index_bundled_book()
        children = self._start(options["host"], options["port"])
        self.stdout.write(f"bookchat is serving http://{options['host']}:{options['port']}/ "
                          f"(admin at /admin/). Ctrl-C stops it.")
        try:
            self._wait(children)
        finally:
            self._stop(children)

    def _check_connection_budget(self) -> None:
        """Warn when the database may refuse the connections the workers' threads can hold."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('max_connections')::int "
                           "- current_setting('superuser_reserved_connections')::int")
            available = cursor.fetchone()[0]
        needed = connections_needed()
        if needed > available:
            self.stderr.write(f"Warning: gunicorn's threads and the task worker may hold {needed} database "
                              f"connections, but the database accepts {available}: lower BOOKCHAT_WEB_THREADS "
                              "or BOOKCHAT_WEB_WORKERS, or raise its max_connections.")

    def _index_bundled_book(self) -> None:
        docs = Path(setting("DOCS_DIR"))
        docs = docs if docs.is_absolute() else Path(settings.BASE_DIR) / docs
        if not docs.is_dir():
            self.stderr.write(f"No bundled book at {docs}; skipping indexing.")
            return
        self.stdout.write(f"Indexing the bundled book in {docs} …")
        progress = ProgressBar(sys.stderr)
        try:
            report = index_book(path=docs, book_slug="bookchat-manual", title="bookchat manual",
                                trigger="make run", progress=progress)
        except BookchatError as exc:
            self.stderr.write(f"Indexing the bundled book failed: {exc}")
            return
        finally:
            progress.close()
        self.stdout.write(f"  {report.files_indexed} pages indexed, {report.files_unchanged} unchanged, "
                          f"{report.chunks_embedded} passages embedded, {len(report.errors)} errors "
                          f"({report.total_seconds:.1f} s).")

    def _start(self, host: str, port: int) -> list[subprocess.Popen]:
        base = Path(settings.BASE_DIR)
        env = os.environ | {"DJANGO_SETTINGS_MODULE": "bookchat.settings"}
        web, web_env = gunicorn_command(bind=f"{host}:{port}"), gunicorn_environment(env)
        tasks = [sys.executable, str(base / "manage.py"), "qcluster"]
        # Even so, an upload's embedding takes both cores for as long as it runs; at a lower CPU priority it
        # uses what answers leave, and answers under load stay within 2× their idle p95 (tests/test_soak.py).
        niceness = setting("TASK_NICENESS")
        lower_priority = (lambda: os.nice(niceness)) if niceness else None
        # Each child leads a process group of its own, so that stopping it also reaches the processes
        # it forks (gunicorn workers, the django-q2 sentinel and workers) and none is left behind.
        return [subprocess.Popen(cmd, cwd=base, env=child_env, start_new_session=True, preexec_fn=start)
                for cmd, child_env, start in ((web, web_env, None), (tasks, env, lower_priority))]

    def _wait(self, children: list[subprocess.Popen]) -> None:
        stop = {"now": False}

        def on_signal(signum, frame):
            stop["now"] = True

        # Handled explicitly (not as KeyboardInterrupt): a shell that starts us in the background sets
        # SIGINT to "ignore", and Ctrl-C must still stop everything.
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        while not stop["now"]:
            for child in children:
                if child.poll() is not None:
                    self.stderr.write(f"{child.args[2]} exited with status {child.returncode}; stopping.")
                    return
            time.sleep(0.5)

    def _stop(self, children: list[subprocess.Popen]) -> None:
        self.stdout.write("\nStopping …")
        for child in children:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + graceful_timeout() + 10
        for child in children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(deadline - time.monotonic(), 0.1))
            _signal_group(child, signal.SIGKILL)  # whatever of the group outlived the grace period
            child.wait()
        if embedded_db.started_here:
            from django.db import connections

            connections.close_all()
            embedded_db.stop(Path(settings.DATA_DIR))
            self.stdout.write("Stopped the embedded PostgreSQL (data kept in the data directory).")
        self.stdout.write("Stopped.")


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(child.pid, signum)


def gunicorn_command(*, bind: str, workers: int | None = None, threads: int | None = None,
                     access_log: bool = True) -> list[str]:
    """The gunicorn that ``make run`` starts (tests and ``make bench`` start this one too): ``workers``
    processes of ``threads`` threads, from ``WEB_WORKERS`` and ``WEB_THREADS`` unless given."""
    workers = setting("WEB_WORKERS") if workers is None else workers
    threads = setting("WEB_THREADS") if threads is None else threads
    return [sys.executable, "-m", "gunicorn", "bookchat.wsgi:application", "--bind", bind,
            "--worker-class", "gthread", "--workers", str(workers), "--threads", str(threads),
            "--timeout", "30", "--graceful-timeout", str(graceful_timeout()),
            *(["--access-logfile", "-"] if access_log else [])]


def connections_needed() -> int:
    """Database connections `make run` may hold at once: one per gunicorn thread that has served a request,
    and the django-q2 cluster's (its workers, monitor, pusher and sentinel) and this process's own."""
    return setting("WEB_WORKERS") * setting("WEB_THREADS") + setting("TASK_WORKERS") + 4


def gunicorn_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` as gunicorn gets it. The embedder's OpenMP threads spin while they wait: fastest for bulk
    indexing (the task worker), but a web worker spinning beside a busy task worker turned 16 ms queries
    into seconds. Sleeping threads keep web queries at tens of ms under load (BENCHMARKS.md, Speed)."""
    return {"OMP_WAIT_POLICY": "PASSIVE"} | env


def graceful_timeout() -> int:
    """Seconds a stopping worker gives the requests in flight: the longest a stream lasts, and one more."""
    return math.ceil(setting("DEADLINE_SECONDS")) + 1
