"""MkDocs conventions: the site's config, its pages and their order, page URLs, heading ids, snippets, and the
Markdown extensions' syntax read as the site renders it.

These mirror MkDocs 1.6 (``config/base.py``, ``utils/yaml.py``, ``structure/files.py``, ``structure/nav.py``,
``structure/pages.py``), Python-Markdown 3 (``extensions/toc.py``, ``attr_list.py``, ``abbr.py``) and
pymdown-extensions (``slugs.py``, ``snippets.py``, ``tabbed.py``), so the URLs and anchors we cite are the ones the
built site serves. Nothing here imports them: they are not dependencies of bookchat.

Decisions:
- The config is ``mkdocs.yml``, else ``mkdocs.yaml``, at the book's root (MkDocs' own order). It is read with a
  safe loader that tolerates MkDocs' tags: ``!ENV VAR`` is None and ``!ENV [VAR, …, default]`` its default (the
  indexing machine's environment is not read: an index must not depend on, or leak, it); ``!relative`` is its
  string; ``!!python/name:x`` and ``!!python/object/apply:x`` become a ``PythonRef`` naming ``x`` (nothing is
  imported or called); any other tag is its plain value. Bad input never raises: it is a warning, and the
  defaults stand.
- ``INHERIT`` is merged as MkDocs does (``mergedeep`` REPLACE: mappings merged key by key, recursively, the child
  wins; lists and scalars replaced whole), relative to the file that names it, recursively. A missing file or a
  loop is a warning. Only ``.yml``/``.yaml`` files are read as parents (a monorepo's base config may sit above
  the book's folder).
- ``docs_dir`` (default ``docs``) is relative to the config file's folder. ``site_url`` gets a trailing ``/``
  as MkDocs adds it; without one, page URLs are site-relative (``/guide/``): the site is assumed to be served at
  the root of its host.
- Pages are the Markdown files (``.md``, ``.markdown``, ``.mdown``, ``.mkdn``, ``.mkd``) under ``docs_dir`` that
  are not excluded: dot files/folders and ``/templates/`` (MkDocs' defaults), ``exclude_docs`` and
  ``draft_docs`` (what ``mkdocs build`` leaves out), and a ``README.md`` beside an ``index.md`` in the same
  folder. ``exclude_docs``/``draft_docs``/``not_in_nav`` are gitignore patterns, matched with a small subset of
  gitignore (``*``, ``**``, ``?``, leading/trailing ``/``, ``!`` negation; no character classes).
- ``nav`` entries are pages (a file under ``docs_dir``), sections (a title and children) or links (an
  external URL, or a path that names no page: a warning, as MkDocs logs it). Without ``nav``, the order is
  MkDocs': files sorted by folder (as a tuple of names, so a folder's own files come before its subfolders'),
  then ``index``/``README`` first, then by name, nested by folder (``not_in_nav`` pages left out).
  ``nav_order`` lists each page once, at its first place; pages not in ``nav`` are still pages (``page_files``).
- URLs as ``File.url``: ``index.md``/``README.md`` → the folder's URL, ``foo.md`` → ``foo/`` with
  ``use_directory_urls`` (default true), else ``foo.html`` (and ``index.html``); percent-quoted as MkDocs does.
- Heading ids as the ``toc`` extension makes them: its slugify (default ``markdown.extensions.toc.slugify``:
  NFKD→ASCII, drop what is not ``\\w``/space/``-``, strip, lowercase, runs of ``[-\\s]`` → separator;
  ``slugify_unicode`` keeps Unicode; ``pymdownx.slugs.slugify(case=…, percent_encode=…, normalize=…)``), the
  text being the heading's rendered text (markup, tags and images dropped, entities decoded). An explicit
  ``{#id}``/``{: #id }`` (attr_list) is used verbatim and reserved for the whole page before any other id is
  made; duplicates get ``_1``, ``_2``… (``toc.unique``: ``x_1`` taken → ``x_2``; an empty slug → ``_1``).
- ``clean_mkdocs`` rewrites a page in place, line for line, outside fenced code: content tabs
  (``=== "Title"``, ``===!``, ``===+``) become a ``**Title:**`` label line (as a Docusaurus ``TabItem``) and their
  four-space-indented content is dedented; abbreviation definitions (``*[HTML]: …``) are blanked (the site shows
  them only as tooltips); attr lists are removed from inline elements (``[x](y){ .md-button }``) and blocks
  (a ``{: .class }`` line closing a paragraph); headings keep theirs for ``heading_ids``.
- Snippets (``pymdownx.snippets``) are expanded first, everywhere, code blocks included (that is how a site puts a
  file into a code block), and may add lines (``expand_snippets`` says which page line each stands for, as
  ``ingestion.reading.partials`` does). Paths are relative to ``base_path`` (default ``.``: MkDocs runs from the
  config file's folder, so the project root, not ``docs_dir``), tried in order; a file outside the project root
  is never read. ``;--8<--`` is an escape, ``; path`` in a block a comment; ``file:2:5`` (and ``:-3``,
  ``2:5,8:9``) line ranges and ``file:name`` sections (``--8<-- [start:name]`` … ``[end:name]``) select lines;
  ``auto_append`` files are appended to every page. URL snippets are not downloaded (a warning). A snippet that
  includes itself, directly or not, is skipped with a warning (pymdownx skips it silently).
"""

from __future__ import annotations

import hashlib
import html
import os
import posixpath
import re
import textwrap
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urlsplit

import yaml

from ingestion.reading.documents import Issue
from ingestion.reading.generators import dedent_body, outside_inline_code
from ingestion.reading.partials import InlinedLines

CONFIG_NAMES = ("mkdocs.yml", "mkdocs.yaml")
MARKDOWN_SUFFIXES = (".markdown", ".mdown", ".mkdn", ".mkd", ".md")
MAX_CONFIG_BYTES = 1 << 20
MAX_INHERIT_DEPTH = 10
MAX_SNIPPET_DEPTH = 10
_DEFAULT_EXCLUDE = (".*", "/templates/")
# MkDocs always loads these, before the config's own.
_BUILTIN_EXTENSIONS = ("toc", "tables", "fenced_code")


# -- the config ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PythonRef:
    """A ``!!python/name:x`` (``args``/``kwds`` None) or ``!!python/object/apply:x`` tag's target, not imported."""

    name: str
    args: tuple = ()
    kwds: dict | None = None


@dataclass
class NavEntry:
    """One ``nav`` item: a page (``rel_path`` under ``docs_dir``), a link (``url``) or a section (``children``)."""

    title: str | None
    rel_path: str | None = None
    url: str | None = None
    children: list[NavEntry] = field(default_factory=list)

    @property
    def is_section(self) -> bool:
        return self.rel_path is None and self.url is None


@dataclass(frozen=True)
class Slugify:
    """Which slugify the ``toc`` extension uses: ``default`` (toc.slugify), ``unicode`` (toc.slugify_unicode)
    or ``pymdownx`` (pymdownx.slugs.slugify with ``case``, ``percent_encode``, ``normalize``)."""

    kind: str = "default"
    case: str = "none"
    percent_encode: bool = False
    normalize: str = "NFC"


@dataclass(frozen=True)
class TocOptions:
    permalink: bool | str = False
    slugify: Slugify = Slugify()
    separator: str = "-"


@dataclass
class SnippetOptions:
    """``pymdownx.snippets``' options; ``base_path`` resolved against the config file's folder."""

    base_path: list[Path]
    auto_append: list[str] = field(default_factory=list)
    check_paths: bool = False
    restrict_base_path: bool = True
    dedent_subsections: bool = False


@dataclass
class MkDocsSite:
    root: Path
    config_file: Path
    site_name: str
    docs_dir: Path
    site_url: str | None = None  # ends in "/" (as MkDocs normalises it)
    use_directory_urls: bool = True
    nav: list[NavEntry] | None = None  # None: no ``nav``, MkDocs' folder order
    markdown_extensions: dict[str, dict] = field(default_factory=dict)  # short name → options
    toc: TocOptions = TocOptions()
    snippets: SnippetOptions | None = None  # None: pymdownx.snippets is not enabled
    exclude_docs: list[str] = field(default_factory=list)
    draft_docs: list[str] = field(default_factory=list)
    not_in_nav: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)  # the merged config, as read
    warnings: list[str] = field(default_factory=list)

    def has_extension(self, *names: str) -> bool:
        return any(name in self.markdown_extensions for name in names)


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads MkDocs' tags without running anything (see the module docstring)."""


def _plain(loader: _Loader, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


def _env(loader: _Loader, node: yaml.Node):
    if isinstance(node, yaml.SequenceNode) and len(node.value) > 1:
        return loader.construct_object(node.value[-1], deep=True)
    return None


def _python(loader: _Loader, suffix: str, node: yaml.Node):
    kind, _, name = suffix.partition(":")
    if kind == "name":
        return PythonRef(name.strip())
    value = _plain(loader, node)
    if isinstance(value, dict):
        args = value.get("args") or ()
        kwds = value.get("kwds") or {}
        return PythonRef(name.strip(), tuple(args) if isinstance(args, list) else (), kwds if isinstance(kwds, dict)
                         else {})
    return PythonRef(name.strip(), tuple(value) if isinstance(value, list) else (), {})


_Loader.add_constructor("!ENV", _env)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", _python)
_Loader.add_constructor(None, _plain)  # any other tag: its plain value


def find_config(root: Path) -> Path | None:
    """``mkdocs.yml`` or ``mkdocs.yaml`` at ``root`` (MkDocs tries them in that order)."""
    return next((Path(root) / name for name in CONFIG_NAMES if (Path(root) / name).is_file()), None)


def read_mkdocs(root: Path) -> MkDocsSite | None:
    """The MkDocs site at ``root``; None when there is no ``mkdocs.yml``/``mkdocs.yaml`` there. Never raises for
    bad input: what can't be read is a warning and the defaults stand."""
    root = Path(root).resolve()
    config_file = find_config(root)
    if config_file is None:
        return None
    warnings: list[str] = []
    config = _load_config(config_file, warnings, chain=())
    site = MkDocsSite(root=root, config_file=config_file, site_name="", docs_dir=root / "docs", config=config,
                      warnings=warnings)
    name = config.get("site_name")
    if isinstance(name, str | int | float) and not isinstance(name, bool) and str(name).strip():
        site.site_name = str(name).strip()
    else:
        site.site_name = root.name
        warnings.append(f"{config_file.name}: no site_name; the folder's name is the title")
    site.docs_dir = _docs_dir(config.get("docs_dir", "docs"), config_file.parent, warnings)
    url = config.get("site_url")
    if isinstance(url, str) and url.strip():
        url = url.strip()
        site.site_url = url if url.endswith("/") else url + "/"
    elif url not in (None, ""):
        warnings.append(f"site_url is not a string ({url!r}); page URLs are site-relative")
    udu = config.get("use_directory_urls", True)
    site.use_directory_urls = udu if isinstance(udu, bool) else True
    if not isinstance(udu, bool):
        warnings.append(f"use_directory_urls is not true/false ({udu!r}); true is used")
    for key in ("exclude_docs", "draft_docs", "not_in_nav"):
        setattr(site, key, _patterns(config.get(key), key, warnings))
    site.markdown_extensions = _extensions(config.get("markdown_extensions"), config.get("mdx_configs"), warnings)
    site.toc = _toc_options(site.markdown_extensions.get("toc", {}), warnings)
    if "pymdownx.snippets" in site.markdown_extensions:
        site.snippets = _snippet_options(site.markdown_extensions["pymdownx.snippets"], config_file.parent, warnings)
    if "nav" in config and config["nav"] is not None:
        site.nav = _nav(config["nav"], site, warnings)
    return site


def _load_config(path: Path, warnings: list[str], *, chain: tuple[Path, ...]) -> dict:
    name = path.name if not chain else str(path)
    try:
        data = path.read_bytes()
        if len(data) > MAX_CONFIG_BYTES:
            warnings.append(f"{name}: larger than {MAX_CONFIG_BYTES} bytes; not read")
            return {}
        config = yaml.load(data.decode("utf-8-sig"), Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)
    except UnicodeDecodeError:
        warnings.append(f"{name}: not UTF-8 text; not read")
        return {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        warnings.append(f"{name}: invalid YAML{where}: {getattr(exc, 'problem', None) or exc}")
        return {}
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        warnings.append(f"{name}: not read: {exc}")
        return {}
    if config is None:
        return {}
    if not isinstance(config, dict):
        warnings.append(f"{name}: not a mapping of settings; not read")
        return {}
    inherit = config.pop("INHERIT", None)
    if inherit is None:
        return config
    if not isinstance(inherit, str) or not inherit.lower().endswith((".yml", ".yaml")):
        warnings.append(f"{name}: INHERIT {inherit!r} is not a .yml/.yaml file; not read")
        return config
    parent = (path.parent / inherit).resolve()
    if parent in chain or parent == path.resolve():
        warnings.append(f"{name}: INHERIT loop at {inherit!r}; not read again")
        return config
    if len(chain) >= MAX_INHERIT_DEPTH:
        warnings.append(f"{name}: INHERIT nested more than {MAX_INHERIT_DEPTH} deep")
        return config
    if not parent.is_file():
        warnings.append(f"{name}: inherited config file {inherit!r} does not exist")
        return config
    return merge(_load_config(parent, warnings, chain=(*chain, path.resolve())), config)


def merge(parent: dict, child: dict) -> dict:
    """``child`` merged into ``parent`` as ``mergedeep.merge`` (REPLACE) does: mappings key by key, recursively;
    anything else replaced by the child's value."""
    out = dict(parent)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _docs_dir(value: object, base: Path, warnings: list[str]) -> Path:
    if not isinstance(value, str) or not value.strip():
        warnings.append(f"docs_dir is not a folder name ({value!r}); docs is used")
        value = "docs"
    folder = (base / value.strip()).resolve()
    if not folder.is_dir():
        warnings.append(f"docs_dir {value!r} is not a folder")
    return folder


def _patterns(value: object, key: str, warnings: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    warnings.append(f"{key} is not gitignore patterns; ignored")
    return []


def _short(name: str) -> str:
    return name.removeprefix("markdown.extensions.")


def _extensions(value: object, mdx_configs: object, warnings: list[str]) -> dict[str, dict]:
    """``markdown_extensions`` (a list of names and ``{name: options}``, or a mapping) as {short name: options},
    MkDocs' built-in ``toc``, ``tables``, ``fenced_code`` first."""
    out: dict[str, dict] = {name: {} for name in _BUILTIN_EXTENSIONS}
    items: list = []
    if isinstance(value, dict):
        items = [{k: v} for k, v in value.items()]
    elif isinstance(value, list):
        items = value
    elif value is not None:
        warnings.append("markdown_extensions is not a list; ignored")
    for item in items:
        if isinstance(item, str):
            out.setdefault(_short(item), {})
        elif isinstance(item, dict) and len(item) == 1:
            name, options = next(iter(item.items()))
            if not isinstance(name, str):
                warnings.append(f"markdown_extensions: {item!r} is not an extension; ignored")
                continue
            if options is not None and not isinstance(options, dict):
                warnings.append(f"markdown_extensions: options of {name} are not a mapping; ignored")
                options = None
            out[_short(name)] = {**out.get(_short(name), {}), **(options or {})}
        else:
            warnings.append(f"markdown_extensions: {item!r} is not an extension; ignored")
    if isinstance(mdx_configs, dict):
        for name, options in mdx_configs.items():
            if isinstance(name, str) and isinstance(options, dict) and _short(name) in out:
                out[_short(name)] = {**out[_short(name)], **options}
    return out


def _toc_options(options: dict, warnings: list[str]) -> TocOptions:
    permalink = options.get("permalink", False)
    separator = options.get("separator", "-")
    if not isinstance(separator, str):
        warnings.append(f"toc separator {separator!r} is not a string; '-' is used")
        separator = "-"
    return TocOptions(permalink=permalink if isinstance(permalink, bool | str) else False,
                      slugify=_slugify_option(options.get("slugify"), warnings), separator=separator)


def _slugify_option(value: object, warnings: list[str]) -> Slugify:
    if value is None:
        return Slugify()
    if isinstance(value, PythonRef):
        name = value.name
        if name in ("markdown.extensions.toc.slugify",):
            return Slugify()
        if name == "markdown.extensions.toc.slugify_unicode":
            return Slugify("unicode")
        if name == "pymdownx.slugs.slugify" and value.kwds is not None:
            kwds = {**dict(enumerate(value.args)), **value.kwds}
            return Slugify("pymdownx", case=str(kwds.get("case", "none")),
                           percent_encode=bool(kwds.get("percent_encode", False)),
                           normalize=str(kwds.get("normalize", "NFC")))
    warnings.append(f"toc slugify {getattr(value, 'name', value)!r} is not known; Python-Markdown's default is used")
    return Slugify()


def _snippet_options(options: dict, project: Path, warnings: list[str]) -> SnippetOptions:
    bases = options.get("base_path", ["."])
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list):
        warnings.append("pymdownx.snippets base_path is not a list of paths; '.' is used")
        bases = ["."]
    append = options.get("auto_append") or []
    if isinstance(append, str):
        append = [append]
    if not isinstance(append, list):
        warnings.append("pymdownx.snippets auto_append is not a list of paths; ignored")
        append = []
    return SnippetOptions(
        base_path=[(project / str(base)).resolve() for base in bases if isinstance(base, str)],
        auto_append=[str(item) for item in append if isinstance(item, str)],
        check_paths=bool(options.get("check_paths", False)),
        restrict_base_path=options.get("restrict_base_path", True) is not False,
        dedent_subsections=bool(options.get("dedent_subsections", False)))


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
    return _slug(text, options.slugify, options.separator)


def _slug(value: str, how: Slugify, separator: str) -> str:
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


# -- snippets ------------------------------------------------------------------------------------------

# pymdownx.snippets' RE_ALL_SNIPPETS and RE_SNIPPET_SECTION.
_SNIPPET = re.compile(r"""^(?P<space>[ \t]*)(?P<escape>;*)(?P<all>(?P<inline_marker>-+8<-+[ \t]+)"""
                      r"""(?P<snippet>(?:"(?:\\"|[^"\n\r])+?"|'(?:\\'|[^'\n\r])+?'))(?![ \t])|"""
                      r"""(?P<block_marker>-+8<-+)(?![ \t]))\r?$""")
_SECTION = re.compile(r"""(?i)^(?P<pre>.*?)(?<!;)(?P<escape>;*)(?P<inline_marker>-+8<-+[ \t]+)"""
                      r"""(?P<section>\[[ \t]*(?P<type>start|end)[ \t]*:[ \t]*(?P<name>[a-z][-_0-9a-z]*)[ \t]*\])"""
                      r"""(?P<post>.*?)$""")
_TARGET = re.compile(r"(?i)^(?P<path>.*?)(?:(?P<lines>(?::-?[0-9]*){1,2}(?:,-?[0-9]*(?::-?[0-9]*)?)*)"
                     r"|:(?P<section>[a-z][-_0-9a-z]*))?$")


@dataclass
class _Expansion:
    warnings: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)


def snippet_lines(spec: str, site: MkDocsSite, *, chain: tuple[Path, ...] = (),
                  warnings: list[str] | None = None) -> list[str] | None:
    """The lines ``--8<-- "spec"`` stands for (``file``, ``file:2:5``, ``file:name``…), nested snippets
    expanded; None (with a warning in ``warnings``) when it can't be read. ``chain``: the files being expanded."""
    state = _Expansion(warnings if warnings is not None else [])
    return _snippet(spec, site, chain, state)


def expand_snippets(lines: list[str], site: MkDocsSite, *, rel_path: str, auto_append: bool = True,
                    page: Path | None = None) -> InlinedLines:
    """The page's lines with its snippets (and ``auto_append`` files) inlined; each line remembers the page line
    it stands for (appended files: the page's last line), warnings carry the page line."""
    result = InlinedLines([], [])
    if site.snippets is None:
        result.lines, result.origins = list(lines), list(range(len(lines)))
        return result
    page = page or (site.docs_dir / rel_path)
    source = list(lines)
    appended = auto_append and site.snippets.auto_append
    if appended:
        source += "\n\n-8<-\n{}\n-8<-\n".format("\n\n".join(site.snippets.auto_append)).split("\n")
    last = max(len(lines) - 1, 0)
    for text, origin, warnings, digests in _parse(source, site, chain=(page.resolve(),), section=False):
        result.lines.append(text)
        result.origins.append(min(origin, last))
        result.warnings += [Issue(rel_path, min(origin, last) + 1, message) for message in warnings]
        result.digests += digests
    return result


def _parse(lines: list[str], site: MkDocsSite, *, chain: tuple[Path, ...], section: bool):
    """``(text, origin, warnings, digests)`` for each output line (warnings and digests on the first line a
    snippet gives, or on an empty tuple when it gives none)."""
    block = False
    out: list[tuple[str, int, list[str], list[str]]] = []
    for index, line in enumerate(lines):
        inline = False
        match = _SNIPPET.match(line) if "8<" in line else None
        if match:
            if match.group("escape"):
                out.append((line.replace(";", "", 1), index, [], []))
                continue
            if block and match.group("inline_marker"):
                continue
            if match.group("inline_marker"):
                inline = True
            else:
                block = not block
                continue
        elif not block:
            section_match = _SECTION.match(line) if not section and "8<" in line else None
            if section_match and section_match.group("escape"):
                m = section_match
                line = m.group("pre") + m.group("escape").replace(";", "", 1) + m.group("inline_marker") \
                    + m.group("section") + m.group("post")
            elif section_match:
                continue
            out.append((line, index, [], []))
            continue
        space = (match.group("space") if inline else re.match(r"[ \t]*", line).group()).expandtabs(4)
        spec = match.group("snippet")[1:-1].strip() if inline else line.strip()
        if not inline and not spec:
            out.append(("", index, [], []))
            continue
        if spec.startswith(";"):
            continue
        state = _Expansion()
        inner = _snippet(spec, site, chain, state)
        if not inner:
            if state.warnings or state.digests:
                out.append(("", index, state.warnings, state.digests))
            continue
        first = True
        for text in inner:
            out.append((space + text, index, state.warnings if first else [], state.digests if first else []))
            first = False
    return out


def _snippet(spec: str, site: MkDocsSite, chain: tuple[Path, ...], state: _Expansion) -> list[str] | None:
    options = site.snippets or SnippetOptions([site.config_file.parent])
    target = _TARGET.match(spec)
    path = target.group("path").strip() if target else ""
    if not path:
        state.warnings.append(f"snippet {spec!r}: no path")
        return None
    if path.lower().startswith(("http://", "https://")):
        state.warnings.append(f"snippet {spec!r} is a URL; it is not downloaded")
        return None
    found = _find_snippet(path, options, site.root)
    if isinstance(found, str):
        state.warnings.append(f"snippet {spec!r} not inlined: {found}")
        return None
    if found in chain:
        state.warnings.append(f"snippet {spec!r} not inlined: it includes itself")
        return None
    if len(chain) > MAX_SNIPPET_DEPTH:
        state.warnings.append(f"snippet {spec!r} not inlined: snippets nested more than {MAX_SNIPPET_DEPTH} deep")
        return None
    try:
        data = found.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        state.warnings.append(f"snippet {spec!r} not inlined: cannot read it ({exc})")
        return None
    state.digests.append(hashlib.sha256(data).hexdigest())
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n") if text else []
    lines = _select(lines, target, options, spec, state)
    if lines is None:
        return None
    nested = _parse(lines, site, chain=(*chain, found), section=target.group("section") is not None)
    for _, _, warnings, digests in nested:
        state.warnings += warnings
        state.digests += digests
    return [text for text, *_ in nested]


def _find_snippet(path: str, options: SnippetOptions, root: Path) -> Path | str:
    """The snippet's file (the first base path that has it), or why there is none."""
    outside = False
    for base in options.base_path:
        if not base.exists():
            continue
        if base.is_dir():
            candidate = (base / path).resolve()
            if options.restrict_base_path and not candidate.is_relative_to(base):
                continue
        else:  # a base path may name a single file
            candidate = (base.parent / path).resolve()
            if candidate != base.resolve():
                continue
        if not candidate.is_relative_to(root):
            outside = True
            continue
        if candidate.is_file():
            return candidate
    return "the file is outside the project" if outside else "file not found"


def _select(lines: list[str], target: re.Match, options: SnippetOptions, spec: str,
            state: _Expansion) -> list[str] | None:
    """The line ranges (``:2:5``, ``:-3``, ``:2:5,8:9``; 1-based, inclusive) or the section a spec names."""
    if not lines:
        return lines
    if target.group("lines"):
        total = len(lines)
        picked: list[str] = []
        for part in target.group("lines")[1:].split(","):
            bits = part.split(":")
            start = int(bits[0]) if bits[0].lstrip("-").isdigit() else None
            start = start if start is None or start < 0 else max(0, start - 1)
            end = int(bits[1]) if len(bits) > 1 and bits[1].lstrip("-").isdigit() else None
            if start is not None and start < 0:
                start = min(max(total + start, 0), total)
            if end is not None and end < 0:
                end = min(max(total + 1 + end, 0), total)
            picked.extend(lines[start:end])
        return textwrap.dedent("\n".join(picked)).split("\n") if options.dedent_subsections else picked
    name = target.group("section")
    if not name:
        return lines
    picked, inside, found = [], False, False
    for line in lines:
        match = _SECTION.match(line) if "8<" in line else None
        if match and match.group("escape"):
            line = match.group("pre") + match.group("escape").replace(";", "", 1) + match.group("inline_marker") \
                + match.group("section") + match.group("post")
        elif match and match.group("name") == name:
            if match.group("type").lower() == "start":
                inside = found = True
                continue
            break
        elif match:
            continue
        if inside:
            picked.append(line)
    if not found:
        state.warnings.append(f"snippet {spec!r}: no section {name!r} in the file")
        return None
    return textwrap.dedent("\n".join(picked)).split("\n") if options.dedent_subsections else picked
