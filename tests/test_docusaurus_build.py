"""Citations proven against a real Docusaurus 3 build: the cached "Field Handbook" site (two versions, two
locales, a partial and a component with props; tests/support/docusaurus_site.py) is ingested from its root with
no flags, and every URL bookchat stores or cites must name a page of ``build/`` and an ``id`` in that page.

Needs Node.js with npm (the "node" group of ``NEEDS`` in tests/conftest.py, which also starts the build in the
background when the session begins).
"""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.test import override_settings

from ingestion.models import Book, Chunk, Document
from tests.conftest import VECTOR_CACHE, committed, run_command
from tests.support import docusaurus_site

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.needs("node")]

SITE_URL = docusaurus_site.SITE_URL
EDITIONS = {"field-handbook", "field-handbook--1-0", "field-handbook--fr", "field-handbook--1-0--fr"}
HREF = re.compile(r'href="([^"]+)"')
MARKDOWN_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


@pytest.fixture(scope="module")
def handbook(django_db_setup, django_db_blocker):
    """The built site, ingested once (committed); (site root, build folder, first and second run's reports). Its
    passages' vectors go to the session's cache, where tests/test_tutorial.py's `make run` of the same site finds
    them in `make drills`."""
    root = docusaurus_site.site()
    with django_db_blocker.unblock():
        with override_settings(BOOKCHAT={**settings.BOOKCHAT, "EMBEDDING_CACHE": str(VECTOR_CACHE)}):
            first = committed(lambda: run_command("ingest", str(root), "--json"))
            second = committed(lambda: run_command("ingest", str(root), "--json"))
        yield root, root / "build", json.loads(first[1]), json.loads(second[1])
        committed(lambda: Book.objects.filter(slug__in=EDITIONS).delete())


@pytest.fixture
def answers(no_llm):
    def ask(client, question: str, **fields) -> dict:
        response = client.post("/api/v1/ask", data=json.dumps({"book": "field-handbook", "question": question,
                                                                **fields}), content_type="application/json")
        assert response.status_code == 200, response.content
        return response.json()

    return ask


def test_the_site_root_is_ingested_with_its_title_urls_versions_and_locales_and_no_flags(handbook):
    _, _, first, second = handbook
    assert first["errors"] == [], first["errors"]
    assert first["site"]["title"] == "Field Handbook" and first["site"]["url"] == SITE_URL
    books = {b["slug"]: b for b in first["books"]}
    assert set(books) == EDITIONS
    assert books["field-handbook--1-0"]["latest"] and books["field-handbook--1-0"]["base_url"] == SITE_URL + "docs"
    assert books["field-handbook"]["base_url"] == SITE_URL + "docs/next"
    assert books["field-handbook--fr"]["base_url"] == SITE_URL + "fr/docs/next"
    assert books["field-handbook--1-0--fr"]["base_url"] == SITE_URL + "fr/docs"
    assert {Book.objects.get(slug=slug).title for slug in EDITIONS} == {"Field Handbook"}
    # The translations and versions share the vectors of the pages they did not change.
    assert first["chunks_embedded"] < first["chunks_added"]
    assert second["chunks_embedded"] == 0 and second["files_unchanged"] == second["files_seen"]


def test_every_stored_page_and_section_url_exists_in_the_build(handbook):
    _, build, _, _ = handbook
    documents = Document.objects.filter(book__slug__in=EDITIONS)
    chunks = Chunk.objects.filter(book__slug__in=EDITIONS)
    assert documents.count() >= 20 and chunks.count() >= 40
    broken = {url: docusaurus_site.check_url(url, build, SITE_URL)
              for url in [*documents.values_list("url", flat=True), *chunks.values_list("url", flat=True)]}
    assert {url: why for url, why in broken.items() if why} == {}
    # Links in the stored text were rewritten to the site's URLs too.
    linked = {url for text in chunks.values_list("text", flat=True) for url in MARKDOWN_LINK.findall(text)}
    assert linked, "the handbook's pages link to each other"
    assert {url: why for url in linked if (why := docusaurus_site.check_url(url, build, SITE_URL))} == {}


@pytest.mark.parametrize("question, fields, expected", [
    ("How many VHF radios does each team carry?", {}, SITE_URL + "docs/reference/equipment"),
    ("How long should water boil when the filter breaks?", {"version": "next"}, SITE_URL + "docs/next/guide/water"),
    ("Que vérifie le chef d'équipe avant que l'équipe aille dormir ?", {"version": "current", "locale": "fr"},
     SITE_URL + "fr/docs/next/guide/setup"),
])
def test_source_and_citation_urls_of_answers_resolve_in_the_build(handbook, client, answers, question, fields,
                                                                   expected):
    _, build, _, _ = handbook
    body = answers(client, question, **fields)
    assert not body["refused"], body["answer"]
    urls = [source["url"] for source in body["sources"]]
    urls += HREF.findall(body["answer_html"])
    urls += [s["url"] for s in body["suggestions"]]
    assert any(url.startswith(expected) for url in urls), urls
    assert {url: why for url in urls if (why := docusaurus_site.check_url(url.split(":~:")[0], build, SITE_URL))} \
        == {}


def test_the_props_of_a_component_and_an_imported_partial_are_searchable(handbook):
    first_aid = Chunk.objects.filter(book__slug="field-handbook--1-0", document__path="guide/first-aid.mdx")
    assert any("Step:" in text for text in first_aid.values_list("text", flat=True))
    setup = Chunk.objects.filter(book__slug="field-handbook--1-0", document__path="guide/setup.mdx")
    assert setup.filter(anchor="safety-checklist").exists()
