"""Load: 8 clients over real gunicorn (2 workers, as `make run` starts it) mixing asks, streams and feedback for
10 seconds and for as long as `manage.py ingest` indexes a small book beside them (bench/soak.py says how the
load is made). Checked by outcome: every request answered (each stream with its ``final`` event), the ingest
done, no worker replaced, and no worker's memory grown by more than 10 % from after the warm-up to the end.
How fast answers stay under this load (the soak p95 against the idle one) is measured by ``make bench``, not
asserted here.
"""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from bench.soak import INGEST_PAGES, describe, soak
from ingestion.models import Book, Chunk
from tests.conftest import committed
from tests.support.served import forget_answers_since

pytestmark = [pytest.mark.slow, pytest.mark.drill]  # gunicorn under load beside an ingest: make drills

BOOK = "bookchat-manual"
SOAK_SECONDS = 10.0  # at least: the soak lasts until the ingest beside it has ended (~15 s here)


def soak_questions() -> list[str]:
    sections = committed(lambda: list(Chunk.objects.filter(book__slug=BOOK)
                                      .values_list("heading_path", flat=True).distinct()))
    topics = sorted({path.split(" > ")[-1] for path in sections})
    return [f"What does the book say about {topic.lower()}?" for topic in topics][:16]


def test_eight_clients_with_an_ingest_running_are_all_answered(manual_book, tmp_path, django_db_blocker):
    since = timezone.now()
    slug = f"soak-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        questions = soak_questions()
    try:
        figures = soak(questions, BOOK, ingest_root=tmp_path, ingest_slug=slug, seconds=SOAK_SECONDS, measured=False)
    finally:
        with django_db_blocker.unblock():
            forget_answers_since(since)
            committed(lambda: Book.objects.filter(slug=slug).delete())
    print("\n" + describe(figures))

    assert not figures["errors"], f"{len(figures['errors'])} errors: {figures['errors'][:5]}"
    assert figures["ingest"]["returncode"] == 0, figures["ingest"]["stderr"]
    assert figures["ingest"]["report"]["files_indexed"] == INGEST_PAGES
    assert figures["answers"] >= 20 and figures["votes"] >= 5, "the clients kept asking"
    assert set(figures["rss_end_mb"]) == set(figures["rss_start_mb"]), "a worker was replaced"
    assert figures["rss_growth"] <= 0.10, f"worker RSS grew {figures['rss_growth']:.1%}"
