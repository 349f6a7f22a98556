"""Heading ids as the ``toc`` extension makes them: slugify variants, explicit ids, duplicates (the package's
docstring says what was decided)."""

from __future__ import annotations

import html
import re
import unicodedata
from urllib.parse import quote

from ingestion.reading.mkdocs.config import MkDocsSite, Slugify, TocOptions

# -- heading ids ---------------------------------------------------------------------------------------

# attr_list's HEADER_RE: ``[ ]+{…}[ ]*$`` (also ``{: …}``).
_HEADING_ATTRS = re.compile(r"[ ]+\{:?[ ]*([^}\n ][^}\n]*)\}[ ]*$")
_ATTR_TOKEN = re.compile(r"""[^ =}]+="[^"]*"|[^ =}]+='[^']*'|[^ =}]+=[^ =}]+|[^ =}]+""")
_IDCOUNT = re.compile(r"^(.*)_([0-9]+)$")


def split_heading_attrs(text: str, *, enabled: bool = True) -> tuple[str, str | None]:
    """``"Title { #custom .cls }"`` → ``("Title", "custom")``; the id is None when the attr list has none. With
    attr_list off, the text is left as it is."""
    match = _HEADING_ATTRS.search(text) if enabled else None
    if not match:
        return text.strip(), None
    custom = None
    for token in _ATTR_TOKEN.findall(match.group(1)):
        if token.startswith("#") and len(token) > 1:
            custom = token[1:]
        elif token.startswith("id="):
            custom = token[3:].strip("\"'")
    return text[: match.start()].rstrip("#").strip(), custom


def heading_text(markdown: str, *, emoji: bool = False) -> str:
    """The text ``toc`` slugs: the heading's rendered HTML with tags stripped and entities decoded."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]", "", markdown)  # images have no text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"(`+)(.+?)\1", lambda m: m.group(2).strip().replace("<", "\x00lt").replace(">", "\x00gt"), text)
    text = re.sub(r"<!--.*?-->|<[^>]+>", "", text)
    text = text.replace("\x00lt", "<").replace("\x00gt", ">")
    if emoji:
        text = re.sub(r":[\w+-]+:", "", text)
    text = re.sub(r"\*{1,3}|(?<!\w)_{1,3}(?=\S)|(?<=\S)_{1,3}(?!\w)|~~|==|\^\^", "", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!])", r"\1", text)
    return html.unescape(text).strip()


def slugify(text: str, site: MkDocsSite | None = None) -> str:
    """The site's ``toc`` slug of plain text (without duplicate counting)."""
    options = site.toc if site else TocOptions()
    return slug_as(text, options.slugify, options.separator)


def slug_as(value: str, how: Slugify, separator: str) -> str:
    """``value`` slugified by ``how`` with ``separator`` (the toc extension's slugify functions)."""
    if how.kind == "pymdownx":
        slug = re.sub(r"</?[^>]*>", "", unicodedata.normalize(how.normalize, value)).strip()
        if how.case == "lower":
            slug = slug.lower()
        elif how.case == "lower-ascii":
            slug = re.sub(r"[A-Z]", lambda m: m.group(0).lower(), slug)
        elif how.case == "fold":
            slug = slug.casefold()
        slug = re.sub(r"[^\w\- ]", "", slug).replace(" ", separator)
        return quote(slug.encode("utf-8")) if how.percent_encode else slug
    if how.kind != "unicode":
        value = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(rf"[{separator}\s]+", separator, value)


def unique_id(candidate: str, seen: dict[str, int]) -> str:
    """``toc.unique``: ``candidate``, or ``candidate_1``, ``_2``… (a ``x_1`` taken gives ``x_2``); the keys of
    ``seen`` are the ids taken on the page (its values are not used)."""
    if candidate in seen or not candidate:
        match = _IDCOUNT.match(candidate)
        base, count = (match.group(1), int(match.group(2))) if match else (candidate, 0)
        count += 1
        while f"{base}_{count}" in seen:
            count += 1
        candidate = f"{base}_{count}"
    seen[candidate] = 0
    return candidate


def heading_id(text: str, seen: dict[str, int], site: MkDocsSite | None = None) -> str:
    """The id MkDocs gives a heading whose Markdown is ``text`` (``{#id}`` included, if any), ``seen`` holding
    the ids taken so far on the page. Explicit ids should be reserved first (``reserve_explicit_ids``), as
    ``toc`` does; ``heading_ids`` does both."""
    attr_list = site is None or site.has_extension("attr_list", "pymdownx.extra")
    title, custom = split_heading_attrs(text, enabled=attr_list)
    if custom:
        seen[custom] = 0
        return custom
    emoji = site is not None and site.has_extension("pymdownx.emoji")
    return unique_id(slugify(heading_text(title, emoji=emoji), site), seen)


def reserve_explicit_ids(texts: list[str], seen: dict[str, int], site: MkDocsSite | None = None) -> None:
    """Mark the explicit ``{#id}`` of every heading in ``texts`` as taken (``toc`` collects every id on the page
    before it makes any)."""
    enabled = site is None or site.has_extension("attr_list", "pymdownx.extra")
    for text in texts:
        custom = split_heading_attrs(text, enabled=enabled)[1]
        if custom:
            seen[custom] = 0


def heading_ids(texts: list[str], site: MkDocsSite | None = None) -> list[str]:
    """The ids of a page's headings (their Markdown, in page order), as MkDocs' ``toc`` assigns them."""
    seen: dict[str, int] = {}
    reserve_explicit_ids(texts, seen, site)
    return [heading_id(text, seen, site) for text in texts]
