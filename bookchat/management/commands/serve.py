"""``manage.py serve``: what ``make run`` runs — ``bootstrap`` (migrate, admin login), then gunicorn and the two
django-q2 clusters (the indexing and the background queue, ``bookchat.base.queues``) until Ctrl-C, which stops
them (and the embedded database if this process started it). The database's data stays under the data directory.

Serve first: the bundled manual (and ``--book``, ``make run BOOK=``) are indexed in the background, as jobs of the
task worker (``ingestion.uploads.jobs.queue_local``), while the page already answers; this process follows them on
the terminal, and until a book is indexed the page, ``/api/v1/ready`` and a question say how far its indexing has
got (``chat.pipeline.editions.BookIndexing``: a 503 to ask again). An unchanged book costs a second.

Roles (the manual, "Deploying and running"): ``--role all`` (the default, one machine) does all of
that; ``web`` runs gunicorn only and ``worker`` the django-q2 clusters only (both, unless ``--queue`` names one: a
deployment may run each on nodes of its own). Those two never migrate or index: they refuse to start, in one line,
on a database that ``bootstrap`` hasn't set up. The background cluster runs ``BACKGROUND_EXTRA_NICENESS`` nicer
than the indexing one, so that a publish's embedding gets the cores before a book's sentence vectors.

Decisions (how gunicorn runs, ``gunicorn_command``; the manual, "Deploying and running"; BENCHMARKS.md, "Streams
held open"):
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
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from bookchat.base import embedded_db, queues
from bookchat.base.conf import setting
from bookchat.base.deployment import NotMigrated, PgvectorUnusable, check_pgvector, require_migrated
from bookchat.base.errors import BookchatError
from bookchat.management.commands.bootstrap import BUNDLED_SLUG, BUNDLED_TITLE, bundled_book_dir, describe
from ingestion.indexing.ingesting import default_slug
from ingestion.management.commands.ingest import ProgressBar, summary
from ingestion.models import DefaultBook, IngestionJob
from ingestion.uploads.jobs import queue_local, sweep_stale_jobs

ROLES = ("all", "web", "worker")
WORKER_QUEUES = ("all", *queues.QUEUES)


class Command(BaseCommand):
    help = ("Serve bookchat: --role all (default: bootstrap, then gunicorn + a django-q2 worker, as `make run`), "
            "web (gunicorn only) or worker (the django-q2 cluster only).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--role", choices=ROLES, default="all",
                            help="all: one machine (bootstraps first); web: gunicorn only; worker: django-q2 only. "
                                 "web and worker need a database set up by `manage.py bootstrap`.")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--queue", choices=WORKER_QUEUES, default="all",
                            help="worker: the task queue(s) whose cluster to run: all (default: indexing and "
                                 "background), indexing (uploads, publishes) or background (sentence vectors, "
                                 "calibration, topics, schedules).")
        parser.add_argument("--no-index", action="store_true", help="Don't index the bundled book first (role all).")
        parser.add_argument("--book", metavar="PATH", help="Also index this book (a Docusaurus site's root, a folder "
                            "of Markdown or one page) before serving, and make it the default book (stored: every "
                            "process reads it), unless BOOKCHAT_DEFAULT_BOOK names another (role all; `make run "
                            "BOOK=PATH`).")

    def handle(self, *args, **options) -> None:
        role = options["role"]
        if options["queue"] != "all" and role != "worker":
            raise CommandError("--queue is for --role worker; --role all runs both queues", returncode=1)
        if options["book"] and role != "all":
            raise CommandError("--book is for --role all (one machine); on several, run `manage.py ingest PATH "
                               "--default` once", returncode=1)
        if options["book"] and not Path(options["book"]).expanduser().exists():
            raise CommandError(f"--book: {options['book']} does not exist", returncode=1)
        if role == "all":
            call_command("bootstrap", no_index=True, stdout=self.stdout, stderr=self.stderr)
        else:
            try:
                require_migrated()
                with connection.cursor() as cursor:
                    check_pgvector(cursor)  # a server whose pgvector was downgraded, or never upgraded
            except (NotMigrated, PgvectorUnusable) as exc:
                raise CommandError(exc.message, returncode=1) from None
        if role != "web":
            sweep_stale_jobs()  # upload jobs left "running" by a worker that died (with the previous run)
        served = queues.QUEUES if options["queue"] == "all" else (options["queue"],)
        self._check_connection_budget(role, served)
        default_book = self._own_slug(options["book"]) if options["book"] else None
        if default_book and not setting("DEFAULT_BOOK"):
            # Stored before the children start, so that the page shows it (being indexed) from the first request.
            DefaultBook.choose(default_book, by="serve --book")
        children = self._start(options["host"], options["port"], role, served)
        if role == "worker":
            self.stdout.write(f"bookchat's task workers are running ({', '.join(served)}). Ctrl-C stops them.")
        else:
            self.stdout.write(f"bookchat is serving http://{options['host']}:{options['port']}/ "
                              f"(admin at /admin/). Ctrl-C stops it.")
        try:
            following = []
            if role == "all" and not options["no_index"]:
                following += self._queue_bundled_book()
            if options["book"]:
                following.append(self._queue_own_book(options["book"], default_book))
            self._wait(children, following)
        finally:
            self._stop(children)

    def _check_connection_budget(self, role: str, served: tuple[str, ...] = queues.QUEUES) -> None:
        """Warn when the database may refuse the connections the workers' threads can hold."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('max_connections')::int "
                           "- current_setting('superuser_reserved_connections')::int")
            available = cursor.fetchone()[0]
        needed = connections_needed(role, served)
        if needed > available:
            self.stderr.write(f"Warning: gunicorn's threads and the task worker may hold {needed} database "
                              f"connections, but the database accepts {available}: lower BOOKCHAT_WEB_THREADS "
                              "or BOOKCHAT_WEB_WORKERS, or raise its max_connections.")

    def _queue_bundled_book(self) -> list[Following]:
        docs = bundled_book_dir()
        if not docs.is_dir():
            self.stderr.write(f"No bundled book at {docs}; skipping indexing.")
            return []
        self.stdout.write(f"Indexing the bundled book in {docs} in the background …")
        job = queue_local(path=docs, book_slug=BUNDLED_SLUG, title=BUNDLED_TITLE)
        return [Following(job.pk, done=lambda report: self.stdout.write(describe(report)),
                          failed=lambda message: self.stderr.write(f"Indexing the bundled book failed: {message}"))]

    def _own_slug(self, path: str) -> str:
        """The book ``--book`` makes (the page's default from the start, before it is indexed)."""
        try:
            return default_slug(path)
        except BookchatError as exc:
            raise CommandError(f"Reading {path} failed: {exc}", returncode=1) from None

    def _queue_own_book(self, path: str, slug: str) -> Following:
        """Index the user's book in the background (incremental: unchanged pages cost nothing)."""
        self.stdout.write(f"Indexing your book in {path} in the background as the book {slug!r} (commands "
                          f"name it with --book {slug}) …")

        def done(report) -> None:
            self.stdout.write(summary(report))  # as `ingest` reports it, errors and warnings included
            if report.files_indexed + report.files_unchanged == 0:
                self.stderr.write(f"Indexing {path} failed: no page could be indexed (see the errors above)")
            elif setting("DEFAULT_BOOK"):
                self.stdout.write(f"Your book is {slug!r}; BOOKCHAT_DEFAULT_BOOK keeps "
                                  f"{setting('DEFAULT_BOOK')!r} the default.")
            else:
                self.stdout.write(f"Your book {slug!r} is the default book (the manual stays: "
                                  "/?book=bookchat-manual).")

        job = queue_local(path=Path(path).expanduser(), book_slug=slug)
        return Following(job.pk, done=done, failed=lambda message: self.stderr.write(
            f"Indexing {path} failed: {message}"))

    def _start(self, host: str, port: int, role: str,
               served: tuple[str, ...] = queues.QUEUES) -> list[Child]:
        base = Path(settings.BASE_DIR)
        env = {"DJANGO_SETTINGS_MODULE": "bookchat.settings"} | os.environ  # the children run with our settings
        wanted = [("gunicorn", gunicorn_command(bind=f"{host}:{port}"), gunicorn_environment(env), None)] \
            if role != "worker" else []
        # Even so, an upload's embedding takes both cores for as long as it runs; at a lower CPU priority it
        # uses what answers leave, and answers under load stay within 2× their idle p95 (bench/soak.py, `make bench`).
        wanted += [(f"the {queue} task worker", task_command(), env | queues.cluster_environment(queue),
                    lower_priority(queues.niceness(queue))) for queue in served] if role != "web" else []
        # Each child leads a process group of its own, so that stopping it also reaches the processes
        # it forks (gunicorn workers, the django-q2 sentinel and workers) and none is left behind.
        return [Child(name, subprocess.Popen(cmd, cwd=base, env=child_env, start_new_session=True,
                                             preexec_fn=start))
                for name, cmd, child_env, start in wanted]

    def _wait(self, children: list[Child], following: list[Following] = ()) -> None:
        stop = {"now": False}
        progress = ProgressBar(sys.stderr)

        def on_signal(signum, frame):
            stop["now"] = True

        # Handled explicitly (not as KeyboardInterrupt): a shell that starts us in the background sets
        # SIGINT to "ignore", and Ctrl-C must still stop everything.
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        following = list(following)
        while not stop["now"]:
            for child in children:
                if child.process.poll() is not None:
                    progress.close()
                    self.stderr.write(f"{child.name} exited with status {child.process.returncode}; stopping.")
                    return
            following = [f for f in following if not f.check(progress)]
            time.sleep(0.5)
        progress.close()

    def _stop(self, children: list[Child]) -> None:
        self.stdout.write("\nStopping …")
        for child in (child.process for child in children):
            if child.args == task_command():
                # django-q2's own stop: its main process tells the sentinel, which stops the workers once their
                # tasks end. SIGTERM to the whole group would kill the sentinel outright (it keeps the default
                # action), maybe holding a lock the main process then waits on until the SIGKILL below.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGTERM)
            else:
                _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + graceful_timeout() + 10
        for child in (child.process for child in children):
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


@dataclass(frozen=True)
class Child:
    """A process ``serve`` started, and how its messages name it."""

    name: str
    process: subprocess.Popen


def lower_priority(niceness: int) -> Callable[[], None] | None:
    """What a child runs before its program to take CPU niceness ``niceness`` (None for 0)."""
    return (lambda: os.nice(niceness)) if niceness else None


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(child.pid, signum)


def task_command() -> list[str]:
    """A django-q2 cluster that ``make run`` and ``--role worker`` start (each queue's, by its environment:
    ``queues.cluster_environment``): ``qcluster`` through the ``bookchat`` command line's module, which a checkout
    and an installed wheel both have (a wheel has no ``manage.py``)."""
    return [sys.executable, "-m", "bookchat.cli", "qcluster"]


def gunicorn_command(*, bind: str, workers: int | None = None, threads: int | None = None,
                     access_log: bool = True) -> list[str]:
    """The gunicorn that ``make run`` starts (tests and ``make bench`` start this one too): ``workers``
    processes of ``threads`` threads, from ``WEB_WORKERS`` and ``WEB_THREADS`` unless given."""
    workers = setting("WEB_WORKERS") if workers is None else workers
    threads = setting("WEB_THREADS") if threads is None else threads
    return [sys.executable, "-m", "gunicorn", "bookchat.wsgi:application", "--bind", bind,
            "--config", "python:bookchat.gunicorn_config",  # its hooks: /metrics counts every worker
            "--worker-class", "gthread", "--workers", str(workers), "--threads", str(threads),
            "--timeout", "30", "--graceful-timeout", str(graceful_timeout()),
            *(["--access-logfile", "-"] if access_log else [])]


def connections_needed(role: str = "all", served: tuple[str, ...] = queues.QUEUES) -> int:
    """Database connections `serve --role` may hold at once: one per gunicorn thread that has served a request
    (web), each django-q2 cluster's (its workers, monitor, pusher and sentinel; worker) and this process's own."""
    web = setting("WEB_WORKERS") * setting("WEB_THREADS") if role != "worker" else 0
    tasks = sum(queues.workers(queue) + queues.CLUSTER_OVERHEAD for queue in served) if role != "web" else 0
    return web + tasks + 1


def gunicorn_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` as gunicorn gets it: with sleeping OpenMP threads even where ``env`` was made before ``bookchat``
    set that default (``bookchat/__init__.py``). A web worker whose threads spin beside a busy task worker turned
    16 ms queries into seconds (BENCHMARKS.md, Speed)."""
    return {"OMP_WAIT_POLICY": "PASSIVE"} | env


def graceful_timeout() -> int:
    """Seconds a stopping worker gives the requests in flight: the longest a stream lasts, and one more."""
    return math.ceil(setting("DEADLINE_SECONDS")) + 1


class Following:
    """A background indexing job ``serve`` follows on the terminal: its progress bar while it runs, then ``done``
    with its report (read as ``ingest``'s report reads) or ``failed`` with why."""

    def __init__(self, job_id: int, *, done: Callable, failed: Callable[[str], None]):
        self.job_id = job_id
        self.done = done
        self.failed = failed

    def check(self, progress: ProgressBar) -> bool:
        """Draw the job's progress; whether it has ended (and was reported)."""
        job = IngestionJob.objects.filter(pk=self.job_id).first()
        if job is None:
            return True
        if job.is_active:
            progress("files", job.files_done, job.files_total)
            if embedding := _EMBEDDING.search(job.stage or ""):
                progress("embed", int(embedding[1]), int(embedding[2]))
            return False
        progress.close()
        if job.status == IngestionJob.Status.DONE:
            self.done(SimpleNamespace(**{**REPORT_DEFAULTS, **job.report}))
        else:
            self.failed(job.error or job.status)
        return True


_EMBEDDING = re.compile(r"^embedding passages \((\d+)/(\d+)\)")
# What a job's stored report may lack (a site's is its editions' sum) that the report's readers read.
REPORT_DEFAULTS = {"after": {}, "errors": [], "warnings": [], "dry_run": False, "tokens": 0, "embed_seconds": 0.0,
                   "total_seconds": 0.0}
