"""Real-browser tests of a rate limit as a student meets it (Debian's Chromium through Playwright): on the chat page
and in the widget on the docs-site test page (another origin, which reads ``Retry-After`` through CORS), a second
question within the limit's window shows "Many questions at once — trying again in N s" and is answered by itself
once the wait is over; when that retry is refused too, the message says when to try again and nothing is sent
again by itself. A search as typed that is refused keeps its results, says so calmly, and searches the box's text
once the wait is over; the widget's searches carry its conversation's id.

The limits are a few seconds long ("1/3second"), so the waits are short. A retry is refused "too" by filling the
limit's counters while the student waits, as the rest of a class asking from the same address would. The fixtures
are test_browser.py's (one live server, one Chromium per module); every page watches its console, where Chromium
reports each 429 as a failed resource (those lines are expected here, and only those).
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlparse

import pytest

from tests.conftest import committed
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    QUESTION,
    ask_widget,
    browser,
    browser_settings,
    contrast,
    database_open,
    open_docs,
    open_page,
    servers,
    wait_for_results,
    widget_key,
)

# A drill (make drills): each test waits out real limits, the longest page and widget tests make test had.
pytestmark = [pytest.mark.slow, pytest.mark.drill, pytest.mark.needs("browser"),
              pytest.mark.usefixtures("counters_removed")]

SECOND = "How do I publish a book from CI?"
WAITING = re.compile(r"Many questions at once — trying again in \d+ s")
STOPPED = re.compile(r"Many questions at once — try again in \d+ s\.")
LIMIT = "1/3second"


@pytest.fixture
def counters_removed(servers):
    """Each test starts and ends with no request counted (the live server committed its counts)."""
    from chat.models import RateCounter

    committed(lambda: RateCounter.objects.all().delete())
    yield
    committed(lambda: RateCounter.objects.all().delete())


@pytest.fixture
def limited(settings):
    """One question per 3 s for a student: the page's session, the widget's conversation and (on a publishable key)
    the widget's address; every other limit as configured."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_PAGE": LIMIT, "RATE_CONVERSATION": LIMIT, "RATE_KEY_IP": LIMIT}


def the_class_uses_up_the_limits(seconds: float) -> None:
    """Every counter full for ``seconds`` more, as if the rest of the class had asked meanwhile."""
    from chat.models import RateCounter

    committed(lambda: RateCounter.objects.update(count=10_000, window_ends=time.time() + seconds))


def unexpected(errors: list[str]) -> list[str]:
    return [e for e in errors if "status of 429" not in e]


def reads_in_both_themes(page, note) -> bool:
    """The note's text against its background: 4.5:1 or more in light and in dark."""
    ratios = []
    for theme in ("dark", "light"):
        page.emulate_media(color_scheme=theme)
        ratios.append(contrast(*note.evaluate("n => { const s = getComputedStyle(n); "
                                              "return [s.color, s.backgroundColor]; }")))
    return min(ratios) >= 4.5


def asks(page) -> list:
    """The question requests the page sends from now on."""
    sent = []
    page.on("request", lambda r: "/api/v1/ask" in r.url and r.method == "POST" and sent.append(r))
    return sent


# -- the chat page -----------------------------------------------------------------------------------------------
def ask_on_page(page, question: str) -> None:
    page.fill("#question", question)
    page.press("#question", "Enter")


def test_page_waits_out_a_limit_and_answers_the_second_question_by_itself(servers, open_page, limited):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    sent = asks(page)
    ask_on_page(page, QUESTION)
    page.locator("article.turn:not(.pending) .sources").first.wait_for()
    ask_on_page(page, SECOND)

    note = page.locator("article.turn.pending .rate-limited")
    note.wait_for()
    assert WAITING.fullmatch(note.text_content()), note.text_content()
    page.wait_for_function("() => document.getElementById('live').textContent.startsWith('Many questions at once')")
    assert reads_in_both_themes(page, note)

    answered = page.locator("article.turn:not(.pending)").nth(1)
    answered.locator(".sources").wait_for()  # no click: sent again once the wait was over
    assert answered.locator(".question").text_content().strip().endswith(SECOND)
    assert page.locator(".rate-limited, .error").count() == 0, "the wait's note is gone with the answer"
    assert len(sent) == 3, "the first question, the refused second, and the second once more"
    assert unexpected(errors) == []


def test_page_stops_after_a_second_refusal_and_says_when_to_ask_again(servers, open_page, limited):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", color_scheme="dark")
    sent = asks(page)
    ask_on_page(page, QUESTION)
    page.locator("article.turn:not(.pending) .sources").first.wait_for()
    ask_on_page(page, SECOND)
    page.locator("article.turn.pending .rate-limited").wait_for()
    the_class_uses_up_the_limits(8)

    refusal = page.locator("article.turn.failed .error[role=alert]")
    refusal.wait_for()
    assert STOPPED.fullmatch(refusal.text_content()), refusal.text_content()
    page.wait_for_timeout(9000)  # past the wait it names: nothing is sent by itself
    assert len(sent) == 3 and refusal.is_visible(), "one retry, then the message stays"
    assert page.locator("#ask-button").is_enabled(), "the student may ask again"
    assert unexpected(errors) == []


# -- the widget on a docs site -----------------------------------------------------------------------------------
def test_widget_waits_out_a_limit_and_answers_the_second_question_by_itself(servers, open_page, widget_key, limited):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    sent = asks(page)
    page.locator(".bc-launcher").click()
    ask_widget(page, QUESTION)
    page.locator(".bc-answer[data-state=done]").first.wait_for()
    ask_widget(page, SECOND)

    note = page.locator(".bc-answer[data-state=waiting] .bc-wait")
    note.wait_for()
    assert WAITING.fullmatch(note.text_content()), note.text_content()
    assert reads_in_both_themes(page, note)
    page.wait_for_function("() => document.getElementById('bookchat-widget').shadowRoot"
                           ".querySelector('[role=status].bc-sr').textContent.startsWith('Many questions at once')")
    page.locator(".bc-answer[data-state=done]").nth(1).wait_for()  # no click: sent again after the wait
    assert page.locator(".bc-answer").count() == 2 and page.locator(".bc-error").count() == 0
    assert len(sent) == 3
    session = sent[0].post_data_json.get("session_id")
    assert session is None and sent[2].post_data_json["session_id"] == sent[1].post_data_json["session_id"]
    assert unexpected(errors) == []


def test_widget_stops_after_a_second_refusal_and_says_when_to_ask_again(servers, open_page, widget_key, limited):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    sent = asks(page)
    page.locator(".bc-launcher").click()
    ask_widget(page, QUESTION)
    page.locator(".bc-answer[data-state=done]").first.wait_for()
    ask_widget(page, SECOND)
    page.locator(".bc-answer[data-state=waiting]").wait_for()
    the_class_uses_up_the_limits(8)

    refusal = page.locator(".bc-answer[data-state=error] .bc-error[role=alert]")
    refusal.wait_for()
    assert STOPPED.fullmatch(refusal.text_content()), refusal.text_content()
    page.wait_for_timeout(9000)  # past the wait it names: nothing is sent by itself
    assert len(sent) == 3 and refusal.is_visible()
    assert page.locator(".bc-send").is_enabled(), "the student may ask again"
    assert unexpected(errors) == []


def test_widget_search_waits_out_a_limit_quietly_and_carries_the_conversation(servers, open_page, widget_key,
                                                                             settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_SEARCH": LIMIT}
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    page.locator(".bc-launcher").click()
    ask_widget(page, QUESTION)
    page.locator(".bc-answer[data-state=done]").first.wait_for()
    session = page.evaluate(f"sessionStorage.getItem('bookchat:session:{BOOK}')")
    assert session

    searches = []
    page.on("request", lambda r: "/api/v1/search?" in r.url and searches.append(r.url))
    page.locator(".bc-mode-search").click()
    box = page.locator(".bc-search-input")
    box.type("ingest", delay=30)
    wait_for_results(page, "ingest")
    box.type(" fold", delay=30)  # within 3 s of the first search: refused
    status = page.locator(".bc-search-status")
    page.wait_for_function("() => document.getElementById('bookchat-widget').shadowRoot"
                           ".querySelector('.bc-search-status').textContent.startsWith('Many searches at once')")
    assert page.locator(".bc-result").count() > 0, "the results shown stay"
    assert page.locator(".bc-error").count() == 0
    wait_for_results(page, "ingest fold")  # no keystroke: searched once the wait was over
    assert "Many searches" not in status.text_content()
    assert all(parse_qs(urlparse(url).query).get("session_id") == [session] for url in searches), searches
    assert len(searches) == 3, "the first search, the refused one, and the box's text once more"
    assert unexpected(errors) == []
