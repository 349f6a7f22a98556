"""Safe intake of a staff upload: ``.md``/``.mdx`` files stored as they are, or one ``.zip`` unpacked with checks.

Two steps. ``check_upload`` reads the upload through and refuses it, saying why, writing nothing (what the upload
form's validation calls); ``store_upload`` writes a checked upload into a new staging folder under
``DATA_DIR/uploads/`` that ``ingestion.uploads.jobs`` then renames to the job's own folder (what saving the job
calls). A zip is refused, naming the entry, for: paths that leave the folder (``../``, also written with
backslashes), absolute paths (``/x``, ``C:\\x``), symlinks, encrypted entries, corrupt data, more entries than
``UPLOAD_MAX_FILES``, and more than ``UPLOAD_MAX_UNCOMPRESSED_BYTES`` once unpacked — checked on the declared sizes
first, then on the bytes actually read, so a header that understates them gets nowhere. Names the file system could
not hold (a name over 255 bytes, a path that is both a page and a folder) are refused before anything is written.
Entries that are neither pages nor ``_category_`` files are not stored but listed as ignored. When every page (and
category file) sits under one top-level folder (a zip of ``docs/``), that folder is the book's root. The content of
a page is not checked here: indexing reports a binary or non-UTF-8 page with its file and line and indexes the rest.
"""

from __future__ import annotations

import re
import shutil
import stat
import time
import uuid
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

from django.conf import settings

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from ingestion.reading.discovery import MARKDOWN_SUFFIXES

ZIP_SUFFIX = ".zip"
CATEGORY_FILES = ("_category_.json", "_category_.yml", "_category_.yaml")
STAGING_PREFIX = "incoming-"
# Folders that archivers add beside the content (macOS resource forks); never part of a book.
JUNK_FOLDERS = ("__MACOSX",)
_CHUNK = 64 * 1024
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
# The longest file name (bytes, one path component) and path the file systems a server uses (ext4, XFS, tmpfs) hold.
NAME_MAX = 255
PATH_MAX = 4096


class UploadError(BookchatError):
    code = "bad_upload"


class UploadedFile(Protocol):
    """What Django's ``UploadedFile`` offers and intake uses."""

    name: str
    size: int

    def chunks(self, chunk_size: int | None = None): ...

    def seek(self, offset: int, whence: int = 0) -> int: ...

    def read(self, size: int = -1) -> bytes: ...


@dataclass
class Intake:
    """The checked upload, stored under ``root`` as the pages of a book (or of one of its folders)."""

    root: Path
    names: list[str]  # the uploaded files' names
    pages: list[str] = field(default_factory=list)  # stored .md/.mdx files, relative to root (the book)
    ignored: list[str] = field(default_factory=list)  # zip entries that are not pages, not stored
    ignored_count: int = 0  # of a published archive, all it did not store (``ignored`` names the first ones)
    top_folder: str = ""  # the zip's single top-level folder, used as the book's root
    is_zip: bool = False
    seconds: float = 0.0

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def ignored_listed(self) -> list[str]:
        """What was not stored, as the job records it: the names, and how many more a published archive left
        unnamed (``… and 1,234 more``)."""
        unnamed = self.ignored_count - len(self.ignored)
        return [*self.ignored, f"… and {unnamed:,} more"] if unnamed > 0 else list(self.ignored)


@dataclass
class CheckedUpload:
    """An upload that passed every check, read through but not stored: what ``store_upload`` writes."""

    files: Sequence[UploadedFile]
    names: list[str]  # the uploaded files' names
    pages: list[str] = field(default_factory=list)  # the .md/.mdx files to store, relative to the book
    ignored: list[str] = field(default_factory=list)  # zip entries that are not pages, not stored
    entries: list[tuple[zipfile.ZipInfo, str]] = field(default_factory=list)  # a zip's entries to store, and where
    top_folder: str = ""  # the zip's single top-level folder, used as the book's root
    is_zip: bool = False
    seconds: float = 0.0


def uploads_dir() -> Path:
    return Path(settings.DATA_DIR) / "uploads"


def clean_folder(folder: str) -> str:
    """A "folder inside the book" as a relative POSIX path without slashes at the ends ("" = the book's root)."""
    text = (folder or "").strip().replace("\\", "/")
    if not text:
        return ""
    if text.startswith("/") or _DRIVE_RE.match(text):
        raise UploadError(f"folder {folder!r} must be relative to the book (like 'using/'), not absolute")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    for part in parts:
        if part == "..":
            raise UploadError(f"folder {folder!r} may not contain '..'")
        if part.startswith((".", "_")):
            raise UploadError(f"folder {folder!r}: a folder whose name starts with '.' or '_' is not part of the "
                              "published book (Docusaurus skips it)")
        if any(ord(c) < 32 for c in part):
            raise UploadError(f"folder {folder!r} contains control characters")
    return "/".join(parts)


def check_upload(files: Sequence[UploadedFile], *, folder: str = "") -> CheckedUpload:
    """Check ``files`` (a zip's every entry read through, in memory), writing nothing; ``UploadError`` if refused."""
    started = time.monotonic()
    folder = clean_folder(folder)
    if not files:
        raise UploadError("choose at least one file: .md or .mdx pages, or one .zip of a docs folder")
    names = [_base_name(f.name) for f in files]
    for upload, name in zip(files, names, strict=True):
        _check_file(upload, name)
    zips = [n for n in names if n.lower().endswith(ZIP_SUFFIX)]
    if zips and len(files) > 1:
        raise UploadError(f"upload one .zip on its own, or .md/.mdx files without a zip ({', '.join(zips)})")
    checked = CheckedUpload(files=files, names=names, is_zip=bool(zips))
    if zips:
        _check_zip(files[0], names[0], checked, folder)
    else:
        _check_pages(names, checked, folder)
    checked.seconds = time.monotonic() - started
    return checked


def store_upload(checked: CheckedUpload) -> Intake:
    """Write a checked upload into a new staging folder; ``UploadError`` (leaving nothing) if the server can't."""
    started = time.monotonic()
    staging = uploads_dir() / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    intake = Intake(root=staging, names=checked.names, pages=list(checked.pages), ignored=list(checked.ignored),
                    top_folder=checked.top_folder, is_zip=checked.is_zip)
    try:
        staging.mkdir(parents=True)
        if checked.is_zip:
            _extract_zip(checked, intake)
        else:
            _store_pages(checked, intake)
    except BaseException as exc:
        intake.discard()
        if isinstance(exc, OSError):  # the staging folder itself: a full disk, a read-only data folder
            raise UploadError(f"the upload cannot be stored on the server ({exc.strerror or exc})") from None
        raise
    intake.seconds = checked.seconds + time.monotonic() - started
    return intake


def receive_upload(files: Sequence[UploadedFile], *, folder: str = "") -> Intake:
    """Check ``files`` and store them in a new staging folder; raise ``UploadError`` (storing nothing) if refused."""
    return store_upload(check_upload(files, folder=folder))


def _base_name(name: str) -> str:
    return PurePosixPath((name or "").replace("\\", "/")).name


def _check_file(upload: UploadedFile, name: str) -> None:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in (*MARKDOWN_SUFFIXES, ZIP_SUFFIX):
        raise UploadError(f"{name}: not a .md, .mdx or .zip file")
    if not upload.size:
        raise UploadError(f"{name} is empty")
    limit = setting("UPLOAD_MAX_BYTES")
    if upload.size > limit:
        raise UploadError(f"{name} is {upload.size:,} bytes, over the {limit:,}-byte limit "
                          "(BOOKCHAT_UPLOAD_MAX_BYTES)")


def _check_pages(names: list[str], checked: CheckedUpload, folder: str) -> None:
    seen = set()
    for name in names:
        if name.startswith((".", "_")):
            raise UploadError(f"{name}: a page whose name starts with '.' or '_' is not published (Docusaurus "
                              "treats it as hidden or a partial); rename it")
        if name in seen:
            raise UploadError(f"{name} is in the upload twice")
        seen.add(name)
        rel = f"{folder}/{name}" if folder else name
        if problem := _unstorable(rel):
            raise UploadError(f"{rel} cannot be stored ({problem}); refused")
        checked.pages.append(rel)


def _unstorable(rel: str) -> str:
    """Why the file system could not hold a file at ``rel`` under a staging folder ("" if it can)."""
    if any(len(part.encode()) > NAME_MAX for part in rel.split("/")):
        return f"a name in it is longer than {NAME_MAX} bytes"
    if len(str(uploads_dir() / f"{STAGING_PREFIX}{'0' * 32}" / rel).encode()) >= PATH_MAX:
        return f"its path is longer than {PATH_MAX} bytes"
    return ""


def _store_pages(checked: CheckedUpload, intake: Intake) -> None:
    for upload, rel in zip(checked.files, checked.pages, strict=True):
        target = intake.root / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
        except OSError as exc:  # a full disk, …
            raise UploadError(f"{rel} cannot be stored ({exc.strerror or exc}); refused") from None


def _entry_path(raw: str, zip_name: str) -> str:
    """The entry's path inside the zip as safe relative POSIX ("" for the zip's root), or UploadError."""
    name = raw.replace("\\", "/")
    if name.startswith("/") or _DRIVE_RE.match(name):
        raise UploadError(f"{zip_name}: entry {raw!r} has an absolute path; refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UploadError(f"{zip_name}: entry {raw!r} points outside the upload ('..'); refused")
    if any(ord(c) < 32 for p in parts for c in p):
        raise UploadError(f"{zip_name}: entry {raw!r} has control characters in its name; refused")
    return "/".join(parts)


def _is_kept(rel: str) -> bool:
    path = PurePosixPath(rel)
    return path.suffix.lower() in MARKDOWN_SUFFIXES or path.name.lower() in CATEGORY_FILES


def _open_zip(upload: UploadedFile, zip_name: str) -> zipfile.ZipFile:
    upload.seek(0)
    try:
        return zipfile.ZipFile(getattr(upload, "file", upload))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise UploadError(f"{zip_name} is not a valid zip file ({exc})") from None


def _check_zip(upload: UploadedFile, zip_name: str, checked: CheckedUpload, folder: str) -> None:
    max_entries = setting("UPLOAD_MAX_FILES")
    max_bytes = setting("UPLOAD_MAX_UNCOMPRESSED_BYTES")
    with _open_zip(upload, zip_name) as archive:
        infos = archive.infolist()
        if len(infos) > max_entries:
            raise UploadError(f"{zip_name} holds {len(infos):,} entries, over the limit of {max_entries:,} "
                              "(BOOKCHAT_UPLOAD_MAX_FILES)")
        declared = sum(info.file_size for info in infos)
        if declared > max_bytes:
            raise UploadError(f"{zip_name} would expand to {declared:,} bytes, over the {max_bytes:,}-byte limit "
                              "(BOOKCHAT_UPLOAD_MAX_UNCOMPRESSED_BYTES)")
        plan = _plan(infos, zip_name, checked)
        if not any(PurePosixPath(rel).suffix.lower() in MARKDOWN_SUFFIXES for _, rel in plan):
            raise UploadError(f"{zip_name} has no .md or .mdx page")
        checked.top_folder = _single_top_folder([rel for _, rel in plan])
        for info, rel in plan:
            rel = rel[len(checked.top_folder) + 1:] if checked.top_folder else rel
            checked.entries.append((info, f"{folder}/{rel}" if folder else rel))
        _check_storable(checked.entries, zip_name)
        read = 0
        for info, rel in checked.entries:
            try:
                read = _copy_entry(archive, info, zip_name, read, max_bytes, out=None)
            except OSError as exc:
                raise UploadError(f"{zip_name}: entry {info.filename!r} cannot be read ({exc.strerror or exc}); "
                                  "refused") from None
            if PurePosixPath(rel).suffix.lower() in MARKDOWN_SUFFIXES:
                checked.pages.append(rel)


def _check_storable(entries: list[tuple[zipfile.ZipInfo, str]], zip_name: str) -> None:
    """Refuse entries the file system could not hold: a name too long, a path that is a page and a folder too."""
    paths = {rel for _, rel in entries}
    for info, rel in entries:
        problem = _unstorable(rel)
        parts = rel.split("/")
        if not problem and any("/".join(parts[:n]) in paths for n in range(1, len(parts))):
            problem = "another entry is stored as a file where it needs a folder"
        if problem:
            raise UploadError(f"{zip_name}: entry {info.filename!r} cannot be stored ({problem}); refused")


def _extract_zip(checked: CheckedUpload, intake: Intake) -> None:
    max_bytes = setting("UPLOAD_MAX_UNCOMPRESSED_BYTES")
    zip_name = checked.names[0]
    with _open_zip(checked.files[0], zip_name) as archive:
        written = 0
        for info, rel in checked.entries:
            written = _extract_entry(archive, info, intake.root / rel, zip_name, written, max_bytes)


def _plan(infos: list[zipfile.ZipInfo], zip_name: str, checked: CheckedUpload) -> list[tuple[zipfile.ZipInfo, str]]:
    """Check every entry (names, types, encryption) before writing anything; the (entry, path) pairs to store."""
    plan, seen = [], set()
    for info in infos:
        rel = _entry_path(info.filename, zip_name)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UploadError(f"{zip_name}: entry {info.filename!r} is a symbolic link; refused")
        if info.flag_bits & 0x1:
            raise UploadError(f"{zip_name}: entry {info.filename!r} is encrypted; upload a zip without a password")
        if info.is_dir() or stat.S_ISDIR(mode) or not rel:
            continue
        if rel.split("/")[0] in JUNK_FOLDERS or not _is_kept(rel):
            checked.ignored.append(rel)
            continue
        if rel in seen:
            raise UploadError(f"{zip_name}: entry {info.filename!r} appears twice; refused")
        seen.add(rel)
        plan.append((info, rel))
    return plan


def _single_top_folder(paths: list[str]) -> str:
    tops = {p.split("/")[0] for p in paths}
    if len(tops) == 1 and all("/" in p for p in paths):
        return tops.pop()
    return ""


def _extract_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, zip_name: str, written: int,
                   max_bytes: int) -> int:
    """Stream one entry to ``target``, counting the bytes really written; the new running total."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as out:
            return _copy_entry(archive, info, zip_name, written, max_bytes, out=out)
    except OSError as exc:
        raise UploadError(f"{zip_name}: entry {info.filename!r} cannot be stored ({exc.strerror or exc}); "
                          "refused") from None


def _copy_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, zip_name: str, written: int, max_bytes: int, *,
                out: BinaryIO | None) -> int:
    """Read one entry through (into ``out``, when given), counting its bytes against its header and the upload's
    limit; the new running total."""
    entry_bytes = 0
    try:
        with archive.open(info) as source:
            while chunk := source.read(_CHUNK):
                entry_bytes += len(chunk)
                written += len(chunk)
                if written > max_bytes:
                    raise UploadError(f"{zip_name}: entry {info.filename!r} takes the upload over the "
                                      f"{max_bytes:,}-byte limit once unpacked "
                                      "(BOOKCHAT_UPLOAD_MAX_UNCOMPRESSED_BYTES); refused")
                if entry_bytes > info.file_size:
                    raise UploadError(f"{zip_name}: entry {info.filename!r} is larger than its header says; refused")
                if out is not None:
                    out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise UploadError(f"{zip_name}: entry {info.filename!r} is corrupt or unreadable ({exc}); refused") from None
    return written
