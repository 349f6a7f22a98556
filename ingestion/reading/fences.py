"""Code in Markdown text: which lines are fenced code, where the code spans are, and HTML entities decoded
outside them. The one fence reader of a page's text, for the parser, the link rewriter and the answer's plain text.

Decisions:
- A fence opens with three or more backticks or tildes (any indent) and closes with a run of the same character at
  least as long and nothing else on the line; an unclosed fence runs to the end of the text.
- Entities (``&lt;``, also the escaped ``\\&lt;``) are decoded in prose only: code shows them as written.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

_ENTITY = re.compile(r"\\?&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
FENCE_LINE = re.compile(r"^\s*(`{3,}|~{3,})")


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
    fence = ""
    for line in lines:
        opener = FENCE_LINE.match(line)
        if not fence:
            fence = opener.group(1) if opener else ""
            yield line, "open" if opener else "text"
        elif opener and opener.group(1).startswith(fence) and not line.strip().strip(fence[0]):
            fence = ""
            yield line, "close"
        else:
            yield line, "code"


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
