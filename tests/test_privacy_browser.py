"""Real-browser tests of a student's "My data" (Debian's Chromium through Playwright): in the widget on the docs-site
test page (another origin, its publishable key), a student asks, hands the answer to the course staff, opens "My
data" from the panel's footer by keyboard, downloads a JSON file that holds the question and the note, deletes it
after a confirmation (the server no longer has the conversation or the hand-off, and the widget forgot their ids),
and the footer's "about" link leads to the server's /privacy/ page; on the chat page, the same two buttons.

The fixtures are test_browser.py's (one live server, one Chromium per module); every page watches its console.
Erasures write their tombstone under a test's own data folder.
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import json

import pytest

from tests.conftest import committed
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    QUESTION,
    ask_widget,
    browser,
    browser_settings,
    database_open,
    open_docs,
    open_page,
    screenshot,
    servers,
    widget_key,
)
from tests.test_handoffs_browser import NOT_COVERED, handoffs_removed  # noqa: F401 (its fixture)

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.usefixtures("handoffs_removed")]

NOTE = "Week 3: nobody in the tutorial knew."
SESSION_KEY = f"bookchat:session:{BOOK}"
HANDOFFS_KEY = f"bookchat:handoffs:{BOOK}"


@pytest.fixture(autouse=True)
def own_data_dir(settings, tmp_path):
    """Tombstones (and archives) of this test's erasures in a folder of its own."""
    settings.DATA_DIR = tmp_path
    return tmp_path


def held(session_id: str, answer_id: str) -> tuple[bool, bool]:
    """Whether the server still has the conversation, and a hand-off of the answer."""
    from audit.models import Handoff
    from chat.models import Conversation

    return committed(lambda: (Conversation.objects.filter(id=session_id).exists(),
                              Handoff.objects.filter(answer_id=answer_id).exists()))


def downloaded(download) -> dict:
    with open(download.path(), encoding="utf-8") as file:
        return json.load(file)


def focused_class(page) -> str:
    return page.evaluate("document.getElementById('bookchat-widget').shadowRoot.activeElement.className")


def hand_off_in_the_widget(page) -> str:
    page.locator(".bc-launcher").click()
    ask_widget(page, NOT_COVERED)
    answer = page.locator(".bc-answer[data-state=done][data-refused=true]").last
    answer.wait_for()
    answer.locator(".bc-handoff-prominent .bc-handoff-open").click()
    answer.locator(".bc-handoff-note").fill(NOTE)
    answer.locator(".bc-handoff-send").click()
    answer.locator(".bc-handoff-status[data-status=open]").wait_for()
    return answer.get_attribute("data-answer-id")


def test_widget_my_data_downloads_then_deletes_this_browsers_conversation_and_hand_offs(
        servers, open_page, widget_key):
    bookchat, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    answer_id = hand_off_in_the_widget(page)
    session_id = page.evaluate(f"sessionStorage.getItem('{SESSION_KEY}')")
    assert session_id and held(session_id, answer_id) == (True, True)

    about = page.locator(".bc-footer a.bc-about")
    assert about.get_attribute("href") == f"{bookchat.url}/privacy/" and about.get_attribute("target") == "_blank"
    opener = page.locator(".bc-my-data-open")
    opener.focus()
    page.keyboard.press("Enter")  # by keyboard: the box opens with its first button focused
    assert opener.get_attribute("aria-expanded") == "true" and focused_class(page) == "bc-my-data-download"
    screenshot(page, "widget-my-data")
    with page.expect_download() as download:
        page.keyboard.press("Enter")
    document = downloaded(download.value)
    assert download.value.suggested_filename == "bookchat-my-data.json"
    assert [c["id"] for c in document["conversations"]] == [session_id]
    assert NOT_COVERED in json.dumps(document["conversations"]) and NOTE in json.dumps(document["handoffs"])

    page.once("dialog", lambda dialog: dialog.dismiss())  # not confirmed: nothing is deleted
    page.locator(".bc-my-data-erase").click()
    assert held(session_id, answer_id) == (True, True)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(".bc-my-data-erase").click()
    page.locator(".bc-my-data-status", has_text="Deleted: 1 conversation(s), 1 question(s)").wait_for()
    assert held(session_id, answer_id) == (False, False)
    assert page.evaluate(f"[sessionStorage.getItem('{SESSION_KEY}'), localStorage.getItem('{HANDOFFS_KEY}')]") \
        == [None, None], "the widget forgot the ids"
    assert page.locator(".bc-log .bc-empty").is_visible() and page.locator(".bc-answer").count() == 0
    assert errors == []


def test_page_my_data_downloads_then_deletes_the_sessions_conversation(servers, open_page):
    from chat.models import Turn

    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".sources").wait_for()
    answer_id = turn.get_attribute("data-answer-id")
    session_id = committed(lambda: str(Turn.objects.get(answer_id=answer_id).conversation_id))
    with page.expect_download() as download:
        page.locator("#my-data button[data-my-data=download]").click()
    assert QUESTION in json.dumps(downloaded(download.value)["conversations"])
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#my-data button[data-my-data=erase]").click()
    page.locator(".my-data-status", has_text="Deleted: 1 conversation(s)").wait_for()
    assert held(session_id, answer_id) == (False, False)
    assert errors == []
