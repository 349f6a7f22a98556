"""The course staff's answer from end to end, in Debian's Chromium through Playwright: a student on the chat page and
one in the widget on a docs page (another origin) get a refusal and hand it off with a note; a reviewer whose
admin is limited to the book replies to each in the admin's inbox, citing one section picked from the book's
outline by searching as they type (the first reply kept as a staff answer, as the form offers by default); each
student sees the reply with its citation in the same conversation and after a reload; then a second student asks
the question again in other words and is served the staff answer, labelled "Answered by the course staff on DATE",
and a question the book answers gets the book's answer.

The fixtures are test_browser.py's (one live server, one Chromium per module); every page watches its console.
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import pytest

from tests.conftest import committed
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    admin_user,
    ask_widget,
    browser,
    browser_settings,
    database_open,
    log_in,
    open_docs,
    open_page,
    servers,
    widget_key,
)
from tests.test_handoffs_browser import (  # noqa: F401 (its fixture)
    NOT_COVERED,
    check_reply,
    check_widget_reply,
    handoffs_removed,
    stored,
)

# A drill (make drills): two students and a reviewer in Chromium, ~7 s; make test keeps the hand-off browser tests.
pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.usefixtures("handoffs_removed"),
              pytest.mark.drill]

NOTE = "We asked in the tutorial and nobody knew."
REPLY = "The book doesn't bake: ingest your recipes as a folder of Markdown instead [1]."
# The question asked again by another student: a near copy ("what's" for "What is", no question mark).
AGAIN = "what's the best recipe for chocolate chip cookies"
ANSWERED = "How do I ingest a folder?"  # the manual answers it


@pytest.fixture
def staff_answers_removed(servers):
    yield
    from chat.models import StaffAnswer

    committed(lambda: StaffAnswer.objects.all().delete())


def reviewer_of_the_book(admin_user) -> None:
    """A reviewer whose admin shows only the manual."""
    from ingestion.models import Book, BookAccess

    user = admin_user("rhea", groups=["Reviewers"])
    committed(lambda: BookAccess.objects.create(user=user).books.set([Book.objects.get(slug=BOOK)]))


def hand_off_on_the_page(page) -> str:
    page.fill("#question", NOT_COVERED)
    page.press("#question", "Enter")
    turn = page.locator("article.turn:not(.pending)").last
    turn.locator(".suggestions").wait_for()
    assert turn.locator(".answer.refused").count() == 1, "a refusal"
    answer_id = turn.get_attribute("data-answer-id")
    turn.locator("details.handoff.prominent summary").click()
    turn.locator("textarea[name=note]").fill(NOTE)
    turn.locator(".handoff-form button[type=submit]").click()
    turn.locator(".handoff-status[data-status=open]").wait_for()
    return answer_id


def hand_off_in_the_widget(page) -> str:
    page.locator(".bc-launcher").click()
    ask_widget(page, NOT_COVERED)
    answer = page.locator(".bc-answer[data-state=done][data-refused=true]").last
    answer.wait_for()
    answer_id = answer.get_attribute("data-answer-id")
    answer.locator(".bc-handoff-prominent .bc-handoff-open").click()
    answer.locator(".bc-handoff-note").fill(NOTE)
    answer.locator(".bc-handoff-send").click()
    answer.locator(".bc-handoff-status[data-status=open]").wait_for()
    return answer_id


def reply_in_the_admin(page, base: str, answer_id: str, *, keep: bool) -> str:
    """The reviewer opens the hand-off from the inbox, cites the section the search finds first for "ingest fol",
    and sends the reply: the cited section's URL."""
    handoff = stored(answer_id)
    page.goto(f"{base}/admin/audit/handoff/?status__exact=open")
    # The list's links carry its filters (``?_changelist_filters=…``).
    page.locator(f"#result_list a[href*='/audit/handoff/{handoff.pk}/change/']").first.click()
    assert NOTE in page.text_content("#content"), "the student's note is in the conversation shown"
    page.fill("#id_answer", REPLY)
    page.fill("#id_citations_search", "ingest fol")
    page.locator("#id_citations_results [role=option]").first.wait_for()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert "Cited as [1]" in page.text_content(".bookchat-picker-status")
    assert page.is_checked("#id_keep"), "keeping the reply as a staff answer is the default"
    if not keep:
        page.uncheck("#id_keep")
    page.click("button[value=reply]")
    page.wait_for_url(f"{base}/admin/audit/handoff/")
    handoff = stored(answer_id)
    assert handoff.status == "answered" and len(handoff.citations) == 1
    return handoff.citations[0]["url"]


@pytest.mark.usefixtures("staff_answers_removed")
def test_a_refusal_handed_off_is_answered_by_the_staff_reaches_both_students_and_answers_the_next_one(
        servers, open_page, widget_key, admin_user):
    bookchat, docs = servers
    student, student_errors = open_page(f"{bookchat.url}/?book={BOOK}")
    on_page = hand_off_on_the_page(student)
    reader, reader_errors = open_docs(open_page, docs, widget_key(docs.origin))
    in_widget = hand_off_in_the_widget(reader)

    reviewer_of_the_book(admin_user)
    staff, staff_errors = open_page(f"{bookchat.url}/admin/login/")
    log_in(staff, bookchat.url, "rhea")
    section_url = reply_in_the_admin(staff, bookchat.url, on_page, keep=True)
    assert reply_in_the_admin(staff, bookchat.url, in_widget, keep=False) == section_url

    # Each student: the reply under the answer in the same conversation, and there after a reload.
    student.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    check_reply(student.locator(f"#answer-{on_page} .handoff-status[data-status=answered]"), section_url)
    student.reload()
    check_reply(student.locator(f"#answer-{on_page} .handoff-status[data-status=answered]"), section_url)
    reader.locator(".bc-close").click()
    reader.locator(".bc-launcher").click()
    check_widget_reply(reader.locator(f".bc-answer[data-answer-id='{in_widget}'] "
                                      ".bc-handoff-status[data-status=answered]"), section_url)
    reader.reload()
    reader.locator(".bc-launcher").click()
    check_widget_reply(reader.locator(".bc-staff .bc-handoff-status[data-status=answered]"), section_url)

    # A second student, on the page: the staff answer, labelled, with its citation; the book's own answer after.
    second, second_errors = open_page(f"{bookchat.url}/?book={BOOK}")
    second.fill("#question", AGAIN)
    second.press("#question", "Enter")
    turn = second.locator("article.turn:not(.pending)").last
    turn.locator(".badge.level-staff").wait_for()
    assert "Answered by the course staff on" in turn.locator(".badge.level-staff").text_content()
    assert "ingest your recipes as a folder" in turn.locator(".answer-text").text_content()
    assert turn.locator(".answer-text a.bookchat-cite").count() == 1
    assert section_url.split("#")[0] in turn.locator(".sources").inner_html()
    second.fill("#question", ANSWERED)
    second.press("#question", "Enter")
    second.wait_for_function("() => document.querySelectorAll('article.turn:not(.pending)').length === 2")
    book_turn = second.locator("article.turn:not(.pending)").last
    book_turn.locator(".sources").wait_for()
    assert book_turn.locator(".badge.level-staff").count() == 0, "the book answers it: the book's answer"
    assert "ingest your recipes" not in book_turn.locator(".answer-text").text_content()
    from chat.models import StaffAnswer

    kept = committed(lambda: StaffAnswer.objects.get())
    assert (kept.question, kept.served) == (NOT_COVERED, 1)
    assert student_errors == reader_errors == staff_errors == second_errors == []
