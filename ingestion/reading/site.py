"""A Docusaurus site as books: its docs, their versions and their translations, from the site's own config.

``ingest SITE_ROOT`` reads ``docusaurus.config.*`` (``ingestion.reading.site_config``), plans one book per docs
plugin instance and one edition per version and locale, and indexes each edition like a folder.

Decisions:
- The classic preset's docs are the book; each extra ``plugin-content-docs`` instance is a book of its own,
  slug ``<book>-<id>``, titled "<site title> (<id>)".
- Every version and every locale is an edition: a ``Book`` row of its own that points at its root, the
  instance's current docs in the default locale (what a plain ``ingest SITE/docs`` indexes). The root never
  changes identity when a version is cut; clients name its slug, and without ``version`` they are answered
  from Docusaurus's ``lastVersion`` (the newest in ``versions.json``, else current) in the default locale.
- URLs as Docusaurus routes them: ``url`` + ``baseUrl`` + (locale, unless the default) + ``routeBasePath``
  + the version's path: "" for the latest, ``next`` for current when it is not the latest, else the
  version's name; ``versions.<name>.path``/``label`` in the plugin's options override.
- A locale edition is the default locale's pages with the translated files in their place, as Docusaurus
  falls back to the untranslated page. A version with no translated file in a locale is not indexed for
  it (it would only repeat the default locale's pages); asked in that locale, the default locale answers.
- Lexical search in a locale uses PostgreSQL's text-search configuration for its language (``french``,
  ``german``, …; ``simple`` where there is none); a book that is not a site keeps ``english``.
- Vectors are shared within a site: an edition reuses any vector its root or a sibling holds for the same
  embedded text, so a new version embeds only the pages it changed.
- ``--base-url`` replaces the site's address (``url`` + ``baseUrl``), ``--title`` its title; editions that
  are no longer in the site are reported, and removed with ``--prune``.
- Not read: sidebars (page order), ``includeCurrentVersion: false`` (current docs are still the root and
  indexed; they answer only when asked for by version), translated category labels (``current.json``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ingestion.languages import language_or_default, search_config_for
from ingestion.models import BOOK_SLUG_LENGTH, book_slug_from
from ingestion.reading.discovery import Discovery, SourceFile, discover
from ingestion.reading.documents import Issue
from ingestion.reading.site_config import DocsInstance, SiteConfig

CURRENT = "current"


@dataclass
class Edition:
    """One version of one docs instance in one locale, indexed as a book."""

    slug: str
    title: str
    folder: Path
    base_url: str
    version: str
    version_label: str
    version_path: str
    version_rank: int
    latest: bool
    locale: str
    trailing_slash: bool | None
    translations: Path | None = None  # the locale's folder of translated files
    is_root: bool = False
    default_locale: bool = True  # in the site's default locale (what ``--language`` names, when given)

    @property
    def fields(self) -> dict:
        """The edition's columns of ``Book``."""
        return {"version": self.version, "version_label": self.version_label, "version_path": self.version_path,
                "version_rank": self.version_rank, "latest": self.latest, "locale": self.locale,
                "trailing_slash": self.trailing_slash, "language": language_or_default(self.locale),
                "search_config": search_config_for(self.locale)}

    def discover(self) -> Discovery:
        """The edition's pages: the version's files, each replaced by its translation where there is one."""
        found = discover(self.folder)
        if self.translations is None:
            return found
        translated = discover(self.translations)
        by_path = {file.rel_path: file for file in translated.files}
        files = [by_path.pop(file.rel_path, file) for file in found.files]
        files.extend(by_path.values())  # pages that exist only in this locale
        files.sort(key=lambda file: file.rel_path)
        return Discovery(root=found.root, files=[SourceFile(f.path, f.rel_path) for f in files],
                         warnings=found.warnings + translated.warnings)


@dataclass
class SitePlan:
    config: SiteConfig
    books: list[list[Edition]] = field(default_factory=list)  # per docs instance: the root first
    warnings: list[Issue] = field(default_factory=list)


def plan_site(config: SiteConfig, *, slug: str | None = None, title: str | None = None,
              base_url: str | None = None) -> SitePlan:
    """The books and editions of a site, from its config and its folders (nothing is read but JSON files)."""
    plan = SitePlan(config, warnings=[Issue(config.config_file.name, None, w) for w in config.warnings])
    site_url = _site_url(config, base_url)
    site_title = title or config.title or config.root.name
    slug = slug or book_slug_from(config.title) or book_slug_from(config.root.name) or "book"
    for instance in config.docs:
        instance_slug = slug if instance.id == "default" else book_slug_from(f"{slug}-{instance.id}")
        book_title = site_title if instance.id == "default" else f"{site_title} ({instance.id})"
        editions = _editions(config, instance, plan, slug=instance_slug, title=book_title, site_url=site_url)
        if editions:
            plan.books.append(editions)
    if not plan.books:
        plan.warnings.append(Issue(config.config_file.name, None, "the site has no docs (docs: false and no "
                                   "plugin-content-docs instance)"))
    return plan


def _editions(config: SiteConfig, instance: DocsInstance, plan: SitePlan, *, slug: str, title: str,
              site_url: str) -> list[Edition]:
    root = config.root
    folder = (root / instance.path).resolve()
    if not folder.is_dir():
        plan.warnings.append(Issue(instance.path, None, f"docs folder of instance {instance.id!r} not found"))
        return []
    versions = _versions_file(root, instance, plan)
    last = instance.last_version or (versions[0] if versions else CURRENT)
    names = [CURRENT, *versions]
    if instance.only_include_versions is not None:
        names = [n for n in names if n in instance.only_include_versions or n == CURRENT]
    versioned = "versioned_docs" if instance.id == "default" else f"{instance.id}_versioned_docs"
    i18n_plugin = "docusaurus-plugin-content-docs" + ("" if instance.id == "default" else f"-{instance.id}")
    editions = []
    for rank, name in enumerate(names):  # current first, then versions.json's order: newest first
        source = folder if name == CURRENT else root / versioned / f"version-{name}"
        if not source.is_dir():
            plan.warnings.append(Issue(f"{versioned}/version-{name}", None,
                                       f"version {name!r} is in the versions file but its folder is missing"))
            continue
        options = instance.versions.get(name) or {}
        path = options.get("path")
        if not isinstance(path, str):
            path = "" if name == last else ("next" if name == CURRENT else name)
        label = options.get("label")
        if not isinstance(label, str) or not label:
            label = "Next" if name == CURRENT else name
        for locale in (config.default_locale, *[x for x in config.locales if x != config.default_locale]):
            default = locale == config.default_locale
            translations = None
            if not default:
                translations = (root / config.i18n_path / config.locale_paths.get(locale, locale) / i18n_plugin
                                / (name if name == CURRENT else f"version-{name}"))
                if not _has_pages(translations):
                    continue
            editions.append(Edition(
                slug=_edition_slug(slug, name if name != CURRENT else "", "" if default else locale),
                title=title, folder=source, translations=translations,
                base_url=_join(_locale_url(config, locale, site_url), instance.route_base_path, path.strip("/")),
                version=name, version_label=label, version_path=path.strip("/"), version_rank=rank,
                latest=name == last, locale=locale, trailing_slash=config.trailing_slash,
                is_root=name == CURRENT and default, default_locale=default,
            ))
    editions.sort(key=lambda e: not e.is_root)
    return editions


def _versions_file(root: Path, instance: DocsInstance, plan: SitePlan) -> list[str]:
    name = "versions.json" if instance.id == "default" else f"{instance.id}_versions.json"
    path = root / name
    if not path.is_file():
        return []
    try:
        versions = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        plan.warnings.append(Issue(name, None, f"not read ({exc}); only the current docs are indexed"))
        return []
    if not isinstance(versions, list) or not all(isinstance(v, str) and v.strip() for v in versions):
        plan.warnings.append(Issue(name, None, "is not a list of version names; only the current docs are indexed"))
        return []
    return [v.strip() for v in versions if v.strip() != CURRENT]


def _has_pages(folder: Path) -> bool:
    return folder.is_dir() and any(p.suffix.lower() in (".md", ".mdx") for p in folder.rglob("*") if p.is_file())


def _site_url(config: SiteConfig, base_url: str | None) -> str:
    if base_url is not None:
        return base_url.rstrip("/")
    return config.site_url.rstrip("/")


def _locale_url(config: SiteConfig, locale: str, site_url: str | None) -> str:
    """The site's URL in ``locale``: the site's own for the default locale, else with ``/<locale>`` (or the
    locale's own url/baseUrl in the config, unless ``--base-url`` was given)."""
    if locale == config.default_locale:
        return site_url
    if site_url != _site_url(config, None):
        return f"{site_url}/{locale}"
    return config.locale_urls.get(locale, f"{site_url}/{locale}/").rstrip("/")


def _join(*parts: str) -> str:
    return "/".join(part.strip("/") if i else part.rstrip("/") for i, part in enumerate(parts) if part.strip("/")
                    or i == 0)


def _edition_slug(slug: str, version: str, locale: str) -> str:
    """``handbook``, ``handbook--1-0``, ``handbook--fr``, ``handbook--1-0--fr`` (at most ``BOOK_SLUG_LENGTH``
    characters: a longer one is cut and ends with a digest of the whole)."""
    parts = [slug] + [re.sub(r"[^a-z0-9]+", "-", x.lower()).strip("-") or "x" for x in (version, locale) if x]
    joined = "--".join(parts)
    if len(joined) <= BOOK_SLUG_LENGTH:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
    return f"{joined[:BOOK_SLUG_LENGTH - len(digest) - 1].rstrip('-')}-{digest}"
