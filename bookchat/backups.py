"""Backups of a whole install: the database, and the files bookchat keeps beside it in ``DATA_DIR``.

A backup is one ``.tar.gz``: ``manifest.json`` first (what is inside, from which bookchat and database, and the SHA-256
of every other member), ``database.dump`` (``pg_dump --format=custom``, one snapshot of the whole database), the data
folder's ``uploads/`` (uploads waiting to be indexed), ``archive/`` (archived audit records, the only copy of purged
ones) and ``privacy/`` (the tombstones of learners' erasures), and, only when asked, ``secret_key`` (the key in force)
and ``secret_key_fallbacks`` (the older keys it still accepts, one a line, when there are any). It is written under a
temporary name beside its destination and renamed when complete, so the destination never holds half an archive.

``unpack_archive`` checks an archive whole (manifest, sizes, checksums) as it unpacks it; ``bookchat.restoring``
restores one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path, PurePosixPath

from django.conf import settings

from bookchat.base import embedded_db, pgtools, secret_keys
from bookchat.base.errors import BookchatError
from bookchat.base.files import PARTIAL_SUFFIX, replacing_privately

FORMAT = "bookchat-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DUMP = "database.dump"
SECRET_KEY_FILE = secret_keys.KEY_FILE
FALLBACKS_FILE = secret_keys.FALLBACKS_FILE
# Folders of DATA_DIR a backup carries: uploads waiting to be indexed, the audit archives, and the erasures'
# tombstones (audit.privacy.tombstones: a restore merges them, never replaces them).
DATA_FOLDERS = ("uploads", "archive", "privacy")
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
CHUNK = 1024 * 1024

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


# --- backup -----------------------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
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
            if not path.is_file() or path.is_symlink() or path.name.endswith(PARTIAL_SUFFIX):
                continue
            target = staging / folder / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copy2(path, target)
            except FileNotFoundError:
                continue
            counts[folder] += 1
    return counts


def _copy_secrets(staging: Path) -> list[str]:
    """The key in force and, when there are any, the older keys it accepts (``BOOKCHAT_SECRET_KEY_FALLBACKS``'s and
    the data folder's: a restored install must read what this one signed), into ``staging``; their member names."""
    secret_keys.write_private(staging / SECRET_KEY_FILE, settings.SECRET_KEY)
    if not settings.SECRET_KEY_FALLBACKS:
        return [SECRET_KEY_FILE]
    secret_keys.write_fallbacks(staging, list(settings.SECRET_KEY_FALLBACKS))
    return [SECRET_KEY_FILE, FALLBACKS_FILE]


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
    try:
        pgtools.run("pg_dump", ["--format=custom", "--no-password", f"--file={staging / DUMP}"],
                    connection.settings_dict, what="pg_dump failed")
        counts = _copy_data_files(data_dir, staging)
        members = [DUMP] + sorted(str(p.relative_to(staging)) for folder in DATA_FOLDERS
                                  for p in (staging / folder).rglob("*") if p.is_file())
        members += _copy_secrets(staging) if with_secrets else []
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "created_at": started.isoformat(),
            "bookchat_version": bookchat_version(), "database": database,
            "includes": {"database": True, **{folder: counts[folder] for folder in DATA_FOLDERS},
                         "secret_key": with_secrets,
                         "secret_key_fallbacks": len(settings.SECRET_KEY_FALLBACKS) if with_secrets else 0,
                         "secret_key_source": ("BOOKCHAT_SECRET_KEY" if settings.BOOKCHAT["SECRET_KEY"]
                                               else "data folder") if with_secrets else None},
            "files": {name: {"sha256": sha256_of(staging / name), "bytes": (staging / name).stat().st_size}
                      for name in members},
        }
        # private: it holds the audit trail
        with replacing_privately(out) as raw, tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
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
