"""What a static-site generator decides about a book: which files are pages, a page's URL, its headings' anchors,
the order of its navigation, and syntax of its own to read as the site renders it. One object per book, handed
to the parser, the link rewriter and the indexer, so that every citation lands where the generator put it.

- ``Conventions``: Docusaurus's (``ingestion.reading.docusaurus``), also those of a plain folder of Markdown.
- ``MdBookConventions``: an mdBook (``book.toml``, ``ingestion.reading.mdbook``): the pages are SUMMARY.md's
  chapters (SUMMARY.md, drafts and files it doesn't list are not pages), ``path.html`` URLs (``index.html`` for a
  README), mdBook's heading ids, hidden lines of Rust blocks (and ``hidelines``) left out, ``{{#title}}`` read.
- ``MkDocsConventions``: an MkDocs site (``mkdocs.yml``, ``ingestion.reading.mkdocs``): the pages MkDocs
  builds, directory or ``.html`` URLs per ``use_directory_urls``, the ``toc`` extension's ids (explicit ids
  reserved first, as it does), snippets inlined, content tabs, abbreviations and attribute lists cleaned.

A book remembers its generator (``Book.generator``); the conventions are rebuilt from the book's config at each
run, never stored.
"""

from __future__ import annotations

from pathlib import Path

from ingestion.reading import mdbook, mkdocs
from ingestion.reading.docusaurus import document_slug, document_url, heading_anchor, split_explicit_id
from ingestion.reading.fences import fenced_blocks
from ingestion.reading.generators import outside_inline_code
from ingestion.reading.partials import InlinedLines, PartialResolver

DOCUSAURUS, MDBOOK, MKDOCS = "docusaurus", "mdbook", "mkdocs"


class HeadingAnchors:
    """The anchors of one page's headings, in page order (Docusaurus: github-slugger, ``{#id}`` kept as is)."""

    def __init__(self):
        self.seen: dict[str, int] = {}

    def anchor(self, source: str, plain: str) -> tuple[str, str]:
        """(title, anchor) of a heading: ``source`` is its Markdown, ``plain`` its text with markup removed."""
        title, explicit = split_explicit_id(plain)
        return title, explicit if explicit is not None else heading_anchor(title, self.seen)


class Conventions:
    """Docusaurus's conventions, and a plain folder's."""

    generator = DOCUSAURUS

    def is_page(self, rel_path: str) -> bool:
        return True

    def page_slug(self, rel_path: str, front_matter: dict) -> str:
        return document_slug(rel_path, front_matter)

    def page_url(self, base_url: str, slug: str, trailing_slash: bool | None = None) -> str:
        return document_url(base_url, slug, trailing_slash)

    def anchors(self, sources: list[str]) -> HeadingAnchors:
        """The anchor maker of a page whose headings' Markdown is ``sources``."""
        return HeadingAnchors()

    def clean(self, lines: list[str]) -> None:
        """Rewrite the generator's own syntax in ``lines`` in place, line for line, before the MDX cleanup."""

    def navigation(self) -> list[tuple[str, str]] | None:
        """(page, label) in the generator's navigation order, or None where the folders and front matter order
        the pages (``ingestion.reading.outline``)."""
        return None

    def resolver(self, root: Path, *, max_bytes: int, site_root: Path | None,
                 pages: dict[str, Path]) -> PartialResolver:
        """What inlines a page's includes and hashes a page with them."""
        return PartialResolver(root, max_bytes=max_bytes, site_root=site_root, pages=pages)


# -- mdBook -----------------------------------------------------------------------------------------------------------
class MdBookAnchors(HeadingAnchors):
    def anchor(self, source: str, plain: str) -> tuple[str, str]:
        title, custom, _ = mdbook.split_heading_attributes(plain)
        return title, mdbook.heading_id(title, self.seen, custom_id=custom)


class MdBookConventions(Conventions):
    generator = MDBOOK

    def __init__(self, book: mdbook.MdBook):
        self.book = book
        self._pages = set(book.pages)

    def is_page(self, rel_path: str) -> bool:
        return rel_path in self._pages

    def page_slug(self, rel_path: str, front_matter: dict) -> str:
        return mdbook.html_path(rel_path, index_readme=self.book.index_readme)

    def page_url(self, base_url: str, slug: str, trailing_slash: bool | None = None) -> str:
        return mdbook.page_url(base_url or self.book.site_url, slug, index_readme=False)  # the slug is the .html

    def anchors(self, sources: list[str]) -> HeadingAnchors:
        return MdBookAnchors()

    def clean(self, lines: list[str]) -> None:
        text, _ = mdbook.title_directive("\n".join(lines))
        lines[:] = text.split("\n")
        _hide_code_lines(lines, self.book.hidelines)
        _unescape_directives(lines)

    def navigation(self) -> list[tuple[str, str]]:
        titles: dict[str, str] = {}
        for chapter in self.book.chapters:  # a chapter listed twice keeps its first title, as its first place
            titles.setdefault(chapter.path, chapter.title)
        return [(page, titles[page]) for page in self.book.pages]

    def resolver(self, root: Path, *, max_bytes: int, site_root: Path | None,
                 pages: dict[str, Path]) -> PartialResolver:
        # {{#include ../listings/…}} reaches outside src/: anywhere in the book's folder is allowed.
        return PartialResolver(root, max_bytes=max_bytes, site_root=self.book.root, pages=pages)


def _hide_code_lines(lines: list[str], hidelines: dict[str, str]) -> None:
    """Empty the hidden lines of each fenced block in ``lines`` (the Rust rule, or the language's prefix)."""
    for block in fenced_blocks(lines):
        body = block.code(lines)
        if body:
            visible = mdbook.visible_code("\n".join(body), block.info, hidelines, blank=True).split("\n")
            if len(visible) == len(body):
                lines[block.start + 1:block.start + 1 + len(body)] = visible


_ESCAPED_DIRECTIVE = "\\{{#"


def _unescape_directives(lines: list[str]) -> None:
    """mdBook shows an escaped ``\\{{#include …}}`` as the text ``{{#include …}}``. Outside code Markdown drops
    the backslash itself; in a code block or span it would stay, so it is dropped here."""
    if not any(_ESCAPED_DIRECTIVE in line for line in lines):
        return
    code = {index for block in fenced_blocks(lines) for index in range(block.start + 1, block.end)}

    def unescape(text: str) -> str:
        return text.replace(_ESCAPED_DIRECTIVE, "{{#")

    for index, line in enumerate(lines):
        if _ESCAPED_DIRECTIVE in line:
            lines[index] = unescape(line) if index in code else outside_inline_code(line, str, code=unescape)


# -- MkDocs -----------------------------------------------------------------------------------------------------------
class MkDocsAnchors(HeadingAnchors):
    def __init__(self, site: mkdocs.MkDocsSite, sources: list[str]):
        super().__init__()
        self.site = site
        mkdocs.reserve_explicit_ids(sources, self.seen, site)

    def anchor(self, source: str, plain: str) -> tuple[str, str]:
        title, _ = mkdocs.split_heading_attrs(plain)
        return title, mkdocs.heading_id(source, self.seen, self.site)


class SnippetResolver(PartialResolver):
    """An MkDocs page's includes are ``pymdownx.snippets`` (not MDX partials); ``page_hash`` (inherited) covers
    them through ``inline``."""

    def __init__(self, site: mkdocs.MkDocsSite, root: Path, *, max_bytes: int, pages: dict[str, Path]):
        super().__init__(root, max_bytes=max_bytes, pages=pages)
        self.site = site

    def inline(self, lines: list[str], *, rel_path: str) -> InlinedLines:
        return mkdocs.expand_snippets(lines, self.site, rel_path=rel_path)


class MkDocsConventions(Conventions):
    generator = MKDOCS

    def __init__(self, site: mkdocs.MkDocsSite):
        self.site = site
        self._pages = set(mkdocs.page_files(site))

    def is_page(self, rel_path: str) -> bool:
        return rel_path in self._pages

    def page_slug(self, rel_path: str, front_matter: dict) -> str:
        blog = self.site.blog
        if blog is not None and blog.is_post(rel_path):  # published at its date and slug, read from the file
            try:
                text = (self.site.docs_dir / rel_path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            rel_path = mkdocs.post_rel_path(blog, rel_path, text, emoji=self.site.has_extension("pymdownx.emoji")) \
                or rel_path
        return mkdocs.page_path(rel_path, self.site.use_directory_urls)

    def page_url(self, base_url: str, slug: str, trailing_slash: bool | None = None) -> str:
        base = base_url or (self.site.site_url or "")
        return base.rstrip("/") + "/" + slug.lstrip("/") if base else "/" + slug.lstrip("/")

    def anchors(self, sources: list[str]) -> HeadingAnchors:
        return MkDocsAnchors(self.site, sources)

    def clean(self, lines: list[str]) -> None:
        mkdocs.clean_mkdocs_lines(lines, self.site)

    def navigation(self) -> list[tuple[str, str]]:
        titles = _nav_titles(self.site.nav or mkdocs.default_nav(self.site))
        order = mkdocs.nav_order(self.site)
        order += [page for page in sorted(self._pages, key=mkdocs.file_sort_key) if page not in order]
        return [(page, titles.get(page, "")) for page in order if page in self._pages]

    def resolver(self, root: Path, *, max_bytes: int, site_root: Path | None,
                 pages: dict[str, Path]) -> PartialResolver:
        return SnippetResolver(self.site, root, max_bytes=max_bytes, pages=pages)


def _nav_titles(entries: list[mkdocs.NavEntry]) -> dict[str, str]:
    titles: dict[str, str] = {}
    for entry in entries:
        if entry.rel_path and entry.title and entry.rel_path not in titles:
            titles[entry.rel_path] = entry.title
        titles.update({k: v for k, v in _nav_titles(entry.children).items() if k not in titles})
    return titles


# -- which generator ------------------------------------------------------------------------------------------------
def book_facts(conventions: Conventions) -> tuple[Path, str | None, str | None, list[str]]:
    """(pages folder, title, site URL, warnings about the config) of an mdBook or MkDocs book."""
    if isinstance(conventions, MdBookConventions):
        book = conventions.book
        url = book.site_url if book.site_url.strip("/") else None  # "/" (the default) names no host
        return book.source_dir, book.title, url, book.warnings
    if isinstance(conventions, MkDocsConventions):
        site = conventions.site
        return site.docs_dir, site.site_name, site.site_url, site.warnings
    raise ValueError(f"no config facts for {conventions.generator}")


def config_language(conventions: Conventions) -> str | None:
    """The language an mdBook's ``book.toml`` (``[book] language``, ``en`` by default) or an MkDocs site's
    ``theme.language`` names, as written; None for a folder or when MkDocs names none."""
    if isinstance(conventions, MdBookConventions):
        return conventions.book.language
    if isinstance(conventions, MkDocsConventions):
        return conventions.site.language
    return None


def files_read(conventions: Conventions) -> list[Path]:
    """The config files an mdBook's or an MkDocs site's conventions were read from (MkDocs' INHERIT included)."""
    if isinstance(conventions, MdBookConventions):
        return [conventions.book.root / "book.toml"]
    if isinstance(conventions, MkDocsConventions):
        return [conventions.site.config_file, *conventions.site.inherited]
    return []


def config_file(conventions: Conventions) -> str:
    if isinstance(conventions, MdBookConventions):
        return "book.toml"
    if isinstance(conventions, MkDocsConventions):
        return conventions.site.config_file.name
    return ""


def detect(root: Path) -> Conventions | None:
    """The conventions of the generator whose config is at ``root`` (``book.toml``, ``mkdocs.yml``), or None."""
    if (root / "book.toml").is_file():
        book = mdbook.read_mdbook(root)
        return MdBookConventions(book) if book is not None else None
    site = mkdocs.read_mkdocs(root)
    return MkDocsConventions(site) if site is not None else None


def for_book(generator: str, pages_folder: Path | None) -> Conventions:
    """A stored book's conventions, read again from the config beside or above its pages folder (``src/``,
    ``docs/``, or deeper with a custom ``src``/``docs_dir``); Docusaurus's when there is none any more."""
    if generator in (MDBOOK, MKDOCS) and pages_folder is not None:
        for folder in [pages_folder, *list(pages_folder.parents)[:3]]:
            found = detect(folder) if folder.is_dir() else None
            if found is not None and found.generator == generator:
                return found
    return Conventions()
