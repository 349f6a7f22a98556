"""`ingest BOOK_ROOT` of an mdBook (``book.toml``) and of an MkDocs site (``mkdocs.yml``): read as the generator
builds them (``ingestion.reading.conventions``). Small fixture books under tests/data, embedded for real; the MkDocs
one is also built with MkDocs itself, and every URL and anchor bookchat stored must exist in that build."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ingestion.models import Book, Chunk, Document
from tests.conftest import REPO, run_command

pytestmark = pytest.mark.django_db

MDBOOK = REPO / "tests" / "data" / "mdbook_site"
MKDOCS = REPO / "tests" / "data" / "mkdocs_site"


def ingest(path: Path, *args: str) -> dict:
    code, out, err = run_command("ingest", str(path), "--json", *args)
    report = json.loads(out)
    assert code == 0, (report, err)
    return report


@pytest.fixture(autouse=True)
def small_passages(settings):
    """A passage per section, so that each heading's anchor is stored (the fixture's sections are short)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CHUNK_TARGET_TOKENS": 20, "CHUNK_MIN_TOKENS": 1,
                         "CHUNK_OVERLAP_TOKENS": 0}


@pytest.fixture
def mdbook_copy(tmp_path) -> Path:
    return Path(shutil.copytree(MDBOOK, tmp_path / "pilot"))


def test_an_mdbook_is_read_from_its_root_as_mdbook_builds_it(mdbook_copy, client):
    report = ingest(mdbook_copy)
    assert report["errors"] == [] and not [w for w in report["warnings"] if "not inlined" in w["message"]]
    book = Book.objects.get(slug=report["book"])
    assert (book.slug, book.title, book.generator) == ("harbour-pilots-handbook", "Harbour Pilot's Handbook", "mdbook")
    pages = dict(book.documents.values_list("path", "url"))
    assert pages == {"README.md": "/pilot/index.html", "guide/boarding.md": "/pilot/guide/boarding.html",
                     "guide/ladders.md": "/pilot/guide/ladders.html", "tides.md": "/pilot/tides.html",
                     "glossary.md": "/pilot/glossary.html"}, "SUMMARY.md and unlisted files are not pages"
    anchors = set(Chunk.objects.filter(document__path="guide/boarding.md").values_list("url", flat=True))
    assert {"/pilot/guide/boarding.html#safety-first", "/pilot/guide/boarding.html#safety-first-1",
            "/pilot/guide/boarding.html#ladder-check"} <= anchors
    ladders = " ".join(Chunk.objects.filter(document__path="guide/ladders.md").values_list("text", flat=True))
    assert "let freeboard" in ladders and "fn main" not in ladders, "hidden Rust lines are not shown"
    tides = " ".join(Chunk.objects.filter(document__path="tides.md").values_list("text", flat=True))
    assert "forty minutes" in tides, "an include from outside src/ is inlined"
    outline = client.get(f"/api/v1/books/{book.slug}").json()["outline"]
    assert [p["path"] for chapter in outline for p in chapter["pages"]] == \
        ["README.md", "guide/boarding.md", "guide/ladders.md", "tides.md", "glossary.md"], "SUMMARY.md's order"


def test_reingesting_an_mdbook_embeds_nothing_and_an_edited_include_reindexes_its_page_only(mdbook_copy):
    ingest(mdbook_copy)
    again = ingest(mdbook_copy / "src")  # its src/ folder is read as the book it belongs to
    assert again["book"] == "harbour-pilots-handbook"
    assert (again["files_indexed"], again["chunks_embedded"]) == (0, 0)
    (mdbook_copy / "listings" / "tide-table.md").write_text("Low water at the quay comes an hour after the mouth.\n")
    edited = ingest(mdbook_copy)
    assert edited["files_indexed"] == 1 and edited["files_unchanged"] == 4


def test_a_bad_book_toml_still_indexes_with_a_warning(mdbook_copy):
    (mdbook_copy / "book.toml").write_bytes(b"\x00\xff[book\ntitle = ")
    report = ingest(mdbook_copy)
    assert report["errors"] == [] and any(w["file"] == "book.toml" for w in report["warnings"])
    assert Book.objects.get(slug=report["book"]).generator == "mdbook"


@pytest.fixture
def mkdocs_copy(tmp_path) -> Path:
    return Path(shutil.copytree(MKDOCS, tmp_path / "handbook"))


def test_an_mkdocs_site_is_read_from_its_root_and_every_url_exists_in_its_real_build(mkdocs_copy, client):
    report = ingest(mkdocs_copy)
    assert report["errors"] == []
    book = Book.objects.get(slug=report["book"])
    assert (book.title, book.generator) == ("Fixture Handbook", "mkdocs")
    pages = dict(book.documents.values_list("path", "url"))
    assert "drafts/wip.md" not in pages and ".hidden.md" not in pages and "templates/page.md" not in pages
    assert pages["guide/install.md"] == "https://example.org/handbook/guide/install/"
    assert pages["blog/posts/new-moorings.md"] == "https://example.org/handbook/blog/2025/03/07/new-moorings-for-pilot-boats/"
    assert pages["blog/posts/tide-gauge.md"] == "https://example.org/handbook/blog/2024/11/20/gauge/"

    built = mkdocs_copy / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(built)],
                            cwd=mkdocs_copy, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    missing = []
    for url in {*pages.values(), *Chunk.objects.filter(book=book).values_list("url", flat=True)}:
        path, _, anchor = url.removeprefix("https://example.org/handbook/").partition("#")
        page = built / path / "index.html" if path == "" or path.endswith("/") else built / path
        if not page.is_file():
            missing.append(f"{url}: no page {page.relative_to(built)}")
        elif anchor and not re.search(rf'\bid="{re.escape(anchor)}"', page.read_text(encoding="utf-8")):
            missing.append(f"{url}: no #{anchor} in the page")
    assert missing == [], missing

    install = " ".join(Chunk.objects.filter(document__path="guide/install.md").values_list("text", flat=True))
    assert "=== " not in install and "--8<--" not in install, "tabs and snippets are read as the site renders them"
    outline = client.get(f"/api/v1/books/{book.slug}").json()["outline"]
    order = [p["path"] for chapter in outline for p in chapter["pages"]]
    assert order[0] == "index.md", order


def test_reingesting_an_mkdocs_site_embeds_nothing_and_an_edited_snippet_reindexes_its_pages(mkdocs_copy):
    ingest(mkdocs_copy)
    again = ingest(mkdocs_copy)
    assert (again["files_indexed"], again["chunks_embedded"]) == (0, 0)
    notice = mkdocs_copy / "includes" / "notice.md"
    notice.write_text(notice.read_text() + "\nA new sentence in the shared notice.\n")
    edited = ingest(mkdocs_copy)
    assert edited["files_indexed"] == 1, "only the page that includes the notice"


def test_a_page_stored_at_an_older_url_moves_to_its_url_on_the_next_ingest_without_embedding(mkdocs_copy):
    """A page's URL rules can change with a newer bookchat (posts of Material's blog were once linked at their
    file's path): the next ingest re-stores such a page at its URL, and its passages keep their vectors."""
    report = ingest(mkdocs_copy)
    post = Document.objects.get(book__slug=report["book"], path="blog/posts/tide-gauge.md")
    right = post.url
    old = "https://example.org/handbook/blog/posts/tide-gauge/"
    Document.objects.filter(pk=post.pk).update(url=old, slug="blog/posts/tide-gauge/")
    Chunk.objects.filter(document=post).update(url=old)
    again = ingest(mkdocs_copy)
    assert (again["files_indexed"], again["chunks_embedded"]) == (1, 0)
    post.refresh_from_db()
    assert post.url == right and set(Chunk.objects.filter(document=post).values_list("url", flat=True)) == {right}
