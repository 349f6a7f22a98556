"""The reviewers' admin's own decisions (``audit.admin``), without a page: CSV cells a spreadsheet can't run as
formulas, links only to web addresses, the columns and read-only fields an audit row shows (escaped, shortened, with
"—" for nothing), only the review fields editable, a bad ``days`` falling back, and the CSV download's shape."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from django.contrib import admin
from django.test import RequestFactory

from audit.admin import (
    CSV_COLUMNS,
    REVIEW_FIELDS,
    AuditLogAdmin,
    FeedbackFilter,
    RefusedFilter,
    _csv_values,
    csv_cell,
    safe_link,
)
from audit.models import AuditLog


@pytest.fixture
def audit_admin() -> AuditLogAdmin:
    return AuditLogAdmin(AuditLog, admin.site)


@pytest.mark.parametrize(("value", "cell"), [
    ("=SUM(A1)", "'=SUM(A1)"), ("+1", "'+1"), ("-1", "'-1"), ("@cmd", "'@cmd"), ("\tx", "'\tx"),
    ("plain", "plain"), (None, ""), (3, "3"), ("a=b", "a=b"),
])
def test_a_csv_cell_never_starts_a_formula(value, cell):
    assert csv_cell(value) == cell


def test_only_web_and_site_relative_links_are_kept():
    assert safe_link("https://docs.example.org/a") and safe_link("/a#b") == "/a#b"
    assert safe_link("javascript:alert(1)") is None and safe_link("//evil.example/x") is None
    assert safe_link("") is None and safe_link(None) is None


def test_the_csv_values_follow_the_columns_with_sources_as_heading_paths():
    row = AuditLog(question="q", sources=[{"heading_path": "A > B"}, {"title": "no path"}], status="answered",
                   generator="extractive", generation_failure="timeout")
    values = _csv_values(row)
    assert len(values) == len(CSV_COLUMNS) and values[CSV_COLUMNS.index("question")] == "q"
    assert values[CSV_COLUMNS.index("generation_failure")] == "timeout", "why the language model didn't answer"
    assert values[CSV_COLUMNS.index("sources")] == "A > B | "  # a source without a heading path stays a blank


def test_the_row_columns_shorten_and_say_nothing_plainly(audit_admin):
    long = "why " * 40
    assert audit_admin.short_question(AuditLog(question=long)) == long[:89] + "…"
    assert audit_admin.short_question(AuditLog(question="short?")) == "short?"
    assert [audit_admin.feedback(AuditLog(feedback_rating=r)) for r in ("up", "down", "")] == ["👍", "👎", "—"]
    empty = AuditLog()
    assert [audit_admin.grounding_summary(empty), audit_admin.timings(empty), audit_admin.tokens(empty),
            audit_admin.retrieval_summary(empty), audit_admin.sources_links(empty)] == ["—"] * 5
    row = AuditLog(grounding={"supported": 2, "claims": [1, 2]}, timings_ms={"retrieve": 40, "generate": 90},
                   llm_usage={"prompt_tokens": None, "completion_tokens": 12, "counted_by": "server"})
    assert audit_admin.grounding_summary(row) == "supported: 2"  # lists and objects left out
    assert audit_admin.timings(row) == "retrieve 40, generate 90"
    assert audit_admin.tokens(row) == "prompt ?, completion 12 (counted by server)"


def test_source_links_are_escaped_and_never_javascript(audit_admin):
    row = AuditLog(sources=[{"n": 2, "heading_path": "<b>Install</b>", "url": "javascript:alert(1)", "score": 0.9,
                             "cited": True},
                            {"title": "Use", "url": "https://docs.example.org/use", "score": 0.5}])
    html = str(audit_admin.sources_links(row))
    assert "<b>" not in html and "&lt;b&gt;Install&lt;/b&gt;" in html and "javascript:" not in html
    assert "[2] &lt;b&gt;Install&lt;/b&gt; (score 0.9, cited)" in html
    assert '[2] <a href="https://docs.example.org/use" target="_blank" rel="noopener">Use</a> (score 0.5)' in html


def test_only_the_review_fields_are_editable(audit_admin):
    readonly = audit_admin.get_readonly_fields(RequestFactory().get("/"))
    assert not set(REVIEW_FIELDS) & set(readonly)
    assert {"question", "answer", "reviewed_by", "answer_id"} <= set(readonly)


@pytest.mark.parametrize(("query", "days"), [({"days": "90"}, 90), ({"days": "8"}, 30), ({"days": "x"}, 30), ({}, 30)])
def test_a_days_choice_outside_the_offered_ones_falls_back(audit_admin, query, days):
    assert audit_admin._choice(RequestFactory().get("/", query), "days", (7, 30, 90), 30) == days


def test_the_csv_download_is_utf8_with_a_bom_and_defused_cells(audit_admin):
    response = audit_admin._csv("export", ("a", "b"), [["=1+1", "é"]])
    assert response["Content-Disposition"] == 'attachment; filename="export.csv"'
    text = response.content.decode("utf-8")
    assert text.startswith("\ufeff")
    assert list(csv.reader(io.StringIO(text[1:]))) == [["a", "b"], ["'=1+1", "é"]]


@pytest.mark.django_db
def test_the_feedback_and_refused_filters_narrow_the_rows():
    for rating, refused in (("up", False), ("down", True), ("", True)):
        AuditLog.objects.create(answer_id=uuid.uuid4(), channel="api", book_slug="admin-unit", question=rating,
                                feedback_rating=rating, refused=refused)
    request = RequestFactory().get("/")
    rows = AuditLog.objects.filter(book_slug="admin-unit")

    def narrowed(filter_class, name: str, value: str) -> list[str]:
        chosen = filter_class(request, {name: [value]}, AuditLog, None).queryset(request, rows)
        return sorted(chosen.values_list("question", flat=True))

    assert narrowed(FeedbackFilter, "feedback", "down") == ["down"]
    assert narrowed(FeedbackFilter, "feedback", "none") == [""]
    assert narrowed(FeedbackFilter, "feedback", "sideways") == ["", "down", "up"]
    assert narrowed(RefusedFilter, "refused", "yes") == ["", "down"]
    assert narrowed(RefusedFilter, "refused", "no") == ["up"]
