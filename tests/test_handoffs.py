"""Hand-offs to the course staff and the staff's answers, as services (``audit.handoffs``,
``chat.pipeline.staff_answers``), on the real database and the bundled manual: an answer handed off with a copy
of its conversation, once; the staff's reply with its citations, kept as a staff answer; a decline; and what each
refuses."""

from __future__ import annotations

import uuid

import pytest

from audit import handoffs
from audit.models import AuditLog, Handoff
from bookchat.base.errors import NotFound, RequestError
from chat.models import StaffAnswer
from chat.pipeline.answering import answer_question
from chat.pipeline.questions import AskRequest
from chat.pipeline.staff_answers import cite, section_text
from ingestion.models import Book, Chunk

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"


@pytest.fixture(autouse=True)
def manual(manual_book, no_llm):
    return Book.objects.get(slug=BOOK)


def ask(question: str, session_id: str | None = None):
    answer = answer_question(AskRequest(question=question, book=BOOK, channel="api",
                                        session_id=uuid.UUID(session_id) if session_id else None))
    return answer


def a_section(manual: Book) -> Chunk:
    return Chunk.objects.filter(book=manual, document__path="using/01-ingest.md", anchor__gt="").order_by(
        "ordinal").first()


def test_an_answer_handed_off_keeps_its_conversation_and_is_handed_off_once():
    first = ask("How do I ingest a folder?")
    second = ask("And how do I upload chapters in the admin?", session_id=first.session_id)
    handoff, created = handoffs.hand_off(uuid.UUID(second.answer_id), note="  I tried twice.  ", channel="widget")
    assert created and handoff.status == Handoff.Status.OPEN and handoff.book_slug == BOOK
    assert handoff.note == "I tried twice." and handoff.session_id == uuid.UUID(second.session_id)
    assert [turn["question"] for turn in handoff.conversation] == ["How do I ingest a folder?",
                                                                 "And how do I upload chapters in the admin?"]
    assert handoff.conversation[-1]["answer"] == second.answer and handoff.conversation[-1]["sources"]
    again, created = handoffs.hand_off(uuid.UUID(second.answer_id), note="another note", channel="widget")
    assert not created and again.pk == handoff.pk and again.note == "I tried twice."
    assert len(handoff.token) >= 40 and handoffs.by_token(handoff.token).pk == handoff.pk


def test_the_conversation_is_read_from_the_turn_when_the_audit_row_is_missing():
    answer = ask("How do I ingest a folder?")
    AuditLog.objects.filter(answer_id=answer.answer_id).delete()
    handoff, created = handoffs.hand_off(uuid.UUID(answer.answer_id), channel="page")
    assert created and handoff.question == "How do I ingest a folder?" and handoff.conversation[-1]["sources"]


@pytest.mark.parametrize(("arguments", "error"), [
    ({"answer_id": "unknown"}, "unknown_answer"),
    ({"book_slug": "another-book"}, "unknown_answer"),
    ({"note": "x" * (Handoff.NOTE_MAX + 1)}, "note_too_long"),
])
def test_what_a_hand_off_refuses_stores_nothing(arguments, error):
    answer = ask("How do I ingest a folder?")
    answer_id = uuid.uuid4() if arguments.pop("answer_id", None) else uuid.UUID(answer.answer_id)
    with pytest.raises((NotFound, RequestError)) as refused:
        handoffs.hand_off(answer_id, channel="api", **arguments)
    assert refused.value.code == error
    assert not Handoff.objects.exists()


def test_a_key_bound_to_the_book_hands_off_its_answers():
    answer = ask("How do I ingest a folder?")
    handoff, created = handoffs.hand_off(uuid.UUID(answer.answer_id), channel="widget", book_slug=BOOK)
    assert created
    with pytest.raises(NotFound):
        handoffs.hand_off(uuid.UUID(answer.answer_id), channel="widget", book_slug="another-book")


def test_a_reply_cites_sections_of_the_book_and_is_kept_as_a_staff_answer(manual):
    handoff, _ = handoffs.hand_off(uuid.UUID(ask("Can I import pages from Notion?").answer_id), channel="page")
    section = a_section(manual)
    handoffs.reply(handoff, answer="Not directly: export them as Markdown, then upload them [1].",
                   citations=[section.id, section.id])
    handoff.refresh_from_db()
    assert handoff.status == Handoff.Status.ANSWERED and handoff.replied_at is not None
    assert [c["heading_path"] for c in handoff.citations] == [section.heading_path]
    assert handoff.citations[0]["text"] == section_text(manual, section.document.path, section.heading_path)
    kept = StaffAnswer.objects.get(pk=handoff.staff_answer_id)
    assert kept.question == "Can I import pages from Notion?" and kept.book == manual
    assert kept.question_vector is not None and kept.embedder and kept.status == StaffAnswer.Status.ACTIVE
    status = handoffs.status(handoff)
    assert status["reply"]["citations"][0].url == section.url
    assert section.url.split("#")[0] in status["reply"]["answer_html"]


def test_a_reply_not_kept_makes_no_staff_answer(manual):
    handoff, _ = handoffs.hand_off(uuid.UUID(ask("Can I import pages from Notion?").answer_id), channel="page")
    handoffs.reply(handoff, answer="Not directly [1].", citations=[a_section(manual).id], keep=False)
    assert handoff.staff_answer is None and not StaffAnswer.objects.exists()


@pytest.mark.parametrize(("answer", "citations", "error"), [
    ("", None, "empty_answer"),
    ("See [2].", None, "invalid_citation"),
    ("See [1].", ["not-a-passage"], "not_a_section"),
    ("See [1].", ["https://elsewhere.example/page#part"], "not_a_section"),
])
def test_what_a_reply_refuses_changes_nothing(manual, answer, citations, error):
    handoff, _ = handoffs.hand_off(uuid.UUID(ask("Can I import pages from Notion?").answer_id), channel="page")
    with pytest.raises(RequestError) as refused:
        handoffs.reply(handoff, answer=answer, citations=[a_section(manual).id] if citations is None else citations)
    assert refused.value.code == error
    handoff.refresh_from_db()
    assert handoff.status == Handoff.Status.OPEN and not StaffAnswer.objects.exists()


def test_a_section_is_cited_by_its_url(manual):
    section = a_section(manual)
    assert [c["chunk_id"] for c in cite(manual, [section.url])] == [section.id]


def test_a_decline_needs_a_reason_and_closes_the_hand_off():
    handoff, _ = handoffs.hand_off(uuid.UUID(ask("Can I import pages from Notion?").answer_id), channel="page")
    with pytest.raises(RequestError):
        handoffs.decline(handoff, reason="  ")
    handoffs.decline(handoff, reason="This course doesn't use Notion.")
    assert handoffs.status(handoff)["declined_reason"] == "This course doesn't use Notion."
    with pytest.raises(RequestError) as refused:
        handoffs.note_coverage(handoff)
    assert refused.value.code == "handoff_closed"


@pytest.mark.parametrize("token", ["not-a-token", "", "x" * 43, "a\x00" * 20, "../" * 20, "é" * 43])
def test_a_wrong_token_finds_nothing(token):
    with pytest.raises(NotFound):
        handoffs.by_token(token)
