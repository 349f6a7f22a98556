"""Which files MkDocs builds as pages, their order (``nav`` or MkDocs' own) and their URLs (the package's
docstring says what was decided)."""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit

from ingestion.reading.mkdocs.blog import blog_options
from ingestion.reading.mkdocs.config import _DEFAULT_EXCLUDE, MARKDOWN_SUFFIXES, MkDocsSite, NavEntry, load_site

# -- pages and navigation ------------------------------------------------------------------------------


def _gitignore_regex(pattern: str) -> tuple[re.Pattern, bool, bool]:
    """(regex, negated, directories only) for one gitignore line, matched against a posix path."""
    negated = pattern.startswith("!")
    pattern = pattern[1:] if negated else pattern
    dir_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    anchored = "/" in pattern
    pattern = pattern.lstrip("/")
    out = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            out.append(".*")
            index += 2
        elif pattern[index] == "*":
            out.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(pattern[index]))
            index += 1
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(f"^{prefix}{''.join(out)}$"), negated, dir_only


def matches_gitignore(patterns: list[str] | tuple[str, ...], rel_path: str) -> bool:
    """Whether ``rel_path`` (a file, relative to ``docs_dir``) is matched by gitignore ``patterns`` (the last
    matching line wins; a pattern matching a parent folder matches the file)."""
    parts = PurePosixPath(rel_path).parts
    candidates = [("/".join(parts[:i]), i < len(parts)) for i in range(1, len(parts) + 1)]
    matched = False
    for pattern in patterns:
        regex, negated, dir_only = _gitignore_regex(pattern)
        if any(regex.match(path) and (is_dir or not dir_only) for path, is_dir in candidates):
            matched = not negated
    return matched


def _is_markdown(rel_path: str) -> bool:
    return rel_path.endswith(MARKDOWN_SUFFIXES)


def _stem_name(rel_path: str) -> str:
    """MkDocs' ``File.name``: the file's stem, ``README`` counting as ``index``."""
    stem = posixpath.splitext(posixpath.basename(rel_path))[0]
    return "index" if stem == "README" else stem


def page_files(site: MkDocsSite) -> list[str]:
    """Every page MkDocs builds (relative to ``docs_dir``, posix), in the order ``get_files`` walks them."""
    found: list[str] = []
    docs = site.docs_dir
    if not docs.is_dir():
        return found
    for folder, dirnames, filenames in _walk(docs):
        dirnames.sort()
        rel_dir = folder.relative_to(docs).as_posix()
        by_dest: dict[str, str] = {}
        for filename in sorted(filenames, key=lambda f: (posixpath.splitext(f)[0] not in ("index", "README"), f)):
            rel = filename if rel_dir == "." else f"{rel_dir}/{filename}"
            if not _is_markdown(rel) or matches_gitignore(_DEFAULT_EXCLUDE, rel) \
                    or matches_gitignore(site.exclude_docs, rel) or matches_gitignore(site.draft_docs, rel):
                continue
            earlier = by_dest.setdefault(_stem_name(rel), rel)
            if earlier != rel:  # README.md and index.md in one folder: index.md wins, as in MkDocs
                site.warnings.append(f"{earlier} is not a page: it conflicts with {rel}")
                found.remove(earlier)
            found.append(rel)
    return found


def _walk(top: Path):
    for folder, dirnames, filenames in os.walk(top, followlinks=False):
        yield Path(folder), dirnames, filenames


def file_sort_key(rel_path: str) -> tuple:
    parts = PurePosixPath(rel_path).parts
    return (parts[:-1], _stem_name(rel_path) != "index", parts[-1])


def _dirname_to_title(name: str) -> str:
    title = name.replace("-", " ").replace("_", " ")
    return title.capitalize() if title.lower() == title else title


def default_nav(site: MkDocsSite) -> list[NavEntry]:
    """The navigation MkDocs builds without ``nav``: pages sorted as ``file_sort_key``, nested in sections
    named by ``dirname_to_title`` (``nest_paths``); ``not_in_nav`` pages left out."""
    nested: list[NavEntry] = []
    for rel in sorted(page_files(site), key=file_sort_key):
        if matches_gitignore(site.not_in_nav, rel):
            continue
        branch = nested
        for part in PurePosixPath(rel).parent.parts:
            title = _dirname_to_title(part)
            section = next((e for e in branch if e.is_section and e.title == title), None)
            if section is None:
                section = NavEntry(title)
                branch.append(section)
            branch = section.children
        branch.append(NavEntry(None, rel_path=rel))
    return nested


def _nav(value: object, site: MkDocsSite, warnings: list[str]) -> list[NavEntry]:
    """``nav`` parsed as MkDocs' ``_data_to_navigation``."""
    pages = set(page_files(site))
    entries: list[NavEntry] = []

    def item(title: str | None, path: str) -> NavEntry:
        parts = urlsplit(path)
        if parts.scheme or parts.netloc:
            return NavEntry(title, url=path)
        rel = PurePosixPath(path).as_posix()
        if rel in pages:
            return NavEntry(title, rel_path=rel)
        warnings.append(f"nav names {path!r}, which is not a page in docs_dir; it is kept as a link")
        return NavEntry(title, url=path)

    def walk(data, out: list[NavEntry], depth: int) -> None:
        if depth > 50:
            warnings.append("nav is nested too deep; the rest is ignored")
            return
        if isinstance(data, dict):
            for key, val in data.items():
                title = str(key) if key is not None else None
                if isinstance(val, str):
                    out.append(item(title, val))
                elif isinstance(val, list | dict):
                    section = NavEntry(title)
                    walk(val, section.children, depth + 1)
                    out.append(section)
                else:
                    warnings.append(f"nav entry {key!r}: {val!r} is not a path or a section; ignored")
        elif isinstance(data, list):
            for child in data:
                walk(child, out, depth + 1)
        elif isinstance(data, str):
            out.append(item(None, data))
        else:
            warnings.append(f"nav entry {data!r} is not a path or a section; ignored")

    if not isinstance(value, list | dict | str):
        warnings.append("nav is not a list; MkDocs' folder order is used")
        return default_nav(site)
    walk(value, entries, 0)
    return entries


def nav_order(site: MkDocsSite) -> list[str]:
    """The pages (relative to ``docs_dir``) in navigation order, sections flattened depth-first, each page once;
    without ``nav``, MkDocs' folder order."""
    order: list[str] = []

    def walk(entries: list[NavEntry]) -> None:
        for entry in entries:
            if entry.rel_path and entry.rel_path not in order:
                order.append(entry.rel_path)
            walk(entry.children)

    walk(site.nav if site.nav is not None else default_nav(site))
    return order


def page_path(rel_path: str, use_directory_urls: bool = True) -> str:
    """MkDocs' ``Page.url``: the page's URL relative to the site root ("" for the home page)."""
    parent = posixpath.dirname(rel_path)
    name = _stem_name(rel_path)
    if not use_directory_urls or name == "index":
        dest = posixpath.join(parent, name + ".html")
    else:
        dest = posixpath.join(parent, name, "index.html")
    dirname, filename = posixpath.split(dest)
    url = (dirname or ".") + "/" if use_directory_urls and filename == "index.html" else dest
    url = quote(url)
    return "" if url in (".", "./") else url


def page_url(site: MkDocsSite, rel_path: str) -> str:
    """The page's URL: ``site_url`` + ``page_path`` (MkDocs' ``canonical_url``), or ``/`` + it without a
    ``site_url`` (site-relative: the site is assumed served at its host's root)."""
    path = page_path(rel_path, site.use_directory_urls)
    return (site.site_url or "/") + path


def read_mkdocs(root: Path) -> MkDocsSite | None:
    """The MkDocs site at ``root``, its ``nav`` read against the pages it names; None when there is no
    ``mkdocs.yml``/``mkdocs.yaml`` there. Never raises for bad input: what can't be read is a warning and the
    defaults stand."""
    site = load_site(root)
    if site is not None and site.config.get("nav") is not None:
        site.nav = _nav(site.config["nav"], site, site.warnings)
    if site is not None:
        site.blog = blog_options(site.config.get("plugins"), site.warnings)
    return site
