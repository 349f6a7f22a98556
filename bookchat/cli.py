"""The ``bookchat`` command: operations that must not start the embedded database (``db stop``, ``db status``, and
``push``, which publishes a book to a server: ``bookchat.push``).

Everything else goes through ``manage.py`` (``bookchat`` forwards other commands to it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from bookchat import conf, embedded_db

BASE_DIR = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    path = Path(conf.from_environment()["DATA_DIR"])
    return path if path.is_absolute() else BASE_DIR / path


def db_command(action: str, *, as_json: bool) -> int:
    if embedded_db.is_configured_externally():
        print("DATABASE_URL (or DATABASE_URL_FILE) is set: bookchat does not manage that server.", file=sys.stderr)
        return 2
    pgdata = data_dir() / "pgdata"
    if action == "stop":
        stopped = embedded_db.stop(data_dir())
        result = {"stopped": stopped, "pgdata": str(pgdata)}
        text = "Stopped the embedded PostgreSQL." if stopped else "The embedded PostgreSQL was not running."
    elif action == "status":
        running = embedded_db.server_running(pgdata)
        result = {"running": running, "pgdata": str(pgdata)}
        text = f"The embedded PostgreSQL is {'running' if running else 'stopped'} ({pgdata})."
    else:
        print(f"unknown db action {action!r}: use stop or status", file=sys.stderr)
        return 2
    print(json.dumps(result) if as_json else text)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["db"]:
        as_json = "--json" in argv
        rest = [a for a in argv[1:] if a != "--json"]
        return db_command(rest[0] if rest else "status", as_json=as_json)
    if argv[:1] == ["push"]:
        from bookchat.push import main as push

        return push(argv[1:])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    from bookchat.deployment import run_management_command

    run_management_command(["bookchat", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main())
