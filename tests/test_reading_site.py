"""``ingestion.reading.site``: a Docusaurus site planned as books and editions (versions × locales) from its config
and folders, without indexing anything: slugs, titles, URLs, the latest version, which locales get an edition, and
the warnings for a broken versions file or a missing version folder. tests/test_site.py indexes a real site."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ingestion.models import Book
from ingestion.reading.site import Edition, _edition_slug, plan_site
from ingestion.reading.site_config import DocsInstance, SiteConfig

FILES = ("docs/a.md", "docs/b.md", "versioned_docs/version-1.0/a.md", "api/x.md",
         "i18n/fr/docusaurus-plugin-content-docs/current/a.md",
         "i18n/fr/docusaurus-plugin-content-docs/current/only-fr.md")


@pytest.fixture
def config(tmp_path: Path) -> SiteConfig:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n")
    (tmp_path / "versions.json").write_text(json.dumps(["1.0", "0.9"]))
    return SiteConfig(root=tmp_path, config_file=tmp_path / "docusaurus.config.js", title="My Site",
                      url="https://example.org", base_url="/b/", trailing_slash=None, locales=("en", "fr"),
                      docs=(DocsInstance(), DocsInstance(id="api", path="api", route_base_path="api")))


def _summary(edition: Edition) -> tuple:
    return (edition.slug, edition.title, edition.base_url, edition.version, edition.version_label,
            edition.latest, edition.locale, edition.is_root)


def test_each_docs_instance_is_a_book_and_each_version_and_translated_locale_an_edition(config):
    plan = plan_site(config)
    assert [[_summary(edition) for edition in book] for book in plan.books] == [
        [("my-site", "My Site", "https://example.org/b/docs/next", "current", "Next", False, "en", True),
         ("my-site--fr", "My Site", "https://example.org/b/fr/docs/next", "current", "Next", False, "fr", False),
         ("my-site--1-0", "My Site", "https://example.org/b/docs", "1.0", "1.0", True, "en", False)],
        [("my-site-api", "My Site (api)", "https://example.org/b/api", "current", "Next", True, "en", True)],
    ]  # 1.0 has no French translation: no edition (French questions fall back to English)
    assert [(issue.file, issue.message) for issue in plan.warnings] == [
        ("versioned_docs/version-0.9", "version '0.9' is in the versions file but its folder is missing")]


def test_a_broken_versions_file_leaves_only_the_current_docs(config):
    (config.root / "versions.json").write_text("{")
    plan = plan_site(config, slug="hb", base_url="https://other.example/z/")
    assert [(e.slug, e.base_url, e.latest) for e in plan.books[0]] == [
        ("hb", "https://other.example/z/docs", True), ("hb--fr", "https://other.example/z/fr/docs", True)]
    assert plan.warnings[0].file == "versions.json" and "only the current docs are indexed" in plan.warnings[0].message


def test_a_locale_edition_reads_the_translation_in_place_of_the_original(config):
    french = next(edition for edition in plan_site(config).books[0] if edition.locale == "fr")
    files = {file.rel_path: file.path for file in french.discover().files}
    assert sorted(files) == ["a.md", "b.md", "only-fr.md"]
    assert "i18n" in files["a.md"].parts and "i18n" not in files["b.md"].parts


def test_a_site_without_docs_is_warned(config):
    plan = plan_site(SiteConfig(root=config.root, config_file=config.config_file, title="T", url="", base_url="/",
                                trailing_slash=None))
    assert plan.books == [] and "the site has no docs" in plan.warnings[-1].message


def test_a_long_edition_slug_is_cut_and_ends_in_a_digest():
    assert _edition_slug("hb", "1.0.0-Beta", "pt-BR") == "hb--1-0-0-beta--pt-br"
    long = _edition_slug("a" * 60, "1.0", "fr")
    assert len(long) == Book._meta.get_field("slug").max_length and long != _edition_slug("a" * 60, "1.1", "fr")
