"""``manage.py serve``: what ``make run`` runs — migrate, admin login, index the bundled book, then
gunicorn and a django-q2 cluster until Ctrl-C, which stops them (and the embedded database if
this process started it). The database's data stays under the data directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

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
        if not options["no_index"]:
            self._index_bundled_book()
        children = self._start(options["host"], options["port"])
        self.stdout.write(f"bookchat is serving http://{options['host']}:{options['port']}/ "
                          f"(admin at /admin/). Ctrl-C stops it.")
        try:
            self._wait(children)
        finally:
            self._stop(children)

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
        python = sys.executable
        base = Path(settings.BASE_DIR)
        env = os.environ | {"DJANGO_SETTINGS_MODULE": "bookchat.settings"}
        web = [python, "-m", "gunicorn", "bookchat.wsgi:application", "--bind", f"{host}:{port}",
               "--workers", str(setting("WEB_WORKERS")), "--access-logfile", "-", "--graceful-timeout", "5"]
        tasks = [python, str(base / "manage.py"), "qcluster"]
        # The embedder's OpenMP threads spin while they wait: fastest for bulk indexing (the task worker),
        # but a web worker spinning beside a busy task worker turned 16 ms queries into seconds. Sleeping
        # threads keep web queries at tens of ms under load (BENCHMARKS.md, Speed).
        web_env = {"OMP_WAIT_POLICY": "PASSIVE"} | env
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
        deadline = time.monotonic() + 15
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
