"""Setting up a deployment once, and noticing one that isn't: ``manage.py bootstrap`` migrates, creates the
admin login and indexes the bundled book under a Postgres advisory lock; web and worker nodes only check
that it was done (``serve --role web|worker``), and commands meeting a database without bookchat's tables
say what to run instead of printing a traceback.

Decisions:
- A session-level advisory lock on the deployment's database, not a file: nodes on several machines share
  only that database. Two nodes bootstrapping together run one after the other; the second finds every
  migration applied and the book unchanged, and does nothing.
- Nodes never migrate on start: a rolling deploy would run an old node against a schema it doesn't know.
  Migrations run once per deployment, before the new nodes start (README, "Running on more than one machine").
- "Not migrated" is recognised after the fact (a missing-table error, then the migration plan confirms it),
  so that commands pay nothing for the check when the database is set up.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from bookchat.errors import ConfigurationError

# pg_advisory_lock's key for bootstrapping: the bytes of "bookchat" as a signed 64-bit number.
LOCK_KEY = int.from_bytes(b"bookchat", "big", signed=True)
NOT_MIGRATED = ("bookchat's database is not set up yet ({count} migrations to apply): run `manage.py bootstrap` "
                "once for this deployment (`make run` does it on one machine), then try again.")


class NotMigrated(ConfigurationError):
    code = "not_migrated"

    def __init__(self, pending: list[str]):
        super().__init__(NOT_MIGRATED.format(count=len(pending)))
        self.pending = pending


@contextlib.contextmanager
def deployment_lock(*, on_wait: Callable[[], None] | None = None) -> Iterator[float]:
    """Hold the deployment's advisory lock; yields the seconds spent waiting for another node to release it."""
    from django.db import connection

    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cursor.fetchone()[0]:
            if on_wait is not None:
                on_wait()
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
    try:
        yield time.monotonic() - started
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def pending_migrations() -> list[str]:
    """The migrations this code has that the database hasn't applied (``app.name``)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _ in plan]


def require_migrated() -> None:
    """NotMigrated when the database lacks migrations this code has."""
    pending = pending_migrations()
    if pending:
        raise NotMigrated(pending)


def explain_missing_tables(exc: BaseException) -> str | None:
    """The one line to print for ``exc`` when it comes from a database bookchat was never migrated on."""
    from django.db import ProgrammingError, connection

    if not isinstance(exc, ProgrammingError) or "does not exist" not in str(exc):
        return None
    try:
        connection.close()  # the failed statement may have left it unusable
        pending = pending_migrations()
    except Exception:  # the database itself is the problem: let the original error speak
        return None
    return NotMigrated(pending).message if pending else None


def run_management_command(argv: list[str]) -> None:
    """Django's ``execute_from_command_line``, but a database without bookchat's tables is one line, exit 1."""
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except Exception as exc:
        message = explain_missing_tables(exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        sys.exit(1)
