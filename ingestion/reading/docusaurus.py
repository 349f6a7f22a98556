"""Docusaurus conventions: heading anchors, number prefixes, doc slugs and URLs, partials and category labels.

These mirror @docusaurus/plugin-content-docs v3 (``numberPrefix.ts``, ``slug.ts``, ``docs.ts``) and
github-slugger, so the URLs and anchors we cite are the ones the built site serves.

Decisions:
- Explicit ``{#id}`` heading ids do not take part in duplicate counting (as in Docusaurus).
- Fallback labels/titles are "humanised": number prefix dropped, ``-``/``_`` → spaces, first letter
  upper-cased. An ``index``/``README`` file takes its folder's name for that fallback title.
"""

from __future__ import annotations

import json
import posixpath
import re
import unicodedata
from pathlib import Path, PurePosixPath

import yaml

from ingestion.reading.documents import Issue

# Docusaurus: a heading ending in `{#custom-id}` (or, the MDX-safe form of v3.x's future.v4, `{/* #custom-id */}`)
# uses that id verbatim.
_EXPLICIT_ID_RE = re.compile(r"\s*\{(?:#([^{}]+)|/\*\s*#([^{}*]+?)\s*\*/)\}\s*$")
# Docusaurus skips date-like (2021-01-…) and version-like (1.2-…) prefixes before the real rule.
_IGNORED_PREFIX_RE = re.compile(r"^\d+[-_.]\d+")
_NUMBER_PREFIX_RE = re.compile(r"^(?P<number>\d+)\s*[-_.]+\s*(?P<suffix>[^-_.\s].*)$", re.S)
_INDEX_NAMES = ("index", "readme")
_CATEGORY_FILES = ("_category_.json", "_category_.yml", "_category_.yaml")


def split_explicit_id(title: str) -> tuple[str, str | None]:
    """``"Title {#custom-id}"`` or ``"Title {/* #custom-id */}"`` → ``("Title", "custom-id")``; without an id →
    ``(title, None)``."""
    match = _EXPLICIT_ID_RE.search(title)
    custom = match and (match.group(1) or match.group(2) or "").strip()
    if not custom:
        return title.strip(), None
    return title[: match.start()].strip(), custom


def github_slug(text: str) -> str:
    """github-slugger's slug (without duplicate counting): lowercase, keep letters, marks, digits,
    ``-`` and ``_`` (connector punctuation), turn each space into ``-``, drop everything else."""
    out = []
    for char in text.lower():
        if char == " ":
            out.append("-")
        elif char == "-" or unicodedata.category(char)[0] in "LMN" or unicodedata.category(char) == "Pc":
            out.append(char)
    return "".join(out)


def heading_anchor(title: str, seen: dict[str, int]) -> str:
    """The anchor of a heading titled ``title`` (plain text, no ``{#id}``), counting duplicates in
    ``seen`` exactly as github-slugger does: ``intro``, ``intro-1``, ``intro-2``…"""
    base = github_slug(title)
    slug = base
    while slug in seen:
        seen[base] += 1
        slug = f"{base}-{seen[base]}"
    seen[slug] = 0
    return slug


def strip_number_prefix(name: str) -> str:
    """``01-intro`` → ``intro``, ``2 - Setup`` → ``Setup``; names that are only a number, and
    date- or version-like names (``2021-01-02-x``, ``1.2-x``), are left alone."""
    if _IGNORED_PREFIX_RE.match(name):
        return name
    match = _NUMBER_PREFIX_RE.match(name)
    return match.group("suffix") if match else name


def humanize(name: str) -> str:
    """A readable label from a file or folder name: ``03-ros2-fundamentals`` → ``Ros2 fundamentals``."""
    words = re.sub(r"[-_\s]+", " ", strip_number_prefix(name)).strip()
    return words[:1].upper() + words[1:]


def title_from_path(rel_path: str) -> str:
    """Fallback page title from the file name (the folder's name for index/README pages)."""
    path = PurePosixPath(rel_path)
    stem = path.stem
    if stem.lower() in _INDEX_NAMES and path.parent.name:
        stem = path.parent.name
    return humanize(stem)


def _is_category_index(file_stem: str, dir_name: str) -> bool:
    # Docusaurus compares the raw names (number prefixes included), case-insensitively.
    folder = dir_name.split("/")[-1].lower() if dir_name != "." else None
    return file_stem.lower() in (*_INDEX_NAMES, folder)


def document_slug(rel_path: str, front_matter: dict) -> str:
    """The doc's URL path under the docs base URL, without leading/trailing slashes ("" = root).

    Folders (number prefixes stripped) + doc id (front matter ``id`` or the unprefixed file name);
    index/README/``<folder>/<folder>.md`` map to the folder; front matter ``slug`` is absolute
    (``/x`` replaces the path) or relative to the folder (``x``)."""
    path = PurePosixPath(rel_path)
    dir_name = str(path.parent)
    strip = strip_number_prefix if front_matter.get("parse_number_prefixes", True) is not False else str
    doc_id = front_matter.get("id")
    base_id = str(doc_id) if doc_id is not None and str(doc_id) else strip(path.stem)
    dir_slug = "/" if dir_name == "." else "/" + "/".join(strip(part) for part in dir_name.split("/")) + "/"
    fm_slug = front_matter.get("slug")
    fm_slug = str(fm_slug) if fm_slug is not None else None
    if fm_slug and fm_slug.startswith("/"):
        slug = fm_slug
    elif not fm_slug and _is_category_index(path.stem, dir_name):
        slug = dir_slug
    else:
        slug = posixpath.normpath(posixpath.join(dir_slug, fm_slug or base_id))
    return re.sub(r"/{2,}", "/", slug).strip("/")


def document_url(base_url: str, slug: str, trailing_slash: bool | None = None) -> str:
    """The page's URL: the book's base URL, then the page's slug ("" = the base URL's root), ending in "/" when
    the site's ``trailingSlash`` is true."""
    base = base_url.rstrip("/")
    if not slug:
        return f"{base}/"
    return f"{base}/{slug.rstrip('/')}/" if trailing_slash else f"{base}/{slug}"


def is_partial(rel_path: str) -> bool:
    """Docusaurus ignores files and folders whose name starts with ``_`` (partials, templates)."""
    return any(part.startswith("_") for part in PurePosixPath(rel_path).parts)


def category_label(root: Path, rel_dir: str) -> str:
    """The sidebar label of folder ``rel_dir`` (relative to the docs root); "" for the root."""
    return category_label_with_issue(root, rel_dir)[0]


def category_label_with_issue(root: Path, rel_dir: str) -> tuple[str, Issue | None]:
    """Like :func:`category_label`, plus a warning when the ``_category_`` file can't be read."""
    label, _, issue = category_entry(root, rel_dir)
    return label, issue


def category_entry(root: Path, rel_dir: str) -> tuple[str, float | None, Issue | None]:
    """(label, sidebar position, warning) of folder ``rel_dir``: its ``_category_`` file's ``label`` and
    ``position``, else its humanised name and its number prefix (as Docusaurus's autogenerated sidebars)."""
    rel_dir = rel_dir.strip("/")
    if rel_dir in ("", "."):
        return "", None, None
    name = PurePosixPath(rel_dir).name
    fallback = humanize(name)
    for file_name in _CATEGORY_FILES:
        path = Path(root) / rel_dir / file_name
        if path.is_file():
            data, issue = _read_category(path, f"{rel_dir}/{file_name}")
            label = data.get("label")
            label = str(label).strip() if label is not None and str(label).strip() else fallback
            return label, _position(data.get("position"), name), issue
    return fallback, _position(None, name), None


def sidebar_position(rel_path: str, front_matter: dict) -> float | None:
    """A page's place among its folder's items: ``sidebar_position``, else its file name's number prefix."""
    return _position(front_matter.get("sidebar_position"), PurePosixPath(rel_path).stem)


def _position(value: object, name: str) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return float(value)
    if _IGNORED_PREFIX_RE.match(name):
        return None
    match = _NUMBER_PREFIX_RE.match(name)
    return float(match.group("number")) if match else None


def _read_category(path: Path, rel_file: str) -> tuple[dict, Issue | None]:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        return {}, Issue(rel_file, exc.lineno, f"invalid JSON in category file: {exc.msg}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        return {}, Issue(rel_file, line, f"invalid YAML in category file: {exc}")
    except (OSError, ValueError, TypeError, RecursionError) as exc:  # unreadable, not UTF-8, bad date…
        return {}, Issue(rel_file, None, f"cannot read category file: {exc}")
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, Issue(rel_file, 1, "category file is not a mapping")
    return data, None
