"""The chat page at / without a browser: the form post (no JavaScript), the conversation in the session,
feedback forms, the page's own API access (session + CSRF, no key), safe answer HTML and the CSP header.
Real-browser checks of the same page are in test_browser.py."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from bookchat.base.security import CONTENT_SECURITY_POLICY
from chat.models import Feedback, Turn
from chat.pipeline.rendering import render_answer
from chat.pipeline.source_cards import Source
from ingestion.models import Book
from tests.conftest import REPO

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"


@pytest.fixture(autouse=True)
def page_settings(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": "", "LLM_API_KEY": "",
                         "LLM_MODEL": "", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0}


def ask_form(client, question: str, selected_text: str = "", book: str = BOOK, follow=True):
    return client.post("/", {"question": question, "selected_text": selected_text, "book": book}, follow=follow)


def test_page_renders_the_book_with_a_strict_content_security_policy(client):
    response = client.get(f"/?book={BOOK}")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    html = response.content.decode()
    assert f"Ask “{Book.objects.get(slug=BOOK).title}”" in html
    assert '<label for="question">' in html and 'id="live"' in html and 'aria-live="polite"' in html
    assert "<script>" not in html and " style=" not in html, "no inline script or style (the CSP forbids them)"


def test_form_post_without_javascript_answers_and_continues_the_conversation(client):
    first = ask_form(client, "How do I ingest a folder?", follow=False)
    assert first.status_code == 302, "post/redirect/get: a reload never asks again"
    assert first["Location"].startswith(f"/?book={BOOK}#answer-")
    page = client.get(first["Location"]).content.decode()
    answer_id = first["Location"].rsplit("#answer-", 1)[1]
    turn = Turn.objects.get(answer_id=answer_id)
    assert f'id="answer-{answer_id}"' in page
    assert 'class="bookchat-cite"' in page, "citation markers link to their sources"
    assert 'class="open-in-book"' in page and ":~:text=" in page, "source cards open the book at the passage"
    assert re.search(r'class="badge level-(high|medium|low)"', page)

    second = ask_form(client, "And what does the --prune option do?")
    html = second.content.decode()
    assert html.count('class="turn"') == 2
    assert Turn.objects.filter(conversation=turn.conversation).count() == 2, "the session continues"


def test_not_covered_question_shows_related_sections(client):
    html = ask_form(client, "What is the best recipe for chocolate chip cookies?").content.decode()
    assert "Not covered" in html
    assert 'aria-label="Related sections"' in html
    assert html.count("</li>", html.index("Related sections")) >= 3


def test_new_conversation_starts_afresh(client):
    ask_form(client, "How do I ingest a folder?")
    response = client.post("/new", {"book": BOOK}, follow=True)
    assert response.status_code == 200
    assert 'class="turn"' not in response.content.decode()


@pytest.mark.parametrize(("question", "status", "message"), [
    ("", 400, "question is empty"),
    ("   \n\t ", 400, "question is empty"),
    ("x" * 1001, 400, "the limit is 1000"),
    ("word " * 501, 400, "the limit is 500"),
    ("nul \x00 byte", 400, "NUL"),
])
def test_bad_questions_get_a_clear_error_on_the_page(client, question, status, message):
    response = ask_form(client, question, follow=False)
    assert response.status_code == status
    html = response.content.decode()
    assert 'role="alert"' in html and message in html
    assert not Turn.objects.exists()


def test_unknown_book_and_huge_passage_are_refused_clearly(client):
    response = ask_form(client, "How do I ingest?", selected_text="y" * 2001, follow=False)
    assert response.status_code == 400 and "selected_text is 2001 characters" in response.content.decode()
    assert client.post("/", {"question": "hello", "book": "no-such-book"}).status_code in (302, 200), \
        "an unknown book slug falls back to the default book"


def test_markup_in_a_question_never_reaches_the_page_as_html(client):
    ask_form(client, "<script>alert('x')</script><img src=x onerror=alert(1)> How do I ingest a folder?")
    html = client.get(f"/?book={BOOK}").content.decode()
    # The turn is on the page, its question as text without the markup, and answered.
    assert '<span class="who">You asked</span><p dir="auto">How do I ingest a folder?</p>' in html
    assert html.count('<div class="answer">') == 1
    assert "<script>alert" not in html and "onerror=alert" not in html and "<img src=x" not in html


def test_form_post_without_csrf_token_is_refused():
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/", {"question": "How do I ingest a folder?", "book": BOOK}).status_code == 403
    assert not Turn.objects.exists()


def test_page_session_uses_the_api_with_its_csrf_token_and_no_key():
    strict = Client(enforce_csrf_checks=True)
    strict.get(f"/?book={BOOK}")
    token = strict.cookies["csrftoken"].value
    body = json.dumps({"question": "How do I ingest a folder?", "book": BOOK})
    refused = strict.post("/api/v1/ask/stream", data=body, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
    streamed = strict.post("/api/v1/ask/stream", data=body, content_type="application/json",
                           headers={"X-CSRFToken": token})
    assert streamed.status_code == 200
    events = b"".join(streamed.streaming_content).decode()
    final = json.loads(events.split("event: final\ndata: ", 1)[1].split("\n", 1)[0])
    assert final["answer_html"] and final["sources"]
    page = strict.get(f"/?book={BOOK}").content.decode()
    assert f'id="answer-{final["answer_id"]}"' in page, "a streamed answer joins the page's conversation"
    assert Turn.objects.get(answer_id=final["answer_id"]).conversation.id.hex == final["session_id"].replace("-", "")


def test_answer_fragment_only_for_the_session_that_asked(client):
    location = ask_form(client, "How do I ingest a folder?", follow=False)["Location"]
    answer_id = location.rsplit("#answer-", 1)[1]
    fragment = client.get(f"/answers/{answer_id}")
    assert fragment.status_code == 200 and fragment.content.decode().lstrip().startswith("<article")
    assert Client().get(f"/answers/{answer_id}").status_code == 404


def test_feedback_form_without_javascript(client):
    location = ask_form(client, "How do I ingest a folder?", follow=False)["Location"]
    answer_id = location.rsplit("#answer-", 1)[1]
    response = client.post(f"/answers/{answer_id}/feedback", {"rating": "down", "comment": "too short",
                                                              "next": f"/?book={BOOK}"})
    assert response.status_code == 302 and response["Location"] == f"/?book={BOOK}#answer-{answer_id}"
    assert Feedback.objects.get(answer_id=answer_id).comment == "too short"
    page = client.get(f"/?book={BOOK}").content.decode()
    assert 'value="down" class="thumb down" aria-pressed="true"' in page

    bad = client.post(f"/answers/{answer_id}/feedback", {"rating": "sideways"})
    assert bad.status_code == 400 and 'rating must be' in bad.content.decode()
    stranger = Client().post(f"/answers/{answer_id}/feedback", {"rating": "up"})
    assert stranger.status_code == 403
    offsite = client.post(f"/answers/{answer_id}/feedback", {"rating": "up", "next": "https://evil.example/"})
    assert offsite["Location"].startswith("/#answer-"), "never redirects off the site"


def test_widget_script_is_served_with_caching_headers(client):
    response = client.get("/static/bookchat/widget.js")
    assert response.status_code == 200
    assert "javascript" in response["Content-Type"]
    assert "max-age" in response["Cache-Control"]


# -- answer HTML -----------------------------------------------------------------------------------------------
SOURCES = [Source(n=1, url="https://book.example.org/intro#setup", chapter="Intro", section="Setup",
                  heading_path="Intro > Setup", excerpt="", score=0.9, chunk_id="c1", cited=True, document="intro.md"),
           Source(n=2, url="javascript:alert(1)", chapter="Evil", section="Evil", heading_path="Evil > Evil",
                  excerpt="", score=0.1, chunk_id="c2", cited=True, document="evil.md")]


@pytest.mark.parametrize("hostile", [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<iframe src=https://evil.example></iframe>",
    "[click](javascript:alert(1))", "<a href='javascript:alert(1)'>x</a>", "<style>body{display:none}</style>",
    "<svg onload=alert(1)>", '<div style="position:fixed">x</div>', "![x](https://evil.example/t.png)",
])
def test_answer_html_has_no_markup_from_the_answer(hostile):
    html = render_answer(f"Setting up is easy {hostile} [1].", SOURCES)
    elements = parsed_elements(html)
    assert {tag for tag, _ in elements} <= {"p", "a"}, html
    for _, attrs in elements:
        assert not any(name.startswith("on") or name == "style" for name in attrs), html
        assert not attrs.get("href", "").lower().startswith("javascript"), html
    assert ("a", {"class": "bookchat-cite", "href": "https://book.example.org/intro#setup", "data-n": "1",
                  "title": "Intro › Setup"}) in elements


def parsed_elements(html: str) -> list[tuple[str, dict]]:
    """Every element of an HTML fragment as (tag, attributes), as a browser's parser would see them."""
    from html.parser import HTMLParser

    found = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Collector().feed(html)
    return found


def test_answer_html_renders_markdown_and_links_only_real_citations():
    markdown = "Run this:\n\n```bash\nmake run [1]\n```\n\n- one [1]\n- two [2]\n- three [7]\n\n# Big"
    html = render_answer(markdown, SOURCES)
    code = re.search(r'<pre><code class="language-bash">(.*?)</code></pre>', html, re.DOTALL).group(1)
    assert re.sub(r"<[^>]+>", "", code) == "make run [1]", "markers inside code stay code"
    assert html.count('class="bookchat-cite"') == 1, "[2] has an unsafe URL and [7] names no source"
    assert "<li>three [7]</li>" in html
    assert "<h4>Big</h4>" in html and "<h1>" not in html


def test_widget_options_documented_in_the_manual_are_the_ones_it_reads():
    manual = (REPO / "docs" / "using" / "05-widget.mdx").read_text()
    documented = set(re.findall(r"^\| `data-([a-z-]+)` \|", manual, re.MULTILINE))
    widget = (REPO / "static" / "bookchat" / "widget.js").read_text()
    read_options = widget[widget.index("function readOptions"):widget.index("function apiBase")]
    # dataset names are camel case: data.searchButton is data-search-button
    read = {re.sub(r"[A-Z]", lambda m: "-" + m.group().lower(), name)
            for name in re.findall(r"\bdata\.([a-zA-Z]+)\b", read_options)}
    assert documented == read == {"key", "book", "position", "title", "color", "placeholder", "api",
                                     "version", "search", "search-button"}
    assert "'data-key': 'pk_…'" in manual and "'data-book': 'my-book'" in manual, "the docusaurus.config.js recipe"


def test_a_book_indexed_with_another_embedder_is_a_clear_503_on_the_page(client):
    Book.objects.create(slug="other-embedder", title="Other", embedder_name="openai:text-embedding-3-large",
                        embedder_dimension=3072)
    response = ask_form(client, "How do I ingest a folder?", book="other-embedder", follow=False)
    assert response.status_code == 503
    assert "Couldn" in response.content.decode() and "embedder" in response.content.decode().lower()
