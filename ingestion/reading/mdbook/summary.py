"""``SUMMARY.md``: the book's chapters in order, with their numbers, parts and drafts."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from markdown_it import MarkdownIt


@dataclass(frozen=True)
class Chapter:
    """One entry of ``SUMMARY.md``."""

    title: str
    path: str | None  # relative to the source folder, posix; None for a draft chapter
    number: str | None = None  # "4.1" for numbered chapters; None for prefix and suffix chapters
    level: int = 1  # 1 for prefix, suffix and top-level numbered chapters; 2 for their sub-chapters…
    part: str | None = None  # the part title (``# Part`` in SUMMARY.md) the chapter is under

    @property
    def draft(self) -> bool:
        return self.path is None


def parse_summary(text: str) -> tuple[str | None, list[Chapter], list[str]]:
    """``(summary title, chapters in order, warnings)`` of a ``SUMMARY.md``'s text (see the module docstring).
    Separators (``---``) are read and skipped: they are not chapters."""
    markdown = MarkdownIt("commonmark")
    markdown.normalizeLink = lambda url: url  # keep destinations as written, as pulldown-cmark does
    markdown.validateLink = lambda url: True
    tokens = markdown.parse(text)
    return _SummaryParser(tokens).parse()


class _SummaryParser:
    def __init__(self, tokens: list):
        self.tokens = tokens
        self.pos = 0
        self.chapters: list[Chapter] = []
        self.warnings: list[str] = []

    def parse(self) -> tuple[str | None, list[Chapter], list[str]]:
        title = self._title()
        self._affix(prefix=True)
        self._numbered_parts()
        self._affix(prefix=False)
        return title, self.chapters, self.warnings

    # The title: an h1 that comes first (HTML blocks before it are skipped).
    def _title(self) -> str | None:
        while self.pos < len(self.tokens) and self.tokens[self.pos].type == "html_block":
            self.pos += 1
        if self._at("heading_open", "h1"):
            title = _inline_text(self.tokens[self.pos + 1])
            self.pos += 3
            return title
        return None

    def _affix(self, *, prefix: bool) -> None:
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            if token.type in ("bullet_list_open", "ordered_list_open") or self._at("heading_open", "h1"):
                if not prefix:
                    line = token.map[0] + 1 if token.map else "?"
                    self.warnings.append(f"line {line}: suffix chapters cannot be followed by a list or a part "
                                         "title (mdBook stops there); the rest is not read")
                    self.pos = len(self.tokens)
                return
            if token.type == "inline":
                for name, href in _links(token):
                    self.chapters.append(Chapter(name, _chapter_path(href)))
            self.pos += 1

    def _numbered_parts(self) -> None:
        counter = [0]  # top-level numbers go on across lists and parts
        part = None
        while self.pos < len(self.tokens):
            if self._at("paragraph_open"):
                return  # the suffix chapters
            if self._at("heading_open", "h1"):
                part = _inline_text(self.tokens[self.pos + 1])
                self.pos += 3
            self._numbered(counter, part)

    def _numbered(self, counter: list[int], part: str | None) -> None:
        first = True
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            if token.type == "paragraph_open":
                if not first:
                    return
                self.pos = self._close_of(self.pos) + 1  # mdBook skips a paragraph right after a part title
            elif self._at("heading_open", "h1"):
                return
            elif token.type in ("bullet_list_open", "ordered_list_open"):
                self._list(parent=(), counter=counter, part=part)
            elif token.nesting == 1:
                self.pos = self._close_of(self.pos) + 1  # any other block is skipped with its content
            else:
                self.pos += 1  # hr (a separator), code, html…
            first = False

    def _list(self, *, parent: tuple[int, ...], counter: list[int] | None, part: str | None) -> None:
        """The list at ``self.pos``; ``counter``: the numbers already used at the top level (None below it)."""
        close = self._close_of(self.pos)
        self.pos += 1
        index = 0
        while self.pos < close:
            token = self.tokens[self.pos]
            if token.type != "list_item_open":
                self.pos += 1
                continue
            item_close = self._close_of(self.pos)
            link = self._item_link(self.pos, item_close)
            if link is None:
                line = token.map[0] + 1 if token.map else "?"
                self.warnings.append(f"line {line}: a list item must be only a link (mdBook stops there); "
                                     "left out with its sub-chapters")
                self.pos = item_close + 1
                continue
            index += 1
            number = (*parent, index + (counter[0] if counter is not None else 0))
            name, href = link
            self.chapters.append(Chapter(name, _chapter_path(href), ".".join(map(str, number)), len(number), part))
            self.pos += 1
            while self.pos < item_close:
                if self.tokens[self.pos].type in ("bullet_list_open", "ordered_list_open"):
                    self._list(parent=number, counter=None, part=part)
                else:
                    self.pos += 1
            self.pos = item_close + 1
        if counter is not None:
            counter[0] += index
        self.pos = close + 1

    def _item_link(self, start: int, close: int) -> tuple[str, str] | None:
        """The link a list item starts with (its first block's inline content must start with it)."""
        for token in self.tokens[start + 1:close]:
            if token.type == "paragraph_open":
                continue
            if token.type != "inline":
                return None
            children = [child for child in token.children or [] if not (child.type == "text" and not child.content)]
            if not children or children[0].type != "link_open":
                return None
            return next(iter(_links(token)))
        return None

    def _at(self, kind: str, tag: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        token = self.tokens[self.pos]
        return token.type == kind and (tag is None or token.tag == tag)

    def _close_of(self, start: int) -> int:
        depth = 0
        for index in range(start, len(self.tokens)):
            depth += self.tokens[index].nesting
            if depth == 0:
                return index
        return len(self.tokens) - 1


def _links(inline) -> list[tuple[str, str]]:
    """``(name, href)`` of each link in an inline token: the name is its text and code, as mdBook takes it."""
    found, name, href = [], None, None
    for child in inline.children or []:
        if child.type == "link_open" and name is None:
            name, href = [], child.attrGet("href") or ""
        elif child.type == "link_close" and name is not None:
            found.append(("".join(name), href))
            name = None
        elif name is not None:
            name.append(_child_text(child))
    return found


def _inline_text(inline) -> str:
    return "".join(_child_text(child) for child in inline.children or [])


def _child_text(child) -> str:
    if child.type in ("text", "code_inline"):
        return child.content
    if child.type == "softbreak":
        return " "
    if child.type == "image":  # pulldown-cmark gives the alt text as text events
        return "".join(_child_text(c) for c in child.children or [])
    return ""


def _chapter_path(href: str) -> str | None:
    """The chapter's file from its link: None for a draft (``[Title]()``); only ``%20`` is decoded, as in mdBook."""
    if not href:
        return None
    path = posixpath.normpath(href.replace("%20", " ").replace("\\", "/"))
    return path.removeprefix("./")
