"""Backup and restore of a whole install: the database, and the files bookchat keeps beside it in ``DATA_DIR``.

A backup is one ``.tar.gz``: ``manifest.json`` first (what is inside, from which bookchat and database, and the
SHA-256 of every other member), ``database.dump`` (``pg_dump --format=custom``, one snapshot of the whole
database), the data folder's ``uploads/`` (uploads waiting to be indexed) and ``archive/`` (archived audit
records, the only copy of purged ones), and, only when asked, ``secret_key``. It is written under a temporary
name beside its destination and renamed when complete, so the destination never holds half an archive.

A restore checks the whole archive (manifest, sizes, checksums) before it changes anything, refuses a database
that already holds bookchat's data unless forced, restores the dump in one transaction (a failure leaves the
database as it was), then the files, then runs the migrations, so a backup of an older release is upgraded.
Restoring into the database ``DATABASE_URL`` names moves an embedded install to an external server.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path, PurePosixPath

from django.conf import settings

from bookchat import embedded_db, pgtools
from bookchat.errors import BookchatError

FORMAT = "bookchat-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DUMP = "database.dump"
SECRET_KEY_FILE = "secret_key"
# Folders of DATA_DIR a backup carries: uploads waiting to be indexed, and the audit archives.
DATA_FOLDERS = ("uploads", "archive")
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
CHUNK = 1024 * 1024

# What a restore without the backup's secret key means (the restore's output and the manual say it).
WITHOUT_KEY = ("this install's secret key differs from the backed-up one: everyone logged in (the admin, chat-page "
               "conversations) must log in again, tasks queued before the backup can't be read (they fail; Retry "
               "them in the admin), and audit rows' client-IP hashes and rate-limit counters don't match new "
               "requests from the same address. API keys, passwords, second factors, books and the audit trail "
               "are unaffected.")


class BackupError(BookchatError):
    """``status``: the exit status the commands end with (2: refused as asked, nothing done; 1: failed)."""

    code = "backup_failed"

    def __init__(self, message: str, *, code: str | None = None, status: int = 1):
        super().__init__(message, code=code)
        self.status = status


@dataclass
class BackupReport:
    archive: str
    bytes: int
    created_at: str
    bookchat_version: str
    database: dict
    includes: dict
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class RestoreReport:
    archive: str
    created_at: str
    bookchat_version: str
    database: dict
    replaced: bool = False
    files: dict = field(default_factory=dict)
    secret_key: str = "not_in_backup"
    migrations_applied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


# --- what the database holds ------------------------------------------------------------------------------------

def bookchat_version() -> str:
    try:
        return metadata.version("bookchat")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout that was never installed
        return "unknown"


def database_description() -> dict:
    """The server's version, where the database is (embedded or DATABASE_URL; never the URL, it holds the
    password) and the latest migration applied per app."""
    from django.db import connection
    from django.db.migrations.recorder import MigrationRecorder

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    heads: dict[str, str] = {}
    if MigrationRecorder(connection).has_table():
        for app, name in MigrationRecorder(connection).applied_migrations():
            heads[app] = max(heads.get(app, name), name)
    return {"server_version": version, "name": connection.settings_dict["NAME"],
            "source": "DATABASE_URL" if embedded_db.is_configured_externally() else "embedded",
            "migrations": dict(sorted(heads.items()))}


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


# --- backup -----------------------------------------------------------------------------------------------------

def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _copy_data_files(data_dir: Path, staging: Path) -> dict[str, int]:
    """Copy DATA_FOLDERS into ``staging`` (files that vanish meanwhile, a job finishing, are skipped); the number
    of files copied per folder."""
    counts = {}
    for folder in DATA_FOLDERS:
        counts[folder] = 0
        source = data_dir / folder
        if not source.is_dir():
            continue
        for path in sorted(source.rglob("*")):
            if not path.is_file() or path.is_symlink() or path.name.endswith(".partial"):
                continue
            target = staging / folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copy2(path, target)
            except FileNotFoundError:
                continue
            counts[folder] += 1
    return counts


def check_destination(out: Path, *, force: bool) -> Path:
    out = out.expanduser().absolute()
    if out.is_dir():
        raise BackupError(f"{out} is a folder: name the archive file to write (e.g. {out}/bookchat.tar.gz)",
                          code="destination_is_folder", status=2)
    if out.exists() and not force:
        raise BackupError(f"{out} exists: choose another name, or add --force to replace it", code="destination_exists",
                          status=2)
    if not out.parent.is_dir():
        raise BackupError(f"the folder {out.parent} does not exist: create it first", code="no_such_folder", status=2)
    if not os.access(out.parent, os.W_OK):
        raise BackupError(f"the folder {out.parent} is not writable", code="not_writable", status=2)
    return out


def create_backup(out: Path, *, force: bool = False, with_secrets: bool = False) -> BackupReport:
    """Write the backup archive ``out`` (see the module's docstring)."""
    started = datetime.now(UTC)
    out = check_destination(out, force=force)
    from django.db import connection

    major, dump_tool = pgtools.tool_version("pg_dump")
    database = database_description() | {"dump_tool": dump_tool}
    server_major = int(database["server_version"].split(".")[0].split()[0])
    if server_major > major:
        raise BackupError(f"the database server is PostgreSQL {database['server_version']} and {dump_tool} can only "
                          f"dump servers up to {major}: install PostgreSQL {server_major}'s client tools and set "
                          "BOOKCHAT_PG_BIN_DIR to their folder", code="pg_dump_too_old")
    data_dir = Path(settings.DATA_DIR)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".staging", dir=out.parent))
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        pgtools.run("pg_dump", ["--format=custom", "--no-password", f"--file={staging / DUMP}"],
                    connection.settings_dict, what="pg_dump failed")
        counts = _copy_data_files(data_dir, staging)
        if with_secrets:
            key_file = staging / SECRET_KEY_FILE
            key_file.write_text(settings.SECRET_KEY)
            key_file.chmod(0o600)
        members = [DUMP] + sorted(str(p.relative_to(staging)) for folder in DATA_FOLDERS
                                  for p in (staging / folder).rglob("*") if p.is_file())
        members += [SECRET_KEY_FILE] if with_secrets else []
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "created_at": started.isoformat(),
            "bookchat_version": bookchat_version(), "database": database,
            "includes": {"database": True, **{folder: counts[folder] for folder in DATA_FOLDERS},
                         "secret_key": with_secrets,
                         "secret_key_source": ("BOOKCHAT_SECRET_KEY" if settings.BOOKCHAT["SECRET_KEY"]
                                               else "data folder") if with_secrets else None},
            "files": {name: {"sha256": _sha256(staging / name), "bytes": (staging / name).stat().st_size}
                      for name in members},
        }
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the audit trail
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                body = json.dumps(manifest, indent=2).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode, info.mtime = len(body), 0o600, int(started.timestamp())
                tar.addfile(info, io.BytesIO(body))
                for name in members:
                    info = tar.gettarinfo(staging / name, arcname=name)
                    info.uid = info.gid = 0
                    info.uname = info.gname = ""
                    info.mode = 0o600
                    with open(staging / name, "rb") as file:
                        tar.addfile(info, file)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BackupReport(archive=str(out), bytes=out.stat().st_size, created_at=manifest["created_at"],
                        bookchat_version=manifest["bookchat_version"], database=database,
                        includes=manifest["includes"],
                        seconds=round((datetime.now(UTC) - started).total_seconds(), 2))


# --- reading an archive -----------------------------------------------------------------------------------------

def _member_name(name: str) -> str | None:
    """The member's path when it is a plain relative one (no ``..``, no absolute path), else None."""
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("..", ".", "") for part in path.parts) or "\\" in name:
        return None
    return str(path)


def _check_manifest(manifest: object, archive: Path) -> dict:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{archive} is not a bookchat backup (its manifest is not one)", code="not_a_backup")
    if not isinstance(manifest.get("format_version"), int) or manifest["format_version"] > FORMAT_VERSION:
        raise BackupError(f"{archive} was written by a newer bookchat (backup format "
                          f"{manifest.get('format_version')!r}; this one reads up to {FORMAT_VERSION}): upgrade "
                          "bookchat first", code="newer_format")
    files = manifest.get("files")
    if not isinstance(files, dict) or DUMP not in files or not all(
            isinstance(v, dict) and isinstance(v.get("sha256"), str) and isinstance(v.get("bytes"), int)
            and _member_name(k) for k, v in files.items()):
        raise BackupError(f"{archive}'s manifest is damaged (its list of files is not valid)", code="bad_manifest")
    return manifest


def unpack_archive(archive: Path, into: Path) -> dict:
    """Check ``archive`` whole and unpack its members into the folder ``into``; the manifest. Every member must be
    listed in the manifest with its size and checksum, and every listed file present: otherwise a ``BackupError``
    says what is wrong (``into`` may then hold some files: the caller removes it)."""
    if not archive.is_file():
        raise BackupError(f"{archive} does not exist" if not archive.exists() else f"{archive} is not a file",
                          code="no_such_archive", status=2)
    if archive.stat().st_size == 0:
        raise BackupError(f"{archive} is empty (0 bytes): not a bookchat backup", code="not_a_backup")
    damaged = f"{archive} is damaged or truncated"
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST or not first.isfile() or first.size > MAX_MANIFEST_BYTES:
                raise BackupError(f"{archive} is not a bookchat backup (it has no {MANIFEST} first)",
                                  code="not_a_backup")
            try:
                manifest = json.loads(tar.extractfile(first).read())
            except ValueError:
                raise BackupError(f"{archive} is not a bookchat backup (its {MANIFEST} is not JSON)",
                                  code="not_a_backup") from None
            files = _check_manifest(manifest, archive)["files"]
            seen: set[str] = set()
            for member in tar:  # from the first member again: the manifest is skipped
                if member is first:
                    continue
                name = _member_name(member.name)
                if name is None or name not in files or name in seen or not member.isfile():
                    raise BackupError(f"{archive} holds {member.name!r}, which its manifest does not list as a file",
                                      code="bad_member")
                seen.add(name)
                _unpack_member(tar, member, into / name, files[name], damaged)
    except (tarfile.ReadError, tarfile.CompressionError) as exc:
        if "unexpected end" in str(exc) or "truncated" in str(exc):
            raise BackupError(f"{damaged} ({exc})", code="damaged") from None
        raise BackupError(f"{archive} is not a bookchat backup (not a gzip-compressed tar archive)",
                          code="not_a_backup") from None
    except (EOFError, zlib.error, tarfile.TarError, OSError) as exc:
        raise BackupError(f"{damaged} ({exc})", code="damaged") from None
    missing = sorted(set(files) - seen)
    if missing:
        raise BackupError(f"{damaged}: {len(missing)} file(s) its manifest lists are missing, the first "
                          f"{missing[0]}", code="damaged")
    return manifest


def _unpack_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, expected: dict, damaged: str) -> None:
    if member.size != expected["bytes"]:
        raise BackupError(f"{damaged}: {member.name} holds {member.size} bytes, the manifest says "
                          f"{expected['bytes']}", code="damaged")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    source = tar.extractfile(member)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        while block := source.read(CHUNK):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != expected["sha256"]:
        raise BackupError(f"{damaged}: {member.name}'s checksum does not match the manifest's", code="damaged")


def read_manifest(archive: Path) -> dict:
    """The manifest of a whole, checked archive (every member unpacked to a temporary folder and verified)."""
    with tempfile.TemporaryDirectory() as folder:
        return unpack_archive(archive, Path(folder))


# --- restore ----------------------------------------------------------------------------------------------------

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
                                  f"install {label} on the server (it is the `{name}` extension), then restore again",
                                  code="extension_missing")
            try:
                with connection.cursor() as create:
                    create.execute(f'CREATE EXTENSION IF NOT EXISTS "{name}"')
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
    for folder in DATA_FOLDERS:
        source = staging / folder
        if not source.is_dir():
            continue
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            target = data_dir / folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if folder == "archive" and target.exists() and _sha256(target) != _sha256(path):
                aside = target.with_name(target.name + ".before-restore")
                os.replace(target, aside)
                moved["archives_kept_aside"].append(str(aside))
            os.replace(path, target)
            moved[folder] += 1
    return moved


def _restore_secret_key(staging: Path, data_dir: Path) -> None:
    key = (staging / SECRET_KEY_FILE).read_text()
    partial = data_dir / f".{SECRET_KEY_FILE}.restoring"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(key)
    os.replace(partial, data_dir / SECRET_KEY_FILE)


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
    call_command("migrate", interactive=False, verbosity=0, stdout=io.StringIO())
    return sorted(f"{app}.{name}" for app, name in set(MigrationRecorder(connection).applied_migrations()) - before)


def restore_archive(path: Path, *, force: bool = False, with_secrets: bool = False) -> RestoreReport:
    """Restore the backup ``path`` into the database and data folder this process is configured for (see the
    module's docstring). Raises ``BackupError`` (nothing changed) when the archive is not a whole bookchat backup,
    the database holds data and ``force`` is false, or the dump can't be restored."""
    started = datetime.now(UTC)
    from django.db import connection

    path = Path(path).expanduser().absolute()
    data_dir = Path(settings.DATA_DIR)
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=data_dir))
    try:
        manifest = unpack_archive(path, staging)
        _check_migrations_known(manifest)
        contents = database_contents()
        held = {what: n for what, n in contents["rows"].items() if n}
        if held and not force:
            listed = ", ".join(f"{what}: {n}" for what, n in held.items())
            raise BackupError(f"the database {connection.settings_dict['NAME']} already holds bookchat's data "
                              f"({listed}): restore into a new install, or add --force to replace it all",
                              code="database_not_empty", status=2)
        listing, extensions = _restore_list(staging / DUMP, connection.settings_dict, staging)
        _ensure_extensions(extensions)
        clean = contents["tables"] > 0
        server_major = _server_major()
        connection.close()
        pgtools.restore_dump(staging / DUMP, listing, connection.settings_dict, clean=clean,
                             server_major=server_major, what="pg_restore failed (the database was left as it was)")
        report = RestoreReport(archive=str(path), created_at=manifest.get("created_at", ""),
                               bookchat_version=manifest.get("bookchat_version", ""),
                               database={"name": connection.settings_dict["NAME"],
                                         "source": "DATABASE_URL" if embedded_db.is_configured_externally()
                                         else "embedded", "replaced_rows": held},
                               replaced=bool(held))
        report.files = _move_files(staging, data_dir, replace_uploads=bool(held))
        if (staging / SECRET_KEY_FILE).exists():
            if (staging / SECRET_KEY_FILE).read_text() == settings.SECRET_KEY:
                report.secret_key = "already_in_use"
            elif with_secrets:
                _restore_secret_key(staging, data_dir)
                report.secret_key = "restored"
                if settings.BOOKCHAT["SECRET_KEY"]:
                    report.warnings.append("the backup's secret key was written to the data folder, but "
                                           "BOOKCHAT_SECRET_KEY is set and wins: set it to the backed-up key (or "
                                           "unset it), or " + WITHOUT_KEY)
            else:
                report.secret_key = "not_restored"
                report.warnings.append("the backup holds the secret key, and it was not restored (add "
                                       "--with-secrets to restore it): " + WITHOUT_KEY)
        else:
            report.warnings.append("the backup holds no secret key (made without --with-secrets): unless this "
                                   "install runs with the old key, " + WITHOUT_KEY)
        report.migrations_applied = _migrate()
        _record(path, manifest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.seconds = round((datetime.now(UTC) - started).total_seconds(), 2)
    return report


def _record(path: Path, manifest: dict) -> None:
    from bookchat.models import StaffCommand

    with contextlib.suppress(Exception):  # the log of a restore that worked never fails it
        StaffCommand.record(f"restore {path.name}", "restored backup", f"{path.name} of {manifest.get('created_at')}")
