"""Where students struggle, in a real browser: the book's map and its topics page, light and dark, each held by
axe-core (WCAG 2.1 A and AA, no rule disabled), the heat strip's cells reached by keyboard as links to their
questions, and screenshots of both pages in both themes (BOOKCHAT_SCREENSHOT_DIR keeps them).

The fixtures and helpers are test_browser.py's and test_accessibility.py's (one live server, one Chromium per
module)."""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tests.conftest import committed
from tests.test_accessibility import assert_none_found, wcag_violations
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    admin_user,
    browser,
    browser_settings,
    database_open,
    log_in,
    open_page,
    screenshot,
    servers,
)

# A drill (make drills): the pages' figures, links, filters and privacy are make test's (test_struggle_admin.py);
# this walk with its screenshots and axe-core runs after it, so that make test stays within ten minutes.
pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.drill]

# (status, confidence level, thumbs) of the questions put on each of the first sections that get any
TRAFFIC = [("answered", "high", ""), ("unsure", "low", "down"), ("not_covered", "low", ""),
           ("answered", "medium", "down"), ("withheld", "low", "")]


def student_traffic() -> list[int]:
    """Questions on the manual's sections over the last weeks, some answered well, some not: the map's rows,
    heat strip and ranking all have something to show."""
    from django.utils import timezone

    from audit.models import AuditLog
    from audit.struggle import outline_sections
    from ingestion.models import Book

    sections = outline_sections(Book.objects.get(slug=BOOK))
    rows = []
    for n, section in enumerate(sections[:12:2]):
        for k, (status, level, thumbs) in enumerate(TRAFFIC[: 1 + n % len(TRAFFIC)]):
            rows.append(AuditLog.objects.create(
                answer_id=uuid.uuid4(), channel="page", book_slug=BOOK, question=f"question {n}.{k}", answer="…",
                status=status, confidence_level=level, feedback_rating=thumbs, session_id=uuid.uuid4(),
                sources=[{"n": 1, "url": section["url"], "cited": True, "heading_path": section["heading_path"]}],
                created_at=timezone.now() - timedelta(days=3 * n + k)))
    return [row.pk for row in rows]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_map_reads_in_both_themes_and_its_heat_strip_by_keyboard(servers, open_page, admin_user, theme):
    from audit.models import AuditLog

    bookchat, _ = servers
    rows = committed(student_traffic)
    try:
        admin_user("map-reviewer", groups=["Reviewers"])
        page, errors = open_page(f"{bookchat.url}/admin/login/", color_scheme=theme)
        log_in(page, bookchat.url, "map-reviewer")
        page.goto(f"{bookchat.url}/admin/audit/auditlog/struggle/?book={BOOK}&days=90")
        page.wait_for_selector("#struggle-sections")
        assert page.locator("#struggle-ranking tbody tr").count() >= 4
        assert page.locator("#struggle-sections tr.never-asked").count() >= 1
        assert "question 0.0" not in page.content(), "no question text on the map"
        found = {f"the map ({theme})": wcag_violations(page)}
        screenshot(page, f"struggle-map-{theme}")

        cell = page.locator("svg[role=group] a").first  # the heat strip's first cell, by keyboard
        cell.focus()
        assert page.evaluate("document.activeElement.tagName.toLowerCase()") == "a"
        label = cell.get_attribute("aria-label")
        page.keyboard.press("Enter")
        page.wait_for_url("**/admin/audit/auditlog/?**")
        assert "chapter=" in page.url and label
        assert_none_found(found)
        assert errors == []
    finally:
        committed(lambda: AuditLog.objects.filter(pk__in=rows).delete())


def topic_run(rows: list[int]) -> int:
    """A done run of the manual's topics over ``rows``: one topic asked in enough conversations to show its
    examples, one not."""
    from django.utils import timezone

    from audit.models import AuditLog, TopicRun
    from audit.struggle import score

    def topic(n: int, ids: list[int], sessions: int, examples: list[str]) -> dict:
        asked = AuditLog.objects.filter(pk__in=ids)
        counts = {"high": asked.filter(status="answered", confidence_level="high").count(),
                  "medium": asked.filter(status="answered", confidence_level="medium").count(),
                  "unsure": asked.filter(status="unsure").count(),
                  "refused": asked.filter(status="not_covered").count(),
                  "withheld": asked.filter(status="withheld").count(),
                  "thumbs_down": asked.filter(feedback_rating="down").count(), "wrong": 0, "needs_doc_fix": 0}
        struggle = sum(counts[k] for k in ("unsure", "refused", "withheld", "thumbs_down"))
        terms = [["install", "docker", "python"], ["ingest", "folder", "markdown"]][n - 1]
        return {"n": n, "terms": terms, "label": " · ".join(terms), "questions": len(ids), "sessions": sessions,
                **counts, "shares": {"unsure": counts["unsure"] / len(ids), "refused": counts["refused"] / len(ids)},
                "struggle": struggle, "score": score(struggle, len(ids), sessions), "examples": examples,
                "sections": [{"url": "https://docs.example.org/install", "section": "Install > Prepare your system",
                              "count": len(ids)}], "ids": ids}

    now = timezone.now()
    half = len(rows) // 2
    return TopicRun.objects.create(
        book_slug=BOOK, since=now - timedelta(days=30), until=now, status=TopicRun.Status.DONE, finished_at=now,
        took_seconds=1.7, questions=len(rows), unclustered=0, requested_by="schedule",
        topics=[topic(1, rows[:half], 6, ["How do I install bookchat with Docker?", "Which Python do I need?"]),
                topic(2, rows[half:], 2, ["How do I ingest a folder?"])]).pk


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_topics_page_reads_in_both_themes(servers, open_page, admin_user, theme):
    from audit.models import AuditLog, TopicRun

    bookchat, _ = servers
    rows = committed(student_traffic)
    committed(lambda: topic_run(rows))
    try:
        admin_user("topics-reviewer", groups=["Reviewers"])
        page, errors = open_page(f"{bookchat.url}/admin/login/", color_scheme=theme)
        log_in(page, bookchat.url, "topics-reviewer")
        page.goto(f"{bookchat.url}/admin/audit/auditlog/topics/?book={BOOK}")
        page.wait_for_selector("#topics")
        assert page.locator("#topics tr.topic").count() == 2
        assert "How do I install bookchat with Docker?" in page.content()
        assert "How do I ingest a folder?" not in page.content(), "2 conversations: below the threshold"
        found = {f"the topics page ({theme})": wcag_violations(page)}
        screenshot(page, f"struggle-topics-{theme}")
        page.click("#topics-recompute")
        page.wait_for_selector(".messagelist .success")
        assert_none_found(found)
        assert errors == []
    finally:
        committed(lambda: (AuditLog.objects.filter(pk__in=rows).delete(),
                           TopicRun.objects.filter(book_slug=BOOK).delete()))
