"""What mdBook's HTML renderer names: a chapter's file and URL, and its headings' ids."""

from __future__ import annotations

import posixpath
import re
import unicodedata
from pathlib import PurePosixPath
from urllib.parse import quote

DEFAULT_SITE_URL = "/"


# Characters a browser leaves as they are in a URL path (RFC 3986 pchar and "/"); the rest is percent-encoded.
_PATH_SAFE = "/!$&'()*+,;=:@~-._"


def html_path(rel_path: str, *, index_readme: bool = True) -> str:
    """The file mdBook writes for a chapter: ``ch01.md`` → ``ch01.html``; ``README.md`` → ``index.html`` of its
    folder while the ``index`` preprocessor runs."""
    path = PurePosixPath(posixpath.normpath(rel_path.replace("\\", "/")).removeprefix("./"))
    if index_readme and path.stem.lower() == "readme":
        path = path.with_name("index.md")
    return (path.with_suffix(".html") if path.suffix else path.with_name(path.name + ".html")).as_posix()


def page_url(site_url: str, rel_path: str, *, index_readme: bool = True) -> str:
    """A chapter's URL: ``site_url`` (``/`` by default: the URL is then root-relative) + its HTML file,
    percent-encoded as a browser requests it."""
    base = (site_url or DEFAULT_SITE_URL).rstrip("/") + "/"
    return base + quote(html_path(rel_path, index_readme=index_readme), safe=_PATH_SAFE)


# Rust's char::is_whitespace (Unicode White_Space).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                        + "".join(chr(c) for c in range(0x2000, 0x200B)))

# Non-spacing marks that are Unicode Alphabetic (vowel signs and the like), by name.
_ALPHABETIC_MARK_WORDS = ("VOWEL", "ANUSVARA", "CANDRABINDU", "VISARGA", "SIGN AA", "LENGTH MARK", "SUBJOINED",
                          "MEDIAL", "HEBREW POINT", "ARABIC FATHA", "ARABIC KASRA", "ARABIC DAMMA", "ARABIC SUKUN",
                          "ARABIC SHADDA")

# Symbols that are Unicode Alphabetic: circled letters, and the squared/negative letters of the SMP.
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))

# A heading attribute block (pulldown-cmark): ``{…}`` at the end, with no ``{}<>\`` inside.
_ATTRIBUTE_BLOCK = re.compile(r"\{(?P<attrs>[^{}<>\\\n]*)\}[ \t]*$")

_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")


def _is_alphanumeric(char: str) -> bool:
    """Rust's ``char::is_alphanumeric`` (Unicode Alphabetic or Numeric), approximated with ``unicodedata``."""
    category = unicodedata.category(char)
    if category[0] in "LN" or category == "Mc":
        return True
    if category == "Mn":
        name = unicodedata.name(char, "")
        return any(word in name for word in _ALPHABETIC_MARK_WORDS)
    code = ord(char)
    return category == "So" and any(low <= code <= high for low, high in _ALPHABETIC_SYMBOLS)


def normalize_id(text: str) -> str:
    """mdBook's id for a heading's text: trimmed, lowercased; alphanumerics, ``_`` and ``-`` kept, each
    whitespace character → ``-``, everything else dropped; ``section`` when nothing is left."""
    out = []
    for char in _strip_whitespace(text).lower():
        if char in "_-" or _is_alphanumeric(char):
            out.append(char)
        elif char in _WHITESPACE:
            out.append("-")
    return "".join(out) or "section"


def _strip_whitespace(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] in _WHITESPACE:
        start += 1
    while end > start and text[end - 1] in _WHITESPACE:
        end -= 1
    return text[start:end]


def unique_id(base: str, seen: dict[str, int]) -> str:
    """``base``, or the first of ``base-1``, ``base-2``… not yet in ``seen`` (the ids given so far in the page;
    each maps to the last suffix tried for it), as mdBook's ``unique_id``."""
    if base not in seen:
        seen[base] = 0
        return base
    count = seen[base]
    while True:
        count += 1
        candidate = f"{base}-{count}"
        if candidate not in seen:
            seen[base] = count
            seen[candidate] = 0
            return candidate


def heading_id(text: str, seen: dict[str, int], *, custom_id: str | None = None) -> str:
    """The id mdBook gives a heading whose rendered text is ``text`` (inline markup rendered: code kept, emphasis
    markers, HTML tags and image alt texts gone, entities decoded, smart punctuation applied — see
    :func:`smart_dashes`), unique within the page (``seen``: one dict per page, also for definition-list terms).
    A ``custom_id`` (from ``{#id}``) is returned as is and not counted."""
    if custom_id:
        return custom_id
    return unique_id(normalize_id(text), seen)


def split_heading_attributes(heading: str) -> tuple[str, str | None, list[str]]:
    """A heading's source content → ``(content, custom id or None, classes)``: a trailing ``{#id .class key=v}``
    block (pulldown-cmark's heading attributes: space-separated, the last ``#id`` wins, empty ones ignored) is
    removed, then an ATX closing sequence (``## Title ## {#id}``)."""
    match = _ATTRIBUTE_BLOCK.search(heading)
    if match is None:
        return heading.strip(), None, []
    custom, classes = None, []
    for attribute in match.group("attrs").split():
        if attribute.startswith("#"):
            custom = attribute[1:] or custom
        elif attribute.startswith(".") and attribute[1:]:
            classes.append(attribute[1:])
    content = heading[:match.start()].rstrip(" \t")
    content = _CLOSING_HASHES.sub("", content) if content.endswith("#") else content
    return content.strip(" \t"), custom, classes


def smart_dashes(text: str) -> str:
    """pulldown-cmark's smart punctuation for dashes and ellipses, as mdBook renders text outside code (on by
    default): ``---`` → em dash, ``--`` → en dash, ``...`` → ``…``. In an id, this makes ``--`` vanish."""
    def dashes(match: re.Match) -> str:
        count = len(match.group())
        if count % 3 == 0:
            return "—" * (count // 3)
        if count % 2 == 0:
            return "–" * (count // 2)
        if count % 3 == 2:
            return "—" * (count // 3) + "–"
        return "—" * ((count - 4) // 3) + "––"
    return re.sub(r"-{2,}", dashes, text).replace("...", "…")
