"""Imported MDX partials: ``import Intro from './_intro.mdx'`` + ``<Intro />`` → the partial's Markdown, inlined.

Runs on a page's lines before the line-preserving MDX cleanup (``ingestion.reading.mdx``), so it may add lines:
each line of the result remembers the page line it stands for (``InlinedLines.origins``), and the
parser reports blocks, headings, warnings and errors at the page line of the ``<Intro />`` that brought
them in. ``PartialResolver.page_hash`` folds the partials' bytes into a page's content hash, so editing a
partial re-indexes the pages that use it.

Decisions:
- Only default imports of ``.md``/``.mdx`` files, used as ``<Name />`` on a line of its own, are inlined,
  with that line's indentation; other uses stay JSX (dropped with a warning). String props given there
  (``<Intro name="Ada" />``) replace the partial's ``{props.name}``, as Docusaurus renders them; other
  props (expressions) don't, and their ``{props.x}`` stays as written.
- Paths: ``./`` and ``../`` are relative to the importing file; ``@site/`` is the site root — the book's
  folder or its parent, whichever holds ``docusaurus.config.*``; without a config file, ``@site/<book
  folder name>/…`` (the usual ``@site/docs/…``) maps into the book. A partial must lie inside the site
  root (the book's folder when there is no config). Anything else is a warning naming the import.
- A partial's front matter is dropped and its own ESM blocks blanked; nested partials are inlined up to
  ``MAX_DEPTH`` levels; an import cycle is a warning and the repeated partial is not inlined again.
- mdBook's ``{{#include path}}`` (also ``#rustdoc_include``, ``#playground``) on a line of its own, in a
  ``.md`` page, in code blocks too: the file (relative to the page, inside the book or site) is inlined as
  mdBook renders it, with its line ranges (``:3``, ``:3:``, ``::9``, ``:3:9``) and ``:anchor`` sections
  (between ``ANCHOR: name`` and ``ANCHOR_END: name``; anchor marker lines are never shown). An included
  ``.md`` file's own includes are inlined too. One that can't be read is a warning and a blank line. A
  ``{{#playground file attr…}}`` is the file in a ```` ```rust,attr… ```` block, as mdBook's links preprocessor
  writes it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bookchat.base.errors import BookchatError
from ingestion.reading.discovery import decode_source
from ingestion.reading.documents import Issue
from ingestion.reading.mdbook.display import playground_block
from ingestion.reading.mdx import find_code_lines

MAX_DEPTH = 5
_CONFIG_NAMES = ("docusaurus.config.js", "docusaurus.config.ts", "docusaurus.config.mjs",
                 "docusaurus.config.cjs", "docusaurus.config.mts", "docusaurus.config.cts")
_PARTIAL_IMPORT = re.compile(
    r"""^import\s+(?P<name>[A-Za-z_$][\w$]*)\s+from\s+(?P<q>['"])(?P<spec>[^'"\n]+\.mdx?)(?P=q)\s*;?\s*$""")
_ANY_PARTIAL_IMPORT = re.compile(r"""^import\s+[A-Za-z_$][\w$]*\s+from\s+['"][^'"\n]+\.mdx?['"]""", re.M)
_USE = re.compile(r"^(?P<indent>[ \t]*)<(?P<name>[A-Za-z_$][\w$]*)(?:\s[^<>]*)?/>\s*$")
_ESM_START = re.compile(r"^(?:import|export)\s")
# ``{{#playground file attr…}}`` takes words after the file (``editable``, ``mdbook-runnable``): its code block's.
_MDBOOK_INCLUDE = re.compile(r"^(?P<indent>[ \t]*)\{\{\s*#(?P<kind>include|rustdoc_include|playground)\s+"
                            r"(?P<path>[^\s:}]+)(?::(?P<range>[^\s}]*))?(?P<words>(?:[ \t]+[^\s}]+)*)\s*\}\}\s*$",
                            re.M)
_STRING_PROP = re.compile(r"""\s(?P<name>[A-Za-z_$][\w$]*)=(?:"(?P<d>[^"]*)"|'(?P<s>[^']*)'|"""
                          r"""\{\s*(?:"(?P<jd>[^"]*)"|'(?P<js>[^']*)'|`(?P<t>[^`$]*)`)\s*\})""")
_PROPS_USE = re.compile(r"\{\s*props\.([A-Za-z_$][\w$]*)\s*\}")
_ANCHOR_MARK = re.compile(r"ANCHOR(?:_END)?:\s*(?P<name>[\w-]+)")
_MDBOOK_SUFFIXES = (".md", ".markdown")


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
        joined = "\n".join(lines)
        mdbook = rel_path.lower().endswith(_MDBOOK_SUFFIXES)
        if not _ANY_PARTIAL_IMPORT.search(joined) and not (mdbook and _MDBOOK_INCLUDE.search(joined)):
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
        mdbook = page.suffix.lower() in _MDBOOK_SUFFIXES
        for index, line in enumerate(lines):
            origin = index
            include = _MDBOOK_INCLUDE.match(line) if mdbook and "{{" in line else None
            if include is not None:
                inner = self._include(include, page=page, chain=chain, rel_path=rel_path, result=result,
                                      line=origin if page_line is None else page_line)
                indent = include.group("indent")
                out.extend((indent + text if text.strip() else "", origin) for text in inner or [""])
                continue
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
            props = _string_props(line)
            if props:
                inner = [_PROPS_USE.sub(lambda m, props=props: props.get(m.group(1), m.group(0)), text)
                         for text in inner]
            out.append(("", origin))  # the partial renders as blocks of its own
            out.extend((indent + text if text.strip() else "", origin) for text in inner)
            out.append(("", origin))
        return out

    def _include(self, include: re.Match, *, page: Path, chain: tuple[Path, ...], rel_path: str,
                 result: InlinedLines, line: int) -> list[str] | None:
        """The lines an mdBook ``{{#include}}`` stands for; None (with a warning) when it can't be read."""
        spec = include.group("path")

        def warn(message: str) -> None:
            result.warnings.append(Issue(rel_path, line + 1, f"mdBook {{{{#include {spec}}}}} not inlined: "
                                                             f"{message}"))

        target = (page.parent / spec).resolve()
        inside = self.site_root or self.root
        if not target.is_relative_to(inside):
            warn("the file is outside the book")
            return None
        if not target.is_file():
            warn("file not found")
            return None
        text = self._load(target, chain, result, warn, cycle="include cycle", nested="includes")
        if text is None:
            return None
        lines = _line_range(text.split("\n"), include.group("range"))
        if lines is None:
            warn(f"no anchor {include.group('range')!r} in the file")
            return None
        lines = [text for text in lines if not _ANCHOR_MARK.search(text)]
        if include.group("kind") == "playground":  # the file, as a Rust block the reader can run
            return playground_block("\n".join(lines), include.group("words").split()).removesuffix("\n").split("\n")
        if include.group("words"):
            warn(f"{{{{#{include.group('kind')}}}}} takes a file and no more words")
            return None
        if target.suffix.lower() in _MDBOOK_SUFFIXES:
            lines = [text for text, _ in self._expand(lines, page=target, chain=(*chain, target), rel_path=rel_path,
                                                      result=result, page_line=line)]
        return lines

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
        text = self._load(target, chain, result, warn, cycle="import cycle", nested="partials")
        if text is None:
            return None
        lines = _without_front_matter(text.split("\n"))
        esm = _esm_lines(lines)
        expanded = self._expand(lines, page=target, chain=(*chain, target), rel_path=rel_path, result=result,
                                page_line=line)
        # Inlined lines carry the index of their <Partial /> line, which is never an ESM line.
        return ["" if index in esm else text for text, index in expanded]

    def _load(self, target: Path, chain: tuple[Path, ...], result: InlinedLines, warn: Callable[[str], None], *,
              cycle: str, nested: str) -> str | None:
        """The text of a partial or included file, its digest recorded; None (with a warning) for a cycle, nesting
        past ``MAX_DEPTH`` or a file that can't be read."""
        if target in chain:
            warn(f"{cycle} " + " → ".join(self._name(path) for path in (*chain, target)))
            return None
        if len(chain) > MAX_DEPTH:
            warn(f"{nested} nested more than {MAX_DEPTH} deep")
            return None
        loaded = self._read(target)
        if isinstance(loaded, str):
            warn(loaded)
            return None
        text, digest = loaded
        result.digests.append(digest)
        return text

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


def _string_props(tag: str) -> dict[str, str]:
    """The string-valued props of a ``<Partial name="…" />`` tag."""
    return {m.group("name"): next(v for v in m.group("d", "s", "jd", "js", "t") if v is not None)
            for m in _STRING_PROP.finditer(tag)}


def _line_range(lines: list[str], spec: str | None) -> list[str] | None:
    """mdBook's selection: ``3`` (line 3), ``3:`` / ``:9`` / ``3:9`` (1-based, inclusive), ``name`` (between its
    ANCHOR marks); None for an anchor the file doesn't have."""
    if not spec:
        return lines
    numbers = re.fullmatch(r"(\d*)(:?)(\d*)", spec)
    if numbers and (numbers.group(1) or numbers.group(3)):
        start = int(numbers.group(1) or 1)
        if not numbers.group(2):
            return lines[start - 1:start]
        end = int(numbers.group(3)) if numbers.group(3) else len(lines)
        return lines[max(start - 1, 0):end]
    begin = next((i for i, text in enumerate(lines) if re.search(rf"ANCHOR:\s*{re.escape(spec)}\b", text)), None)
    if begin is None:
        return None
    end = next((i for i in range(begin + 1, len(lines))
                if re.search(rf"ANCHOR_END:\s*{re.escape(spec)}\b", lines[i])), len(lines))
    return lines[begin + 1:end]


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
