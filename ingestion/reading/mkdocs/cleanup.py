"""Line-preserving rewrites of the extensions' syntax: content tabs, abbreviations, attribute lists (the
package's docstring says what was decided)."""

from __future__ import annotations

import re

from ingestion.reading.generators import dedent_body, outside_inline_code
from ingestion.reading.mkdocs.config import MkDocsSite

# -- line-preserving cleanup ---------------------------------------------------------------------------

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})")
_TAB = re.compile(r'^(?P<indent>[ \t]*)={3}(?:\+|\+!|!\+|!)? +"(?P<title>.*?)" *$')
_ABBR = re.compile(r"^[ \t]*\*\[[^\\\]]*?\][ ]?:")
_ATX = re.compile(r"^[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_SETEXT = re.compile(r"^[ \t]{0,3}(?:=+|-+)[ \t]*$")
_ATTRS = r"\{:?[ ]*[^}\n ][^}\n]*\}"
_BLOCK_ATTRS = re.compile(rf"^[ \t]*{_ATTRS}[ \t]*$")
_INLINE_ATTRS = re.compile(rf"(?P<el>\]\([^()\n]*\)|\]\[[^\]\n]*\]|\]|\*{{1,2}}|_{{1,2}}|~~|==|</[A-Za-z][\w-]*>)"
                           rf"{_ATTRS}")


def clean_mkdocs(text: str, site: MkDocsSite | None = None) -> str:
    """``text`` with MkDocs' extension syntax rewritten line for line (see ``clean_mkdocs_lines``)."""
    lines = text.split("\n")
    clean_mkdocs_lines(lines, site)
    return "\n".join(lines)


def clean_mkdocs_lines(lines: list[str], site: MkDocsSite | None = None) -> None:
    """Rewrite ``lines`` in place, never adding or removing one, outside fenced code: content tabs → label line
    and dedented content, abbreviation definitions blanked, attr lists removed except on headings. Only the
    extensions the site enables are read (all of them without a site)."""
    on = (lambda *names: True) if site is None else site.has_extension
    tabs, abbr = on("pymdownx.tabbed"), on("abbr", "pymdownx.extra")
    attrs = on("attr_list", "pymdownx.extra")
    fence: tuple[str, int, int] | None = None  # the open fence's character, length and indentation
    for index in range(len(lines)):
        line = lines[index]
        opening = _FENCE.match(line)
        if fence is not None:
            marker = opening.group("fence") if opening else ""
            # A closing fence: the same character, as long, indented less than four columns past the opening's.
            if marker[:1] == fence[0] and len(marker) >= fence[1] and not line[opening.end():].strip() \
                    and len(opening.group("indent").expandtabs(4)) < fence[2] + 4:
                fence = None
            continue
        if opening and not (opening.group("fence")[0] == "`" and "`" in line[opening.end():]):
            fence = (opening.group("fence")[0], len(opening.group("fence")), len(opening.group("indent").expandtabs(4)))
            continue
        if tabs and "===" in line:
            match = _TAB.match(line)
            if match:
                title = match.group("title").strip().replace("*", "")
                lines[index] = match.group("indent") + (f"**{title}:**" if title else "")
                dedent_body(lines, index + 1, len(match.group("indent").expandtabs(4)) + 4, clear_blank=True)
                continue
        if abbr and _ABBR.match(line):
            lines[index] = ""
            continue
        if attrs and "{" in line and not _is_heading(lines, index):
            previous = lines[index - 1] if index else ""
            if _BLOCK_ATTRS.match(line) and previous.strip() and not _FENCE.match(previous):
                lines[index] = ""
            else:
                lines[index] = outside_inline_code(line, lambda part: _INLINE_ATTRS.sub(r"\g<el>", part))


def _is_heading(lines: list[str], index: int) -> bool:
    if _ATX.match(lines[index]):
        return True
    following = lines[index + 1] if index + 1 < len(lines) else ""
    return bool(lines[index].strip()) and bool(_SETEXT.match(following)) and not _ATX.match(following)
