"""Finding a book's source files on disk and reading them safely.

Discovery takes ``.md``/``.mdx`` files under a folder (or one file), skips Docusaurus
partials (any path segment starting with ``_``), hidden folders and ``node_modules``, and
never follows a symlink that points outside the folder. Reading refuses what is not a
Markdown text: too large, binary (NUL bytes), not UTF-8 — each with the file and line.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from bookchat.base.errors import BookchatError
from ingestion.reading.documents import Issue
from ingestion.reading.docusaurus import is_partial

MARKDOWN_SUFFIXES = (".md", ".mdx")
SKIPPED_FOLDERS = {"node_modules", "__pycache__"}


class SourceError(BookchatError):
    code = "bad_source"


@dataclass
class SourceFile:
    path: Path  # absolute
    rel_path: str  # POSIX, relative to the root


@dataclass
class Discovery:
    root: Path
    files: list[SourceFile] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    single_file: bool = False


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
        return True
    except ValueError:
        return False


def discover(path: Path, *, root: Path | None = None) -> Discovery:
    """The Markdown pages under ``path`` (a folder or one file), relative to ``root`` (default: ``path``)."""
    if not path.exists() and not path.is_symlink():
        raise SourceError(f"{path} does not exist", code="not_found")
    if path.is_file():
        if path.suffix.lower() not in MARKDOWN_SUFFIXES:
            raise SourceError(f"{path} is not a Markdown file (.md or .mdx)", code="not_markdown")
        base = (root or path.parent).resolve()
        resolved = path.resolve()
        rel = resolved.relative_to(base).as_posix() if _inside(resolved, base) else path.name
        return Discovery(root=base, files=[SourceFile(resolved, rel)], single_file=True)
    if not path.is_dir():
        raise SourceError(f"{path} is neither a folder nor a file", code="not_found")

    root = path.resolve()
    found = Discovery(root=root)
    for folder, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(folder)
        kept = []
        for name in sorted(dirnames):
            sub = here / name
            rel = sub.relative_to(root).as_posix()
            if name.startswith(".") or name in SKIPPED_FOLDERS or is_partial(rel):
                continue
            if sub.is_symlink():
                found.warnings.append(Issue(rel, None, "symlinked folder not followed"
                                            + ("" if _inside(sub, root) else " (it points outside the book)")))
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            file = here / name
            rel = file.relative_to(root).as_posix()
            if file.suffix.lower() not in MARKDOWN_SUFFIXES or is_partial(rel) or name.startswith("."):
                continue
            if file.is_symlink() and not _inside(file, root):
                found.warnings.append(Issue(rel, None, "symlink points outside the book; not followed"))
                continue
            if not file.is_file():
                found.warnings.append(Issue(rel, None, "not a regular file; skipped"))
                continue
            found.files.append(SourceFile(file, rel))
    return found


@dataclass
class SourceText:
    text: str
    content_hash: str


def read_source(file: SourceFile, *, max_bytes: int) -> SourceText:
    """The file's text, or a SourceError naming why it can't be a Markdown page."""
    try:
        _check_size(file.path.stat().st_size, max_bytes, file.rel_path)  # before reading a huge file
        data = file.path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}", code="unreadable", file=file.rel_path) from exc
    return decode_source(data, rel_path=file.rel_path, max_bytes=max_bytes)


def _check_size(size: int, max_bytes: int, rel_path: str) -> None:
    if size > max_bytes:
        raise SourceError(f"file is {size:,} bytes, over the {max_bytes:,}-byte limit (BOOKCHAT_MAX_FILE_BYTES)",
                          code="too_large", file=rel_path)


def decode_source(data: bytes, *, rel_path: str, max_bytes: int) -> SourceText:
    _check_size(len(data), max_bytes, rel_path)
    nul = data.find(b"\x00")
    if nul >= 0:
        raise SourceError("binary file (it contains NUL bytes), not Markdown text", code="binary",
                          file=rel_path, line=data.count(b"\n", 0, nul) + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at byte {exc.start}); save the file as UTF-8",
            code="not_utf8", file=rel_path, line=data.count(b"\n", 0, exc.start) + 1,
        ) from None
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return SourceText(text=text, content_hash=hashlib.sha256(data).hexdigest())
