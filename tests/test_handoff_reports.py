"""Hand-offs in the reports: ``/metrics`` (``bookchat.scraping.handoff_metrics``: each book's open hand-offs and the
oldest one's age, 0 for a book none waits in), the dashboard's figures (``audit.dashboard.open_handoffs``), and the
coverage gaps (``audit.gaps``: a hand-off marked "the book should cover this" joins them whatever bookchat answered,
counted as the staff's, in the Markdown for the authors and the ``gaps`` command's JSON)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from audit.dashboard import open_handoffs
from audit.gaps import coverage_gaps, gaps_markdown
from audit.handoffs import open_by_book
from audit.models import AuditLog, Handoff
from bookchat.scraping import handoff_metrics
from ingestion.models import Book
from tests.conftest import run_command

pytestmark = pytest.mark.django_db
TOKEN = "scrape-me-0123456789"


@pytest.fixture
def books():
    alpha = Book.objects.create(slug="alpha", title="Alpha", embedder_name="test", embedder_dimension=3)
    Book.objects.create(slug="alpha-fr", title="Alpha", embedder_name="test", embedder_dimension=3, edition_of=alpha,
                        locale="fr")
    Book.objects.create(slug="quiet", title="Quiet", embedder_name="test", embedder_dimension=3)


def handoff(book: str, age: timedelta, **fields) -> Handoff:
    return Handoff.objects.create(answer_id=uuid.uuid4(), book_slug=book, channel="page",
                                  created_at=timezone.now() - age,
                                  conversation=[{"question": fields.pop("question", "q?"), "answer": "…"}], **fields)


def test_metrics_count_each_books_open_hand_offs_and_the_oldest_ones_age(client, settings, books):
    handoff("alpha", timedelta(hours=2))
    handoff("alpha", timedelta(minutes=5))
    handoff("alpha", timedelta(days=9), status=Handoff.Status.ANSWERED)
    handoff("deleted-book", timedelta(minutes=1))
    settings.BOOKCHAT = {**settings.BOOKCHAT, "METRICS_TOKEN": TOKEN, "METRICS_ALLOW": ""}
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    samples = {(s.name, s.labels.get("book")): s.value for f in text_string_to_metric_families(
        response.content.decode()) for s in f.samples if s.name.startswith("bookchat_handoff")}
    assert samples[("bookchat_handoffs_open", "alpha")] == 2
    assert samples[("bookchat_handoffs_open", "quiet")] == 0
    assert samples[("bookchat_handoffs_open", "deleted-book")] == 1, "a hand-off outlives its book"
    assert ("bookchat_handoffs_open", "alpha-fr") not in samples, "a hand-off names the root book"
    assert 7200 <= samples[("bookchat_handoff_oldest_open_seconds", "alpha")] < 7300
    assert samples[("bookchat_handoff_oldest_open_seconds", "quiet")] == 0


def test_the_figures_are_of_the_books_asked_for(books):
    handoff("alpha", timedelta(hours=1))
    handoff("quiet", timedelta(hours=3))
    assert set(open_by_book()) == {"alpha", "quiet"} and set(open_by_book(["alpha"])) == {"alpha"}
    assert [row["book"] for row in open_handoffs(within=None)] == ["alpha", "quiet"]
    assert [row["book"] for row in open_handoffs(within=None, book="quiet")] == ["quiet"]
    assert open_handoffs(within=[]) == []
    families = {family.name: family for family in handoff_metrics()}
    counted = {s.labels["book"]: s.value for s in families["bookchat_handoffs_open"].samples}
    assert set(counted) == set(Book.objects.roots().values_list("slug", flat=True)), "every book students read"
    assert {slug for slug, value in counted.items() if value} == {"alpha", "quiet"}


def test_a_hand_off_the_staff_marked_joins_the_coverage_gaps_whatever_bookchat_answered(books):
    marked = handoff("alpha", timedelta(hours=1), status=Handoff.Status.COVERAGE, question="Is there a night ferry?")
    handoff("alpha", timedelta(hours=1), status=Handoff.Status.DECLINED, question="Who won the match?")
    for h, level in ((marked, "high"), (Handoff.objects.get(status="declined"), "high")):
        AuditLog.objects.create(answer_id=h.answer_id, channel="page", book_slug="alpha", question=h.question,
                                answer="…", status="answered", confidence=0.9, confidence_level=level)
    AuditLog.objects.create(answer_id=uuid.uuid4(), channel="page", book_slug="alpha",
                            question="How do I reset my password?", answer="…", status="not_covered", refused=True,
                            confidence_level="low")
    gaps = coverage_gaps(days=30, book="alpha")
    assert sorted((g.label, g.staff) for g in gaps) == [("How do I reset my password?", 0),
                                                         ("Is there a night ferry?", 1)]
    assert gaps[0].staff == 1, "of two groups of one, the staff's comes first"
    assert coverage_gaps(days=30, within=["quiet"]) == []
    text = gaps_markdown(gaps, book="alpha", days=30)
    assert "(1 marked by the course staff: the book should cover this)" in text
    code, out, _ = run_command("gaps", "--book", "alpha", "--json")
    assert code == 0 and sorted(g["staff"] for g in json.loads(out)["gaps"]) == [0, 1]
