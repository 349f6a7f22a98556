"""Book-relative links in passages become the book's section URLs, at ingestion.

Authors link pages as files (``[Ingest a book](../using/01-ingest.md#options)``); in an answer or a source
card such a link goes nowhere. ``book_links`` maps every page of the book to its URL before any page is
indexed, and ``PageLinks.rewrite`` turns the links in one page's passages into those URLs.

Decisions:
- Only the stored text is rewritten. A chunk's id and embedding key stay hashes of the chunker's text, so
  rewriting never embeds anything, and re-indexing an unchanged book embeds nothing.
- Rewritten: inline links and reference definitions whose target is a ``.md``/``.mdx`` file of the book →
  that page's URL plus the link's ``#anchor`` as written (authors write the heading id Docusaurus gives, the
  anchor our own URLs use); a pure ``#anchor`` → the page's own URL plus the anchor. Files are found as
  Docusaurus finds them: ``./x.md``/``../x.md`` from the page's folder, ``/x.md`` from the book's root, ``x.md``
  from the root, then from the page's folder. A ``.md``/``.mdx`` file that is not a page of the book keeps its
  link text only, and the run warns with the line. Absolute URLs, ``mailto:``, ``@site/`` paths, other
  relative links, images and anything in code stay as written.
- Reference-style uses (``[text][label]``, ``[label]``) become inline links: markdown-it never makes a
  definition a block, so a passage would otherwise hold the use without the definition.
- The map, before the pages: a folder run maps its discovered files; a single-file run maps the book's stored
  pages plus that file. Each file is read once more (the indexer reads it again after), and its front matter
  is YAML-loaded only when it names ``slug``, ``id`` or ``parse_number_prefixes``, the keys ``document_slug``
  reads: 0.05–0.3 ms a page (docusaurus-docs: 90 pages in 28 ms, where parsing them takes 480 ms; rewriting
  their 3,400 blocks, 45 ms). A file that can't be read keeps its stored URL (or the one its path gives): it
  fails on its own when the indexer reaches it.
- Re-processing: each Document stores ``links_to``, the files its links named → the URL they were written
  with ("" when the file is no page of the book). A page whose bytes are unchanged is parsed and chunked again
  (embedding nothing) when one of those URLs changed: a target moved, re-slugged, added or removed. Only pages
  whose own targets changed are re-processed, never pages without book links. A null ``links_to`` (a page
  stored before links were rewritten) re-processes the page once.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from markdown_it.common.utils import normalizeReference

from bookchat.base.errors import BookchatError
from ingestion.reading.conventions import DOCUSAURUS, Conventions
from ingestion.reading.discovery import SourceFile, read_source
from ingestion.reading.documents import Issue
from ingestion.reading.docusaurus import document_slug
from ingestion.reading.fences import code_ranges
from ingestion.reading.parsing import read_front_matter

_PAGE_SUFFIXES = (".md", ".mdx")
_SLUG_KEYS = re.compile(r"""^[ \t]*["']?(?:slug|id|parse_number_prefixes)["']?[ \t]*:""", re.M)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_WHITESPACE = re.compile(r"\s")

# CommonMark's link syntax, as far as passages need it (one level of brackets inside a link's text); the
# possessive quantifiers keep a run of spaces from being tried in every split.
_TEXT = r"(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*"
_LABEL = r"(?:[^\[\]\\]|\\.)+"
_DEST = r"<[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*"
_TITLE = r"""\s++(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))"""
_LINK = re.compile(
    # a reference definition on a line of its own (maybe in a quote or list item): `[label]: dest "title"`
    rf"(?P<definition>^(?P<lead>[ \t]*(?:>[ \t]?)*(?:(?:[-*+]|\d+[.)])[ \t]+)?)\[(?P<def_label>{_LABEL})\]:"
    rf"[ \t]*(?P<def_dest><[^<>\n]*>|\S+)(?P<def_rest>[^\n]*))"
    # an image, left as it is
    rf"|(?P<image>!\[{_TEXT}\](?:\(\s*+(?:{_DEST})(?:{_TITLE})?\s*+\)|\[(?:{_LABEL})?\])?)"
    # an inline link `[text](dest "title")`, or a reference `[text][label]`, `[text][]`, `[text]`
    rf"|(?<!\\)\[(?P<text>{_TEXT})\](?:\(\s*+(?P<dest>{_DEST})(?P<title>{_TITLE})?\s*+\)|\[(?P<label>{_LABEL})?\])?",
    re.M,
)
_KEEP = object()  # a link target that is left as written


def page_slug(text: str, rel_path: str, conventions: Conventions | None = None) -> str:
    """The page's slug as ``parse_document`` computes it, reading no more of the page than it must."""
    conventions = conventions or Conventions()
    if conventions.generator != DOCUSAURUS:  # front matter names no slug outside Docusaurus
        return conventions.page_slug(rel_path, {})
    front_matter = {}
    if text.startswith("---"):
        close = text.find("\n---", 3)
        if _SLUG_KEYS.search(text, 0, close if close >= 0 else len(text)):
            front_matter = read_front_matter(text, rel_path=rel_path)
    return document_slug(rel_path, front_matter)


def book_links(files: list[SourceFile], *, base_url: str, stored_slugs: dict[str, str], whole_book: bool,
               max_bytes: int, trailing_slash: bool | None = None,
               conventions: Conventions | None = None) -> BookLinks:
    """The map of the book's pages to their URLs. ``files`` are the discovered ones; ``stored_slugs`` (source
    path → slug) the book's stored pages, which fill in when ``files`` are not the ``whole_book``."""
    conventions = conventions or Conventions()
    slugs = {} if whole_book else dict(stored_slugs)
    for file in files:
        try:
            slugs[file.rel_path] = page_slug(read_source(file, max_bytes=max_bytes).text, file.rel_path, conventions)
        except BookchatError:  # unreadable, or bad front matter: the page fails on its own later
            slugs[file.rel_path] = stored_slugs.get(file.rel_path, conventions.page_slug(file.rel_path, {}))
    return BookLinks({path: conventions.page_url(base_url, slug, trailing_slash) for path, slug in slugs.items()})


@dataclass
class BookLinks:
    """Every page of the book: source path → URL."""

    urls: dict[str, str]

    def page(self, *, rel_path: str, url: str, definitions: dict[str, tuple[str, str]]) -> PageLinks:
        """The links of page ``rel_path`` at ``url``, with its reference definitions (``ParsedDocument``'s)."""
        return PageLinks(self, rel_path, url, definitions)

    def still_resolve(self, links_to: dict[str, str] | None) -> bool:
        """Whether a stored page's links would be written as they are (its ``links_to``); False for a page
        stored before links were rewritten."""
        return links_to is not None and all(self.urls.get(path, "") == url for path, url in links_to.items())


@dataclass
class PageLinks:
    """Rewrites the links of one page's passages; remembers the pages they named (``links_to``) and the
    targets that are not in the book (``missing``)."""

    book: BookLinks
    rel_path: str
    url: str
    definitions: dict[str, tuple[str, str]]
    links_to: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def rewrite(self, markdown: str) -> str:
        """``markdown`` with its book links rewritten (see the module's decisions)."""
        if "[" not in markdown:
            return markdown
        masked = list(markdown)  # code can hold brackets but no links: hide it from the pattern
        for start, end in code_ranges(markdown):
            masked[start:end] = "\x00" * (end - start)
        masked = "".join(masked)
        out: list[str] = []
        pos = search = 0
        while match := _LINK.search(masked, search):
            replacement = self._replacement(match, markdown)
            if replacement is None:  # brackets that are no link: there may be one inside them
                search = match.start() + 1
                continue
            out.append(markdown[pos : match.start()])
            out.append(replacement)
            pos = search = match.end()
        out.append(markdown[pos:])
        return "".join(out)

    def issues(self, source_text: str) -> list[Issue]:
        """One warning per link target that is not a page of the book, with its line in the source."""
        out = []
        for target in dict.fromkeys(self.missing):
            at = source_text.find(target)
            line = source_text.count("\n", 0, at) + 1 if at >= 0 else None
            out.append(Issue(self.rel_path, line, f"link to {target}: no such page in the book; its text is kept "
                                                  "without the link"))
        return out

    # -- one link ------------------------------------------------------------------------------
    def _replacement(self, match: re.Match, markdown: str) -> str | None:
        def group(name: str) -> str | None:
            start, end = match.span(name)
            return markdown[start:end] if start >= 0 else None

        if group("image") is not None:
            return group("image")
        if group("definition") is not None:
            if normalizeReference(group("def_label")) not in self.definitions:
                return None
            target = self._resolve(group("def_dest"))
            if target is _KEEP:
                return group("definition")
            if target is None:  # the definition of a dead link goes with it
                return ""
            return f"{group('lead')}[{group('def_label')}]: {_destination(target)}{group('def_rest')}"
        text = group("text")
        if group("dest") is not None:
            target = self._resolve(group("dest"))
            if target is _KEEP:
                return group(0)
            return text if target is None else f"[{text}]({_destination(target)}{group('title') or ''})"
        definition = self.definitions.get(normalizeReference(group("label") or text))
        if definition is None:
            return None
        href, title = definition
        target = self._resolve(href)
        if target is None:
            return text
        escaped = title.replace('"', '\\"')
        title = f' "{escaped}"' if title else ""
        return f"[{text}]({_destination(href if target is _KEEP else target)}{title})"

    def _resolve(self, destination: str) -> str | None | object:
        """The URL a link target stands for; None for a page that is not in the book, ``_KEEP`` for a target
        that is no page of the book (a URL, an image, a relative link without .md)."""
        raw = destination[1:-1] if destination.startswith("<") and destination.endswith(">") else destination
        if raw.startswith("#"):
            return self.url + raw if len(raw) > 1 else _KEEP
        if _SCHEME.match(raw) or raw.startswith(("//", "@site/")):
            return _KEEP
        path, _, anchor = raw.partition("#")
        path = unquote(path.partition("?")[0])
        if not path.lower().endswith(_PAGE_SUFFIXES):
            return _KEEP
        for rel in self._candidates(path):
            url = self.book.urls.get(rel)
            self.links_to[rel] = url or ""
            if url is not None:
                return url + (f"#{anchor}" if anchor else "")
        self.missing.append(raw)
        return None

    def _candidates(self, path: str) -> list[str]:
        """Where a file link may point, in Docusaurus' order: ``./x.md`` and ``../x.md`` from the page's folder,
        ``/x.md`` from the book's root, ``x.md`` from the root, then from the page's folder."""
        folder = posixpath.dirname(self.rel_path)
        if path.startswith("/"):
            places = [path.lstrip("/")]
        elif path.startswith(("./", "../")):
            places = [posixpath.join(folder, path)]
        else:
            places = [path, posixpath.join(folder, path)]
        return list(dict.fromkeys(posixpath.normpath(place) for place in places))


def _destination(url: str) -> str:
    """``url`` as a Markdown link destination: spaces as ``%20`` (as Docusaurus writes them), in angle brackets
    when it holds parentheses."""
    url = _WHITESPACE.sub("%20", url)
    return f"<{url}>" if "(" in url or ")" in url else url
