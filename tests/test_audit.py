"""The audit trail: one row per answer on every channel, written after the response and never failing it."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid

import pytest
from django.db import connection
from django.test import Client

from audit import recording
from audit.models import AuditLog
from chat.models import ApiKey, Feedback
from chat.pipeline.announcements import AuditRecord, Outcome
from tests.conftest import run_command

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SITE = "https://docs.example.org"
QUESTION = "How do I ingest a folder?"
NOT_COVERED = "What is the boiling point of tungsten in kelvin?"


@pytest.fixture(autouse=True)
def audit_settings(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0}


def ask(client, question=QUESTION, path="/api/v1/ask", **extra):
    return client.post(path, data=json.dumps({"question": question, "book": BOOK}), content_type="application/json",
                       **extra)


def final_event(streaming_response) -> dict:
    events = b"".join(streaming_response.streaming_content).decode()
    return json.loads(events.split("event: final\ndata: ", 1)[1].split("\n", 1)[0])


def test_an_api_answer_writes_one_complete_row(client):
    response = ask(client, REMOTE_ADDR="203.0.113.9")
    body = response.json()
    row = AuditLog.objects.get(answer_id=body["answer_id"])
    assert AuditLog.objects.count() == 1
    assert (row.channel, row.book_slug, row.question, row.answer) == ("api", BOOK, QUESTION, body["answer"])
    assert row.status == "answered" and not row.refused and not row.flagged
    assert row.generator == "extractive" and row.confidence == body["confidence"]
    assert row.confidence_level == body["confidence_level"]
    assert str(row.session_id) == body["session_id"]
    assert [s["chunk_id"] for s in row.sources] == [s["chunk_id"] for s in body["sources"]]
    assert all(s["heading_path"] and s["score"] is not None for s in row.sources)
    assert row.grounding and row.retrieval["candidates"] > 0
    assert set(row.timings_ms) >= {"retrieval", "generation", "grounding"} and row.latency_ms >= 0
    assert row.client_ip_hash and "203.0.113.9" not in row.client_ip_hash and len(row.client_ip_hash) == 64
    assert row.client_ip_hash == recording.hash_ip("203.0.113.9"), "the same visitor hashes the same"
    assert row.review_status == "new" and row.api_key_id is None


def test_a_refused_question_is_recorded_with_the_closest_sections(client):
    body = ask(client, NOT_COVERED).json()
    assert body["refused"]
    row = AuditLog.objects.get(answer_id=body["answer_id"])
    assert row.status == "not_covered" and row.refused and row.sources == []
    assert row.suggestions and row.suggestions[0]["heading_path"]


def test_stream_is_recorded_only_after_its_last_event_went_out(client):
    response = ask(client, path="/api/v1/ask/stream")
    chunks = iter(response.streaming_content)
    seen = b""
    for chunk in chunks:
        seen += chunk
        if b"event: final" in seen:
            break
    assert not AuditLog.objects.exists(), "the audit write waits until the whole response is sent"
    list(chunks)  # the test client closes the response when its content is used up
    row = AuditLog.objects.get()
    assert row.channel == "stream" and row.answer


def test_the_page_form_and_the_pages_own_api_calls_are_channel_page():
    browser = Client()
    browser.get(f"/?book={BOOK}")
    assert browser.post("/", {"question": QUESTION, "book": BOOK}).status_code == 302
    assert browser.post("/api/v1/ask", data=json.dumps({"question": "What does --prune do?", "book": BOOK}),
                        content_type="application/json").status_code == 200
    assert list(AuditLog.objects.values_list("channel", flat=True)) == ["page", "page"]


def test_widget_rows_name_the_key_but_never_hold_it(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    key = ApiKey(name="docs site", kind=ApiKey.PUBLISHABLE, allowed_origins=SITE)
    raw = key.issue()
    key.save()
    response = client.post(f"/api/v1/ask?key={raw}", data=json.dumps({"question": QUESTION, "book": BOOK}),
                           content_type="application/json", headers={"Origin": SITE})
    assert response.status_code == 200
    row = AuditLog.objects.get()
    assert (row.channel, row.api_key_id, row.api_key_name) == ("widget", key.pk, "docs site")
    assert raw not in json.dumps(list(AuditLog.objects.values()), default=str)


def test_the_cli_ask_command_is_recorded():
    code, out, _ = run_command("ask", QUESTION, "--book", BOOK, "--json")
    assert code == 0
    row = AuditLog.objects.get(answer_id=json.loads(out)["answer_id"])
    assert row.channel == "cli" and row.client_ip_hash == ""


def test_quality_evaluation_is_not_recorded(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": QUESTION, "expected_pages": ["using/01-ingest.md"]}) + "\n")
    code, out, err = run_command("evaluate", "--questions", str(questions), "--book", BOOK, "--json")
    assert code == 0, err
    assert json.loads(out)["questions"] == 1, "the question was asked"
    assert not AuditLog.objects.exists()


def test_a_timeout_after_validation_is_recorded_as_timeout(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": 0.000001}
    assert ask(client).status_code == 504
    row = AuditLog.objects.get()
    assert (row.status, row.error_code, row.question, row.answer) == ("timeout", "timeout", QUESTION, "")


def test_invalid_questions_are_not_answers_and_are_not_recorded(client):
    assert ask(client, "").status_code == 400
    assert client.post("/api/v1/ask", data=json.dumps({"question": QUESTION, "book": "no-such-book"}),
                       content_type="application/json").status_code == 404
    assert not AuditLog.objects.exists()


class ErrorRecords(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_broken_audit_table_never_fails_the_answer(client):
    failures = recording.write_failures()
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditlog RENAME TO audit_auditlog_broken")
    # Listen on the logger itself: whether bookchat's loggers reach the root logger (where caplog listens) depends
    # on what configured logging last (settings.LOGGING says they don't).
    errors = ErrorRecords()
    recording_logger = logging.getLogger("audit.recording")
    recording_logger.addHandler(errors)
    try:
        response = ask(client)
        streamed = ask(client, path="/api/v1/ask/stream")
        final = final_event(streamed)
        code, out, _ = run_command("ask", QUESTION, "--book", BOOK, "--json")
    finally:
        recording_logger.removeHandler(errors)
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditlog_broken RENAME TO audit_auditlog")
    assert response.status_code == 200 and response.json()["sources"]
    assert final["answer"] and code == 0 and json.loads(out)["answer"]
    assert recording.write_failures() == failures + 3
    assert sum("writing the audit record" in r.getMessage() for r in errors.records) == 3
    assert not AuditLog.objects.exists()
    assert ask(client).status_code == 200 and AuditLog.objects.count() == 1, "the trail resumes when it can"


def test_feedback_is_copied_to_the_row_and_survives_the_conversation(client):
    body = ask(client).json()
    vote = client.post(f"/api/v1/answers/{body['answer_id']}/feedback", content_type="application/json",
                       data=json.dumps({"rating": "down", "comment": "wrong page", "session_id": body["session_id"]}))
    assert vote.status_code == 201
    row = AuditLog.objects.get(answer_id=body["answer_id"])
    assert (row.feedback_rating, row.feedback_comment) == ("down", "wrong page") and row.feedback_at
    from chat.models import Conversation

    Conversation.objects.all().delete()  # what the 30-minute purge does
    assert AuditLog.objects.get(answer_id=body["answer_id"]).feedback_rating == "down"


def test_a_vote_cast_before_the_row_is_written_is_not_lost():
    answer_id = uuid.uuid4()
    Feedback.objects.create(answer_id=answer_id, conversation_id=uuid.uuid4(), rating="up", channel="widget")
    row = recording.write(AuditRecord(outcome=Outcome.ANSWERED, answer_id=answer_id, channel="widget", question="q",
                                      book_slug=BOOK))
    assert row.feedback_rating == "up"


def test_a_record_with_every_field_set_is_the_row_it_writes():
    """Every field of an ``AuditRecord`` reaches its row under its own name, except the three the row keeps in its
    own words (the outcome as a status, the IP as a keyed hash) or not at all (why it refused: /metrics')."""
    record = AuditRecord(
        outcome=Outcome.HELD_BACK, answer_id=uuid.uuid4(), channel="widget", question="How do I ingest a folder?",
        selected_text="manage.py ingest", api_key_id=7, api_key_name="docs site", client_ip="203.0.113.5",
        learner="5f2a9c", book_slug=BOOK, session_id=uuid.uuid4(),
        resolved_question="How do I ingest a folder? (of Markdown)",
        answer="The closest sections:", draft_answer="Run ingest [1].", generator="extractive",
        sources=[{"n": 1, "chunk_id": "c1", "heading_path": "Using > Ingest", "chapter": "Using", "section": "Ingest",
                  "document": "using/ingest.md", "url": "/using/ingest#folder", "score": 0.81, "cited": False}],
        suggestions=[{"title": "Ingest", "heading_path": "Using > Ingest", "url": "/using/ingest"}],
        confidence=0.41, confidence_level="low", refused=True, refusal_reason="unsure", flagged=True,
        grounding={"passed": True, "reason": "", "cited_sources": [1]}, retrieval={"best_cosine": 0.8},
        error_code="timeout", error_message="out of time", latency_ms=123, timings_ms={"retrieval": 1.5},
        llm_usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "counted_by": "server"},
        generation_failure="timeout", generation_failure_message="the model did not answer within 1 s")
    assert all(getattr(record, f.name) for f in dataclasses.fields(record)), "each field set, to be seen arriving"
    written = recording.write(record)
    row = AuditLog.objects.get(pk=written.pk)
    copied = {f.name for f in dataclasses.fields(record)} - {"outcome", "client_ip", "refusal_reason"}
    assert {name: getattr(row, name) for name in copied} == {name: getattr(record, name) for name in copied}
    assert row.status == AuditLog.Status.UNSURE and row.client_ip_hash == recording.hash_ip("203.0.113.5")
    assert not hasattr(row, "refusal_reason")


def test_client_ip_behind_trusted_proxies(settings, rf):
    from bookchat.base.security import client_ip

    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7")
    assert client_ip(request) == "10.0.0.1", "without trusted proxies the header can be forged"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "TRUSTED_PROXIES": 1}
    assert client_ip(request) == "198.51.100.7"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "TRUSTED_PROXIES": 2}
    assert client_ip(request) == "6.6.6.6"


def test_every_outcome_the_pipeline_names_is_stored_as_one_of_the_trails_statuses():
    assert set(recording.STATUS_OF) == set(Outcome), "an outcome without a status would fail its audit write"
    assert set(recording.STATUS_OF.values()) == set(AuditLog.Status)
    assert recording.STATUS_OF[Outcome.HELD_BACK] == recording.STATUS_OF[Outcome.UNSURE] == AuditLog.Status.UNSURE
    assert recording.STATUS_OF[Outcome.UNANSWERABLE] == AuditLog.Status.NOT_COVERED
    assert recording.STATUS_OF[Outcome.TIMED_OUT] == AuditLog.Status.TIMEOUT
