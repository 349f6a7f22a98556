"""A Docusaurus site ingested from its root: the config's title and URLs, versions and locales as editions of
one book, incremental re-indexing across versions, and the API's ``version``/``locale``.

The site here is written by hand, small and with a config of plain literals, so it costs seconds and reads
the same with or without node; the real Docusaurus build is proven in test_docusaurus_build.
"""

from __future__ import annotations

import json
import shutil

import pytest

from chat.pipeline.editions import resolve_book
from ingestion.models import Book
from tests.conftest import run_command
from tests.support.versioned_site import SETUP_CURRENT, write_versioned_site

pytestmark = pytest.mark.django_db

@pytest.fixture
def site(tmp_path):
    return write_versioned_site(tmp_path / "site")


def ingest(*args: str) -> tuple[int, dict]:
    code, out, _ = run_command("ingest", *args, "--json")
    return code, json.loads(out)


def editions(report: dict) -> dict[str, dict]:
    return {book["slug"]: book for book in report["books"]}


def test_a_site_root_is_indexed_with_its_title_urls_versions_and_locales(site):
    code, report = ingest(str(site))
    assert code == 0, report["errors"]
    assert report["site"]["title"] == "Field Notes"
    assert report["site"]["url"] == "https://notes.example.org/notes/"
    books = editions(report)
    assert set(books) == {"field-notes", "field-notes--2-0", "field-notes--fr"}
    current, old, french = books["field-notes"], books["field-notes--2-0"], books["field-notes--fr"]
    assert (current["version"], current["latest"], current["base_url"]) == (
        "current", False, "https://notes.example.org/notes/guide/next")
    assert (old["version"], old["latest"], old["base_url"]) == ("2.0", True, "https://notes.example.org/notes/guide")
    assert (french["locale"], french["base_url"]) == ("fr", "https://notes.example.org/notes/fr/guide/next")
    root = Book.objects.get(slug="field-notes")
    assert root.title == "Field Notes" and root.edition_of is None
    assert set(root.editions.values_list("slug", flat=True)) == {"field-notes--2-0", "field-notes--fr"}
    # trailingSlash: true, as the built site links its pages.
    old_book = Book.objects.get(slug="field-notes--2-0")
    assert old_book.documents.get(path="setup.md").url == "https://notes.example.org/notes/guide/setup/"
    assert old_book.documents.get(path="intro.md").url == "https://notes.example.org/notes/guide/intro/"
    # The translation replaces its page; the untranslated one falls back to English, as Docusaurus does.
    fr = Book.objects.get(slug="field-notes--fr")
    assert "Carnet" in fr.documents.get(path="intro.md").title
    assert fr.documents.get(path="setup.md").url == "https://notes.example.org/notes/fr/guide/next/setup/"
    # Lexical search in French stems and drops stop words the French way; the English editions keep english.
    assert (fr.search_config, Book.objects.get(slug="field-notes").search_config) == ("french", "english")
    assert (fr.language, Book.objects.get(slug="field-notes").language) == ("fr", "en"), "a locale is its language"
    vector = str(fr.chunks.get(document__path="intro.md", ordinal=0).search_vector)
    assert "'échantillon'" in vector and "'le'" not in vector and "'la'" not in vector
    # The same text in two versions is embedded once: 2.0's intro reuses current's vectors.
    assert books["field-notes--2-0"]["chunks_embedded"] < books["field-notes--2-0"]["chunks_added"]


def test_a_second_run_embeds_nothing_and_a_new_version_embeds_only_what_it_changed(site):
    ingest(str(site))
    code, again = ingest(str(site))
    assert code == 0 and again["chunks_embedded"] == 0
    assert again["files_unchanged"] == again["files_seen"]
    # Cut 3.0 from current, with one page changed: only that page's new passage is embedded.
    shutil.copytree(site / "docs", site / "versioned_docs/version-3.0")
    (site / "versioned_docs/version-3.0/setup.md").write_text(
        SETUP_CURRENT + "\nRecord the benchmark readings in the notebook's last column.\n", encoding="utf-8")
    (site / "versions.json").write_text(json.dumps(["3.0", "2.0"]), encoding="utf-8")
    code, cut = ingest(str(site))
    assert code == 0, cut["errors"]
    books = editions(cut)
    assert books["field-notes--3-0"]["latest"] and not books["field-notes--2-0"]["latest"]
    assert books["field-notes--3-0"]["base_url"] == "https://notes.example.org/notes/guide"
    assert books["field-notes--2-0"]["base_url"] == "https://notes.example.org/notes/guide/2.0"
    assert cut["chunks_embedded"] == books["field-notes--3-0"]["chunks_embedded"] == 1
    assert Book.objects.get(slug="field-notes--2-0").documents.get(path="setup.md").url.endswith("/guide/2.0/setup/")


def test_flags_still_override_the_config(site):
    code, report = ingest(str(site), "--book", "notes", "--title", "Survey notes", "--base-url",
                          "https://docs.example.com/")
    assert code == 0
    books = editions(report)
    assert set(books) == {"notes", "notes--2-0", "notes--fr"}
    assert books["notes--2-0"]["base_url"] == "https://docs.example.com/guide"
    assert Book.objects.get(slug="notes--fr").title == "Survey notes"


def test_a_broken_versions_file_is_reported_and_the_current_docs_still_indexed(site):
    (site / "versions.json").write_text("{not json", encoding="utf-8")
    code, report = ingest(str(site))
    assert code == 0
    assert set(editions(report)) == {"field-notes", "field-notes--fr"}
    assert any(w["file"] == "versions.json" for w in report["warnings"])


def test_a_version_without_its_folder_is_reported_and_the_others_indexed(site):
    (site / "versions.json").write_text(json.dumps(["2.0", "1.0"]), encoding="utf-8")
    code, report = ingest(str(site))
    assert code == 0
    assert "field-notes--1-0" not in editions(report)
    assert any("version '1.0'" in w["message"] for w in report["warnings"])


def test_a_version_dropped_from_the_site_is_removed_with_prune(site):
    ingest(str(site))
    (site / "versions.json").write_text("[]", encoding="utf-8")
    _, kept = ingest(str(site))
    assert Book.objects.filter(slug="field-notes--2-0").exists()
    assert any("--prune" in w["message"] for w in kept["warnings"])
    _, pruned = ingest(str(site), "--prune")
    assert not Book.objects.filter(slug="field-notes--2-0").exists()


# -- asking a version ------------------------------------------------------------------------------------
@pytest.fixture
def indexed_site(site, no_llm):
    code, report = ingest(str(site))
    assert code == 0
    return report


def ask(client, **body):
    return client.post("/api/v1/ask", data=json.dumps({"book": "field-notes", **body}),
                       content_type="application/json")


def test_a_question_is_answered_from_the_latest_version_unless_it_names_one(client, indexed_site):
    question = "How often should the level be calibrated?"
    latest = ask(client, question=question).json()
    assert (latest["book"], latest["version"]) == ("field-notes", "2.0")
    assert all(s["url"].startswith("https://notes.example.org/notes/guide/") and "/next/" not in s["url"]
               for s in latest["sources"])
    assert "week" in latest["answer"]
    for name in ("current", "next", "Next"):
        nxt = ask(client, question=question, version=name).json()
        assert nxt["version"] == "current"
        assert all("/guide/next/" in s["url"] for s in nxt["sources"])
        assert "morning" in nxt["answer"]


def test_a_question_in_french_is_answered_from_the_translation(client, indexed_site):
    body = ask(client, question="Que faut-il noter au début de chaque visite ?", locale="fr-FR",
               version="next").json()
    assert (body["version"], body["locale"]) == ("current", "fr")
    assert body["sources"][0]["url"].startswith("https://notes.example.org/notes/fr/guide/next/")
    # A locale the book has no translation for is answered in the default locale.
    assert ask(client, question="What is recorded at each visit?", locale="de").json()["locale"] == "en"


def test_naming_a_site_reads_it_and_its_editions_in_one_query(indexed_site, django_assert_num_queries):
    # A search resolves its book on every keystroke: one round trip, whichever edition is asked for.
    for version, locale, wanted in ((None, None, "2.0"), ("next", "fr-FR", "current"), ("2.0", "de", "2.0")):
        with django_assert_num_queries(1):
            book = resolve_book("field-notes", version=version, locale=locale)
        assert book.version == wanted and book.root.slug == "field-notes"
    assert resolve_book("field-notes--fr").locale == "fr", "an edition named by its own slug"


@pytest.mark.parametrize("version, status, error", [
    ("9.9", 404, "unknown_version"), (2, 400, "invalid_type"), ("", 400, None), ("x" * 101, 400, "too_long"),
])
def test_a_bad_version_is_refused_with_a_clear_error(client, indexed_site, version, status, error):
    response = ask(client, question="What is recorded at each visit?", version=version)
    if version == "":  # an empty string is no version: the latest answers
        assert response.status_code == 200
        return
    assert response.status_code == status, response.content
    body = response.json()
    assert body["field"] == "version" and (error is None or body["error"] == error)
    if error == "unknown_version":
        assert "2.0" in body["message"] and "current" in body["message"]


def test_books_lists_a_sites_versions_and_locales_once(client, indexed_site):
    books = {b["slug"]: b for b in client.get("/api/v1/books").json()["books"]}
    assert "field-notes--2-0" not in books and "field-notes--fr" not in books
    notes = books["field-notes"]
    assert notes["versions"] == ["current", "2.0"]
    assert notes["locales"] == ["en", "fr"]
    assert notes["base_url"] == "https://notes.example.org/notes/guide"  # the latest version's
    latest = [e for e in notes["editions"] if e["latest"]]
    assert [(e["version"], e["locale"]) for e in latest] == [("2.0", "en")]
    assert {(e["version"], e["path"], e["locale"]) for e in notes["editions"]} == {
        ("current", "next", "en"), ("2.0", "", "en"), ("current", "next", "fr")}
