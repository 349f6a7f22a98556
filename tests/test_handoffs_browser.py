"""Real-browser tests of "Ask the course staff" (Debian's Chromium through Playwright): a student on the chat page,
and one in the widget on the docs-site test page (another origin), get a refusal, hand it off with a note, and see
the staff's reply with its citation in the same conversation, after a reload and on the next visit from the same
browser; the page's form without JavaScript leads to the status page, which shows the reply too.

The staff's reply is made with ``audit.handoffs.reply`` (what the admin's reply form calls), not kept as a staff
answer, so that no later question of the session is answered by it. A reply reaches a page that is open when the
student comes back to it (``visibilitychange``) or opens the widget again; the page and the widget also look every
few minutes while one waits, which no test waits for. The fixtures are test_browser.py's (one live server, one
Chromium per module); every page watches its console.
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import json

import pytest

from tests.conftest import committed
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    ask_widget,
    browser,
    browser_settings,
    database_open,
    open_docs,
    open_page,
    servers,
    widget_key,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.usefixtures("handoffs_removed")]

NOT_COVERED = "What is the best recipe for chocolate chip cookies?"  # the manual refuses it
# Shown as HTML, it would run (and the CSP would report it on the page's console): it must read as text.
NOTE = 'For week 3 <script>window.noteRan = 1</script><img src=x onerror="window.noteRan = 2"> <b>bold?</b>'
REPLY = "The book doesn't bake: ingest your recipes as a folder of Markdown instead [1]."
WIDGET = "document.getElementById('bookchat-widget').shadowRoot"


@pytest.fixture
def handoffs_removed(servers):
    """The hand-offs a test made are removed after it (the live server committed them)."""
    yield
    from audit.models import Handoff

    committed(lambda: Handoff.objects.all().delete())


def stored(answer_id: str):
    from audit.models import Handoff

    return committed(lambda: Handoff.objects.filter(answer_id=answer_id).first())


def reply_to(answer_id: str) -> str:
    """The course staff answer the hand-off of ``answer_id``, citing one section: that section's URL."""
    from audit import handoffs
    from audit.models import Handoff
    from ingestion.models import Chunk

    def answer() -> str:
        section = Chunk.objects.filter(book__slug=BOOK, document__path="using/01-ingest.md", anchor__gt="").order_by(
            "ordinal").first()
        handoffs.reply(Handoff.objects.get(answer_id=answer_id), answer=REPLY, citations=[section.id], keep=False)
        return section.url

    return committed(answer)


def kept_tokens(page, root: str = "window") -> list[dict]:
    return json.loads(page.evaluate(f"{root}.localStorage.getItem('bookchat:handoffs:{BOOK}')") or "[]")


def test_a_student_on_the_page_hands_off_a_refusal_and_reads_the_reply_there_and_on_the_next_visit(
        servers, open_page):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    page.fill("#question", NOT_COVERED)
    page.press("#question", "Enter")
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".suggestions").wait_for()
    answer_id = turn.get_attribute("data-answer-id")
    handoff = turn.locator("details.handoff.prominent")
    assert handoff.locator("summary").text_content().strip() == "Not what you needed? Ask the course staff"
    handoff.locator("summary").click()
    turn.locator("textarea[name=note]").fill(NOTE)
    assert turn.locator(".handoff-count").text_content() == f"{len(NOTE)} of 2000 characters"
    with page.expect_response(lambda r: r.url.endswith(f"/api/v1/answers/{answer_id}/handoff")) as sent:
        turn.locator(".handoff-form button[type=submit]").click()
    assert sent.value.status == 201
    waiting = turn.locator(".handoff-status[data-status=open]")
    waiting.wait_for()
    assert "Sent to the course staff on" in waiting.locator(".handoff-title").text_content()
    assert waiting.locator(".note-text").text_content() == NOTE, "the note is shown as text"
    assert page.evaluate("window.noteRan") is None and turn.locator(".handoff-note img, .handoff-note b").count() == 0
    handoff = stored(answer_id)
    assert (handoff.note, handoff.channel) == (NOTE, "page")
    assert [(t["token"], t["answer_id"]) for t in kept_tokens(page)] == [(handoff.token, answer_id)]

    section_url = reply_to(answer_id)
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")  # the student comes back to the tab
    answered = turn.locator(".handoff-status[data-status=answered]")
    answered.wait_for()
    check_reply(answered, section_url)
    page.wait_for_function("() => document.getElementById('live').textContent.includes('replied')")

    page.reload()  # the same conversation: the reply under its answer
    check_reply(page.locator(f"#answer-{answer_id} .handoff-status[data-status=answered]"), section_url)

    page.click(".new-conversation button")  # the next visit starts afresh: the answer is no longer on the page
    page.wait_for_selector("#staff-questions")
    listed = page.locator("#staff-questions .handoff-status[data-status=answered]")
    assert page.locator("#staff-questions-title").text_content() == "Your questions to the course staff"
    assert NOT_COVERED in listed.locator(".handoff-question").text_content()
    check_reply(listed, section_url)
    assert errors == []


def check_reply(block, section_url: str) -> None:
    block.wait_for()
    assert "Answered by the course staff on" in block.locator(".handoff-title").text_content()
    assert "ingest your recipes as a folder" in block.locator(".answer-text").text_content()
    assert block.locator(".answer-text a.bookchat-cite").count() == 1, "the reply's citation marker links"
    assert block.locator(".open-in-book").get_attribute("href") == section_url


def test_a_student_in_the_widget_hands_off_a_refusal_and_reads_the_reply_there_and_after_a_reload(
        servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    page.locator(".bc-launcher").click()
    ask_widget(page, NOT_COVERED)
    answer = page.locator(".bc-answer[data-state=done][data-refused=true]").last
    answer.wait_for()
    answer_id = answer.get_attribute("data-answer-id")
    ask = answer.locator(".bc-handoff-prominent .bc-handoff-open")
    assert ask.text_content() == "Not what you needed? Ask the course staff"
    ask.click()
    note = answer.locator(".bc-handoff-note")
    note.wait_for()
    assert page.evaluate(f"{WIDGET}.activeElement.classList.contains('bc-handoff-note')"), "focus goes to the note"
    note.fill(NOTE)
    assert answer.locator(".bc-handoff-count").text_content() == f"{len(NOTE)} of 2000 characters"
    with page.expect_response(lambda r: f"/api/v1/answers/{answer_id}/handoff?key=pk_" in r.url
                              and r.request.method == "POST") as sent:
        answer.locator(".bc-handoff-send").click()
    assert sent.value.status == 201
    waiting = answer.locator(".bc-handoff-status[data-status=open]")
    waiting.wait_for()
    assert waiting.locator(".bc-handoff-note-shown .bc-handoff-text").text_content() == NOTE
    assert waiting.locator("script, img, b").count() == 0 and page.evaluate("window.noteRan") is None, "text"
    handoff = stored(answer_id)
    assert (handoff.note, handoff.channel) == (NOTE, "widget")
    assert [(t["token"], t["answer_id"]) for t in kept_tokens(page)] == [(handoff.token, answer_id)]
    assert page.evaluate(f"sessionStorage.getItem('bookchat:session:{BOOK}')"), "the conversation stays per tab"

    section_url = reply_to(answer_id)
    page.locator(".bc-close").click()
    page.locator(".bc-launcher").click()  # the student opens the chat again
    answered = answer.locator(".bc-handoff-status[data-status=answered]")
    check_widget_reply(answered, section_url)

    page.reload()  # the panel starts empty: the reply is in the list of the reader's questions to the staff
    page.locator(".bc-launcher").click()
    listed = page.locator(".bc-staff .bc-handoff-status[data-status=answered]")
    check_widget_reply(listed, section_url)
    assert page.locator(".bc-staff-title").text_content() == "Your questions to the course staff"
    assert NOT_COVERED in listed.locator(".bc-handoff-question").text_content()
    assert errors == []


def check_widget_reply(block, section_url: str) -> None:
    block.wait_for()
    assert "Answered by the course staff on" in block.locator(".bc-handoff-title").text_content()
    assert "ingest your recipes as a folder" in block.locator(".bc-staff-reply").text_content()
    assert block.locator(".bc-staff-reply a.bookchat-cite").count() == 1
    source = block.locator(".bc-sources a").first
    assert source.text_content().startswith("[1] ")
    # The manual's links are the site's own paths: on a docs site, they open its pages.
    assert source.evaluate("a => new URL(a.href).pathname") == section_url.split("#")[0]


def test_the_page_without_javascript_hands_off_to_the_status_page(servers, open_page):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", java_script_enabled=False)
    page.fill("#question", NOT_COVERED)
    page.click("#ask-button")
    page.wait_for_url("**#answer-*")
    turn = page.locator("article.turn").last
    answer_id = turn.get_attribute("data-answer-id")
    turn.locator("details.handoff summary").click()
    turn.locator("textarea[name=note]").fill(NOTE)
    with page.expect_navigation():
        turn.locator(".handoff-form button[type=submit]").click()
    token = stored(answer_id).token
    assert page.url == f"{bookchat.url}/api/v1/handoffs/{token}"
    assert "Sent to the course staff on" in page.locator(".handoff-title").text_content()
    assert page.locator(".note-text").text_content() == NOTE
    section_url = reply_to(answer_id)
    page.reload()
    assert "Answered by the course staff on" in page.locator(".handoff-title").text_content()
    assert page.locator(".open-in-book").get_attribute("href") == section_url
    page.click("text=Back to the conversation")
    page.locator(f"#answer-{answer_id}").wait_for()
    assert errors == []
