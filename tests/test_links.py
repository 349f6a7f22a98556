"""Book-relative links become the book's section URLs at ingestion (ingestion/reading/links.py): end to end through
`manage.py ingest` on a tiny real book, plus the rewriting rules on their own and the pre-pass's slugs
against the parser's on the real corpora."""

from __future__ import annotations

import json

import pytest

from ingestion.models import Chunk, Document
from ingestion.reading.discovery import discover, read_source
from ingestion.reading.documents import Issue
from ingestion.reading.links import BookLinks, page_slug
from ingestion.reading.parsing import parse_document
from tests.conftest import run_command
from tests.support.shared_data import shared_corpus

BASE = "https://example.org/docs"

INGEST_PAGE = """# Ingest a book

## Options

The ingest command reads a folder of Markdown pages, chunks every page by its headings and stores
the passages with their vectors, so that questions can be answered from the book.
"""

REDIRECTS_PAGE = """# Redirects

## Redirect options {#options}

The redirects plugin keeps old page addresses working after a page moves to another address.
"""

INTRO_PAGE = """# Introduction

This book explains how bookchat indexes a book and answers questions from it with citations.
"""

LINKING_PAGE = """# Linking pages

Read [Ingest a book](../using/01-ingest.md) first, then [the redirect options](../api/redirects.mdx#options),
the [introduction](/intro.md) and [this page's own section](#more). A [missing page](./gone.md) is no link,
a [reference link][ingest] becomes an inline one, and [the web](https://example.com/a.md) stays as it is.

```md
A [code link](../using/01-ingest.md) is an example, not a link.
```

## More

Inline code like `[not a link](../using/01-ingest.md)` stays as written too.

[ingest]: ../using/01-ingest.md#options
"""


def ingest(*args: str) -> tuple[int, dict]:
    code, out, _ = run_command("ingest", *args, "--json")
    return code, json.loads(out)


def make_book(book_dir) -> None:
    book_dir.write("using/01-ingest.md", INGEST_PAGE)
    book_dir.write("api/redirects.mdx", REDIRECTS_PAGE)
    book_dir.write("intro.md", INTRO_PAGE)
    book_dir.write("guides/linking.md", LINKING_PAGE)


def stored_text(path: str) -> str:
    return "\n\n".join(Chunk.objects.filter(book__slug="links", document__path=path).order_by("ordinal")
                       .values_list("text", flat=True))


# -- end to end ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_book_relative_links_are_stored_as_the_books_section_urls(book_dir):
    make_book(book_dir)
    code, report = ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    assert code == 0 and report["errors"] == []
    text = stored_text("guides/linking.md")
    assert f"[Ingest a book]({BASE}/using/ingest)" in text
    assert f"[the redirect options]({BASE}/api/redirects#options)" in text
    assert f"[introduction]({BASE}/intro)" in text
    assert f"[this page's own section]({BASE}/guides/linking#more)" in text
    assert f"[reference link]({BASE}/using/ingest#options)" in text
    assert "[the web](https://example.com/a.md)" in text
    assert "A missing page is no link" in text and "gone.md" not in text
    assert "A [code link](../using/01-ingest.md) is an example" in text
    assert "`[not a link](../using/01-ingest.md)`" in text
    assert {"file": "guides/linking.md", "line": 4, "message": "link to ./gone.md: no such page in the book; "
            "its text is kept without the link"} in report["warnings"]
    assert Document.objects.get(book__slug="links", path="guides/linking.md").links_to == {
        "using/01-ingest.md": f"{BASE}/using/ingest", "api/redirects.mdx": f"{BASE}/api/redirects",
        "intro.md": f"{BASE}/intro", "guides/gone.md": ""}


@pytest.mark.django_db
def test_reingest_of_a_book_with_links_embeds_nothing(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    code, report = ingest(str(book_dir.root), "--book", "links")
    assert code == 0
    assert report["chunks_embedded"] == 0 and report["files_unchanged"] == 4 and report["files_indexed"] == 0


@pytest.mark.django_db
def test_a_new_slug_for_the_linked_page_updates_the_link_without_embedding(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    linking_ids = set(Chunk.objects.filter(document__path="guides/linking.md").values_list("id", "embedding_key"))
    book_dir.write("using/01-ingest.md", "---\nslug: /guides/ingesting\n---\n\n" + INGEST_PAGE)
    code, report = ingest(str(book_dir.root), "--book", "links")
    assert code == 0 and report["errors"] == []
    assert report["chunks_embedded"] == 0
    assert report["files_indexed"] == 2 and report["files_unchanged"] == 2  # the moved page and the one linking it
    text = stored_text("guides/linking.md")
    assert f"[Ingest a book]({BASE}/guides/ingesting)" in text
    assert f"[reference link]({BASE}/guides/ingesting#options)" in text
    assert "/using/ingest" not in text
    assert set(Chunk.objects.filter(document__path="guides/linking.md")
               .values_list("id", "embedding_key")) == linking_ids


@pytest.mark.django_db
def test_a_page_added_where_a_link_pointed_turns_its_text_into_a_link(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    book_dir.write("guides/gone.md", "# Gone\n\nThis page was missing when the book was first indexed.\n")
    code, report = ingest(str(book_dir.root), "--book", "links")
    assert code == 0
    assert report["chunks_embedded"] == Chunk.objects.filter(document__path="guides/gone.md").count()
    assert report["files_indexed"] == 2  # the new page and the one linking it
    assert f"[missing page]({BASE}/guides/gone)" in stored_text("guides/linking.md")


@pytest.mark.django_db
def test_one_page_ingested_alone_links_to_the_stored_pages(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    page = book_dir.write("guides/linking.md", LINKING_PAGE.replace("Read [Ingest", "First read [Ingest"))
    code, report = ingest(str(page), "--book", "links")
    assert code == 0 and report["files_indexed"] == 1
    text = stored_text("guides/linking.md")
    assert f"First read [Ingest a book]({BASE}/using/ingest)" in text
    assert f"[introduction]({BASE}/intro)" in text


@pytest.mark.django_db
def test_pages_stored_before_links_were_rewritten_are_rewritten_once_without_embedding(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "links", "--base-url", BASE)
    Document.objects.filter(book__slug="links").update(links_to=None)
    Chunk.objects.filter(document__path="guides/linking.md").update(text="old text")
    code, report = ingest(str(book_dir.root), "--book", "links")
    assert code == 0 and report["chunks_embedded"] == 0 and report["files_indexed"] == 4
    assert f"[introduction]({BASE}/intro)" in stored_text("guides/linking.md")
    _, report = ingest(str(book_dir.root), "--book", "links")
    assert report["files_unchanged"] == 4


# -- the rules on their own -----------------------------------------------------------------------
def rewrite(markdown: str, *, rel_path: str = "guides/page.md", urls: dict | None = None) -> tuple[str, object]:
    book = BookLinks(urls if urls is not None else {"intro.md": f"{BASE}/intro", "guides/setup.md": f"{BASE}/setup",
                                                    "guides/my page.md": f"{BASE}/guides/my page"})
    parsed = parse_document(markdown, rel_path=rel_path)
    links = book.page(rel_path=rel_path, url=f"{BASE}/guides/page", definitions=parsed.link_definitions)
    return "\n\n".join(links.rewrite(block.text) for block in parsed.blocks), links


@pytest.mark.parametrize(("markdown", "expected"), [
    ("See [setup](setup.md).", f"See [setup]({BASE}/setup)."),
    ("See [intro](intro.md), found from the root first.", f"See [intro]({BASE}/intro), found from the root first."),
    ("See [intro](../intro.md#why \"Why\").", f'See [intro]({BASE}/intro#why "Why").'),
    ("See [`intro`](./../intro.md) and [![logo](logo.png)](/intro.md).",
     f"See [`intro`]({BASE}/intro) and [![logo](logo.png)]({BASE}/intro)."),
    ("See [a page](<./my page.md>) and [b](my%20page.md).",
     f"See [a page]({BASE}/guides/my%20page) and [b]({BASE}/guides/my%20page)."),
    ("An image ![intro](./intro.md) and an escaped \\[link](./setup.md) stay.",
     "An image ![intro](./intro.md) and an escaped \\[link](./setup.md) stay."),
    ("Mail [us](mailto:a@example.org), [site](@site/docs/intro.md), [up](../other/), [top](#).",
     "Mail [us](mailto:a@example.org), [site](@site/docs/intro.md), [up](../other/), [top](#)."),
    ("[text [inner](#x) more] and [unknown][label].",
     f"[text [inner]({BASE}/guides/page#x) more] and [unknown][label]."),
    ("[Setup] is a shortcut.\n\n[setup]: ./setup.md", f"[Setup]({BASE}/setup) is a shortcut."),
])
def test_link_rewriting_rules(markdown, expected):
    assert rewrite(markdown)[0] == expected


def test_links_to_files_outside_the_book_keep_their_text_and_are_reported():
    text, links = rewrite("One [x](../../outside.md) and\n[two][y].\n\n[y]: nowhere.mdx")
    assert text == "One x and\ntwo."
    assert links.issues("One [x](../../outside.md) and\n[two][y].\n\n[y]: nowhere.mdx") == [
        Issue("guides/page.md", 1, "link to ../../outside.md: no such page in the book; its text is kept without "
                                   "the link"),
        Issue("guides/page.md", 4, "link to nowhere.mdx: no such page in the book; its text is kept without the link"),
    ]
    assert links.links_to == {"../outside.md": "", "nowhere.mdx": "", "guides/nowhere.mdx": ""}


def test_a_stored_page_is_rechecked_only_when_a_page_it_links_to_changes_url():
    book = BookLinks({"intro.md": f"{BASE}/intro"})
    assert book.still_resolve({}) and book.still_resolve({"intro.md": f"{BASE}/intro", "gone.md": ""})
    assert not book.still_resolve({"intro.md": f"{BASE}/introduction"})
    assert not book.still_resolve({"intro.md": ""})
    assert not book.still_resolve(None)


@pytest.mark.needs("shared-data")
def test_the_pre_pass_slug_is_the_parsers_on_every_page_of_the_real_corpora():
    for name in ("docusaurus-docs", "physical-ai-book", "physical-ai-book-2"):
        for file in discover(shared_corpus(name)).files:
            text = read_source(file, max_bytes=2_000_000).text
            assert page_slug(text, file.rel_path) == parse_document(text, rel_path=file.rel_path).slug, file.rel_path
