"""The struggle pages' own decisions (``audit.struggle_admin``), without a page: the map table's filtering and sorting,
a bad query value falling back, links into the book's site only for web addresses, the period in whole seconds, the
evidence links (each count of a section, the previous period, heat cells cut to the period), a topic as its page shows
it (examples only above the threshold), and the filters' 404 for a level or value no row could have."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.http import Http404
from django.test import RequestFactory
from django.utils import timezone

from audit.models import AuditLog, TopicRun
from audit.struggle_admin import (
    COUNT_COLUMNS,
    Evidence,
    LevelFilter,
    SectionFilter,
    percent,
    period,
    pick,
    shown_sections,
    shown_topic,
    site_link,
)


def section(name: str, chapter: str, questions: int, **counts) -> dict:
    return {column: 0 for column in COUNT_COLUMNS} | {"section": name, "chapter": chapter, "url": f"/{name}",
                                                     "questions": questions} | counts


SECTIONS = [section("a", "one", 0), section("b", "one", 2, unsure=1), section("c", "two", 5), section("d", "two", 2)]


@pytest.mark.parametrize(("chapter", "asked", "sort", "names"), [
    ("", "", "outline", ["a", "b", "c", "d"]),
    ("one", "", "outline", ["a", "b"]),
    ("", "yes", "questions", ["c", "b", "d"]),  # most first, ties in the outline's order
    ("", "no", "outline", ["a"]),
    ("two", "yes", "unsure", ["c", "d"]),
])
def test_the_map_table_filters_by_chapter_and_asked_and_sorts_by_a_count(chapter, asked, sort, names):
    rows = shown_sections(list(SECTIONS), chapter=chapter, asked=asked, sort=sort)
    assert [row["section"] for row in rows] == names


def test_a_bad_choice_falls_back_and_only_web_links_lead_into_the_site():
    assert pick("90", ("7", "90"), "30") == "90" and pick("<script>", ("7", "90"), "30") == "30"
    assert pick(None, {"": "all"}, "") == ""
    assert site_link("https://docs.example.org/a") and site_link("/docs/a") == "/docs/a"
    assert site_link("JavaScript:alert(1)") is None and site_link("data:text/html,x") is None
    assert percent(None) is None and percent(0.126) == 13


def test_the_period_ends_on_a_whole_second_after_now():
    since, until = period(7)
    assert until.microsecond == 0 and until > timezone.now() - timedelta(seconds=1)
    assert until - since == timedelta(days=7)


def query_of(link: str) -> dict:
    return {key: values[0] for key, values in parse_qs(urlsplit(link).query).items()}


def test_each_count_of_a_section_links_to_exactly_its_rows():
    since = timezone.make_aware(datetime(2026, 11, 1))
    until = since + timedelta(days=10)
    evidence = Evidence("demo", since, until)
    counted = section("x", "one", 3, unsure=2, thumbs_down=1, previous=4, struggle=3, medium=0)
    cells = {cell["label"]: cell for cell in evidence.section_cells(counted)}
    assert query_of(cells["questions"]["link"]) == {
        "book_slug__exact": "demo", "created_at__gte": since.isoformat(), "created_at__lt": until.isoformat(),
        "section": "/x"}
    assert query_of(cells["unsure"]["link"])["level"] == "unsure"
    assert query_of(cells["thumbs down"]["link"])["feedback"] == "down"
    before = query_of(cells["previous"]["link"])
    assert before["created_at__gte"] == (since - timedelta(days=10)).isoformat()
    assert before["created_at__lt"] == since.isoformat()
    assert cells["medium"]["link"] is None  # a zero
    assert cells["struggle"]["link"] is None and cells["struggle"]["value"] == 3  # a figure without rows of its own


def test_heat_cells_link_to_their_week_cut_to_the_period():
    since = timezone.make_aware(datetime(2026, 11, 4, 12))  # a Wednesday
    until = timezone.make_aware(datetime(2026, 11, 12, 8))
    rows = Evidence("demo", since, until).heat({"weeks": ["2026-11-02", "2026-11-09"],
                                                "chapters": [{"chapter": "Guide", "counts": [1, 0]}]})
    [(chapter, cells)] = rows
    assert chapter == "Guide" and [count for count, _ in cells] == [1, 0]
    first, second = (query_of(link) for _, link in cells)
    assert first["created_at__gte"] == since.isoformat()  # the week began before the period
    assert first["created_at__lt"] == timezone.make_aware(datetime(2026, 11, 9)).isoformat()
    assert second["created_at__lt"] == until.isoformat() and second["chapter"] == "demo/Guide"


def test_a_topics_examples_show_only_when_asked_in_enough_conversations():
    run = TopicRun(pk=12, book_slug="demo")
    topic = {"n": 3, "sessions": 2, "examples": ["how do I x"], "shares": {"unsure": 0.5},
             "sections": [{"section": "S", "url": "javascript:x"}]}
    shown = shown_topic(topic, run, threshold=2)
    assert shown["examples"] == ["how do I x"] and shown["unsure_share"] == 50 and shown["refused_share"] is None
    assert shown["sections"][0]["site"] is None
    assert query_of(shown["evidence"]) == {"book_slug__exact": "demo", "topic": "12.3"}
    assert shown_topic(topic, run, threshold=3)["examples"] == []


def test_the_filters_answer_404_for_a_level_or_value_no_row_could_have():
    request = RequestFactory().get("/")
    with pytest.raises(Http404):
        LevelFilter(request, {"level": ["bogus"]}, AuditLog, None).queryset(request, AuditLog.objects.all())
    with pytest.raises(Http404):
        SectionFilter(request, {"section": ["/a\x00b"]}, AuditLog, None).value()
    unused = LevelFilter(request, {}, AuditLog, None)
    assert unused.lookups(request, None) == [] and unused.queryset(request, "rows") == "rows"
