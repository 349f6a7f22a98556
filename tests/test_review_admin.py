"""Reviewing in the admin: the Reviewers group, read-only audit rows but for the review fields, filters,
the review queue, CSV export, the dashboard's charts and coverage gaps."""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from audit.dashboard import review_queue_filter
from audit.models import AuditLog
from chat.pipeline.confidence import MEDIUM

pytestmark = pytest.mark.django_db
SINCE_2020 = "created_at__gte=2020-01-01+00%3A00%3A00%2B00%3A00"


def row(question="How do I ingest a folder?", **fields) -> AuditLog:
    values = {"answer_id": uuid.uuid4(), "channel": "api", "book_slug": "bookchat-manual", "question": question,
              "answer": "Run `manage.py ingest PATH` [1].", "confidence": 0.9, "confidence_level": "high",
              "status": "answered", "sources": [{"n": 1, "chunk_id": "abc", "heading_path": "Ingest > Folders",
                                                 "url": "https://docs.example.org/ingest#folders", "score": 0.9,
                                                 "cited": True}]}
    return AuditLog.objects.create(**(values | fields))


@pytest.fixture
def reviewer(client):
    user = User.objects.create_user("rita", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name="Reviewers"))
    client.force_login(user)
    return user


def test_reviewers_group_holds_only_what_reviewing_needs():
    codenames = set(Group.objects.get(name="Reviewers").permissions.values_list("codename", flat=True))
    assert {"view_auditlog", "change_auditlog", "view_reviewqueueitem", "change_reviewqueueitem",
            "view_dashboard", "view_feedback", "view_chunk"} <= codenames
    assert not {c for c in codenames if c.startswith(("add_", "delete_"))}, "reviewers add and delete nothing"
    assert not {c for c in codenames if "apikey" in c or "user" in c or "group" in c}


def test_reviewer_changes_only_the_review_fields(client, reviewer):
    entry = row()
    url = reverse("admin:audit_auditlog_change", args=[entry.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'name="review_status"' in html and 'name="reviewer_note"' in html
    assert 'name="question"' not in html and 'name="answer"' not in html
    assert 'href="https://docs.example.org/ingest#folders"' in html, "sources link into the book"
    response = client.post(url, {"review_status": "wrong", "reviewer_note": "cites the wrong page",
                                 "question": "tampered", "answer": "tampered"})
    assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.review_status, entry.reviewer_note) == ("wrong", "cites the wrong page")
    assert entry.question == "How do I ingest a folder?" and entry.answer.startswith("Run")
    assert entry.reviewed_by == reviewer and entry.reviewed_at


def test_nobody_adds_or_deletes_audit_rows(admin_client):
    entry = row()
    assert admin_client.get(reverse("admin:audit_auditlog_add")).status_code == 403
    assert admin_client.get(reverse("admin:audit_auditlog_delete", args=[entry.pk])).status_code == 403
    response = admin_client.post(reverse("admin:audit_auditlog_changelist"),
                                 {"action": "delete_selected", "_selected_action": [entry.pk]})
    assert AuditLog.objects.filter(pk=entry.pk).exists() and response.status_code in (200, 302)


def test_staff_without_the_reviewers_group_sees_no_audit_rows(client):
    client.force_login(User.objects.create_user("sam", password="x", is_staff=True))
    assert client.get(reverse("admin:audit_auditlog_changelist")).status_code == 403
    assert client.get(reverse("admin:audit_dashboard")).status_code == 403


def test_a_javascript_url_in_a_source_is_never_a_link(client, reviewer):
    entry = row(sources=[{"n": 1, "heading_path": "Evil", "url": "javascript:alert(1)", "score": 0.5},
                         {"n": 2, "heading_path": "Good", "url": "https://docs.example.org/good", "score": 0.4}])
    response = client.get(reverse("admin:audit_auditlog_change", args=[entry.pk]))
    html = response.content.decode()
    assert response.status_code == 200 and "Evil" in html, "the source is listed"
    assert 'href="https://docs.example.org/good"' in html, "a web address is a link"
    assert "javascript:alert" not in html


@pytest.mark.parametrize("query", ["", "channel__exact=page", "confidence_level__exact=low", "refused=yes",
                                   "status__exact=withheld", "feedback=down", "feedback=none",
                                   "review_status__exact=new", "book_slug__exact=bookchat-manual",
                                   SINCE_2020, "q=tungsten"])
def test_changelist_filters_and_search(client, reviewer, query):
    row()
    row("What is tungsten?", channel="page", status="not_covered", refused=True, confidence=0.2,
        confidence_level="low", feedback_rating="down")
    response = client.get(reverse("admin:audit_auditlog_changelist") + "?" + query)
    assert response.status_code == 200
    expected = {"": 2, "channel__exact=page": 1, "confidence_level__exact=low": 1, "refused=yes": 1,
                "status__exact=withheld": 0, "feedback=down": 1, "feedback=none": 1, "review_status__exact=new": 2,
                "book_slug__exact=bookchat-manual": 2, SINCE_2020: 2, "q=tungsten": 1}[query]
    assert response.context["cl"].result_count == expected


def test_review_queue_holds_unsure_low_confidence_withheld_failed_and_thumbs_down(client, reviewer):
    below = MEDIUM / 2  # a confidence below the fitted medium cut
    low = row("low", confidence=below, confidence_level="low")  # shown with UNSURE_ANSWERS=answer
    unsure = row("unsure", status="unsure", refused=True, confidence=0.2, confidence_level="low",
                 answer="The book doesn't seem to answer this directly…", draft_answer="Run it [1].")
    withheld = row("withheld", status="withheld", flagged=True, confidence=0.3, confidence_level="low")
    down = row("down", feedback_rating="down")
    failed = row("failed", status="timeout", confidence=None, confidence_level="")
    row("fine", confidence=0.97)  # high confidence
    row("refused", status="not_covered", refused=True, confidence=0.1, confidence_level="low")  # → coverage gaps
    row("reviewed", confidence=below, confidence_level="low", review_status="ok")
    row("medium", confidence=0.5, confidence_level="medium")  # not below the medium level
    queued = set(AuditLog.objects.filter(review_queue_filter()).values_list("question", flat=True))
    assert queued == {"low", "unsure", "withheld", "down", "failed"}

    url = reverse("admin:audit_reviewqueueitem_changelist")
    page = client.get(url)
    assert page.status_code == 200 and page.context["cl"].result_count == 5
    response = client.post(url, {"action": "mark_wrong", "_selected_action": [low.pk, down.pk]})
    assert response.status_code == 302
    assert client.get(url).context["cl"].result_count == 3, "marked answers leave the queue"
    assert AuditLog.objects.get(pk=low.pk).review_status == "wrong"
    assert {withheld.pk, failed.pk, unsure.pk} == set(
        AuditLog.objects.filter(review_queue_filter()).values_list("pk", flat=True))
    detail = client.get(reverse("admin:audit_auditlog_change", args=[unsure.pk])).content.decode()
    assert "Run it [1]." in detail, "the reviewer sees the answer that was held back"


def test_csv_export_keeps_text_and_defuses_formulas(client, reviewer):
    a = row("=HYPERLINK(\"http://evil\")", answer="+1 is ünïcode, \"quoted\"")
    b = row("plain")
    response = client.post(reverse("admin:audit_auditlog_changelist"),
                           {"action": "export_csv", "_selected_action": [a.pk, b.pk]})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert {r["question"] for r in rows} == {"'=HYPERLINK(\"http://evil\")", "plain"}
    first = next(r for r in rows if r["question"].startswith("'="))
    assert first["answer"] == "'+1 is ünïcode, \"quoted\"" and first["sources"] == "Ingest > Folders"


def test_dashboard_draws_svg_charts_from_the_rows(client, reviewer):
    now = timezone.now()
    for days_ago, status, level, vote in [(0, "answered", "high", "up"), (0, "not_covered", "low", ""),
                                          (1, "answered", "medium", "down"), (40, "answered", "high", "")]:
        row(status=status, confidence_level=level, feedback_rating=vote, created_at=now - timedelta(days=days_ago),
            refused=status == "not_covered")
    response = client.get(reverse("admin:audit_dashboard"))
    assert response.status_code == 200
    data = response.context["data"]
    assert data["total"] == 3, "only the period's rows"
    assert data["mix"]["high"] == 1 and data["mix"]["medium"] == 1 and data["mix"]["not covered"] == 1
    assert (data["up"], data["down"]) == (1, 1) and data["refusal_rate"] == pytest.approx(33.3)
    html = response.content.decode()
    main = html.split('id="content-main"')[1].split("<!-- END Content -->")[0]
    assert main.count('<svg xmlns="http://www.w3.org/2000/svg" viewBox') == 4 and "<script" not in main
    assert client.get(reverse("admin:audit_dashboard") + "?days=90").context["data"]["total"] == 4
    assert client.get(reverse("admin:audit_dashboard") + "?days=abc&book=<x>").status_code == 200


def test_coverage_gaps_group_similar_unanswered_questions(client, reviewer):
    for q in ["How much does the enterprise plan cost per month?", "What is the price of the enterprise plan?",
              "How much do I pay for enterprise each month?"]:
        row(q, status="not_covered", refused=True, confidence=0.1, confidence_level="low",
            suggestions=[{"title": "Install", "heading_path": "Getting started > Install", "url": "/install"}])
    for q in ["Can I run bookchat on Windows without WSL?", "Does bookchat work natively on Windows?"]:
        row(q, status="answered", confidence=0.5, confidence_level="low")
    row("How do I ingest a folder?")  # answered well: not a gap
    response = client.get(reverse("admin:audit_gaps"))
    assert response.status_code == 200
    gaps = response.context["gaps"]
    assert [g.count for g in gaps] == [3, 2], [g.examples for g in gaps]
    assert "enterprise" in gaps[0].label and gaps[0].refused == 3
    assert gaps[0].nearest_sections == ["Getting started > Install"]
    assert all("Windows" in q for q in gaps[1].examples)
    assert AuditLog.objects.filter(question_vector__isnull=False).count() == 5, "vectors are kept for next time"


def test_coverage_gaps_list_searches_that_found_nothing_once_per_reader_typing(client, reviewer):
    started = timezone.now() - timedelta(minutes=5)
    for n, typed in enumerate(["ku", "kube", "kubernetes", "kubernetes helm"]):  # one reader, keystroke by keystroke
        row(typed, status="searched", client_ip_hash="reader-a", created_at=started + timedelta(seconds=n),
            retrieval={"covered": False, "matched": "meaning"})
    row("kubernetes helm chart", status="searched", client_ip_hash="reader-b",
        retrieval={"covered": False, "matched": "none"})
    row("kubernetes", status="searched", client_ip_hash="reader-c", created_at=started,
        retrieval={"covered": True, "matched": "words"})  # found: not a gap
    row("how to deploy on kubernetes with helm?", status="not_covered", refused=True, confidence_level="low")
    response = client.get(reverse("admin:audit_gaps"))
    gaps = response.context["gaps"]
    searched = sorted(q for g in gaps for q in g.examples if q.startswith("kubernetes h"))
    assert searched == ["kubernetes helm", "kubernetes helm chart"], [g.examples for g in gaps]
    assert sum(g.searched for g in gaps) == 2 and sum(g.count for g in gaps) == 3
    assert "searches" in response.content.decode()


def test_coverage_gaps_list_searches_whose_sections_nobody_opened(client, reviewer):
    """Of searches from a box that reports the section opened (``reports_opens``: the widget, the page with its
    script), the last of a reader's typing whose sections were shown and none opened."""
    found = {"covered": True, "matched": "words"}
    reported = found | {"reports_opens": True}
    sources = [{"n": 1, "heading_path": "Widget > Search", "url": "/widget#search"}]
    old = timezone.now() - timedelta(minutes=5)
    for n, typed in enumerate(["offline sea", "offline search"]):  # typed, shown sections, none opened
        row(typed, status="searched", channel="widget", client_ip_hash="reader-a",
            created_at=old + timedelta(seconds=n), retrieval=reported, sources=sources)
    for n, typed in enumerate(["publishable ke", "publishable key"]):  # typed, and the last one's section opened
        row(typed, status="searched", channel="page", client_ip_hash="reader-b",
            created_at=old + timedelta(seconds=n), retrieval=reported | ({"opened": [1]} if n else {}),
            sources=sources)
    row("search api", status="searched", channel="api", created_at=old, retrieval=found, sources=sources)  # can't say
    row("search page", status="searched", channel="page", created_at=old, retrieval=found, sources=sources)  # no JS
    row("offline mode", status="searched", channel="widget", client_ip_hash="reader-c", retrieval=reported,
        sources=sources)  # just now: the reader may still choose
    response = client.get(reverse("admin:audit_gaps"))
    gaps = response.context["gaps"]
    assert [q for g in gaps for q in g.examples] == ["offline search"], [g.examples for g in gaps]
    assert gaps[0].searched == gaps[0].unopened == 1 and gaps[0].nearest_sections == ["Widget > Search"]
    assert "none opened" in response.content.decode()


def test_coverage_gaps_export_as_markdown_for_an_issue_with_readers_words_escaped(client, reviewer):
    sneaky = "How do I [win](javascript:alert(1)) @octocat <img src=x> the enterprise plan price?"
    for q in ["How much does the enterprise plan cost per month?", "What is the price of the enterprise plan?", sneaky]:
        row(q, status="not_covered", refused=True, confidence=0.1, confidence_level="low",
            suggestions=[{"title": "Plans", "heading_path": "Pricing > Plans", "url": "https://docs.example.org/p#plans"}])
    response = client.get(reverse("admin:audit_gaps") + "?days=30&book=bookchat-manual&export=markdown")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/markdown")
    assert 'filename="coverage-gaps-bookchat-manual-30d.md"' in response["Content-Disposition"]
    text = response.content.decode()
    assert text.startswith("## What readers asked that the book doesn't answer well (the book `bookchat-manual`")
    assert "- asked 2 times (2 refused)" in text  # the two paraphrases; the sneaky question is a group of its own
    assert "- closest sections: [Pricing \\> Plans](https://docs.example.org/p#plans)" in text
    assert "](javascript:" not in text and "@octocat" not in text and text.count("<img") == text.count("\\<img")
    assert "\\[win\\]\\(javascript:alert\\(1\\)\\)" in text and "@\u200boctocat" in text
    page = client.get(reverse("admin:audit_gaps") + "?days=30").content.decode()
    assert 'id="gaps-markdown"' in page and "export=markdown" in page


def test_gaps_command_prints_the_same_markdown_and_refuses_an_unknown_book():
    from ingestion.models import Book
    from tests.conftest import run_command

    Book.objects.get_or_create(slug="gaps-book", defaults={"title": "Gaps", "embedder_name": "x",
                                                          "embedder_dimension": 384})
    row("Is there a night ferry to Gull Island?", book_slug="gaps-book", status="not_covered", refused=True,
        confidence=0.1, confidence_level="low",
        suggestions=[{"title": "Boats", "heading_path": "Harbour > Boats", "url": "https://h.example.org/boats"}])
    code, out, _ = run_command("gaps", "--markdown", "--book", "gaps-book", "--days", "7")
    assert code == 0 and "“Is there a night ferry to Gull Island?”" in out
    assert "[Harbour \\> Boats](https://h.example.org/boats)" in out
    code, out, _ = run_command("gaps", "--json", "--book", "gaps-book")
    assert code == 0 and json.loads(out)["gaps"][0]["sections"][0]["url"] == "https://h.example.org/boats"
    code, out, _ = run_command("gaps", "--book", "no-such-book", "--json")
    assert code == 2 and json.loads(out)["error"] == "unknown_book"
