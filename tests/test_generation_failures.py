"""What a language model's failure leaves behind when the book's own sentences answer instead: the reason on the
``GenerationFailed`` it raised (one of a closed set), the audit row's ``generation_failure`` and message, the row in
the review queue and under the admin's "model failed" filter, and ``bookchat_generation_failures_total{reason}``
counted once; a model that answers leaves none of it. Through the real ``openai`` client against the test server."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse
from prometheus_client import REGISTRY

from audit.dashboard import review_queue_filter
from audit.models import AuditLog
from bookchat.base import metrics
from chat.pipeline import generation
from chat.pipeline.announcements import AuditRecord, Outcome
from chat.pipeline.generation import FAILURE_REASONS, GenerationFailed
from tests import test_generation
from tests.test_generation import ask, configure

llm = test_generation.llm  # the LLM configured against the test server, reset around each test

pytestmark = pytest.mark.django_db

COUNTER = "bookchat_generation_failures_total"
SCAFFOLD = "Excerpts from the book:\n\n[1] (Getting started > Install)\nRun make run to start bookchat. [1]"


def failures(reason: str) -> float:
    return REGISTRY.get_sample_value(COUNTER, {"reason": reason}) or 0.0


def all_failures() -> float:
    return sum(failures(reason) for reason in (*FAILURE_REASONS, "other"))


def queued(answer_id: str) -> bool:
    return AuditLog.objects.filter(review_queue_filter(), answer_id=answer_id).exists()


@pytest.mark.parametrize(("mode", "reply", "reason"), [
    ("error", None, "server_error"),
    ("malformed", None, "malformed"),
    ("empty_choices", None, "empty"),
    ("drop", None, "cut_off"),
    ("garbage", None, "empty"),  # an HTML page: no chat chunk in it
    ("answer", SCAFFOLD, "copied_prompt"),
    ("template", None, "repeated_instructions"),
])
def test_a_failing_model_leaves_its_reason_on_the_row_in_the_queue_and_in_the_counter(llm, mode, reply, reason):
    llm.chat_mode, llm.reply, llm.reply_template = mode, reply, "{system}"
    before, total = failures(reason), all_failures()
    response = ask()
    assert response.generator == "extractive" and response.notice, response.notice
    row = AuditLog.objects.get(answer_id=response.answer_id)
    assert row.generation_failure == reason
    assert row.generation_failure_message and row.generation_failure_message in response.notice
    assert row.generator == "extractive" and row.answer == response.answer
    assert row.status in ("answered", "unsure") and not row.flagged, "the fallback's own outcome stands"
    assert queued(response.answer_id), "an answer the model never wrote goes to the reviewers"
    assert failures(reason) == before + 1
    assert all_failures() == total + 1, "counted once, under its own reason"


def test_a_model_past_its_budget_is_a_timeout(llm, settings):
    configure(settings, GENERATION_SECONDS=0.5, DEADLINE_SECONDS=30.0)
    llm.chat_mode, llm.delay = "slow", 3.0
    before = failures("timeout")
    response = ask()
    row = AuditLog.objects.get(answer_id=response.answer_id)
    assert (row.generation_failure, response.generator) == ("timeout", "extractive")
    assert "did not answer within 0.5 s" in row.generation_failure_message
    assert failures("timeout") == before + 1


def test_a_model_that_answers_leaves_no_failure(llm):
    total = all_failures()
    response = ask()
    assert response.generator == "test-model" and response.notice is None
    row = AuditLog.objects.get(answer_id=response.answer_id)
    assert (row.generation_failure, row.generation_failure_message) == ("", "")
    assert all_failures() == total
    assert not AuditLog.objects.filter(answer_id=response.answer_id).exclude(generation_failure="").exists()


def test_no_model_configured_leaves_no_failure(no_llm, manual_book):
    total = all_failures()
    response = ask()
    assert response.generator == "extractive" and response.notice is None
    assert AuditLog.objects.get(answer_id=response.answer_id).generation_failure == ""
    assert all_failures() == total


def test_a_failure_needs_a_known_reason():
    with pytest.raises(ValueError, match="unknown generation failure reason 'flaky'"):
        GenerationFailed("the model was flaky", reason="flaky")
    with pytest.raises(TypeError):
        GenerationFailed("no reason given")
    assert GenerationFailed("late", reason="timeout").reason == "timeout"


def test_metrics_know_every_reason_and_count_an_unknown_one_as_other():
    assert metrics.GENERATION_FAILURE_REASONS == generation.FAILURE_REASONS
    before = failures("other")
    metrics.on_answered(None, record=AuditRecord(answer_id=uuid.uuid4(), outcome=Outcome.ANSWERED, channel="api",
                                                 question="q", confidence_level="high", generation_failure="<script>"))
    metrics.on_answered(None, record=AuditRecord(answer_id=uuid.uuid4(), outcome=Outcome.FAILED, channel="api",
                                                 question="q", generation_failure="timeout"))
    assert failures("other") == before + 1, "a label value from outside the set is never a new series"


def test_the_admin_shows_the_failure_and_filters_by_it(llm, admin_client):
    llm.chat_mode = "error"
    failed = ask().answer_id
    llm.reset()
    fine = ask().answer_id
    rows = {str(r.answer_id): r for r in AuditLog.objects.filter(answer_id__in=[failed, fine])}
    changelist = reverse("admin:audit_auditlog_changelist")
    page = admin_client.get(changelist)
    assert "model failed: server_error" in page.content.decode(), "the filter offers each reason the rows hold"
    for query, expected in [("model_failed=any", {failed}), ("model_failed=server_error", {failed}),
                            ("model_failed=timeout", set()), ("model_failed=none", {fine})]:
        shown = {str(r.answer_id) for r in admin_client.get(f"{changelist}?{query}").context["cl"].result_list}
        assert shown & {failed, fine} == expected, query
    detail = admin_client.get(reverse("admin:audit_auditlog_change", args=[rows[failed].pk])).content.decode()
    assert "model failure" in detail.lower() and "server_error" in detail
    assert rows[failed].generation_failure_message in detail
    queue = admin_client.get(reverse("admin:audit_reviewqueueitem_changelist") + "?model_failed=any")
    assert uuid.UUID(failed) in {r.answer_id for r in queue.context["cl"].result_list}
