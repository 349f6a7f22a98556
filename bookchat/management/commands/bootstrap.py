"""``manage.py bootstrap``: what a deployment needs once, before its nodes start: migrate, create the admin
login, index the bundled book. Under the deployment's advisory lock (``bookchat.base.deployment``), so nodes that
run it together take turns and the later ones find nothing to do. ``make run`` (``serve --role all``) runs it
first; on several machines, run it once per deployment (the manual, "Deploying and running").
``--wait SECONDS`` first waits that long for the database to accept connections: a container platform starts
PostgreSQL beside it, and compose's health conditions aren't honoured everywhere (podman 4.3 ignores them).
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, OperationalError, connection

from bookchat.base.conf import setting
from bookchat.base.deployment import PgvectorUnusable, check_pgvector, deployment_lock, pending_migrations
from bookchat.base.errors import BookchatError
from ingestion.indexing.ingesting import index_book
from ingestion.indexing.reports import IndexReport
from ingestion.management.commands.ingest import ProgressBar

BUNDLED_SLUG = "bookchat-manual"
BUNDLED_TITLE = "bookchat manual"


def bundled_book_dir() -> Path:
    docs = Path(setting("DOCS_DIR"))
    return docs if docs.is_absolute() else Path(settings.BASE_DIR) / docs


def index_bundled_book(*, trigger: str, progress=None) -> IndexReport:
    """Index ``DOCS_DIR`` as the book ``bookchat-manual`` (incremental: an unchanged book embeds nothing)."""
    return index_book(path=bundled_book_dir(), book_slug=BUNDLED_SLUG, title=BUNDLED_TITLE, trigger=trigger,
                      progress=progress)


def describe(report: IndexReport) -> str:
    return (f"  {report.files_indexed} pages indexed, {report.files_unchanged} unchanged, "
            f"{report.chunks_embedded} passages embedded, {len(report.errors)} errors "
            f"({report.total_seconds:.1f} s).")


class Command(BaseCommand):
    help = ("Set up the deployment once: migrate, create the admin login, index the bundled book "
            "(under an advisory lock: nodes running it together take turns).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-index", action="store_true", help="Don't index the bundled book.")
        parser.add_argument("--json", action="store_true", help="Print the outcome as one JSON object.")
        parser.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                            help="Wait up to this long for the database to accept connections (default: 0).")

    def handle(self, *args, **options) -> None:
        as_json = options["json"]
        result = {"waited_seconds": 0.0, "migrations_applied": [], "admin": None, "book": None}

        def waiting() -> None:
            self.stderr.write("Another node is bootstrapping this deployment; waiting for it …")

        try:
            self._wait_for_database(options["wait"])
            with deployment_lock(on_wait=waiting) as waited:
                result["waited_seconds"] = round(waited, 3)
                with connection.cursor() as cursor:
                    check_pgvector(cursor)
                result["migrations_applied"] = pending_migrations()
                call_command("migrate", interactive=False, verbosity=0)
                admin = io.StringIO()
                call_command("ensure_admin", "--json", stdout=admin)
                result["admin"] = json.loads(admin.getvalue())
                if not as_json:
                    applied = result["migrations_applied"]
                    self.stdout.write(f"Applied {len(applied)} migrations." if applied else
                                      "The database is up to date.")
                    self.stdout.write(_admin_message(result["admin"]))
                if not options["no_index"]:
                    result["book"] = self._index(as_json=as_json)
        except DatabaseError as exc:
            self._fail(as_json, "database", f"bootstrapping failed: {type(exc).__name__}: "
                                            f"{(str(exc).strip().splitlines() or [''])[0]}")
        except PgvectorUnusable as exc:
            self._fail(as_json, exc.code, exc.message)
        except BookchatError as exc:
            self._fail(as_json, exc.code, f"indexing the bundled book failed: {exc}")
        if as_json:
            self.stdout.write(json.dumps(result))

    def _wait_for_database(self, seconds: float) -> None:
        """Return once a connection opens; the last error escapes after ``seconds``."""
        deadline, said = time.monotonic() + seconds, False
        while True:
            try:
                connection.ensure_connection()
                return
            except OperationalError:
                if time.monotonic() >= deadline:
                    raise
                if not said:
                    self.stderr.write(f"Waiting up to {seconds:g} s for the database …")
                    said = True
                connection.close()
                time.sleep(1)

    def _index(self, *, as_json: bool) -> dict | None:
        docs = bundled_book_dir()
        if not docs.is_dir():
            self.stderr.write(f"No bundled book at {docs}; skipping indexing.")
            return None
        if not as_json:
            self.stdout.write(f"Indexing the bundled book in {docs} …")
        progress = None if as_json else ProgressBar(sys.stderr)
        try:
            report = index_bundled_book(trigger="bootstrap", progress=progress)
        finally:
            if progress is not None:
                progress.close()
        if not as_json:
            self.stdout.write(describe(report))
        return report.as_dict()

    def _fail(self, as_json: bool, code: str, message: str) -> None:
        if as_json:
            self.stdout.write(json.dumps({"error": code, "message": message}))
        raise CommandError(message, returncode=1)


def _admin_message(admin: dict) -> str:
    """What ``ensure_admin`` says, from its JSON."""
    if not admin["created"]:
        return "An admin login already exists."
    if admin["password"] is None:
        return f"Created the admin login {admin['username']!r} with the password from BOOKCHAT_ADMIN_PASSWORD."
    return (f"Created the admin login {admin['username']!r} with password {admin['password']} — shown once, "
            "note it now.")
