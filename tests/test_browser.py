"""Real-browser tests: Debian's Chromium driven by Playwright against bookchat on a live server.

- the chat page with JavaScript (a streamed LLM answer, clickable citations, the badge, thumbs) and without
  it (the form post), keyboard only, and at 360 px in dark mode;
- the widget on a static Docusaurus-like page served from another origin: it opens, answers, asks the version
  of the page it is on, "Ask about this" sends the selection, the page's hostile CSS doesn't reach it,
  keyboard only, a 360 px screen, and a key that doesn't allow the page's origin (a clear error in the
  widget, 403 from the API);
- search as you type: the widget's search mode by keyboard (a combobox and its listbox, marks that read in
  light and dark, a result opened at its anchor) and on a real built Docusaurus page, a stale response
  dropped, "Ask about this", taking over the site's own search button and Ctrl+K with data-search="replace";
  the page's search box with and without JavaScript;
- the admin (a reviewer's review, a staff upload) and the API docs, under the Content-Security-Policy.

Every page watches its console: an error there fails the test (except the browser's own report of the
refused request in the refused-origin test). The database is touched only through ``committed`` (on a
thread of its own), because Playwright's sync API runs an event loop in this thread. Set
BOOKCHAT_SCREENSHOT_DIR to keep screenshots of the page and the widget.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import committed, run_command
from tests.support.browser import CHROMIUM_ARGS, BuiltSite, ConsoleErrors, DocsSite, LiveServer, chromium
from tests.support.versioned_site import write_versioned_site

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser")]

BOOK = "bookchat-manual"
QUESTION = "How do I ingest a folder?"
TIMEOUT = 30_000  # ms; answers take well under a second, but CI machines are busy


@pytest.fixture(scope="module")
def servers(manual_book, django_db_blocker):
    with django_db_blocker.unblock(), LiveServer() as bookchat, DocsSite(f"{bookchat_url(bookchat)}") as docs:
        yield bookchat, docs
        # The live server's answers were committed: leave the audit trail empty for the tests that count rows.
        from audit.models import AuditLog

        committed(lambda: AuditLog.objects.all().delete())


def bookchat_url(server: LiveServer) -> str:
    return f"{server.url}/static/bookchat/widget.js"


@pytest.fixture(scope="module")
def browser():
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(autouse=True)
def database_open(django_db_blocker):
    """The live server's threads use the test database (no per-test transaction here: Playwright's event loop
    runs in this thread, and what the server writes must be visible to it anyway)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture(autouse=True)
def browser_settings(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": "", "LLM_API_KEY": "",
                         "LLM_MODEL": "", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0,
                         "GENERATION_SECONDS": 30.0}


@pytest.fixture
def open_page(browser):
    """``open_page(url, **context_options)`` → (page, console errors); contexts close after the test."""
    contexts = []

    def open_(url: str, **options):
        context = browser.new_context(**options)
        context.set_default_timeout(TIMEOUT)
        contexts.append(context)
        page = context.new_page()
        errors = ConsoleErrors()
        errors.watch(page)
        page.goto(url)
        return page, errors

    yield open_
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> None:
    folder = os.environ.get("BOOKCHAT_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


@pytest.fixture
def widget_key(servers):
    """``widget_key(origins)`` → a publishable key (committed; deleted after the test)."""
    from chat.models import ApiKey

    made = []

    def make(origins: str) -> str:
        def create():
            key = ApiKey(name="browser test", kind=ApiKey.PUBLISHABLE, allowed_origins=origins)
            raw = key.issue()
            key.save()
            made.append(key.pk)
            return raw

        return committed(create)

    yield make
    committed(lambda: ApiKey.objects.filter(pk__in=made).delete())


def stored_feedback(answer_id: str):
    from chat.models import Feedback

    return committed(lambda: Feedback.objects.filter(answer_id=answer_id).values_list("rating", "comment").first())


# -- the chat page ---------------------------------------------------------------------------------------------
@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_page_streams_an_llm_answer_with_clickable_citations_badge_and_thumbs(servers, open_page, settings,
                                                                           openai_server):
    bookchat, _ = servers
    openai_server.reset()
    openai_server.token_delay = 0.15  # the answer arrives word by word
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": openai_server.base_url, "LLM_API_KEY": "test",
                         "LLM_MODEL": "test-model"}
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")

    streaming = page.locator("article.turn.pending .answer-text.streaming")
    page.wait_for_function("() => { const el = document.querySelector('article.turn.pending .answer-text');"
                           " return el && el.textContent.length > 3 && el.textContent !== '…'; }")
    partial = streaming.text_content()
    assert streaming.get_attribute("aria-busy") == "true"
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".sources").wait_for()
    final_text = turn.locator(".answer-text").text_content()
    assert len(final_text) > len(partial.strip()), "the text grew token by token before the final answer"
    # the live region reads the answer as shown, once it is final (set 50 ms after it is cleared, so it is a change)
    page.wait_for_function("t => document.getElementById('live').textContent.startsWith(t)", arg=final_text[:40])
    badge = turn.locator(".badge")
    assert badge.text_content().strip() in ("High confidence", "Medium confidence", "Not sure")
    note = turn.locator(".level-note").text_content()
    assert note.startswith(badge.text_content().strip() + ":") and len(note) > 40, "the level says what it means"
    open_links = turn.locator("a.open-in-book")
    assert open_links.count() >= 1 and ":~:text=" in open_links.first.get_attribute("href")

    citation = turn.locator(".answer-text a.bookchat-cite").first
    n = citation.get_attribute("data-n")
    citation.click()
    answer_id = turn.get_attribute("data-answer-id")
    assert page.evaluate("location.hash") == f"#answer-{answer_id}-source-{n}"
    assert page.locator(f"#answer-{answer_id}-source-{n}").evaluate("el => el.matches(':target')")

    turn.locator("button.thumb.up").click()
    page.wait_for_function("(id) => document.querySelector(`#answer-${id} .feedback-status`).textContent"
                           ".includes('Thanks')", arg=answer_id)
    assert turn.locator("button.thumb.up").get_attribute("aria-pressed") == "true"
    assert stored_feedback(answer_id) == ("up", "")
    assert openai_server.requests, "the page's answer came from the LLM server"
    screenshot(page, "chat-page")
    assert errors == []


def ask_without_javascript(servers, open_page, question: str):
    """The page with JavaScript off, ``question`` asked by a plain form post: (page, errors, the answer's turn)."""
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", java_script_enabled=False)
    page.fill("#question", question)
    page.click("#ask-button")
    page.wait_for_url("**#answer-*")
    return page, errors, page.locator("article.turn").last


def test_page_without_javascript_answers_by_form_post(servers, open_page):
    page, errors, turn = ask_without_javascript(servers, open_page, QUESTION)
    assert "ingest" in turn.locator(".answer-text").text_content().lower()
    assert turn.locator(".source").count() >= 1
    assert turn.locator(".badge").count() == 1
    with page.expect_navigation():  # a plain form post, back to the answer (the URL already ends with it)
        turn.locator("button.thumb.down").click()
    answer_id = page.locator("article.turn").last.get_attribute("data-answer-id")
    assert stored_feedback(answer_id) == ("down", "")
    assert errors == []


def test_page_keyboard_only(servers, open_page):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    for _ in range(5):  # the skip link targets the question box (some builds focus it, some only scroll)
        if page.evaluate("document.activeElement.id") == "question":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "question"
    page.keyboard.type(QUESTION)
    page.keyboard.press("Enter")
    page.locator("article.turn:not(.pending) .sources").last.wait_for()
    assert page.evaluate("document.activeElement.id") == "question", "focus comes back to the question box"
    page.keyboard.press("Shift+Tab")
    for _ in range(40):
        if page.evaluate("document.activeElement.classList.contains('thumb')"):
            break
        page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.classList.contains('thumb')"), "thumbs are reachable by keyboard"
    page.keyboard.press("Enter")
    page.wait_for_function("() => [...document.querySelectorAll('.feedback-status')].some(e => e.textContent)")
    assert errors == []


def test_page_at_360_px_in_dark_mode(servers, open_page):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", viewport={"width": 360, "height": 740},
                             color_scheme="dark")
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    page.locator("article.turn:not(.pending) .sources").last.wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 360, "no sideways scrolling"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background != "rgb(255, 255, 255)", "dark mode follows prefers-color-scheme"
    assert page.locator("#ask-button").is_visible()
    screenshot(page, "chat-page-360-dark")
    assert errors == []


# -- the widget on a docs site -----------------------------------------------------------------------------------
def open_docs(open_page, docs: DocsSite, key: str, widget_attributes: str = "", **options):
    docs.key, docs.book, docs.widget_attributes = key, BOOK, widget_attributes
    page, errors = open_page(docs.page_url(), **options)
    page.locator(".bc-launcher").wait_for()  # Playwright's CSS selectors pierce the open shadow root
    return page, errors


def ask_widget(page, question: str) -> None:
    page.locator(".bc-input").fill(question)
    page.locator(".bc-input").press("Enter")


def test_widget_answers_on_a_docs_site_and_the_sites_css_does_not_leak_in(servers, open_page, widget_key):
    bookchat, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    launcher = page.locator(".bc-launcher")
    assert launcher.is_visible(), "the site's `button { display: none !important }` doesn't reach it"
    style = launcher.evaluate("el => { const s = getComputedStyle(el); return [s.color, s.fontFamily]; }")
    assert style[0] != "rgb(255, 0, 0)" and "Comic Sans" not in style[1]
    assert page.evaluate("getComputedStyle(document.querySelector('#intro')).color") == "rgb(255, 0, 0)", \
        "…and the widget doesn't restyle the site"

    launcher.click()
    assert page.locator(".bc-panel").is_visible() and page.locator(".bc-input").is_visible()
    with page.expect_request(lambda r: "/api/v1/ask/stream" in r.url) as request:
        ask_widget(page, QUESTION)
    assert request.value.url.startswith(f"{bookchat.url}/api/v1/ask/stream?key=pk_")
    answer = page.locator(".bc-answer[data-state=done]").last
    answer.wait_for()
    assert "ingest" in answer.locator(".bc-answer-text").text_content().lower()
    assert answer.locator(".bc-badge").get_attribute("data-level") in ("high", "medium", "unsure")
    assert len(answer.locator(".bc-level-note").text_content()) > 40, "the level says what it means"
    source_links = answer.locator(".bc-sources a")
    assert source_links.count() >= 1
    citation = answer.locator(".bc-answer-text a.bookchat-cite").first
    href = citation.evaluate("a => a.href")
    assert href.startswith(docs.origin + "/"), "citations open pages of the same docs site"

    answer.locator(".bc-thumb-up").click()
    page.wait_for_function("() => document.querySelector('#bookchat-widget').shadowRoot"
                           ".querySelector('.bc-feedback-status').textContent.includes('Thanks')")
    assert answer.locator(".bc-thumb-up").get_attribute("aria-pressed") == "true"
    assert stored_feedback(answer.get_attribute("data-answer-id"))[0] == "up"
    screenshot(page, "widget")

    # The citation leads away from where the page is, so waiting for its URL waits for the navigation (the
    # browser keeps a text fragment, ``:~:text=…``, out of the URL it shows).
    target = href.split(":~:")[0]
    before = page.url
    assert target.rstrip("#") != before.rstrip("#"), f"the citation points at the page it is on: {href}"
    citation.click()
    page.wait_for_url(target)
    assert page.url.rstrip("#") == target.rstrip("#") != before.rstrip("#")
    assert errors == []


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_widget_on_a_versioned_page_asks_that_version(servers, open_page, widget_key, tmp_path):
    """A versioned book whose site is the docs server: on /guide/next/… the widget asks the unreleased docs, on
    /guide/… the latest version, and the answer's links stay in that version."""
    from ingestion.models import Book

    _, docs = servers
    site = write_versioned_site(tmp_path / "site")
    code, out, _ = committed(lambda: run_command("ingest", str(site), "--base-url", docs.origin, "--json"))
    assert code == 0, out
    try:
        key = widget_key(docs.origin)
        for path, version, prefix in (("/guide/next/setup/", "current", "/guide/next/"),
                                      ("/guide/setup/", "2.0", "/guide/")):
            docs.key, docs.book = key, "field-notes"
            page, errors = open_page(docs.page_url(path))
            page.locator(".bc-launcher").click()
            with page.expect_request(lambda r: "/api/v1/ask/stream" in r.url) as request:
                ask_widget(page, "How often should the level be calibrated?")
            sent = json.loads(request.value.post_data)
            assert (sent["version"], sent["locale"]) == (version, "en")
            answer = page.locator(".bc-answer[data-state=done]").last
            answer.wait_for()
            links = answer.locator(".bc-sources a").evaluate_all("links => links.map(a => a.href)")
            assert links and all(link.startswith(docs.origin + prefix) for link in links), links
            assert version != "2.0" or not any("/next/" in link for link in links)
            assert errors == []
    finally:
        committed(lambda: Book.objects.filter(slug__startswith="field-notes").delete())


def test_widget_ask_about_selected_text(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    paragraph = page.locator("#ingest-folder-text")
    box = paragraph.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 4)  # select the paragraph by dragging, as a reader would
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] - 4, steps=8)
    page.mouse.up()
    bubble = page.locator(".bc-ask-selection")
    bubble.wait_for(state="visible")
    bubble.click()
    assert page.locator(".bc-selection").is_visible()
    with page.expect_request(lambda r: "/api/v1/ask/stream" in r.url) as request:
        ask_widget(page, "What does this mean?")
    body = json.loads(request.value.post_data)
    assert "such as a docs folder on its own" in body["selected_text"]
    assert set(body) <= {"question", "book", "selected_text", "session_id", "locale", "version"}
    answer = page.locator(".bc-answer[data-state=done]").last
    answer.wait_for()
    excerpts = " ".join(answer.locator(".bc-excerpt").all_text_contents())
    text = answer.locator(".bc-answer-text").text_content()
    assert "such as a docs folder on its own" not in text, "the selection is the reader's: never quoted back"
    assert "bookchat walks the folder" in excerpts, "the answer is what the book says next, from the same passage"
    screenshot(page, "widget-selection")
    assert errors == []


def test_widget_keyboard_only_and_esc_closes(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id === 'bookchat-widget'"):
            break
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.classList.contains('bc-launcher')")
    page.keyboard.press("Enter")
    assert page.locator(".bc-panel").is_visible()
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.classList.contains('bc-input')")
    page.keyboard.type(QUESTION)
    page.keyboard.press("Enter")
    page.locator(".bc-answer[data-state=done]").wait_for()
    page.keyboard.press("Escape")
    assert not page.locator(".bc-panel").is_visible()
    assert page.evaluate("document.activeElement.shadowRoot.activeElement.classList.contains('bc-launcher')"), \
        "Esc gives focus back to the button"
    assert errors == []


# -- search as you type: the widget's search mode and the page's search box -------------------------------------
def in_widget(page, script: str):
    """``script`` (an expression of ``root``, the widget's shadow root) evaluated in the page."""
    return page.evaluate(f"(() => {{ const root = document.getElementById('bookchat-widget').shadowRoot; "
                         f"return {script}; }})()")


def wait_for_results(page, query: str) -> None:
    page.wait_for_function("q => { const r = document.getElementById('bookchat-widget').shadowRoot"
                           ".querySelector('.bc-results'); return r && r.dataset.query === q "
                           "&& r.children.length > 0; }", arg=query)


def opened_search(search_id: str):
    """The audit row of search ``search_id`` once the section opened from it is recorded (the report is sent as
    the page is left, so it may land a moment after the test sees the request)."""
    from audit.models import AuditLog

    deadline = time.monotonic() + 10
    while (row := committed(lambda: AuditLog.objects.filter(answer_id=search_id).first())) is None or \
            "opened" not in row.retrieval:
        assert time.monotonic() < deadline, "the opened section was not recorded"
        time.sleep(0.2)
    return row


def test_widget_search_keyboard_only_opens_a_section_at_its_anchor(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    page.locator("main").click()  # the reader is on the page, not in a field
    page.keyboard.press("/")
    assert page.locator(".bc-panel").is_visible() and page.locator(".bc-search").is_visible()
    assert in_widget(page, "root.activeElement.id") == "bc-search-input"
    assert in_widget(page, "root.activeElement.getAttribute('role')") == "combobox"
    page.keyboard.type("publishable wid", delay=40)
    wait_for_results(page, "publishable wid")
    assert in_widget(page, "root.getElementById('bc-results').getAttribute('role')") == "listbox"
    assert in_widget(page, "root.activeElement.getAttribute('aria-expanded')") == "true"
    marks = page.locator(".bc-result mark")
    assert marks.count() >= 1
    for theme in ("dark", "light"):  # the marked words read in both themes
        page.emulate_media(color_scheme=theme)
        colors = marks.first.evaluate("m => { const s = getComputedStyle(m); return [s.color, s.backgroundColor]; }")
        assert contrast(*colors) >= 4.5, (theme, colors)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    second = page.locator(".bc-result").nth(1)
    assert second.get_attribute("aria-selected") == "true"
    assert in_widget(page, "root.activeElement.getAttribute('aria-activedescendant')") == second.get_attribute("id")
    page.keyboard.press("ArrowUp")
    first = page.locator(".bc-result").first
    assert first.get_attribute("aria-selected") == "true"
    chosen = first.get_attribute("data-url")
    assert "#" in chosen, "a section's link has its anchor"
    screenshot(page, "widget-search")
    with page.expect_request(lambda r: r.method == "POST" and "/opened?" in r.url) as report, \
            page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == chosen, "Enter opens the chosen section"
    assert errors == []
    # The section opened is recorded on the search's audit row (the coverage gaps count searches with none).
    search_id = re.search(r"/search/([0-9a-f-]{36})/opened\?.*\bn=1\b", report.value.url).group(1)
    row = opened_search(search_id)
    assert row.status == "searched" and row.channel == "widget" and row.retrieval["opened"] == [1]


def test_widget_search_drops_a_stale_response(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    held = []

    def hold_the_first(route):
        if "q=ingest&" in route.request.url and not held:
            held.append(route)  # answered only after the newer search has shown its results
        else:
            route.continue_()

    page.route("**/api/v1/search?*", hold_the_first)
    page.evaluate("window.BookchatWidget.search('')")
    box = page.locator(".bc-search-input")
    box.type("ingest", delay=30)
    page.wait_for_timeout(400)  # past the debounce: the first search is sent (and held)
    box.type(" fold", delay=30)
    wait_for_results(page, "ingest fold")
    assert held, "the first search was sent"
    with contextlib.suppress(Exception):  # Playwright may refuse to continue an aborted request: also fine
        held[0].continue_()  # its request was aborted by the newer one; if it still arrives it must be dropped
    page.wait_for_timeout(500)
    assert in_widget(page, "root.querySelector('.bc-results').dataset.query") == "ingest fold"
    assert errors == [] or all("abort" in e.lower() or "search" in e for e in errors), errors


def test_widget_search_ask_about_this_turns_the_query_into_a_question(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    page.evaluate("window.BookchatWidget.search('How do I ingest a folder')")
    wait_for_results(page, "How do I ingest a folder")
    page.locator(".bc-ask-query").click()
    assert page.locator(".bc-form").is_visible() and not page.locator(".bc-search").is_visible()
    assert page.locator(".bc-question").last.text_content() == "How do I ingest a folder"
    page.locator(".bc-answer[data-state=done]").wait_for()
    assert page.locator(".bc-source").count() >= 1
    assert errors == []


def test_widget_search_replaces_the_sites_own_search_when_asked(servers, open_page, widget_key):
    _, docs = servers
    key = widget_key(docs.origin)
    page, errors = open_docs(open_page, docs, key)  # by default the site's Ctrl+K stays the site's
    page.locator("main").click()
    page.keyboard.press("Control+k")
    assert page.evaluate("document.body.dataset.siteSearch") == "opened"
    assert not page.locator(".bc-panel").is_visible()

    page, errors = open_docs(open_page, docs, key, widget_attributes=' data-search="replace"')
    page.locator(".DocSearch-Button").click()
    assert page.locator(".bc-search").is_visible()
    assert page.evaluate("document.body.dataset.siteSearch") is None, "the site's search never opened"
    page.keyboard.press("Escape")
    assert not page.locator(".bc-panel").is_visible()
    page.locator("main").click()
    page.keyboard.press("Control+k")
    assert page.locator(".bc-search").is_visible()
    assert page.evaluate("document.body.dataset.siteSearch") is None
    assert errors == []


@pytest.mark.needs("node")
def test_widget_search_by_keyboard_on_a_real_built_docusaurus_page(servers, open_page, widget_key):
    """The handbook site `npm run build` made (tests/support/docusaurus_site.py), React and all, with the widget
    loaded as a `scripts` entry loads it: "/" searches, arrows choose, Enter opens the section."""
    from tests.support import docusaurus_site

    bookchat, _ = servers
    build = docusaurus_site.site() / "build"
    base = "/" + docusaurus_site.SITE_URL.split("/", 3)[3]
    with BuiltSite(build, base, bookchat_url(bookchat)) as site:
        site.attributes = f'data-key="{widget_key(site.origin)}" data-book="{BOOK}"'
        page, errors = open_page(site.origin + base)
        page.locator(".bc-launcher").wait_for()
        page.wait_for_function("() => document.documentElement.dataset.theme")  # Docusaurus has hydrated
        page.locator("main, article").first.click()
        page.keyboard.press("/")
        assert page.locator(".bc-search").is_visible()
        page.keyboard.type("ingest fold", delay=40)
        wait_for_results(page, "ingest fold")
        page.keyboard.press("ArrowDown")
        first = page.locator(".bc-result").first
        assert first.get_attribute("aria-selected") == "true"
        chosen = first.get_attribute("data-url")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url == chosen and chosen.startswith(f"{site.origin}/using/")  # the manual's link, on this site
        assert errors == [] or all("404" in e for e in errors), errors  # the manual's pages aren't on this site


@pytest.mark.parametrize("java_script", [True, False], ids=["javascript", "no-javascript"])
def test_page_search_box_by_keyboard(servers, open_page, java_script):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", java_script_enabled=java_script)
    if java_script:
        page.locator("h1").click()
        page.keyboard.press("/")
    else:
        page.locator("#search-box").focus()
    assert page.evaluate("document.activeElement.id") == "search-box"
    page.keyboard.type("publishable wid")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    sections = page.locator(".search-section a")
    assert sections.count() >= 1 and "#" in (sections.first.get_attribute("href") or "")
    assert page.locator(".search-snippet mark").count() >= 1
    assert page.locator("#search-box").input_value() == "publishable wid"
    from audit.models import AuditLog

    searched = committed(lambda: AuditLog.objects.filter(channel="page", status="searched", question="publishable wid")
                         .order_by("-created_at").first())
    # With its script the page reports the section a reader opens, and says so on the search's row.
    assert bool(searched.retrieval.get("reports_opens")) is java_script
    page.locator("#search-results a.button").click()  # "Ask about this"
    page.wait_for_url("**ask=*")
    assert page.locator("#question").input_value() == "publishable wid"
    assert errors == []
    if java_script:
        page.go_back()
        first = page.locator(".search-section a").first
        search_id = page.locator("[data-search-id]").get_attribute("data-search-id")
        page.route("**/using/**", lambda route: route.fulfill(body="section"))  # wherever the manual's link points
        with page.expect_request(lambda r: r.method == "POST" and f"/search/{search_id}/opened?n=1" in r.url):
            first.click()
        opened_search(search_id)


def test_widget_on_a_360_px_screen(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin), viewport={"width": 360, "height": 740},
                             is_mobile=True, has_touch=True)
    page.locator(".bc-launcher").click()
    panel = page.locator(".bc-panel").bounding_box()
    assert panel["x"] >= 0 and panel["x"] + panel["width"] <= 360 and panel["y"] >= 0
    ask_widget(page, QUESTION)
    page.locator(".bc-answer[data-state=done]").wait_for()
    send = page.locator(".bc-send").bounding_box()
    assert send["x"] + send["width"] <= 360
    assert errors == []


def test_widget_with_a_key_that_does_not_allow_the_origin(servers, open_page, widget_key):
    bookchat, docs = servers
    key = widget_key("https://another-site.example")
    page, errors = open_docs(open_page, docs, key)
    page.locator(".bc-launcher").click()
    ask_widget(page, QUESTION)
    error = page.locator(".bc-error")
    error.wait_for()
    assert "not allowed" in error.text_content()
    assert page.locator(".bc-answer[data-state=done]").count() == 0
    assert all("CORS" in e or "Failed to load resource" in e or "net::" in e for e in errors), errors

    request = urllib.request.Request(f"{bookchat.url}/api/v1/ask/stream?key={key}", method="POST",
                                     data=json.dumps({"question": QUESTION, "book": BOOK}).encode(),
                                     headers={"Origin": docs.origin, "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    assert json.loads(refused.value.read())["error"] == "origin_not_allowed"
    assert refused.value.headers.get("Access-Control-Allow-Origin") is None


# -- the admin -----------------------------------------------------------------------------------------------
@pytest.fixture
def admin_user(servers):
    """``admin_user(name, groups=(), perms=())`` → a committed staff login (password "pw-" + name), removed after."""
    from django.contrib.auth.models import Group, Permission, User

    made = []

    def make(name: str, groups=(), perms=()):
        def create():
            user = User.objects.create_user(name, password=f"pw-{name}", is_staff=True)
            user.groups.set(Group.objects.filter(name__in=groups))
            for perm in perms:
                app, codename = perm.split(".")
                user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
            made.append(user.pk)
            return user

        return committed(create)

    yield make
    committed(lambda: User.objects.filter(pk__in=made).delete())


def log_in(page, base: str, name: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", name)
    page.fill("#id_password", f"pw-{name}")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_reviewer_marks_an_answer_in_the_review_queue_wrong(servers, open_page, admin_user):
    import uuid

    from audit.models import AuditLog
    from chat.pipeline.confidence import MEDIUM

    bookchat, _ = servers
    admin_user("rita", groups=["Reviewers"])
    answer_id = uuid.uuid4()
    committed(lambda: AuditLog.objects.create(
        answer_id=answer_id, channel="widget", book_slug=BOOK, question="How do I delete a book?",
        answer="Run `manage.py ingest --prune` [1].", confidence=MEDIUM / 2, confidence_level="low",
        sources=[{"n": 1, "heading_path": "Ingest a book > Removing pages", "url": "https://docs.example.org/ingest",
                  "score": 0.6, "cited": True}]))
    page, errors = open_page(f"{bookchat.url}/admin/login/")
    log_in(page, bookchat.url, "rita")
    page.click("text=Answers (audit trail)")
    page.click("text=Review queue")
    page.wait_for_url("**/admin/audit/reviewqueueitem/")
    page.click("text=How do I delete a book?")
    page.wait_for_url("**/admin/audit/reviewqueueitem/*/change/")
    assert page.locator("a[href='https://docs.example.org/ingest']").count() == 1, "sources link into the book"
    assert page.locator("[name=question]").count() == 0, "the answer itself is read-only"
    page.select_option("#id_review_status", "wrong")
    page.fill("#id_reviewer_note", "--prune removes pages, not books")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    review = committed(lambda: AuditLog.objects.filter(answer_id=answer_id)
                       .values_list("review_status", "reviewer_note", "reviewed_by__username").get())
    assert review == ("wrong", "--prune removes pages, not books", "rita")
    page.goto(f"{bookchat.url}/admin/audit/reviewqueueitem/")
    assert page.locator("text=How do I delete a book?").count() == 0, "a reviewed answer leaves the queue"
    screenshot(page, "review-queue")
    assert errors == []


def test_a_reviewer_restricted_to_one_book_sees_exports_and_opens_only_its_rows(servers, open_page, admin_user):
    import csv
    import uuid

    from audit.models import AuditLog
    from ingestion.models import Book, BookAccess

    bookchat, _ = servers
    rhea = admin_user("rhea", groups=["Reviewers"])
    committed(lambda: BookAccess.objects.create(user=rhea).books.set(Book.objects.filter(slug=BOOK)))
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    committed(lambda: [AuditLog.objects.create(answer_id=answer_id, channel="page", book_slug=slug, question=question,
                                               answer="…", status="unsure", confidence_level="low")
                       for answer_id, slug, question in ((mine, BOOK, "Where do uploads go?"),
                                                         (theirs, "another-course", "When is the exam?"))])
    other = committed(lambda: AuditLog.objects.get(answer_id=theirs).pk)
    page, errors = open_page(f"{bookchat.url}/admin/login/")
    log_in(page, bookchat.url, "rhea")
    page.goto(f"{bookchat.url}/admin/audit/auditlog/")
    assert page.locator("text=Where do uploads go?").count() == 1
    assert page.locator("text=When is the exam?").count() == 0 and "another-course" not in page.content()

    page.check("#action-toggle")  # every row on the page, then the export action
    page.select_option("select[name=action]", "export_csv")
    with page.expect_download() as download:
        page.click("button[name=index]")
    rows = list(csv.reader(Path(download.value.path()).read_text(encoding="utf-8-sig").splitlines()))
    exported = {(row[3], row[4]) for row in rows[1:]}
    assert (BOOK, "Where do uploads go?") in exported and {book for book, _ in exported} == {BOOK}

    response = page.goto(f"{bookchat.url}/admin/audit/auditlog/{other}/change/")
    assert response.status == 404 and "When is the exam?" not in page.content()
    assert all("404" in error for error in errors), errors


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_api_docs_and_the_dashboard_work_under_the_content_security_policy(servers, open_page, admin_user):
    # Swagger UI and Django's admin are templates we don't own: they may use inline styles, never inline script.
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/api/v1/docs")
    page.wait_for_selector(".swagger-ui .info")
    assert "bookchat API" in page.inner_text(".swagger-ui .info")
    admin_user("dana", groups=["Reviewers"])
    log_in(page, bookchat.url, "dana")
    page.goto(f"{bookchat.url}/admin/audit/auditlog/dashboard/")
    page.wait_for_selector(".bookchat-dashboard svg")
    assert errors == []


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_staff_uploads_a_zip_and_watches_the_job_finish(servers, open_page, admin_user, tmp_path, settings):
    import io
    import time
    import uuid
    import zipfile

    from ingestion.models import Book, IngestionJob
    from tests.support.workers import Cluster

    bookchat, _ = servers
    admin_user("sam", perms=["ingestion.add_ingestionjob", "ingestion.view_ingestionjob"])
    slug = f"browser-upload-{uuid.uuid4().hex[:8]}"
    archive = tmp_path / "docs.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("docs/intro.md", "# Lighthouses\n\nA lighthouse keeper trims the lamp every evening at dusk.\n")
        z.writestr("docs/guide/tides.md", "# Tides\n\nSpring tides come twice a month, at new and full moon.\n")
        z.writestr("docs/img/logo.png", b"\x89PNG\r\n\x1a\n")
    archive.write_bytes(buffer.getvalue())

    worker = Cluster(settings.DATA_DIR, log_dir=tmp_path)  # the worker reads the uploads the live server stored
    try:
        page, errors = open_page(f"{bookchat.url}/admin/login/")
        log_in(page, bookchat.url, "sam")
        page.goto(f"{bookchat.url}/admin/ingestion/ingestionjob/add/")
        page.fill("#id_new_book_slug", slug)
        page.fill("#id_new_book_title", "Browser upload")
        page.set_input_files("#id_upload", str(archive))
        page.click("input[name=_save]")
        page.wait_for_url("**/admin/ingestion/ingestionjob/*/change/")
        seen, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline:  # the job page reloads itself while the job runs
            try:
                status = page.locator(".field-status .readonly").text_content(timeout=2000).strip()
            except Exception:  # caught mid-reload
                continue
            if not seen or seen[-1] != status:
                seen.append(status)
            if status in ("done", "failed"):
                break
            assert worker.proc.poll() is None, worker.output()
            time.sleep(0.3)
        assert seen[-1] == "done", (seen, worker.output())
        assert seen[0] in ("queued", "running"), "the page showed the job before it finished"
        html = page.content()
        assert "docs/img/logo.png" in html or "img/logo.png" in html, "the ignored file is listed"
        screenshot(page, "upload-job")
    finally:
        worker.stop()
    job = committed(lambda: IngestionJob.objects.get(book_slug=slug))
    assert job.status == "done" and job.report["files_indexed"] == 2
    assert committed(lambda: Book.objects.get(slug=slug).documents.count()) == 2
    assert errors == []
    committed(lambda: Book.objects.filter(slug=slug).delete())


# -- code blocks in answers: caption, highlighting, the Copy button, light and dark --------------------------------
CODE_QUESTION = "How do I add the widget to my Docusaurus site?"  # answered with docs/using/05-widget.mdx's block
CODE_TITLE = "docusaurus.config.js"
# What a rendered code block looks like, read in the browser (the page's document or the widget's shadow root).
CODE_BLOCK_FACTS = """block => {
  const pre = block.querySelector('pre');
  const words = [...pre.querySelectorAll('span')].filter(s => s.textContent.trim());
  const copy = block.querySelector('button');
  const box = copy && copy.getBoundingClientRect();
  const overlaps = r => box && r.left < box.right && r.right > box.left && r.top < box.bottom && r.bottom > box.top;
  const keyword = pre.querySelector('span.k');
  return {
    code: (pre.querySelector('code') || pre).textContent,
    color: getComputedStyle(pre).color,
    background: getComputedStyle(pre).backgroundColor,
    keyword: keyword && getComputedStyle(keyword).color,
    colors: [...new Set(words.map(s => getComputedStyle(s).color))],
    covered: words.filter(s => overlaps(s.getBoundingClientRect())).map(s => s.textContent),
  };
}"""


def luminance(css_color: str) -> float:
    """The relative luminance (WCAG) of a computed ``rgb(…)``/``rgba(…)`` colour."""
    channels = [float(v) / 255 for v in re.findall(r"[\d.]+", css_color)[:3]]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def check_code_block(block, theme: str) -> dict:
    """The assertions shared by the page and the widget: line breaks, caption, no fence meta, highlighting
    readable in ``theme``, and a Copy button that covers no code."""
    pre = block.locator("pre")
    assert pre.count() == 1
    shown = pre.inner_text()
    assert "\n" in shown and "scripts:" in shown, "the code keeps its lines"
    assert block.locator(".bookchat-code-title").inner_text() == CODE_TITLE
    facts = block.evaluate(CODE_BLOCK_FACTS)
    assert facts["keyword"] and facts["keyword"] != facts["color"], "keywords are coloured"
    assert len(facts["colors"]) >= 3, facts["colors"]
    assert (luminance(facts["background"]) < 0.1) == (theme == "dark"), facts["background"]
    unreadable = [c for c in facts["colors"] + [facts["color"]] if contrast(c, facts["background"]) < 4.5]
    assert not unreadable, f"code colours below 4.5:1 on {facts['background']}: {unreadable}"
    assert facts["covered"] == [], "the Copy button covers code"
    return facts


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_page_code_answer_is_highlighted_and_copied_by_keyboard(servers, open_page, theme):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", color_scheme=theme)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=bookchat.url)
    page.fill("#question", CODE_QUESTION)
    page.press("#question", "Enter")
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".sources").wait_for()
    answer = turn.locator(".answer-text")
    block = answer.locator(".bookchat-code")
    assert block.count() == 1, answer.inner_html()
    assert "title=" not in answer.inner_text(), "the fence's meta is not shown"
    block.scroll_into_view_if_needed()
    facts = check_code_block(block, theme)
    copy = block.locator("button.code-copy")
    assert copy.get_attribute("aria-label") == f"Copy code: {CODE_TITLE}"

    assert page.evaluate("document.activeElement.id") == "question"
    for _ in range(60):  # back from the question box, through the thumbs and sources, to the Copy button
        page.keyboard.press("Shift+Tab")
        if page.evaluate("document.activeElement.classList.contains('code-copy')"):
            break
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == f"Copy code: {CODE_TITLE}", \
        "the Copy button is reachable with the keyboard"
    screenshot(page, f"code-answer-page-{theme}")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('live').textContent === 'Code copied to the clipboard.'")
    assert copy.inner_text() == "Copied"
    assert page.evaluate("navigator.clipboard.readText()") == facts["code"]
    assert "scripts:" in facts["code"] and "title=" not in facts["code"] and "<span" not in facts["code"]
    assert errors == []


def test_page_code_answer_without_javascript(servers, open_page):
    _, errors, turn = ask_without_javascript(servers, open_page, CODE_QUESTION)
    answer = turn.locator(".answer-text")
    pre = answer.locator(".bookchat-code pre")
    assert pre.count() == 1
    shown = pre.inner_text()
    assert "\n" in shown and "scripts:" in shown
    assert answer.locator(".bookchat-code-title").inner_text() == CODE_TITLE
    assert "title=" not in answer.inner_text()
    assert answer.locator("button").count() == 0, "no Copy button without the script that makes it work"
    assert errors == []


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_widget_code_answer_is_highlighted_and_copied(servers, open_page, widget_key, theme):
    """Dark here is the docs site's own switch (``<html data-theme="dark">``, as Docusaurus does), with the
    system left light, so only the widget's followPageTheme can darken it."""
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin), color_scheme="light")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=docs.origin)
    page.evaluate("(theme) => document.documentElement.setAttribute('data-theme', theme)", theme)
    page.locator(".bc-launcher").click()
    ask_widget(page, CODE_QUESTION)
    answer = page.locator(".bc-answer[data-state=done]").last
    answer.wait_for()
    text = answer.locator(".bc-answer-text")
    block = text.locator(".bookchat-code")
    assert block.count() == 1, text.inner_html()
    assert "title=" not in text.inner_text()
    block.scroll_into_view_if_needed()
    facts = check_code_block(block, theme)
    copy = block.locator("button.bc-copy")
    assert copy.get_attribute("aria-label") == f"Copy code: {CODE_TITLE}"
    screenshot(page, f"code-answer-widget-{theme}")

    focused = "document.activeElement.shadowRoot && document.activeElement.shadowRoot.activeElement"
    assert page.evaluate(f"{focused}.classList.contains('bc-input')")
    for _ in range(60):  # back from the question box, through the thumbs and sources, to the Copy button
        page.keyboard.press("Shift+Tab")
        if page.evaluate(f"{focused} && {focused}.classList.contains('bc-copy')"):
            break
    assert page.evaluate(f"{focused} && {focused}.getAttribute('aria-label')") == f"Copy code: {CODE_TITLE}", \
        "the Copy button is reachable with the keyboard"
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#bookchat-widget').shadowRoot"
                           ".querySelector('.bc-panel > [role=status]').textContent"
                           " === 'Code copied to the clipboard.'")
    assert copy.inner_text() == "Copied"
    assert page.evaluate("navigator.clipboard.readText()") == facts["code"]
    assert "scripts:" in facts["code"] and "title=" not in facts["code"]
    assert errors == []
