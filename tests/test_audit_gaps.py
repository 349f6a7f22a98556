"""Coverage gaps (``audit.gaps``) and their command (``manage.py gaps``, ``audit/management/commands/gaps.py``): which
rows are gaps (a search that found nothing, or whose sections nobody opened once the reader had time), a reader's
typing kept once, questions grouped by their stored vectors, and the Markdown for the book's authors with readers'
words escaped; the command's bad options exit 2 saying why, and its JSON lists the groups."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from audit.gaps import (
    TYPING_SECONDS,
    Gap,
    coverage_gaps,
    found_nothing,
    gaps_markdown,
    last_typed,
    markdown_escape,
    markdown_link,
    opened_nothing,
)
from audit.models import AuditLog
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book
from tests.conftest import run_command

S = AuditLog.Status
BOOK = "gaps-unit-book"
ROW_IDS = itertools.count(1)


def search(text: str, *, client: str = "reader-1", at=None, **retrieval) -> AuditLog:
    return AuditLog(id=next(ROW_IDS), question=text, status=S.SEARCHED, client_ip_hash=client,
                    created_at=at or timezone.now(), retrieval=retrieval)


def test_a_search_found_nothing_when_no_word_matched_or_the_match_is_off_topic():
    assert found_nothing(search("x", matched="none")) and found_nothing(search("x", matched="meaning"))
    assert found_nothing(search("x", matched="words", covered=False))
    assert not found_nothing(search("x", matched="words", covered=True))


def test_a_search_opened_nothing_only_from_a_box_that_reports_opens_and_after_time_to_choose():
    now = timezone.now()
    old = now - timedelta(seconds=TYPING_SECONDS + 1)
    assert opened_nothing(search("x", at=old, reports_opens=True, opened=[]), now)
    assert not opened_nothing(search("x", at=now, reports_opens=True, opened=[]), now)  # still choosing
    assert not opened_nothing(search("x", at=old, reports_opens=True, opened=["#a"]), now)
    assert not opened_nothing(search("x", at=old), now)  # a box that can't tell


def test_only_the_last_search_of_a_readers_typing_is_kept():
    now = timezone.now()
    rows = [search("kubernetes", at=now),  # newest first
            search("kuber", at=now - timedelta(seconds=5)),  # typed on: dropped
            search("kuber", client="reader-2", at=now - timedelta(seconds=6)),  # another reader: kept
            search("kub", at=now - timedelta(seconds=TYPING_SECONDS + 10)),  # long before "kuber": kept
            AuditLog(id=1, question="k", status=S.NOT_COVERED, created_at=now)]  # not a search: kept
    kept = [(row.question, row.client_ip_hash) for row in last_typed(rows)]
    assert kept == [("kubernetes", "reader-1"), ("kuber", "reader-2"), ("kub", "reader-1"), ("k", "")]


def vector(*weights: float) -> list[float]:
    values = np.zeros(get_embedder().dimension, dtype=np.float32)
    values[:len(weights)] = weights
    return values.tolist()


def row(question: str, direction: list[float], *, status=S.NOT_COVERED, level="", days_ago=0.0, **fields) -> AuditLog:
    return AuditLog.objects.create(
        answer_id=uuid.uuid4(), channel="api", book_slug=BOOK, question=question, status=status,
        confidence_level=level, question_vector=direction,
        created_at=timezone.now() - timedelta(days=days_ago), **fields)


@pytest.mark.django_db
def test_questions_group_by_their_stored_vectors_biggest_group_first():
    install = [{"heading_path": "Guide > Install", "url": "https://docs.example.org/install"}]
    row("how to install on windows", vector(1, 0), days_ago=2, suggestions=install)
    row("install on windows 11?", vector(0.99, 0.1), status=S.UNSURE, days_ago=1, suggestions=install)
    row("pricing of the cloud plan", vector(0, 1), status=S.ANSWERED, level="low")
    row("a good answer", vector(1, 0), status=S.ANSWERED, level="high")  # not a gap
    row("asked long ago", vector(1, 0), days_ago=200)  # outside the period
    gaps = coverage_gaps(days=90, book=BOOK)
    assert [(g.count, g.refused) for g in gaps] == [(2, 2), (1, 0)]
    assert gaps[0].examples == ["install on windows 11?", "how to install on windows"]  # most recent first
    assert gaps[0].nearest_sections == ["Guide > Install"]
    assert gaps[0].links == {"Guide > Install": "https://docs.example.org/install"}
    assert gaps[1].label == "pricing of the cloud plan"


@pytest.mark.django_db
def test_a_higher_threshold_splits_what_a_lower_one_groups():
    row("one", vector(1, 0))
    row("two", vector(0.8, 0.6))  # cosine 0.8
    assert [g.count for g in coverage_gaps(book=BOOK, threshold=0.75)] == [2]
    assert [g.count for g in coverage_gaps(book=BOOK, threshold=0.9)] == [1, 1]


def test_markdown_escapes_readers_words_and_links_only_to_web_addresses():
    gap = Gap(count=3, refused=2, searched=1, examples=["[click](javascript:alert(1)) @team *now*"],
              last_asked=timezone.now())
    gap.sections.update({"Setup > <b>Install</b>": 2, "Elsewhere": 1})
    gap.links.update({"Setup > <b>Install</b>": "javascript:alert(1)", "Elsewhere": "https://docs.example.org/a b"})
    text = gaps_markdown([gap, Gap(count=1, examples=["second"])], book="demo", days=30, limit=1)
    assert "## What readers asked that the book doesn't answer well (the book `demo`, last 30 days)" in text
    assert "4 questions" in text and "in 2 groups" in text
    assert "### 1. \\[click\\]\\(javascript:alert\\(1\\)\\) @\u200bteam \\*now\\*" in text
    assert "- asked 3 times (2 refused, 1 searches)" in text
    assert "[Setup \\> \\<b\\>Install\\</b\\>](#)" in text and "[Elsewhere](https://docs.example.org/a%20b)" in text
    assert "… and 1 smaller groups" in text and "second" not in text


def test_markdown_of_no_gap_says_so():
    assert "No gap in this period." in gaps_markdown([], book=None, days=7)
    assert "(every book, last 7 days)" in gaps_markdown([], book=None, days=7)


def test_markdown_escape_flattens_lines_and_markdown_link_keeps_only_http_and_site_paths():
    assert markdown_escape("a\n\n#b_c") == "a \\#b\\_c"
    assert markdown_link("HTTPS://x.org/(a)<b>") == "HTTPS://x.org/%28a%29%3Cb%3E"
    assert markdown_link("/docs/page") == "/docs/page"
    assert markdown_link("data:text/html,x") == markdown_link("mailto:a@b") == "#"


@pytest.mark.django_db
def test_the_command_refuses_an_unknown_book_and_a_period_under_a_day():
    code, _, err = run_command("gaps", "--book", "no-such-book")
    assert code == 2 and "gaps: unknown book 'no-such-book'" in err
    code, out, _ = run_command("gaps", "--days", "0", "--json")
    assert code == 2 and json.loads(out) == {"error": "bad_days", "message": "--days must be at least 1"}


@pytest.mark.django_db
def test_the_command_prints_the_groups_as_text_and_json():
    Book.objects.create(slug=BOOK, title="Gaps", embedder_name="test", embedder_dimension=3)
    row("how to install on windows", vector(1, 0), suggestions=[{"title": "Install", "url": "/install"}])
    code, out, _ = run_command("gaps", "--book", BOOK, "--json")
    report = json.loads(out)
    assert code == 0 and report["book"] == BOOK and report["days"] == 90
    assert [(g["count"], g["refused"], g["examples"], g["sections"]) for g in report["gaps"]] == [
        (1, 1, ["how to install on windows"], [{"heading_path": "Install", "url": "/install"}])]
    code, out, _ = run_command("gaps", "--book", BOOK, "--days", "1")
    assert code == 0 and out.strip() == "1× how to install on windows  (closest: Install)"
