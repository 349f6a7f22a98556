"""The ``bookchat`` command: operations that must not start the embedded database (``db stop``, ``db status``,
``data erase``, and ``push``, which publishes a book to a server: ``bookchat.push``).

``data erase`` is the one command that deletes bookchat's data (`make clean` never does): it stops the embedded
database, says what the data folder holds, and deletes it only once the folder's name is typed back, or with
``--yes``; with no terminal to ask on and no ``--yes`` it refuses (exit 2).

Everything else goes through ``manage.py`` (``bookchat`` forwards other commands to it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from bookchat.base import conf, embedded_db

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


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def data_summary(folder: Path) -> dict:
    """What the data folder holds, as ``data erase`` lists it before deleting."""
    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    return {"folder": str(folder), "exists": folder.is_dir(), "bytes": _size(folder) if folder.is_dir() else 0,
            "entries": [{"name": e.name, "bytes": _size(e) if e.is_dir() else e.stat().st_size} for e in entries]}


_WHAT = {"pgdata": "the embedded database: books, passages, users, API keys, the audit trail",
         "archive": "archived audit records (the only copy of purged ones)", "secret_key": "the secret key",
         "secret_key_fallbacks": "previous secret keys, accepted until `secretkey drop-fallbacks`",
         "uploads": "uploaded files waiting to be indexed"}


def erase_command(args: list[str], *, as_json: bool) -> int:
    unknown = [a for a in args if a != "--yes"]
    if unknown:
        print(f"data erase takes --yes and --json, not {' '.join(unknown)}", file=sys.stderr)
        return 2
    folder = data_dir().resolve()
    if folder in (Path("/"), Path.home().resolve()) or BASE_DIR.resolve().is_relative_to(folder):
        print(f"Not erased: {folder} holds more than bookchat's data (set BOOKCHAT_DATA_DIR to its own folder).",
              file=sys.stderr)
        return 2
    summary = data_summary(folder)
    if not summary["exists"]:
        print(json.dumps({**summary, "erased": False}) if as_json else f"Nothing to erase: {folder} does not exist.")
        return 0
    lines = [f"This deletes {folder} ({summary['bytes'] / 1e6:.1f} MB):"]
    lines += [f"  {e['name']:<12} {e['bytes'] / 1e6:>9.1f} MB  {_WHAT.get(e['name'], '')}".rstrip()
              for e in summary["entries"]]
    if embedded_db.is_configured_externally():
        lines.append("DATABASE_URL is set: the database it names is not touched.")
    if not as_json:
        print("\n".join(lines))
    if "--yes" not in args:
        if not sys.stdin.isatty():
            print("Not erased: run again with --yes (make erase-data ARGS=--yes) to delete it without a question.",
                  file=sys.stderr)
            return 2
        answer = input(f"Type {folder.name} to delete it: ").strip()
        if answer != folder.name:
            print("Not erased.", file=sys.stderr)
            return 2
    stopped = False if embedded_db.is_configured_externally() else embedded_db.stop(folder)
    shutil.rmtree(folder)
    print(json.dumps({**summary, "erased": True, "stopped_database": stopped}) if as_json
          else f"Erased {folder}" + (" (the embedded PostgreSQL was stopped first)." if stopped else "."))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["db"]:
        as_json = "--json" in argv
        rest = [a for a in argv[1:] if a != "--json"]
        return db_command(rest[0] if rest else "status", as_json=as_json)
    if argv[:2] == ["data", "erase"]:
        return erase_command([a for a in argv[2:] if a != "--json"], as_json="--json" in argv)
    if argv[:1] == ["push"]:
        from bookchat.push import main as push

        return push(argv[1:])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    from bookchat.base.deployment import run_management_command

    run_management_command(["bookchat", *argv])
    return 0


if __name__ == "__main__":
    sys.exit(main())
