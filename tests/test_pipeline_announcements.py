"""chat.pipeline.announcements: what chat tells the audit trail, as an ``AuditRecord``. Who asked travels with every
record, evaluation's questions are never sent, a failing receiver never fails the answer, and a question that fails
after validation is told (server-side failures only) and still raised."""

from __future__ import annotations

import logging
import uuid

import pytest

from bookchat.base.errors import DeadlineExceeded, NotFound
from chat.pipeline.announcements import AuditRecord, Outcome, answered, audit_failures, audited_source, send_audit
from chat.pipeline.deadline import Deadline
from chat.pipeline.questions import AskRequest

pytestmark = pytest.mark.django_db  # the audit trail's own receiver writes its row (rolled back with the test)


@pytest.fixture
def told():
    """The records ``answered`` carries during the test."""
    records = []

    def listen(sender, *, record, **kwargs):
        records.append(record)

    answered.connect(listen, dispatch_uid="test-announcements")
    yield records
    answered.disconnect(dispatch_uid="test-announcements")


def ask(channel: str = "api") -> AskRequest:
    return AskRequest(question="How do I install it?", selected_text="pip", book="guide", channel=channel,
                      api_key_id=3, api_key_name="docs site", client_ip="203.0.113.9")


def test_a_record_carries_who_asked_and_the_fields_given(told):
    answer_id = uuid.uuid4()
    send_audit(AuditRecord.of(ask(), outcome=Outcome.ANSWERED, answer_id=answer_id, book_slug="guide",
                              latency_ms=12))
    assert told == [AuditRecord(outcome=Outcome.ANSWERED, answer_id=answer_id, channel="api", api_key_id=3,
                                api_key_name="docs site", client_ip="203.0.113.9", question="How do I install it?",
                                selected_text="pip", book_slug="guide", latency_ms=12)]


def test_evaluation_questions_are_never_told(told):
    send_audit(AuditRecord.of(ask("evaluate"), outcome=Outcome.ANSWERED, answer_id=uuid.uuid4()))
    assert told == []


def test_a_failing_receiver_is_logged_and_never_fails_the_answer(told, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("audit table locked")

    answered.connect(broken, dispatch_uid="test-broken-receiver")
    try:
        with caplog.at_level(logging.ERROR, logger="chat.pipeline.announcements"):
            send_audit(AuditRecord.of(ask(), outcome=Outcome.ANSWERED, answer_id=uuid.uuid4()))
    finally:
        answered.disconnect(dispatch_uid="test-broken-receiver")
    assert len(told) == 1
    assert any("audit table locked" in r.getMessage() for r in caplog.records)


def test_audited_source_keeps_the_audit_fields_only():
    kept = audited_source({"n": 1, "chunk_id": "c1", "url": "/x", "text": "the whole passage", "excerpt": "…"})
    assert kept["n"] == 1 and kept["url"] == "/x" and kept["cited"] is None
    assert "text" not in kept and "excerpt" not in kept


@pytest.mark.parametrize(("error", "code", "message"), [
    (ValueError("bad vector"), "internal_error", "ValueError: bad vector"),
    (DeadlineExceeded("out of time in retrieval"), "timeout", "out of time in retrieval"),
])
def test_a_server_side_failure_after_validation_is_told_and_raised(told, error, code, message):
    with pytest.raises(type(error)), audit_failures(ask(), Deadline(60)):
        raise error
    assert len(told) == 1
    assert (told[0].error_code, told[0].error_message, told[0].book_slug) == (code, message, "guide")
    assert told[0].outcome == (Outcome.TIMED_OUT if code == "timeout" else Outcome.FAILED)


def test_a_client_error_is_raised_but_not_told(told):
    with pytest.raises(NotFound), audit_failures(ask(), Deadline(60)):
        raise NotFound("no such chapter", code="unknown_chapter")
    assert told == []
