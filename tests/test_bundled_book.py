"""The bundled book in docs/ is bookchat's own manual, in Docusaurus form, and indexes cleanly."""

from __future__ import annotations

import pytest

from ingestion.models import Chunk, Document
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


def test_manual_indexes_without_errors_or_warnings(manual_book):
    assert manual_book["errors"] == []
    assert manual_book["warnings"] == []
    assert Document.objects.filter(book__slug="bookchat-manual").count() >= 8


def test_manual_uses_the_docusaurus_features_it_documents():
    sources = {p.relative_to(REPO / "docs").as_posix(): p.read_text() for p in (REPO / "docs").rglob("*.md*")}
    text = "\n".join(sources.values())
    assert any(name.endswith("_category_.json") for name in (p.name for p in (REPO / "docs").rglob("*")))
    assert all(s.startswith("---\n") for s in sources.values()), "every page has front matter"
    for construct in ("<Tabs", "<TabItem", ":::tip", ":::note", "<details>", "{#", "```bash", "| --- |"):
        assert construct in text or construct.replace(" --- ", "---") in text, construct


@pytest.mark.parametrize(("topic", "page"), [
    ("ingest", "using/01-ingest.md"), ("configuration", "operating/configuration.md"),
    ("install", "getting-started/01-install.mdx"), ("widget", "using/05-widget.mdx"),
    ("rest api", "using/04-rest-api.mdx"), ("admin", "operating/admin-and-review.md"),
    ("run", "getting-started/02-run.md"), ("asking", "using/03-asking-questions.md"),
])
def test_manual_has_a_page_for_each_topic(manual_book, topic, page):
    document = Document.objects.get(book__slug="bookchat-manual", path=page)
    assert Chunk.objects.filter(document=document).count() >= 2
    assert topic.split()[0] in (document.title + document.path).lower()
