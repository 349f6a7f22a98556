"""chat.channels.page: which book the chat page shows (asked for, then the session's, then the default, then the
first), one answer as the page shows it (its level and refusal in words, citation markers linked to the cards
below it, the reader's vote), votes in one query, and the no-JavaScript vote going back only to this site. The page
end to end: tests/test_chat_page.py. An answer of the course staff (level ``staff``) labelled with its date, and
"Ask the course staff" standing out where the book fell short."""

from __future__ import annotations

import uuid
from dataclasses import asdict

import pytest
from django.test import RequestFactory
from django.utils import timezone

from chat.channels.access import PAGE_CONVERSATIONS
from chat.channels.page import _current_book, feedback, turn_context, votes_on
from chat.models import Conversation, Feedback, Turn
from chat.pipeline.answers import StaffAnswerRef
from ingestion.models import Book, DefaultBook
from tests.test_channels_responses import an_answer, source


def test_the_book_asked_for_then_the_sessions_then_the_first(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": "beta"}
    books = [Book(slug="alpha"), Book(slug="beta"), Book(slug="gamma")]
    request = RequestFactory().get("/")
    request.session = {"bookchat_book": "gamma"}
    assert _current_book(request, books, "alpha").slug == "alpha"
    assert _current_book(request, books, "no-such-book").slug == "gamma"
    request.session = {}
    assert _current_book(request, books, None).slug == "beta"  # the default
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": "not-indexed-yet"}
    assert _current_book(request, books, None).slug == "alpha"
    assert _current_book(request, [], "alpha") is None


@pytest.mark.django_db
def test_the_stored_default_book_counts_when_no_setting_names_one(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": ""}
    DefaultBook.choose("beta", by="test")
    request = RequestFactory().get("/")
    request.session = {}
    assert _current_book(request, [Book(slug="alpha"), Book(slug="beta")], None).slug == "beta"


def test_an_answer_links_its_markers_to_its_cards_and_says_its_level_in_words():
    turn = Turn(question="How do I install it?", answer="Run `pip install` [1].", answer_id=uuid.uuid4(),
                response=asdict(an_answer(sources=[source(1)])))
    shown = turn_context(turn, "up")
    assert f'href="#answer-{turn.answer_id}-source-1"' in shown["answer_html"]
    assert (shown["level"], shown["level_label"], shown["feedback"]) == ("high", "High confidence", "up")
    assert shown["sources"] == [source(1)]


@pytest.mark.parametrize(("reason", "label"), [("unsure", "Not answered directly"), ("not_covered", "Not covered"),
                                               ("unanswerable", "Not covered")])
def test_a_refusal_says_why_in_words(reason, label):
    turn = Turn(question="q", answer="", answer_id=uuid.uuid4(), refused=True,
                response=asdict(an_answer(refused=True, refusal_reason=reason, confidence_level="low")))
    shown = turn_context(turn, None)
    assert (shown["refused"], shown["refusal_label"], shown["level_label"]) == (True, label, "Low confidence")


def test_a_turn_saved_without_a_response_still_shows():
    shown = turn_context(Turn(question="q", answer="", answer_id=uuid.uuid4(), refused=True, response={}), None)
    assert shown["refused"] is True and shown["sources"] == [] and shown["level_label"] == ""


@pytest.fixture
def answered() -> Turn:
    book = Book.objects.create(slug="paged-book", title="Paged", embedder_name="test", embedder_dimension=3)
    conversation = Conversation.objects.create(book=book, last_active_at=timezone.now())
    return Turn.objects.create(conversation=conversation, question="q", resolved_question="q", answer="a",
                               answer_id=uuid.uuid4())


@pytest.mark.django_db
def test_votes_on_maps_each_voted_answer_to_its_rating(answered):
    unvoted = Turn(answer_id=uuid.uuid4())
    Feedback.objects.create(answer_id=answered.answer_id, conversation_id=answered.conversation_id, rating="down",
                            channel="page")
    assert votes_on([answered, unvoted]) == {answered.answer_id: "down"}


@pytest.mark.django_db
@pytest.mark.parametrize(("back", "expected"), [("/?book=paged-book", "/?book=paged-book"),
                                                ("https://elsewhere.example/phish", "/")])
def test_the_no_javascript_vote_goes_back_to_this_site_only(answered, back, expected):
    request = RequestFactory().post("/", {"rating": "up", "next": back})
    request.session = {PAGE_CONVERSATIONS: {"paged-book": str(answered.conversation_id)}}
    response = feedback(request, answered.answer_id)
    assert response.status_code == 302 and response["Location"] == f"{expected}#answer-{answered.answer_id}"
    assert Feedback.objects.get(answer_id=answered.answer_id).channel == "page"


# -- the course staff: their answers labelled, and "Ask the course staff" under every answer ----------------------
STAFF_ANSWER = StaffAnswerRef(id=7, answered_at="2027-03-04T10:00:00+00:00")


def staff_turn(**fields) -> Turn:
    """A turn whose answer is the course staff's (a response as matching serves one: level ``staff``)."""
    return Turn(question="Can I import pages from Notion?", answer="Export them as Markdown, then upload them [1].",
                answer_id=uuid.uuid4(), response=asdict(an_answer(
                    confidence_level="staff", confidence_note=None, staff_answer=STAFF_ANSWER,
                    answer="Export them as Markdown, then upload them [1].", sources=[source(1)])), **fields)


def test_a_staff_answer_is_labelled_with_its_date_and_says_no_confidence():
    shown = turn_context(staff_turn(), None)
    assert shown["staff"] and shown["staff_answered_at"].isoformat() == "2027-03-04T10:00:00+00:00"
    assert shown["level_label"] == "Answered by the course staff" and not shown["handoff_prominent"]


@pytest.mark.parametrize(("changes", "feedback", "prominent"), [
    ({}, None, False), ({}, "up", False), ({}, "down", True),
    ({"refused": True, "refusal_reason": "not_covered", "confidence_level": "low"}, None, True),
    ({"confidence_level": "unsure"}, None, True), ({"flagged_for_review": True}, None, True),
])
def test_ask_the_course_staff_stands_out_where_the_book_fell_short(changes, feedback, prominent):
    turn = Turn(question="q", answer="a", answer_id=uuid.uuid4(), response=asdict(an_answer(**changes)))
    assert turn_context(turn, feedback)["handoff_prominent"] is prominent


@pytest.mark.django_db
def test_the_page_without_javascript_labels_a_staff_answer_and_offers_the_hand_off(client, answered):
    turn = staff_turn(conversation=answered.conversation, resolved_question="q")
    turn.save()
    session = client.session
    session[PAGE_CONVERSATIONS] = {"paged-book": str(answered.conversation_id)}
    session.save()
    html = client.get(f"/answers/{turn.answer_id}").content.decode()
    assert "Answered by the course staff on" in html and '<time datetime="2027-03-04T10:00:00+00:00">4 March 2027' \
        in html
    assert 'class="badge level-staff"' in html and "level-note" not in html and "Confidence" not in html
    assert 'class="source cited"' in html and f'href="#answer-{turn.answer_id}-source-1"' in html
    assert f'action="/answers/{turn.answer_id}/handoff"' in html and 'class="handoff"' in html
    assert 'maxlength="2000"' in html, "the form's limit comes from audit's context processor"
