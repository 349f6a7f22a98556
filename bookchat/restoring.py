"""Restoring a backup (``bookchat.backups``) into the database and data folder this process is configured for.

The archive is checked whole before anything changes; a database that holds bookchat's data is refused unless forced;
the extensions the dump needs are created first (on a managed server only its administrator may), then the dump is
restored in one transaction (a failure leaves the database as it was), objects owned by the connecting user; then the
uploads, the audit archives (never deleted: a name that clashes keeps the existing file aside), the erasures' tombstones
(merged into the install's) and, when asked, the secret key and the older keys it accepted; then the migrations run, so
a backup of an older release is upgraded, and every tombstone is applied again (``audit.privacy.tombstones``): a learner
erased after the backup was made stays erased. Restoring into the database ``DATABASE_URL`` names moves an embedded
install to an external server. What the restore will replace, and what becomes of the secret key, is known (and handed
to ``before_changes``) once the archive and the database are checked, before anything changes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from bookchat.backups import (
    DATA_FOLDERS,
    DUMP,
    FALLBACKS_FILE,
    SECRET_KEY_FILE,
    BackupError,
    sha256_of,
    unpack_archive,
)
from bookchat.base import embedded_db, pgtools, secret_keys

# What a restore without the backup's secret key means (the restore's output and the manual say it).
WITHOUT_KEY = ("this install's secret key differs from the backed-up one: everyone logged in (the admin, chat-page "
               "conversations) must log in again, tasks queued before the backup can't be read (they fail; Retry "
               "them in the admin), and audit rows' client-IP hashes and rate-limit counters don't match new "
               "requests from the same address. API keys, passwords, second factors, books and the audit trail "
               "are unaffected.")


@dataclass
class RestoreReport:
    archive: str
    created_at: str
    bookchat_version: str
    database: dict
    replaced: bool = False
    files: dict = field(default_factory=dict)
    secret_key: str = "not_in_backup"
    secret_key_fallbacks_added: int = 0
    migrations_applied: list[str] = field(default_factory=list)
    erasures: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _data_tables() -> dict[str, str]:
    """Tables whose rows are an install's own data (what ``--force`` would delete), by what they hold."""
    from django.contrib.auth.models import User

    from audit.models import AuditLog
    from chat.models import ApiKey
    from ingestion.models import Book

    return {"books": Book._meta.db_table, "users": User._meta.db_table, "API keys": ApiKey._meta.db_table,
            "audit records": AuditLog._meta.db_table}


def database_contents() -> dict:
    """``{"tables": n, "rows": {"books": n, ...}}`` of the database this process is configured for."""
    from django.db import connection

    tables = set(connection.introspection.table_names())
    rows = {}
    with connection.cursor() as cursor:
        for what, table in _data_tables().items():
            if table in tables:
                cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608 - a model's own table name
                rows[what] = cursor.fetchone()[0]
    return {"tables": len(tables), "rows": rows}


def _check_migrations_known(manifest: dict) -> None:
    """A backup made by a newer bookchat holds migrations this code doesn't know: refuse before changing anything."""
    from django.db.migrations.loader import MigrationLoader

    known = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    unknown = [f"{app}.{name}" for app, name in (manifest["database"].get("migrations") or {}).items()
               if app in {a for a, _ in known} and (app, name) not in known]
    if unknown:
        raise BackupError(f"the backup comes from a newer bookchat ({manifest.get('bookchat_version')}; its "
                          f"database has migrations this one doesn't know: {', '.join(unknown)}): install that "
                          "release or a newer one, then restore", code="newer_backup", status=2)


_ENTRY = re.compile(r"^\d+; \d+ \d+ (?P<desc>EXTENSION|COMMENT) (?P<rest>.*)$")


def _restore_list(dump: Path, db: dict, folder: Path) -> tuple[Path, list[str]]:
    """pg_restore's table of contents without the extensions (created beforehand by ``_ensure_extensions``, as
    a managed server's administrator may have to) and their comments (only an extension's owner may set them);
    the extensions the dump needs."""
    toc = pgtools.run("pg_restore", ["--list", str(dump)], db, what="the database dump can't be read").stdout
    keep, extensions = [], []
    for line in toc.splitlines():
        match = _ENTRY.match(line)
        if match and match["desc"] == "EXTENSION":
            extensions.append(match["rest"].split()[1])
            continue
        if match and match["rest"].startswith("- EXTENSION "):
            continue
        keep.append(line)
    listing = folder / "restore.list"
    listing.write_text("\n".join(keep) + "\n")
    return listing, extensions


def _ensure_extensions(names: list[str]) -> None:
    from django.db import DatabaseError, connection

    with connection.cursor() as cursor:
        for name in names:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = %s", [name])
            if cursor.fetchone():
                continue
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", [name])
            label = "pgvector" if name == "vector" else name
            if not cursor.fetchone():
                raise BackupError(f"the database server has no {label} extension installed, which bookchat needs: "
                                  f"install {label} on the server (it is the {name} extension), then restore again",
                                  code="extension_missing")
            try:
                cursor.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
            except DatabaseError as exc:
                raise BackupError(f"the {label} extension is installed on the server but this database's user may "
                                  f"not create it ({str(exc).strip()}): have an administrator run CREATE EXTENSION "
                                  f"{name}; in the database {connection.settings_dict['NAME']}, then restore again",
                                  code="extension_not_created") from None


def _move_files(staging: Path, data_dir: Path, *, replace_uploads: bool) -> dict:
    """Put the restored uploads and archives in place; existing archives are never deleted (a clash of names
    with other contents keeps the existing file as ``NAME.before-restore``)."""
    moved = {"uploads": 0, "archive": 0, "uploads_removed": 0, "archives_kept_aside": []}
    uploads = data_dir / "uploads"
    if replace_uploads and uploads.is_dir():
        moved["uploads_removed"] = sum(1 for p in uploads.rglob("*") if p.is_file())
        shutil.rmtree(uploads)
    moved["tombstones_added"] = _merge_tombstones(staging, data_dir)
    for folder in DATA_FOLDERS:
        source = staging / folder
        if not source.is_dir() or folder == "privacy":
            continue
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            target = data_dir / folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if folder == "archive" and target.exists() and sha256_of(target) != sha256_of(path):
                aside = target.with_name(target.name + ".before-restore")
                os.replace(target, aside)
                moved["archives_kept_aside"].append(str(aside))
            os.replace(path, target)
            moved[folder] += 1
    return moved


def _merge_tombstones(staging: Path, data_dir: Path) -> int:
    """The backup's erasure tombstones added to the install's (never replaced: an erasure made since the backup
    stays); how many were new."""
    from audit.privacy import tombstones

    backed_up = staging / tombstones.FILE
    return tombstones.merge(backed_up, into=data_dir / tombstones.FILE) if backed_up.is_file() else 0


def _reapply_erasures() -> dict:
    """Every tombstone applied again to the restored database and archives, before the install serves."""
    from audit.privacy import tombstones

    try:
        return tombstones.reapply()
    except Exception as exc:
        raise BackupError(f"the backup was restored, but applying the erasures again failed ({type(exc).__name__}: "
                          f"{exc}): run the restore again before serving", code="erasures_not_applied") from exc


def _key_plan(staging: Path, *, with_secrets: bool) -> tuple[str, list[str]]:
    """What will become of the backup's secret key, and what that means. A key this install already accepts (its
    own, or one of its fallbacks) is known: nothing to restore, nothing lost."""
    if not (staging / SECRET_KEY_FILE).exists():
        return "not_in_backup", ["the backup holds no secret key (made without --with-secrets): unless this install "
                                 "runs with the old key, " + WITHOUT_KEY]
    key = (staging / SECRET_KEY_FILE).read_text()
    if key == settings.SECRET_KEY:
        return "already_in_use", []
    if key in settings.SECRET_KEY_FALLBACKS:
        return "one_of_the_fallbacks", []
    if not with_secrets:
        return "not_restored", ["the backup holds the secret key, and it was not restored (add --with-secrets to "
                                "restore it): " + WITHOUT_KEY]
    if settings.BOOKCHAT["SECRET_KEY"]:
        return "restored", ["the backup's secret key will be written to the data folder, but BOOKCHAT_SECRET_KEY is "
                            "set and wins: set it to the backed-up key (or unset it), or " + WITHOUT_KEY]
    return "restored", []


def _put_secrets(staging: Path, data_dir: Path, plan: str, *, with_secrets: bool) -> int:
    """With ``with_secrets``, the backup's key into the data folder when ``plan`` says so, and the older keys the
    backed-up install accepted added to the data folder's fallbacks (what it signed stays readable): how many were
    added."""
    if not with_secrets:
        return 0
    if plan == "restored":
        secret_keys.write_private(data_dir / SECRET_KEY_FILE, (staging / SECRET_KEY_FILE).read_text())
    if not (staging / FALLBACKS_FILE).exists():
        return 0
    in_force = (staging / SECRET_KEY_FILE).read_text() if plan == "restored" else settings.SECRET_KEY
    known = {in_force, *settings.SECRET_KEY_FALLBACKS, *secret_keys.file_fallbacks(data_dir)}
    added = [key for key in secret_keys.split_keys((staging / FALLBACKS_FILE).read_text()) if key not in known]
    if added:
        secret_keys.write_fallbacks(data_dir, secret_keys.file_fallbacks(data_dir) + added)
    return len(added)


def _server_major() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        return int(cursor.fetchone()[0]) // 10000


def _migrate() -> list[str]:
    from django.core.management import call_command
    from django.db import connection, connections
    from django.db.migrations.recorder import MigrationRecorder

    connections.close_all()  # the tables were replaced under this process's connection
    before = set(MigrationRecorder(connection).applied_migrations())
    try:
        call_command("migrate", interactive=False, verbosity=0, stdout=io.StringIO())
    except Exception as exc:
        raise BackupError(f"the backup was restored, but migrating it failed ({type(exc).__name__}: {exc}): run "
                          "manage.py migrate to see why", code="migrate_failed") from exc
    return sorted(f"{app}.{name}" for app, name in set(MigrationRecorder(connection).applied_migrations()) - before)


def restore_archive(path: Path, *, force: bool = False, with_secrets: bool = False,
                    before_changes: Callable[[RestoreReport], None] | None = None) -> RestoreReport:
    """Restore the backup ``path`` into the database and data folder this process is configured for (see the
    module's docstring). ``before_changes`` is called with the report of what will be replaced (``replaced``,
    ``database["replaced_rows"]``) and the secret key's fate (``secret_key``, ``warnings``) once every check passed
    and before anything changes; an exception it raises ends the restore with nothing changed. Raises
    ``BackupError`` (nothing changed) when the archive is not a whole bookchat backup, the database holds data and
    ``force`` is false, or the dump can't be restored."""
    started = datetime.now(UTC)
    from django.db import connection

    path = Path(path).expanduser().absolute()
    data_dir = Path(settings.DATA_DIR)
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=data_dir))
    try:
        manifest = unpack_archive(path, staging)
        _check_migrations_known(manifest)
        report, tables = _plan(path, manifest, staging, force=force, with_secrets=with_secrets)
        listing, extensions = _restore_list(staging / DUMP, connection.settings_dict, staging)
        if before_changes is not None:
            before_changes(report)
        _ensure_extensions(extensions)
        server_major = _server_major()
        connection.close()
        pgtools.restore_dump(staging / DUMP, listing, connection.settings_dict, clean=tables > 0,
                             server_major=server_major, what="pg_restore failed (the database was left as it was)")
        report.files = _move_files(staging, data_dir, replace_uploads=report.replaced)
        report.secret_key_fallbacks_added = _put_secrets(staging, data_dir, report.secret_key,
                                                          with_secrets=with_secrets)
        report.migrations_applied = _migrate()
        report.erasures = _reapply_erasures()
        _record(path, manifest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.seconds = round((datetime.now(UTC) - started).total_seconds(), 2)
    return report


def _plan(path: Path, manifest: dict, staging: Path, *, force: bool, with_secrets: bool) -> tuple[RestoreReport, int]:
    """What the restore will do, from the archive and the database as they are, and how many tables the database
    has (the dump replaces them); refused (``database_not_empty``) when the database holds data and ``force`` is
    false."""
    from django.db import connection

    contents = database_contents()
    held = {what: n for what, n in contents["rows"].items() if n}
    if held and not force:
        listed = ", ".join(f"{what}: {n}" for what, n in held.items())
        raise BackupError(f"the database {connection.settings_dict['NAME']} already holds bookchat's data "
                          f"({listed}): restore into a new install, or add --force to replace it all",
                          code="database_not_empty", status=2)
    report = RestoreReport(archive=str(path), created_at=manifest.get("created_at", ""),
                           bookchat_version=manifest.get("bookchat_version", ""),
                           database={"name": connection.settings_dict["NAME"],
                                     "source": "DATABASE_URL" if embedded_db.is_configured_externally()
                                     else "embedded", "replaced_rows": held},
                           replaced=bool(held))
    report.secret_key, report.warnings = _key_plan(staging, with_secrets=with_secrets)
    return report, contents["tables"]


def _record(path: Path, manifest: dict) -> None:
    from bookchat.base.models import StaffCommand

    with contextlib.suppress(Exception):  # the log of a restore that worked never fails it
        StaffCommand.record(f"restore {path.name}", "restored backup", f"{path.name} of {manifest.get('created_at')}")
