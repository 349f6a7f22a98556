"""Search as a reader types (``GET /api/v1/search``, ``chat.pipeline.typeahead``) on the bundled manual: half-written
words, pages grouped with their sections and anchors, marked snippets, bad queries, keys and origins, its own
rate limit, and the audit trail."""

from __future__ import annotations

import html
import re
import uuid
from urllib.parse import urlencode

import pytest
from django.db import connection

from audit.models import AuditLog
from chat.models import ApiKey
from chat.pipeline.typeahead import _vectors, marked_html, read_typed, snippet
from ingestion.indexing.lexicon import query_terms
from ingestion.models import Book

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SEARCH = "/api/v1/search"
SITE = "https://docs.example.org"


@pytest.fixture(autouse=True)
def search_settings(manual_book, no_llm):
    """The manual is indexed, with a generous time budget (``no_llm``)."""


def search(client, q: str, **params):
    return client.get(SEARCH, {"q": q, "book": BOOK, **params})


def test_a_half_written_word_finds_the_sections_that_use_the_whole_one(client):
    response = search(client, "publishable wid")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["matched"] == "words" and body["book"] == BOOK
    marked = {s["snippet"][a:b].lower() for page in body["pages"] for s in page["sections"] for a, b in s["marks"]}
    assert any(word.startswith("widget") for word in marked), marked
    assert "Chat widget for docs sites" in [page["title"] for page in body["pages"][:3]]
    # "covered" is the book's scope check, calibrated on questions: a two-word fragment sits near its threshold
    # (on which side moves with the manual's pages); the words typed out are well inside.
    assert search(client, "publishable widget key").json()["covered"]


def test_a_word_still_being_typed_is_not_embedded_until_it_stands_alone(client):
    """The meaning (what is embedded) leaves out a last word of two letters, one the book lacks, or one that begins a
    word the book uses in more passages ("cat" while "category" is typed), so the vector of the words before it is
    reused."""
    book = Book.objects.get(slug=BOOK)
    with connection.cursor() as cursor:
        cursor.execute("SELECT a.lexeme, b.lexeme FROM ingestion_lexemecount a JOIN ingestion_lexemecount b "
                       "ON b.book_id = a.book_id AND b.lexeme LIKE a.lexeme || '_%%' AND b.chunks > a.chunks "
                       "WHERE a.book_id = %s AND length(a.lexeme) >= 4 AND a.lexeme ~ '^[a-z]+$' "
                       "ORDER BY b.chunks DESC LIMIT 50", [book.pk])
        # A pair whose shorter word, typed, is that word to the book (stemming leaves it as it is).
        short, longer = next((a, b) for a, b in cursor.fetchall() if query_terms(cursor, book.pk, a).get(a, (0,))[0])
        cursor.execute("SELECT lexeme FROM ingestion_lexemecount WHERE book_id = %s AND lexeme ~ '^[a-z]{4,}$' "
                       "ORDER BY chunks DESC LIMIT 1", [book.pk])
        (commonest,) = cursor.fetchone()
        assert read_typed(cursor, book.pk, f"answers {short}").meaning == "answers", (short, longer)
        assert read_typed(cursor, book.pk, "answers qwzx").meaning == "answers", "a word the book lacks"
        assert read_typed(cursor, book.pk, "answers to").meaning == "answers", "two letters begin too many words"
        assert read_typed(cursor, book.pk, f"answers {commonest}").meaning == f"answers {commonest}"
        assert read_typed(cursor, book.pk, short).meaning == short, "a first word is embedded as it is"
    # While the last word is typed, every keystroke's search reuses one vector: the words before it.
    _vectors.clear()
    for typed in ("publishable wid", "publishable widg", "publishable widge"):
        assert search(client, typed).status_code == 200
    assert [text for _, text in _vectors] == ["publishable"]


def test_results_are_pages_best_first_each_with_its_sections_and_their_anchors(client):
    body = search(client, "ingest a folder").json()
    pages = body["pages"]
    assert 1 <= len(pages) <= 5 and len({p["document"] for p in pages}) == len(pages), "a page appears once"
    for page in pages:
        assert 1 <= len(page["sections"]) <= 3
        assert all(s["url"].startswith(page["url"]) for s in page["sections"])
    assert any("#" in s["url"] for page in pages for s in page["sections"]), "section URLs carry anchors"
    best = [page["sections"][0]["score"] for page in pages]
    assert best == sorted(best, reverse=True), "pages in the order of their best section"
    assert len(search(client, "ingest a folder", limit="2").json()["pages"]) <= 2


def test_marks_are_offsets_of_whole_words_and_the_html_only_adds_mark_tags(client):
    for page in search(client, "configure the embedder").json()["pages"]:
        for section in page["sections"]:
            text = section["snippet"]
            for start, end in section["marks"]:
                assert re.fullmatch(r"\w+", text[start:end]), (text, start, end)
            assert html.unescape(re.sub(r"</?mark>", "", section["snippet_html"])) == text
            assert section["snippet_html"].count("<mark>") == len(section["marks"])


def test_a_snippet_escapes_the_books_markup_and_starts_near_the_first_match():
    text = "Intro words. " * 30 + "Put <script>alert(1)</script> in the `<head>` of the page."
    shown, offsets = snippet(text, ("head",))
    assert shown.startswith("…") and "head" in shown and len(shown) <= 200
    rendered = marked_html(shown, offsets)
    assert "<script>" not in rendered and "&lt;<mark>head</mark>&gt;" in rendered, rendered


def test_words_the_book_never_uses_still_find_what_is_nearest_in_meaning(client):
    body = search(client, "qwzx vlorpt").json()
    assert body["matched"] in ("meaning", "none") and not body["covered"]
    assert all(not s["marks"] for page in body["pages"] for s in page["sections"])


@pytest.mark.parametrize(("params", "status", "error", "field"), [
    ({"q": ""}, 400, "empty", "q"),
    ({"q": "   "}, 400, "empty", "q"),
    ({"q": "<b></b>"}, 400, "empty", "q"),
    ({}, 400, "required", "q"),
    ({"q": "x" * 5000}, 400, "too_long", "q"),
    ({"q": "a\x00b"}, 400, "invalid_characters", "q"),
    ({"q": "widget", "limit": "0"}, 400, "out_of_range", "limit"),
    ({"q": "widget", "limit": "ten"}, 400, "invalid_type", "limit"),
    ({"q": "widget", "limit": "1e3"}, 400, "invalid_type", "limit"),
    ({"q": "widget", "colour": "blue"}, 400, "unknown_field", "colour"),
    ({"q": "widget", "book": "no-such-book"}, 404, "unknown_book", "book"),
    ({"q": "widget", "chapter": "no-such-chapter"}, 404, "unknown_chapter", "chapter"),
    ({"q": "'; DROP TABLE ingestion_chunk; --"}, 200, None, None),
    ({"q": "%_\\ lit%"}, 200, None, None),
], ids=["empty", "blank", "only-markup", "missing", "huge", "nul", "limit-0", "limit-word", "limit-float", "unknown",
        "book", "chapter", "sql", "like-wildcards"])
def test_bad_queries_get_clear_errors(client, params, status, error, field):
    response = client.get(SEARCH, {"book": BOOK, **params})
    assert response.status_code == status, response.content
    body = response.json()
    if error is not None:
        assert (body["error"], body["field"]) == (error, field) and body["message"]
    else:
        assert "pages" in body


def test_post_is_405_json(client):
    response = client.post(SEARCH, data="{}", content_type="application/json")
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"


def test_a_publishable_key_searches_from_its_origin_with_cors_and_a_secret_key_not_from_a_browser(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    key = ApiKey(name="site", kind=ApiKey.PUBLISHABLE, allowed_origins=SITE)
    raw = key.issue()
    key.save()
    found = client.get(SEARCH, {"q": "widget", "book": BOOK, "key": raw}, headers={"Origin": SITE})
    assert found.status_code == 200, found.content
    assert found["Access-Control-Allow-Origin"] == SITE
    refused = client.get(SEARCH, {"q": "widget", "book": BOOK, "key": raw}, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403 and "Access-Control-Allow-Origin" not in refused
    assert client.get(SEARCH, {"q": "widget", "book": BOOK}).status_code == 401, "no key, no anonymous access"


def test_searches_have_their_own_limit_and_never_use_up_questions(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_SEARCH": "2/minute", "RATE_ANONYMOUS": "1/minute"}
    ip = {"REMOTE_ADDR": "203.0.113.9"}
    reader = {"book": BOOK, "session_id": "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"}  # the reader's conversation
    assert client.get(SEARCH, {"q": "widget", **reader}, **ip).status_code == 200
    assert client.get(SEARCH, {"q": "widget ke", **reader}, **ip).status_code == 200
    limited = client.get(SEARCH, {"q": "widget key", **reader}, **ip)
    assert limited.status_code == 429 and "too many searches" in limited.json()["message"]
    assert 1 <= int(limited["Retry-After"]) <= 60
    asked = client.post("/api/v1/ask", data='{"question": "How do I add the widget?", "book": "bookchat-manual"}',
                        content_type="application/json", **ip)
    assert asked.status_code == 200, "the reader's question allowance is untouched"


def test_the_pages_search_box_over_its_limit_says_so_and_when_to_retry(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_SEARCH": "1/minute"}
    client.get("/", {"book": BOOK})  # the reader's page session: its searches are counted per session
    assert client.get("/", {"q": "widget", "book": BOOK}).status_code == 200
    limited = client.get("/", {"q": "widget key", "book": BOOK})
    assert limited.status_code == 429 and "too many searches" in limited.content.decode()
    assert 1 <= int(limited["Retry-After"]) <= 60


def test_every_search_is_audited_as_a_lighter_row(client):
    before = AuditLog.objects.count()
    body = search(client, "review que").json()
    row = AuditLog.objects.order_by("-created_at").first()
    assert AuditLog.objects.count() == before + 1
    assert row.status == "searched" and row.question == "review que" and not row.answer
    shown = [s["url"] for page in body["pages"] for s in page["sections"]]
    assert [s["url"] for s in row.sources] == shown
    assert row.retrieval["matched"] == body["matched"]


def opened(client, search_id, **params):
    return client.post(f"{SEARCH}/{search_id}/opened?" + urlencode(params))


def test_the_section_a_reader_opens_is_recorded_on_the_searchs_audit_row(client):
    found = search(client, "ingest a folder", report_opens="true").json()
    shown = sum(len(page["sections"]) for page in found["pages"])
    assert shown >= 2
    assert [s["n"] for page in found["pages"] for s in page["sections"]] == list(range(1, shown + 1))
    assert AuditLog.objects.get(answer_id=found["search_id"]).retrieval["reports_opens"] is True
    assert search(client, "ingest a folder", report_opens="false").status_code == 200
    assert search(client, "ingest a folder", report_opens="perhaps").json()["field"] == "report_opens"
    for n in (2, 1, 2):
        response = opened(client, found["search_id"], n=str(n))
        assert response.status_code == 204, response.content
    row = AuditLog.objects.get(answer_id=found["search_id"])
    assert row.status == "searched" and row.retrieval["opened"] == [1, 2]
    assert row.sources[0]["url"] == found["pages"][0]["sections"][0]["url"], "n counts sections as shown"
    # Nothing but that row changes; a section past the result's end is no section of it.
    assert opened(client, found["search_id"], n=str(shown + 1)).json()["error"] == "unknown_search"


@pytest.mark.parametrize(("path", "params", "status", "error"), [
    (None, {}, 400, "required"),
    (None, {"n": "0"}, 400, "out_of_range"),
    (None, {"n": "31"}, 400, "out_of_range"),
    (None, {"n": "one"}, 400, "invalid_type"),
    (None, {"n": "1.5"}, 400, "invalid_type"),
    (None, {"n": "-1"}, 400, "invalid_type"),
    (None, {"n": "1", "url": "https://evil.example"}, 400, "unknown_field"),
    ("unknown", {"n": "1"}, 404, "unknown_search"),
    ("answer", {"n": "1"}, 404, "unknown_search"),
    ("not-a-uuid", {"n": "1"}, 404, None),
], ids=["missing", "zero", "past-30", "word", "float", "negative", "unknown-field", "unknown-search",
        "an-answer", "bad-id"])
def test_bad_opened_reports_get_clear_errors_and_change_nothing(client, path, params, status, error):
    found = search(client, "ingest a folder").json()
    search_id = {None: found["search_id"], "unknown": uuid.uuid4(), "not-a-uuid": "1; DROP TABLE x"}.get(path)
    if path == "answer":
        search_id = client.post("/api/v1/ask", {"question": "How do I ingest a folder?", "book": BOOK},
                                content_type="application/json").json()["answer_id"]
    response = opened(client, search_id, **params)
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    if error:
        assert response.json()["error"] == error
    assert "opened" not in AuditLog.objects.get(answer_id=found["search_id"]).retrieval
    assert client.get(f"{SEARCH}/{found['search_id']}/opened?n=1").status_code == 405


def test_the_widgets_key_records_opens_of_its_own_books_searches_only(client):
    """As the widget reports it: a POST with no body from the site's origin, the publishable key in the URL."""
    found = search(client, "ingest a folder").json()

    def key_for(book: Book) -> str:
        key = ApiKey(name=f"site-{book.slug}", kind=ApiKey.PUBLISHABLE, allowed_origins=SITE, book=book)
        raw = key.issue()
        key.save()
        return raw

    other = key_for(Book.objects.create(slug="another-book", title="Another", embedder_dimension=384))
    refused = client.post(f"{SEARCH}/{found['search_id']}/opened?n=1&key={other}", headers={"Origin": SITE})
    assert refused.status_code == 404 and refused.json()["error"] == "unknown_search"
    assert "opened" not in AuditLog.objects.get(answer_id=found["search_id"]).retrieval
    own = key_for(Book.objects.get(slug=BOOK))
    recorded = client.post(f"{SEARCH}/{found['search_id']}/opened?n=1&key={own}", headers={"Origin": SITE})
    assert recorded.status_code == 204 and recorded["Access-Control-Allow-Origin"] == SITE
    assert AuditLog.objects.get(answer_id=found["search_id"]).retrieval["opened"] == [1]


def test_the_schema_states_the_search(client):
    schema = client.get("/api/v1/schema?format=json").json()
    operation = schema["paths"]["/api/v1/search"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"q", "book", "version", "locale", "chapter", "limit"} <= names
    assert BOOK in next(p for p in operation["parameters"] if p["name"] == "book")["schema"]["enum"]
    assert "SearchResult" in schema["components"]["schemas"]
