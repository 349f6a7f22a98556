"""The shapes a parsed Markdown/MDX page takes between the parser and the chunker, and the Markdown bookchat
writes into them itself (admonition and tab labels, code fences), whichever reader (``mdx``, ``generators``,
``parsing``) rewrites the page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ADMONITION_LABELS = {"caution": "Caution", "danger": "Danger", "info": "Info", "important": "Important",
                     "note": "Note", "tip": "Tip", "warning": "Warning", "success": "Tip",
                     "secondary": "Note"}


@dataclass(frozen=True)
class Heading:
    """A heading H1–H4 with its Docusaurus anchor (``{#custom-id}`` or slugged title)."""

    level: int
    title: str
    anchor: str
    line: int


@dataclass(frozen=True)
class Block:
    """One unit of page content that the chunker may keep whole.

    ``kind`` is one of: paragraph, code, table, list, quote, admonition, html, math.
    ``text`` is cleaned Markdown (MDX removed, code fences kept with their backticks).
    ``start``/``end`` are character offsets into the original file text; ``line`` and
    ``end_line`` are 1-based source lines. ``headings`` is the chain of headings that
    encloses the block, outermost first (never two of the same level).
    """

    kind: str
    text: str
    line: int
    end_line: int
    start: int
    end: int
    headings: tuple[Heading, ...] = ()


@dataclass(frozen=True)
class Issue:
    """A warning or error about a source file, shaped like the index report's entries."""

    file: str
    line: int | None
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass
class ParsedDocument:
    """A page: its metadata by Docusaurus rules and its content blocks in order."""

    rel_path: str  # POSIX path relative to the docs root, e.g. "guides/intro.mdx"
    title: str
    slug: str  # URL path under the book's base URL, no leading/trailing slash ("" = root)
    front_matter: dict
    category: str  # label of the enclosing folder ("" at the root)
    blocks: list[Block] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    # Reference-style link definitions (``[label]: href "title"``), which are not blocks: label as
    # markdown-it normalises it → (href, title).
    link_definitions: dict[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class Label:
    """A label line we wrote (``Note:``/``npm:``), valid for content up to ``end_line`` (0-based): the parser folds
    it into the next block before that line."""

    text: str
    end_line: int


def admonition_label(kind: str, title: str | None) -> str:
    """``("tip", "Learn")`` → ``"**Tip (Learn):**"``; ``("note", None)`` → ``"**Note:**"``. Bold, so an answer
    or excerpt that starts inside an admonition shows its label as a label, not as the first words of a
    sentence."""
    name = ADMONITION_LABELS.get(kind.lower(), kind[:1].upper() + kind[1:])
    title = (title or "").strip().replace("*", "")
    return f"**{name} ({title}):**" if title else f"**{name}:**"


def fence_for(code: str) -> str:
    """A backtick fence longer than any backtick fence inside ``code`` (at least ```)."""
    longest = max((len(run) for run in re.findall(r"^\s*(`{3,})", code, re.M)), default=2)
    return "`" * max(3, longest + 1)
