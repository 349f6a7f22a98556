"""Code in Markdown text: which lines are fenced code, where the code spans are, and HTML entities decoded
outside them. The one fence reader, of a page's text (the parser, the link rewriter) and of an answer's (its plain
text, the composer's blocks, the rendered HTML, grounding and confidence).

Decisions:
- A fence opens with three or more backticks or tildes (any indent) and closes with a run of the same character at
  least as long and nothing else on the line; an unclosed fence runs to the end of the text. As in CommonMark, a
  backtick fence's info string holds no backtick: ```` ```a` b``` ```` at a line's start is inline code.
- Entities (``&lt;``, also the escaped ``\\&lt;``) are decoded in prose only: code shows them as written.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass

_ENTITY = re.compile(r"\\?&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
FENCE_LINE = re.compile(r"^(?P<indent>\s*)(?P<marker>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Fenced:
    """A fenced block of a text's lines: ``lines[start]`` opens it, ``lines[end]`` closes it (``end`` is
    ``len(lines)`` when the text ends inside it)."""

    start: int
    end: int
    indent: str
    marker: str
    info: str

    def code(self, lines: list[str]) -> list[str]:
        return lines[self.start + 1:self.end]


def opening(line: str) -> re.Match | None:
    """The line as a fence's opening (groups ``indent``, ``marker``, ``info``), or ``None``."""
    found = FENCE_LINE.match(line)
    if found is None or (found["marker"][0] == "`" and "`" in found["info"]):
        return None
    return found


def closes(line: str, marker: str) -> bool:
    """Whether ``line`` closes a block opened with ``marker``."""
    stripped = line.strip()
    return stripped.startswith(marker) and not stripped.strip(marker[0])


def fenced_blocks(lines: list[str]) -> list[Fenced]:
    blocks, i = [], 0
    while i < len(lines):
        opened = opening(lines[i])
        if opened is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not closes(lines[end], opened["marker"]):
            end += 1
        blocks.append(Fenced(i, end, opened["indent"], opened["marker"], opened["info"]))
        i = end + 1
    return blocks


def split_fenced(text: str) -> list[tuple[str, str]]:
    """``text`` as pieces in order: ``("text", prose)`` and ``("code", a block's code)``, its fences left out."""
    lines = text.split("\n")
    pieces, last = [], 0
    for block in fenced_blocks(lines):
        pieces += [("text", "\n".join(lines[last:block.start])), ("code", "\n".join(block.code(lines)))]
        last = block.end + 1
    return [*pieces, ("text", "\n".join(lines[last:]))] if last < len(lines) or not pieces else pieces


def without_code(text: str) -> str:
    """``text`` with its fenced blocks, fences and all, each replaced by a blank line."""
    return "\n\n".join(piece for kind, piece in split_fenced(text) if kind == "text")


def decode_entities(text: str) -> str:
    """Decode HTML entities (``&lt;``, also the escaped ``\\&lt;``) outside fenced and inline code."""
    if "&" not in text:
        return text
    out: list[str] = []
    prose: list[str] = []
    for line, role in fence_roles(text.split("\n")):
        if role == "text":
            prose.append(line)
            continue
        if prose:
            out.append(_decode_prose("\n".join(prose)))
            prose = []
        out.append(line)
    if prose:
        out.append(_decode_prose("\n".join(prose)))
    return "\n".join(out)


def code_ranges(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character ranges of the fenced code blocks and inline code spans of a Markdown text."""
    ranges: list[tuple[int, int]] = []
    pos = 0
    prose_start = None
    for line, role in fence_roles(text.split("\n")):
        end = pos + len(line)
        if role == "text":
            prose_start = pos if prose_start is None else prose_start
        else:
            if prose_start is not None:
                ranges.extend(_code_spans(text, prose_start, pos))
                prose_start = None
            ranges.append((pos, end))
        pos = end + 1
    if prose_start is not None:
        ranges.extend(_code_spans(text, prose_start, len(text)))
    return ranges


def _code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    return [span.span() for span in _CODE_SPAN.finditer(text, start, end)]


def fence_roles(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each line with its role: ``open``/``code``/``close`` for fenced code, else ``text``."""
    roles = ["text"] * len(lines)
    for block in fenced_blocks(lines):
        roles[block.start] = "open"
        roles[block.start + 1:block.end] = ["code"] * (min(block.end, len(lines)) - block.start - 1)
        if block.end < len(lines):
            roles[block.end] = "close"
    return zip(lines, roles, strict=True)


def _decode_prose(text: str) -> str:
    pieces, pos = [], 0
    for span in _CODE_SPAN.finditer(text):
        pieces.append(_ENTITY.sub(_unescape, text[pos : span.start()]))
        pieces.append(span.group())
        pos = span.end()
    pieces.append(_ENTITY.sub(_unescape, text[pos:]))
    return "".join(pieces)


def _unescape(match: re.Match) -> str:
    return html.unescape(match.group().lstrip("\\"))
