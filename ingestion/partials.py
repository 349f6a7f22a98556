"""Imported MDX partials: ``import Intro from './_intro.mdx'`` + ``<Intro />`` → the partial's Markdown, inlined.

Runs on a page's lines before the line-preserving MDX cleanup (``ingestion.mdx``), so it may add lines:
each line of the result remembers the page line it stands for (``InlinedLines.origins``), and the
parser reports blocks, headings, warnings and errors at the page line of the ``<Intro />`` that brought
them in. ``PartialResolver.page_hash`` folds the partials' bytes into a page's content hash, so editing a
partial re-indexes the pages that use it.

Decisions:
- Only default imports of ``.md``/``.mdx`` files, used as ``<Name />`` (props allowed, ignored) on a line
  of its own, are inlined, with that line's indentation; other uses stay JSX (dropped with a warning).
- Paths: ``./`` and ``../`` are relative to the importing file; ``@site/`` is the site root — the book's
  folder or its parent, whichever holds ``docusaurus.config.*``; without a config file, ``@site/<book
  folder name>/…`` (the usual ``@site/docs/…``) maps into the book. A partial must lie inside the site
  root (the book's folder when there is no config). Anything else is a warning naming the import.
- A partial's front matter is dropped and its own ESM blocks blanked; nested partials are inlined up to
  ``MAX_DEPTH`` levels; an import cycle is a warning and the repeated partial is not inlined again.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from bookchat.errors import BookchatError
from ingestion.documents import Issue
from ingestion.mdx import find_code_lines
from ingestion.sources import decode_source

MAX_DEPTH = 5
_CONFIG_NAMES = ("docusaurus.config.js", "docusaurus.config.ts", "docusaurus.config.mjs",
                 "docusaurus.config.cjs", "docusaurus.config.mts", "docusaurus.config.cts")
_PARTIAL_IMPORT = re.compile(
    r"""^import\s+(?P<name>[A-Za-z_$][\w$]*)\s+from\s+(?P<q>['"])(?P<spec>[^'"\n]+\.mdx?)(?P=q)\s*;?\s*$""")
_ANY_PARTIAL_IMPORT = re.compile(r"""^import\s+[A-Za-z_$][\w$]*\s+from\s+['"][^'"\n]+\.mdx?['"]""", re.M)
_USE = re.compile(r"^(?P<indent>[ \t]*)<(?P<name>[A-Za-z_$][\w$]*)(?:\s[^<>]*)?/>\s*$")
_ESM_START = re.compile(r"^(?:import|export)\s")


@dataclass
class InlinedLines:
    lines: list[str]
    origins: list[int]  # for each line: the 0-based line of the page it stands for
    warnings: list[Issue] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)  # sha256 of each partial inlined, in order


class PartialResolver:
    """Reads and inlines the partials of a book's pages (files are read once per resolver)."""

    def __init__(self, root: Path, *, max_bytes: int, site_root: Path | None = None,
                 pages: dict[str, Path] | None = None):
        """``pages``: where a page really is when not at ``root/rel_path`` (a translation read in its place)."""
        self.root = Path(root).resolve()
        self.site_root = site_root.resolve() if site_root else next(
            (folder for folder in (self.root, self.root.parent)
             if any((folder / name).is_file() for name in _CONFIG_NAMES)), None)
        self.pages = pages or {}
        self.max_bytes = max_bytes
        self._files: dict[Path, tuple[str, str] | str] = {}  # path → (text, sha256) or an error message

    def inline(self, lines: list[str], *, rel_path: str) -> InlinedLines:
        """The page's lines with every ``<Partial />`` replaced by the partial's Markdown."""
        result = InlinedLines([], [])
        if not _ANY_PARTIAL_IMPORT.search("\n".join(lines)):
            result.lines, result.origins = list(lines), list(range(len(lines)))
            return result
        page = (self.pages.get(rel_path) or self.root / rel_path).resolve()
        for text, origin in self._expand(lines, page=page, chain=(page,), rel_path=rel_path, result=result):
            result.lines.append(text)
            result.origins.append(origin)
        return result

    def page_hash(self, text: str, content_hash: str, *, rel_path: str) -> str:
        """``content_hash`` for a page without partials; else a hash of it and every partial it inlines."""
        digests = self.inline(text.split("\n"), rel_path=rel_path).digests
        if not digests:
            return content_hash
        return hashlib.sha256("\x00".join([content_hash, *digests]).encode()).hexdigest()

    # -- expansion ---------------------------------------------------------------------------------
    def _expand(self, lines: list[str], *, page: Path, chain: tuple[Path, ...], rel_path: str,
                result: InlinedLines, page_line: int | None = None) -> list[tuple[str, int]]:
        """``(text, origin)`` pairs: ``origin`` is the index in ``lines`` of the line, or of the ``<Partial />``
        that brought it in. ``page_line``: the page's line for warnings, when ``lines`` are a partial's."""
        code, _ = find_code_lines(lines)
        imports = {}
        for index, line in enumerate(lines):
            match = _PARTIAL_IMPORT.match(line) if index not in code else None
            if match:
                imports[match.group("name")] = match.group("spec")
        out: list[tuple[str, int]] = []
        for index, line in enumerate(lines):
            origin = index
            use = _USE.match(line) if index not in code and imports else None
            if use is None or use.group("name") not in imports:
                out.append((line, origin))
                continue
            name = use.group("name")
            inner = self._partial(imports[name], name, page=page, chain=chain, rel_path=rel_path, result=result,
                                  line=origin if page_line is None else page_line)
            if inner is None:
                out.append(("", origin))
                continue
            indent = use.group("indent")
            out.append(("", origin))  # the partial renders as blocks of its own
            out.extend((indent + text if text.strip() else "", origin) for text in inner)
            out.append(("", origin))
        return out

    def _partial(self, spec: str, name: str, *, page: Path, chain: tuple[Path, ...], rel_path: str,
                 result: InlinedLines, line: int) -> list[str] | None:
        """The lines of the partial imported as ``name``, nested partials inlined; None (with a warning)."""
        def warn(message: str) -> None:
            message = f"partial <{name} /> from '{spec}' not inlined: {message}"
            result.warnings.append(Issue(rel_path, line + 1, message))

        target = self._resolve(spec, page)
        if isinstance(target, str):
            warn(target)
            return None
        if target in chain:
            warn("import cycle " + " → ".join(self._name(path) for path in (*chain, target)))
            return None
        if len(chain) > MAX_DEPTH:
            warn(f"partials nested more than {MAX_DEPTH} deep")
            return None
        loaded = self._read(target)
        if isinstance(loaded, str):
            warn(loaded)
            return None
        text, digest = loaded
        result.digests.append(digest)
        lines = _without_front_matter(text.split("\n"))
        esm = _esm_lines(lines)
        expanded = self._expand(lines, page=target, chain=(*chain, target), rel_path=rel_path, result=result,
                                page_line=line)
        # Inlined lines carry the index of their <Partial /> line, which is never an ESM line.
        return ["" if index in esm else text for text, index in expanded]

    def _resolve(self, spec: str, page: Path) -> Path | str:
        """The partial's file, or why it can't be used."""
        if spec.startswith("@site/"):
            rest = spec.removeprefix("@site/")
            if self.site_root is not None:
                base, inside = self.site_root, self.site_root
            elif rest.split("/")[0] == self.root.name:
                base, inside = self.root.parent, self.root
            else:
                return "@site is the Docusaurus site folder, and no docusaurus.config.* was found beside the book"
            target = (base / rest).resolve()
        elif spec.startswith(("./", "../")):
            inside = self.site_root or self.root
            target = (page.parent / spec).resolve()
        else:
            return "only ./, ../ and @site/ paths can be resolved"
        if not target.is_relative_to(inside):
            return "the file is outside the book"
        if not target.is_file():
            return "file not found"
        return target

    def _read(self, path: Path) -> tuple[str, str] | str:
        if path not in self._files:
            try:
                source = decode_source(path.read_bytes(), rel_path=self._name(path), max_bytes=self.max_bytes)
                self._files[path] = (source.text, source.content_hash)
            except OSError as exc:
                self._files[path] = f"cannot read file: {exc.strerror or exc}"
            except BookchatError as exc:
                self._files[path] = exc.message
        return self._files[path]

    def _name(self, path: Path) -> str:
        for base in (self.root, self.site_root):
            if base is not None and path.is_relative_to(base):
                return path.relative_to(base).as_posix()
        return path.name


def _without_front_matter(lines: list[str]) -> list[str]:
    if lines and lines[0].removeprefix("\ufeff").rstrip() == "---":
        close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
        if close is not None:
            return lines[close + 1 :]
    return lines


def _esm_lines(lines: list[str]) -> set[int]:
    """Lines of a partial's top-level ESM blocks (``import``/``export`` at column 0, up to a blank line)."""
    code, _ = find_code_lines(lines)
    esm: set[int] = set()
    index = 0
    while index < len(lines):
        previous_blank = index == 0 or not lines[index - 1].strip()
        if index not in code and previous_blank and _ESM_START.match(lines[index]):
            while index < len(lines) and lines[index].strip():
                esm.add(index)
                index += 1
        index += 1
    return esm
