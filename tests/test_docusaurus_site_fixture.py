"""The cached Docusaurus test site (tests/support/docusaurus_site.py) has the pages, versions, locales and
anchors other tests rely on, and ``check_url`` tells a served URL from a broken one (no database)."""

from __future__ import annotations

import pytest

from tests.support.docusaurus_site import SITE_URL, anchors, check_url, page_for, site

pytestmark = [pytest.mark.slow, pytest.mark.needs("node")]  # ~85 s when the cache is cold


@pytest.fixture(scope="module")
def build():
    return site() / "build"


def text_of(build, path: str) -> str:
    return (build / path / "index.html").read_text(encoding="utf-8")


def test_latest_version_is_served_under_docs_and_current_under_next(build):
    assert "two VHF radios" in text_of(build, "docs/reference/equipment")
    assert "three VHF radios" in text_of(build, "docs/next/reference/equipment")
    assert (build / "docs/next/guide/water/index.html").is_file()
    assert not (build / "docs/guide/water").exists()  # added after 1.0


def test_french_pages_are_translated_where_a_translation_exists(build):
    assert "Bienvenue dans le manuel de terrain" in text_of(build, "fr/docs/next/intro")
    assert "Installer le camp" in text_of(build, "fr/docs/next/guide/setup")
    assert "deux radios VHF" in text_of(build, "fr/docs/reference/equipment")
    assert "First aid in the field" in text_of(build, "fr/docs/next/guide/first-aid")  # no translation: English


def test_partial_heading_and_component_text_are_in_the_pages_that_use_them(build):
    assert {"safety-checklist", "wind-shelter", "choosing-a-site"} <= anchors(build / "docs/guide/setup/index.html")
    assert "Compress and raise" in text_of(build, "docs/guide/first-aid")


def test_check_url_accepts_a_served_page_and_anchor(build):
    assert check_url(SITE_URL + "docs/next/guide/setup#safety-checklist", build, SITE_URL) is None
    assert check_url(SITE_URL + "fr/docs/next/intro#%C3%A0-propos-de-ce-manuel", build, SITE_URL) is None
    assert check_url(SITE_URL + "docs/intro/", build, SITE_URL) is None
    assert page_for(SITE_URL, build, SITE_URL) == build / "index.html"


def test_check_url_names_a_missing_page_or_anchor(build):
    assert "no page" in check_url(SITE_URL + "docs/guide/water", build, SITE_URL)
    assert "no id 'bear-spray'" in check_url(SITE_URL + "docs/guide/setup#bear-spray", build, SITE_URL)
    assert "not under" in check_url("https://handbook.example.org/docs/intro", build, SITE_URL)
    assert page_for(SITE_URL + "docs/../../x", build, SITE_URL) is None
    assert page_for(SITE_URL + "/etc/passwd", build, SITE_URL) is None
