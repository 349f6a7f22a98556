"""Safe intake of a published book: one ``.tar.gz`` of the site's root, streamed from the request into a staging folder.

The archive is read once, as it arrives (gzip, then tar, as streams): nothing is buffered whole and nothing is
stored before its member has been checked. Refused, naming the member, and leaving nothing behind:

- a body that is not gzip, or gzip that is not a tar archive, or one cut short or corrupt;
- more than ``PUBLISH_MAX_BYTES`` as sent, more than ``PUBLISH_MAX_UNCOMPRESSED_BYTES`` once decompressed (every
  byte the gzip stream gives is counted, so a decompression bomb stops at the limit), more than
  ``PUBLISH_MAX_FILES`` members;
- a member whose path leaves the root (``..``, an absolute path, a drive letter), has control characters, or
  appears twice; a symbolic or hard link whose target leaves the root; a device, FIFO or other special file.

What is stored: every regular file but those in folders that are never part of a book's sources (``.git``,
``node_modules``, build caches) and files of no use to indexing (binary files that are not pages, or files over
``MAX_FILE_BYTES``), which are listed as ignored. A page (``.md``/``.mdx``) is always stored: indexing reports a bad
one with its file and line. A link to a file inside the root is stored as a copy of that file (no link is ever
made on disk). When the archive holds exactly one top-level folder, that folder is the site's root
(``tar czf - website/``); otherwise its root is.
"""

from __future__ import annotations

import gzip
import posixpath
import re
import shutil
import tarfile
import time
import uuid
import zlib
from pathlib import Path, PurePosixPath

from bookchat.base.conf import setting
from bookchat.base.errors import RequestError
from ingestion.reading.discovery import MARKDOWN_SUFFIXES
from ingestion.uploads.intake import STAGING_PREFIX, Intake, uploads_dir

GZIP_MAGIC = b"\x1f\x8b"
# Folders that hold no source of a book: version control, dependencies, generators' caches and outputs.
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "node_modules", ".docusaurus", ".cache", "__pycache__", ".venv",
                             "__MACOSX"})
_CHUNK = 64 * 1024
_SNIFF = 8192
LISTED_IGNORED = 200  # files named in the list of what was not stored (the count is kept whole)
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


class ArchiveError(RequestError):
    """A published archive refused as sent; nothing of it is stored."""

    code = "bad_archive"


class _Limited:
    """A readable stream that counts what passes and refuses to pass more than ``limit`` bytes."""

    def __init__(self, stream, limit: int, refusal):
        self.stream = stream
        self.limit = limit
        self.refusal = refusal
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = _CHUNK
        data = self.stream.read(min(size, self.limit - self.count + 1))
        self.count += len(data)
        if self.count > self.limit:
            raise self.refusal()
        return data


class _Prefixed:
    """``head`` (bytes already read to sniff the format), then the rest of ``stream``."""

    def __init__(self, head: bytes, stream):
        self.head = head
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size is None or size < 0 or size >= len(self.head):
                data, self.head = self.head, b""
                return data
            data, self.head = self.head[:size], self.head[size:]
            return data
        return self.stream.read(size)


def receive_tarball(stream, *, content_length: int | None = None) -> Intake:
    """Check the ``.tar.gz`` read from ``stream`` and store its files in a new staging folder; raise
    ``ArchiveError`` (storing nothing) if it is refused."""
    started = time.monotonic()
    max_sent = setting("PUBLISH_MAX_BYTES")
    if content_length is not None and content_length > max_sent:
        raise _too_large_sent(max_sent)
    sent = _Limited(stream, max_sent, lambda: _too_large_sent(max_sent))
    head = sent.read(2)
    while len(head) < 2:
        more = sent.read(2 - len(head))
        if not more:
            break
        head += more
    if not head:
        raise ArchiveError("the body is empty: send the book's sources as one .tar.gz (tar czf - -C SITE .)",
                           code="empty_body")
    if head != GZIP_MAGIC:
        raise ArchiveError("the body is not gzip: send the book's sources as one .tar.gz (tar czf - -C SITE .)",
                           code="not_gzip", status=415)
    max_bytes = setting("PUBLISH_MAX_UNCOMPRESSED_BYTES")
    inflated = _Limited(gzip.GzipFile(fileobj=_Prefixed(head, sent), mode="rb"), max_bytes,
                        lambda: ArchiveError(f"the archive expands to more than {max_bytes:,} bytes "
                                             "(BOOKCHAT_PUBLISH_MAX_UNCOMPRESSED_BYTES); refused",
                                             code="too_large", status=413))
    staging = uploads_dir() / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    intake = Intake(root=staging, names=["sources.tar.gz"], is_zip=False)
    try:
        _extract(inflated, intake)
        _use_single_top_folder(intake)
        if not intake.pages:
            raise ArchiveError("the archive has no .md or .mdx page: send the site's root (the folder with "
                               "docusaurus.config.js, book.toml or mkdocs.yml) or a folder of Markdown",
                               code="no_pages")
    except BaseException:
        intake.discard()
        raise
    intake.seconds = time.monotonic() - started
    return intake


def _too_large_sent(limit: int) -> ArchiveError:
    return ArchiveError(f"the archive is larger than {limit:,} bytes (BOOKCHAT_PUBLISH_MAX_BYTES); leave out what "
                        "is not the book's sources (node_modules, build output, images)", code="too_large",
                        status=413)


def _extract(inflated: _Limited, intake: Intake) -> None:
    max_files = setting("PUBLISH_MAX_FILES")
    max_file = setting("MAX_FILE_BYTES")
    stored: dict[str, Path] = {}
    links: list[tuple[str, str]] = []  # (member, target), both relative to the root: copied once all is stored
    linked: set[str] = set()  # the links' own paths
    members = 0
    try:
        with tarfile.open(fileobj=inflated, mode="r|") as archive:
            for member in archive:
                members += 1
                if members > max_files:
                    raise ArchiveError(f"the archive holds more than {max_files:,} members "
                                       "(BOOKCHAT_PUBLISH_MAX_FILES); refused", code="too_many_files", status=413)
                rel = _member_path(member.name)
                if not rel:
                    continue
                if rel in stored or rel in linked:
                    raise ArchiveError(f"member {member.name!r} appears twice in the archive; refused",
                                       code="duplicate_member")
                if member.isdir():
                    continue
                if member.issym() or member.islnk():
                    links.append((rel, _link_target(member, rel)))
                    linked.add(rel)
                    continue
                if not member.isreg():
                    raise ArchiveError(f"member {member.name!r} is a device, FIFO or other special file; refused",
                                       code="unsafe_member")
                if _skipped(rel) or (member.size > max_file and not _is_page(rel)):
                    _ignore(intake, rel)
                    continue
                path = _store(archive, member, intake.root / rel, rel)
                if path is None:
                    _ignore(intake, rel)
                    continue
                stored[rel] = path
                if _is_page(rel):
                    intake.pages.append(rel)
    except ArchiveError:
        raise
    except (tarfile.ReadError, tarfile.HeaderError, tarfile.StreamError) as exc:
        message = "the body is gzip but not a tar archive" if members == 0 else "the tar archive is corrupt"
        raise ArchiveError(f"{message} ({exc}); send the output of tar czf", code="not_tar") from None
    except (gzip.BadGzipFile, zlib.error, EOFError, OSError) as exc:
        raise ArchiveError(f"the archive is corrupt or cut short ({exc}); send it whole", code="corrupt_archive") \
            from None
    _copy_links(links, stored, intake)


def _member_path(name: str) -> str:
    """The member's path as safe relative POSIX ("" for the root itself), or ArchiveError."""
    text = name.replace("\\", "/")
    if text.startswith("/") or _DRIVE_RE.match(text):
        raise ArchiveError(f"member {name[:300]!r} has an absolute path; refused", code="unsafe_path")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ArchiveError(f"member {name[:300]!r} points outside the archive ('..'); refused", code="unsafe_path")
    if any(ord(c) < 32 or c == "\x7f" for part in parts for c in part):
        raise ArchiveError(f"member {name[:300]!r} has control characters in its name; refused", code="unsafe_path")
    return "/".join(parts)


def _link_target(member: tarfile.TarInfo, rel: str) -> str:
    """The root-relative path a symbolic or hard link points at, or ArchiveError when it leaves the root."""
    target = member.linkname.replace("\\", "/")
    kind = "symbolic" if member.issym() else "hard"
    if target.startswith("/") or _DRIVE_RE.match(target) or not target:
        raise ArchiveError(f"member {member.name[:300]!r} is a {kind} link to {target[:300]!r}, outside the "
                           "archive; refused", code="unsafe_link")
    # A symbolic link's target is relative to its folder; a hard link's to the archive's root.
    joined = posixpath.join(posixpath.dirname(rel), target) if member.issym() else target
    normal = posixpath.normpath(joined)
    if normal == ".." or normal.startswith("../") or normal.startswith("/"):
        raise ArchiveError(f"member {member.name[:300]!r} is a {kind} link to {target[:300]!r}, outside the "
                           "archive; refused", code="unsafe_link")
    return _member_path(normal)


def _ignore(intake: Intake, rel: str) -> None:
    intake.ignored_count += 1
    if len(intake.ignored) < LISTED_IGNORED:
        intake.ignored.append(rel)


def _skipped(rel: str) -> bool:
    return any(part in SKIPPED_FOLDERS for part in rel.split("/")[:-1])


def _is_page(rel: str) -> bool:
    return PurePosixPath(rel).suffix.lower() in MARKDOWN_SUFFIXES


def _store(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path, rel: str) -> Path | None:
    """Stream the member to ``target``; None (nothing kept) for a binary file that is not a page."""
    source = archive.extractfile(member)
    if source is None:
        return None
    first = source.read(_SNIFF)
    if b"\x00" in first and not _is_page(rel):
        return None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as out:
            out.write(first)
            while chunk := source.read(_CHUNK):
                out.write(chunk)
    except (FileExistsError, NotADirectoryError):
        raise ArchiveError(f"member {member.name[:300]!r} clashes with another member of the same name (a file "
                           "and a folder, or names that differ only in case on this server); refused",
                           code="duplicate_member") from None
    except OSError as exc:
        if exc.errno is not None and exc.strerror and "name too long" in exc.strerror.lower():
            raise ArchiveError(f"member {member.name[:300]!r} has a name too long to store; refused",
                               code="unsafe_path") from None
        raise
    return target


def _copy_links(links: list[tuple[str, str]], stored: dict[str, Path], intake: Intake) -> None:
    """Store each link to a stored file as a copy of it; a link to a folder, or to what is not stored, is ignored."""
    for rel, target in links:
        source = stored.get(target)
        if _skipped(rel) or source is None:
            _ignore(intake, rel)
            continue
        path = intake.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        stored[rel] = path
        if _is_page(rel):
            intake.pages.append(rel)


def _use_single_top_folder(intake: Intake) -> None:
    """When everything sits in one top-level folder, make that folder the root."""
    entries = list(intake.root.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        return
    top = entries[0]
    intake.top_folder = top.name
    prefix = f"{top.name}/"
    holder = intake.root.with_name(intake.root.name + "-top")
    top.rename(holder)
    intake.root.rmdir()
    holder.rename(intake.root)
    intake.pages = [page.removeprefix(prefix) for page in intake.pages]
    intake.ignored = [name.removeprefix(prefix) for name in intake.ignored]
