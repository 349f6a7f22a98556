"""chat.channels.feedback: a vote is taken only from the conversation that got the answer (and, with a key bound to
a book, only on that book's answers), voting again replaces it, and an opened section is recorded only when some
receiver knows the search."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from bookchat.base.errors import NotFound, RequestError
from chat.channels.feedback import record_feedback, record_opened
from chat.models import Conversation, Feedback, Turn
from chat.pipeline.announcements import feedback_given, search_opened
from ingestion.models import Book

pytestmark = pytest.mark.django_db


@pytest.fixture
def answer() -> Turn:
    book = Book.objects.create(slug="voted-book", title="Voted", embedder_name="test", embedder_dimension=3)
    conversation = Conversation.objects.create(book=book, last_active_at=timezone.now())
    return Turn.objects.create(conversation=conversation, question="q", resolved_question="q", answer="a",
                               answer_id=uuid.uuid4())


def vote(turn: Turn, rating: str = "up", *, sessions=None, book_slug=None, comment=""):
    return record_feedback(turn.answer_id, rating=rating, comment=comment, channel="api", book_slug=book_slug,
                           session_ids=[turn.conversation_id] if sessions is None else sessions)


def test_voting_again_replaces_the_vote_and_tells_the_audit_trail(answer):
    told = []
    feedback_given.connect(lambda sender, **kw: told.append(kw["rating"]), weak=False, dispatch_uid="test-vote")
    try:
        _, created = vote(answer, "up")
        feedback, created_again = vote(answer, "down", comment="wrong version")
    finally:
        feedback_given.disconnect(dispatch_uid="test-vote")
    assert (created, created_again) == (True, False)
    assert Feedback.objects.filter(answer_id=answer.answer_id).count() == 1
    assert (feedback.rating, feedback.comment, feedback.conversation_id) == ("down", "wrong version",
                                                                             answer.conversation_id)
    assert told == ["up", "down"]


def test_an_unknown_answer_is_not_found():
    with pytest.raises(NotFound) as refused:
        record_feedback(uuid.uuid4(), rating="up", comment="", session_ids=[], channel="api")
    assert refused.value.code == "unknown_answer"


def test_another_conversation_may_not_vote(answer):
    with pytest.raises(RequestError) as refused:
        vote(answer, sessions=[uuid.uuid4()])
    assert (refused.value.code, refused.value.status) == ("not_your_answer", 403)
    assert not Feedback.objects.filter(answer_id=answer.answer_id).exists()


def test_a_key_bound_to_another_book_may_not_vote(answer):
    with pytest.raises(RequestError) as refused:
        vote(answer, book_slug="some-other-book")
    assert refused.value.code == "key_book"
    assert vote(answer, book_slug="voted-book")[1] is True


def test_an_opened_section_of_a_search_nobody_knows_is_not_found():
    with pytest.raises(NotFound) as refused:
        record_opened(uuid.uuid4(), 1)
    assert refused.value.code == "unknown_search"


def test_an_opened_section_is_accepted_when_a_receiver_records_it():
    search_id = uuid.uuid4()
    search_opened.connect(lambda sender, **kw: kw["search_id"] == search_id and kw["n"] == 2, weak=False,
                          dispatch_uid="test-opened")
    try:
        record_opened(search_id, 2)
        with pytest.raises(NotFound):
            record_opened(search_id, 3)
    finally:
        search_opened.disconnect(dispatch_uid="test-opened")
