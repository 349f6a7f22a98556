"""Setting up a deployment once, and noticing one that isn't: ``manage.py bootstrap`` migrates, creates the
admin login and indexes the bundled book under a Postgres advisory lock; web and worker nodes only check
that it was done (``serve --role web|worker``), and commands meeting a database without bookchat's tables
say what to run instead of printing a traceback.

Decisions:
- A session-level advisory lock on the deployment's database, not a file: nodes on several machines share
  only that database. Two nodes bootstrapping together run one after the other; the second finds every
  migration applied and the book unchanged, and does nothing.
- Nodes never migrate on start: a rolling deploy would run an old node against a schema it doesn't know.
  Migrations run once per deployment, before the new nodes start (the manual, "Deploying and running").
- pgvector is checked before migrating and when a node starts, in one line each: missing from the server, older
  than 0.8 (big books search with ``hnsw.iterative_scan``), or not installable by this user (the first migration
  runs ``CREATE EXTENSION vector``, which a managed database may reserve to its administrator).
- "Not migrated" is recognised after the fact (a missing-table error, then the migration plan confirms it),
  so that commands pay nothing for the check when the database is set up.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from bookchat.base.errors import ConfigurationError

# pg_advisory_lock's key for bootstrapping: the bytes of "bookchat" as a signed 64-bit number.
LOCK_KEY = int.from_bytes(b"bookchat", "big", signed=True)
NOT_MIGRATED = ("bookchat's database is not set up yet ({count} migrations to apply): run `manage.py bootstrap` "
                "once for this deployment (`make run` does it on one machine), then try again.")


# hnsw.iterative_scan (a big book's own HNSW index searched until enough of its rows are found) came in 0.8.
PGVECTOR_MINIMUM = (0, 8)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def pgvector_problem(*, installed: str | None, available: str | None, superuser: bool, trusted: bool,
                     may_create: bool, user: str = "", database: str = "") -> str | None:
    """What stops bookchat using pgvector on this database, in one line, or None."""
    minimum = ".".join(map(str, PGVECTOR_MINIMUM))
    if installed is not None:
        if _version(installed) < PGVECTOR_MINIMUM:
            return (f"the database has pgvector {installed}; bookchat needs {minimum} or later: upgrade pgvector on "
                    "the server, then run ALTER EXTENSION vector UPDATE in the database")
        return None
    if available is None:
        return ("the PostgreSQL server has no pgvector extension: install it on the server (the postgresql-NN-"
                "pgvector package, or the managed service's 'vector' extension), or unset DATABASE_URL to use the "
                "embedded database")
    if _version(available) < PGVECTOR_MINIMUM:
        return f"the PostgreSQL server offers pgvector {available}; bookchat needs {minimum} or later: upgrade it"
    if not (superuser or (trusted and may_create)):
        return (f"the database user {user!r} may not create the vector extension in {database!r}: ask its "
                "administrator to run CREATE EXTENSION vector there once, then run `manage.py bootstrap` again")
    return None


class PgvectorUnusable(ConfigurationError):
    code = "pgvector"


def check_pgvector(cursor) -> str:
    """The pgvector version the database has or will install; ``PgvectorUnusable`` (one line) otherwise."""
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    row = cursor.fetchone()
    installed = row[0] if row else None
    cursor.execute("SELECT a.default_version, coalesce(v.trusted, false) FROM pg_available_extensions a "
                   "LEFT JOIN pg_available_extension_versions v ON v.name = a.name AND v.version = a.default_version "
                   "WHERE a.name = 'vector'")
    row = cursor.fetchone()
    available, trusted = row if row else (None, False)
    cursor.execute("SELECT rolsuper, has_database_privilege(current_database(), 'CREATE'), current_user, "
                   "current_database() FROM pg_roles WHERE rolname = current_user")
    superuser, may_create, user, database = cursor.fetchone()
    problem = pgvector_problem(installed=installed, available=available, superuser=superuser, trusted=trusted,
                               may_create=may_create, user=user, database=database)
    if problem:
        raise PgvectorUnusable(problem)
    return installed or available


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
