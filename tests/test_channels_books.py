"""chat.channels.books: a book as clients list it (its editions inside it: versions newest first, its own locale
first, the figures and threshold of its latest edition), its pages, and a page rebuilt from its passages (each
overlap with the passage before removed, a heading written once). Rows are made by hand."""

from __future__ import annotations

import pytest

from chat.channels.books import book_list, book_pages, page_markdown
from chat.models import ScopeCalibration
from ingestion.models import Book, Chunk, Document
from tests.test_book_roles import book

pytestmark = pytest.mark.django_db


def page(of: Book, path: str, **fields) -> Document:
    return Document.objects.create(book=of, path=path, title=fields.pop("title", path), content_hash="h", **fields)


def passage(document: Document, ordinal: int, heading_path: str, text: str) -> Chunk:
    return Chunk.objects.create(
        id=f"{document.book.slug}-{document.path}-{ordinal}", book=document.book, document=document, ordinal=ordinal,
        heading_path=heading_path, text=text, char_start=0, char_end=len(text), line_start=1, line_end=1,
        token_count=1, embedding_key=f"{document.pk}-{ordinal}", dimensions=3, embedding=[0.0, 0.0, 1.0])


@pytest.fixture
def site() -> Book:
    """Version 2.0 in English (the root, latest) with a French translation, and version 1.0 in English."""
    root = book("site", version="2.0", version_label="2.0", locale="en", base_url="https://site.example/",
                folders={"guide": {"label": "Guide"}})
    book("site-fr", edition_of=root, version="2.0", version_label="2.0", locale="fr",
         base_url="https://site.example/fr/")
    old = book("site-1-0", edition_of=root, version="1.0", version_label="1.0", version_path="1.0",
               version_rank=1, latest=False, locale="en", base_url="https://site.example/1.0/")
    page(root, "intro.md")
    passage(page(root, "guide/install.md", category="Guide"), 0, "Guide > Install", "Run the installer.")
    page(old, "intro.md")
    book("elsewhere")
    ScopeCalibration.objects.create(book=root, threshold=0.412345)
    return root


def test_a_book_lists_its_editions_versions_newest_first_and_its_own_locale_first(site):
    [entry] = book_list(slug="site")
    assert (entry["slug"], entry["base_url"], entry["pages"], entry["chunks"]) == ("site", "https://site.example/",
                                                                                    2, 1)
    assert entry["versions"] == ["2.0", "1.0"]
    assert entry["locales"] == ["en", "fr"]
    assert entry["scope_threshold"] == 0.4123
    assert entry["chapters"] == ["Guide", ""]  # the latest edition's, in sidebar order
    assert {(e["version"], e["locale"], e["latest"], e["pages"]) for e in entry["editions"]} == {
        ("2.0", "en", True, 2), ("2.0", "fr", True, 0), ("1.0", "en", False, 1)}


def test_an_edition_is_never_listed_as_a_book_of_its_own(site):
    listed = {entry["slug"] for entry in book_list()}
    assert "site" in listed and not listed & {"site-fr", "site-1-0"}
    assert book_list(slug="site-fr") == []


def test_a_book_without_versions_names_none_and_its_threshold_is_zero_until_calibrated():
    book("plain")
    [entry] = book_list(slug="plain")
    assert entry["versions"] == [] and entry["scope_threshold"] == 0.0
    assert [e["version"] for e in entry["editions"]] == [""]


def test_book_pages_of_a_book_include_its_editions_by_book_then_path_up_to_the_limit(site):
    pages = book_pages(slug="site")
    assert [(p.book.slug, p.path) for p in pages] == [("site", "guide/install.md"), ("site", "intro.md"),
                                                      ("site-1-0", "intro.md")]
    assert len(book_pages(slug="site", limit=1)) == 1


def test_page_markdown_removes_each_overlap_and_writes_each_heading_once():
    document = page(book("notes"), "guide/install.md", title="Install", category="Guide")
    first = "Download the installer from the releases page. Then run it with the default options selected."
    passage(document, 0, "Guide > Install", first)
    passage(document, 1, "Guide > Install", "with the default options selected. Restart when it asks.")
    passage(document, 2, "Guide > Install > On Linux", "## On Linux\n\nUse the package manager.")
    passage(document, 3, "Guide > Install > On Linux > Checking", "Run `tool --version`.")
    assert page_markdown(document) == (
        f"# Install\n\n{first}\n\nRestart when it asks.\n\n## On Linux\n\nUse the package manager.\n\n"
        "### Checking\n\nRun `tool --version`.\n")


def test_page_markdown_keeps_a_short_repeat_and_titles_a_passage_without_headings():
    document = page(book("short"), "faq.md", title="FAQ")
    passage(document, 0, "", "Yes, it works.")
    passage(document, 1, "", "it works. It also runs offline.")  # under 20 characters: not an overlap
    assert page_markdown(document) == "# FAQ\n\nYes, it works.\n\nit works. It also runs offline.\n"
