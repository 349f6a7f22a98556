"""The admin's pages of where students struggle: a book's map (its sections with their counts, the heat strip by
chapter and week, "where to revise first", CSV and Markdown exports), its topics of questions, and the audit list's
filters their links use (a section, a chapter, a topic, a level as the map counts it).

Only users with ``audit.view_dashboard`` see the pages; a reviewer restricted to some books (``ingestion.roles``)
gets a 404 for any other book's page, export or filter. The pages show aggregates only: no question text on the
map, and on the topics page example questions only of topics asked in enough conversations
(``STRUGGLE_MIN_SESSIONS``).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Q
from django.http import Http404, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from audit.charts import COLOURS, heat_strip, stacked_bars
from audit.models import AuditLog, TopicRun
from audit.struggle import DEFAULT_DAYS, LEVELS, outline_sections, struggle_map
from audit.struggle_export import TABLES, ranking_markdown
from audit.topics import latest_topics, queue_topics
from bookchat.base.conf import setting
from ingestion.models import Book, Chunk, book_slug_validator
from ingestion.roles import allowed_books, within_books

S = AuditLog.Status
DAY_CHOICES = (7, 30, 90, 365)
QUESTIONS = ~Q(status=S.SEARCHED)  # an assistant's search is not a question (as the map counts)
LEVEL_ROWS = {  # the rows each level of the map counts (``audit.struggle``'s ``_COUNTS``)
    "high": Q(status=S.ANSWERED, confidence_level="high"),
    "medium": Q(status=S.ANSWERED, confidence_level="medium"),
    "unsure": Q(status=S.UNSURE) | (Q(status=S.ANSWERED) & ~Q(confidence_level__in=("high", "medium"))),
    "refused": Q(status=S.NOT_COVERED),
    "withheld": Q(status=S.WITHHELD),
    "staff": Q(status=S.STAFF),
}
# The audit list's filter for each count of a section that has one.
COUNT_FILTERS = {**{level: {"level": level} for level in LEVELS}, "thumbs_down": {"feedback": "down"},
                 "wrong": {"review_status__exact": AuditLog.Review.WRONG},
                 "needs_doc_fix": {"review_status__exact": AuditLog.Review.NEEDS_DOC_FIX}}
COUNT_COLUMNS = ("questions", "sessions", *LEVELS, "thumbs_down", "wrong", "needs_doc_fix", "previous", "change",
                 "struggle", "score")
SORTS = ("outline", *COUNT_COLUMNS)
HEAT_TITLE = "Questions per chapter and week"
TOPICS_TITLE = "Questions of each topic, by how they were answered"
CHART_LEVELS = {"high": "high", "medium": "medium", "unsure": "unsure", "refused": "not covered",
                "withheld": "withheld", "staff": "staff"}  # a topic's counts → the dashboard's colour names
PENDING = (TopicRun.Status.QUEUED, TopicRun.Status.RUNNING)
RUN_ID_DIGITS = 18  # a longer number is no run's (and would overflow the database's integer)
ASKED = {"": "every section", "yes": "only asked", "no": "never asked"}


def visible_book(user, slug: str) -> Book:
    """The book ``slug`` if ``user`` may see it; else a 404, as for a book that doesn't exist."""
    book = within_books(Book.objects.all(), user, "pk").filter(slug=slug).first() \
        if book_slug_validator.regex.search(slug) else None
    if book is None:
        raise Http404("No such book among yours.")
    return book


class _ShownWhenUsed(admin.SimpleListFilter):
    """A filter the map's links use: in the sidebar only while it is applied (its one choice is its value). A value
    no row could hold (a NUL byte, which PostgreSQL's text refuses) is a 404."""

    def lookups(self, request, model_admin):
        return [(self.value(), self.value())] if self.value() else []

    def value(self) -> str | None:
        value = super().value()
        if value is not None and "\x00" in value:
            raise Http404("No such value.")
        return value


class SectionFilter(_ShownWhenUsed):
    title = "section (where questions landed)"
    parameter_name = "section"

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        chunks = within_books(Chunk.objects.filter(url=self.value()), request.user, "book")
        if not chunks.exists():
            raise Http404("No such section in your books.")
        return queryset.filter(QUESTIONS, section_url=self.value())


class ChapterFilter(_ShownWhenUsed):
    """``BOOK/chapter``: the questions that landed on any section of that chapter of the book's outline."""

    title = "chapter (where questions landed)"
    parameter_name = "chapter"

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        slug, _, chapter = self.value().partition("/")
        book = visible_book(request.user, slug)
        urls = [section["url"] for section in outline_sections(book) if section["chapter"] == chapter]
        if not urls:
            raise Http404("No such chapter in the book.")
        return queryset.filter(QUESTIONS, book_slug=book.slug, section_url__in=urls)


class LevelFilter(_ShownWhenUsed):
    """How the map counts an answer: high, medium, unsure (held back, or answered below medium), refused, withheld
    or staff (the course staff's answer served)."""

    title = "level (as the map counts it)"
    parameter_name = "level"

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if self.value() not in LEVEL_ROWS:
            raise Http404("No such level.")
        return queryset.filter(QUESTIONS, LEVEL_ROWS[self.value()])


class TopicFilter(_ShownWhenUsed):
    """``RUN.N``: the questions of topic ``N`` of the topics run ``RUN`` (a run of a book the user may see)."""

    title = "topic of questions"
    parameter_name = "topic"

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        run_id, _, n = self.value().partition(".")
        runs = within_books(TopicRun.objects.filter(status=TopicRun.Status.DONE), request.user, "book_slug")
        run = runs.filter(pk=int(run_id)).first() if run_id.isdigit() and len(run_id) <= RUN_ID_DIGITS else None
        topic = next((t for t in run.topics if str(t["n"]) == n), None) if run else None
        if topic is None:
            raise Http404("No such topic among your books'.")
        return queryset.filter(pk__in=topic["ids"])


class Evidence:
    """Links to the audit list of one book's questions in a period, narrowed further (a section, a level, …)."""

    def __init__(self, book: str, since: datetime, until: datetime):
        self.book, self.since, self.until = book, since, until
        self.changelist = reverse("admin:audit_auditlog_changelist")
        self._period = self._query(since, until)  # encoded once: a map has thousands of links

    def _query(self, since: datetime, until: datetime) -> str:
        return urlencode({"book_slug__exact": self.book, "created_at__gte": since.isoformat(),
                          "created_at__lt": until.isoformat()})

    def link(self, *, since: datetime | None = None, until: datetime | None = None, **narrowed: str) -> str:
        period = self._query(since or self.since, until or self.until) if since or until else self._period
        return f"{self.changelist}?{period}&{urlencode(narrowed)}" if narrowed else f"{self.changelist}?{period}"

    def section_cells(self, section: dict) -> list[dict]:
        """``{"label", "value", "link" (None for a zero or a figure without rows of its own)}`` for each count
        column of a section's row in the map."""
        before = self.since - (self.until - self.since)
        cells = []
        for column in COUNT_COLUMNS:
            value, link = section[column], None
            if value and (column == "questions" or column in COUNT_FILTERS):
                link = self.link(section=section["url"], **COUNT_FILTERS.get(column, {}))
            elif value and column == "previous":
                link = self.link(section=section["url"], since=before, until=self.since)
            cells.append({"label": label(column), "value": value, "link": link})
        return cells

    def heat(self, heat: dict) -> list[tuple[str, list[tuple[int, str]]]]:
        """The heat strip's rows: each chapter's count per week, each with the link to that week's questions (the
        weeks cut to the period)."""
        zone = timezone.get_current_timezone()
        mondays = [timezone.make_aware(datetime.combine(datetime.fromisoformat(week), time.min), zone)
                   for week in heat["weeks"]]
        spans = [(max(monday, self.since), min(monday + timedelta(weeks=1), self.until)) for monday in mondays]
        return [(row["chapter"], [(count, self.link(since=start, until=end, chapter=f"{self.book}/{row['chapter']}"))
                                  for count, (start, end) in zip(row["counts"], spans, strict=True)])
                for row in heat["chapters"]]


def label(column: str) -> str:
    return column.replace("_", " ")


def site_link(url: str) -> str | None:
    """A section's link into the book's site if it is http(s) or site-relative (never ``javascript:``)."""
    return url if url.lower().startswith(("https://", "http://", "/")) else None


def shown_sections(sections: list[dict], *, chapter: str, asked: str, sort: str) -> list[dict]:
    """The map's table: sections of one chapter (or all), asked about or never, sorted by a count column (most
    first, ties in the outline's order) or in the outline's order."""
    rows = [s for s in sections if (not chapter or s["chapter"] == chapter)
            and (not asked or bool(s["questions"]) == (asked == "yes"))]
    if sort != "outline":
        rows.sort(key=lambda s: -s[sort])
    return rows


def period(days: int) -> tuple[datetime, datetime]:
    """The last ``days`` days, to the end of this second: whole seconds keep the links to the audit list short, and
    they count exactly what the map counts."""
    until = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    return until - timedelta(days=days), until


def books_of(user) -> list[str]:
    books = allowed_books(user)
    return list((Book.objects.all() if books is None else books).order_by("slug").values_list("slug", flat=True))


def pick(value: str | None, choices, default):
    """``value`` if it is one of ``choices``, else ``default`` (a bad query parameter falls back)."""
    return value if value in choices else default


def shown_topic(topic: dict, run: TopicRun, threshold: int) -> dict:
    """A topic as its page shows it: its shares in percent, its example questions only when it was asked in at least
    ``threshold`` conversations, its cited sections' links into the book's site, the link to its questions."""
    shares = topic.get("shares") or {}
    return {**topic, "examples": topic.get("examples", []) if topic["sessions"] >= threshold else [],
            "unsure_share": percent(shares.get("unsure")), "refused_share": percent(shares.get("refused")),
            "sections": [{**s, "site": site_link(s.get("url", ""))} for s in topic.get("sections", [])],
            "evidence": reverse("admin:audit_auditlog_changelist") + "?" + urlencode(
                {"book_slug__exact": run.book_slug, "topic": f"{run.pk}.{topic['n']}"})}


def percent(share: float | None) -> int | None:
    return None if share is None else round(100 * share)


def topics_chart(topics: list[dict]):
    # A run computed before staff answers has no staff count.
    series = {name: [topic.get(level, 0) for topic in topics] for level, name in CHART_LEVELS.items()}
    return stacked_bars(TOPICS_TITLE, [f"{topic['n']}" for topic in topics], series)


class StrugglePages:
    """The map and topics pages, for ``AuditLogAdmin`` (whose ``_check_dashboard``, ``_choice`` and ``_csv`` they
    use)."""

    def struggle_urls(self) -> list:
        return [path("struggle/", self.admin_site.admin_view(self.struggle_view), name="audit_struggle"),
                path("topics/", self.admin_site.admin_view(self.topics_view), name="audit_topics")]

    def _struggle_book(self, request) -> Book:
        self._check_dashboard(request)
        slugs = books_of(request.user)
        return visible_book(request.user, request.GET.get("book") or (slugs[0] if slugs else ""))

    def struggle_view(self, request):
        book = self._struggle_book(request)
        days = self._choice(request, "days", DAY_CHOICES, DEFAULT_DAYS)
        since, until = period(days)
        result = struggle_map(book, since=since, until=until)  # ranks the newest computed topics with the sections
        topics, computed = result["topics"], result["topics_computed"]  # its run: for links to its topics' questions
        if request.GET.get("export"):
            return self._struggle_export(request, result, topics, days)
        evidence = Evidence(book.slug, since, until)
        chapters = list(dict.fromkeys(section["chapter"] for section in result["sections"]))
        chapter = pick(request.GET.get("chapter", ""), chapters, "")
        asked = pick(request.GET.get("asked", ""), ASKED, "")
        sort = pick(request.GET.get("sort", "outline"), SORTS, "outline")
        rows = [{**section, "cells": evidence.section_cells(section), "site": site_link(section["url"])}
                for section in shown_sections(result["sections"], chapter=chapter, asked=asked, sort=sort)]
        for entry in result["ranking"]:
            entry["evidence"] = evidence.link(section=entry["url"]) if entry.get("kind", "section") == "section" \
                else evidence.changelist + "?" + urlencode({"book_slug__exact": book.slug,
                                                            "topic": f"{computed['run']}.{entry['n']}"})
        heat_rows = evidence.heat(result["heat"])
        query = urlencode({"book": book.slug, "days": days, "chapter": chapter, "asked": asked})
        context = {**self.admin_site.each_context(request), "title": f"Where students struggle: {book}",
                   "opts": self.model._meta, "book": book, "books": books_of(request.user), "days": days,
                   "day_choices": DAY_CHOICES, "result": result, "rows": rows, "chapters": chapters,
                   "chapter": chapter, "asked": asked, "asked_choices": ASKED, "sort": sort, "sorts": SORTS,
                   "columns": [(column, label(column)) for column in COUNT_COLUMNS], "query": query,
                   "heat_chart": heat_strip(HEAT_TITLE, result["heat"]["weeks"], heat_rows),
                   "heat_chart_rows": heat_rows, "topics": topics,
                   "export": urlencode({"book": book.slug, "days": days})}
        return TemplateResponse(request, "admin/audit/struggle.html", context)

    def _struggle_export(self, request, result: dict, topics: list[dict], days: int) -> HttpResponse:
        name = f"struggle-{result['book']}-{days}d"
        if request.GET["export"] == "markdown":  # for an issue in the book's repository
            response = HttpResponse(ranking_markdown(result, topics, days=days),
                                    content_type="text/markdown; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="{name}.md"'
            return response
        table = request.GET.get("table", "")
        if request.GET["export"] != "csv" or table not in TABLES:
            return HttpResponseBadRequest("export: markdown, or csv with table=" + ", ".join(TABLES),
                                          content_type="text/plain; charset=utf-8")
        header, rows = TABLES[table](result)
        return self._csv(f"{name}-{table}", header, rows)

    def topics_view(self, request):
        book = self._struggle_book(request)
        if request.method == "POST":
            return self._recompute_topics(request, book)
        run = latest_topics(book.slug)
        threshold = setting("STRUGGLE_MIN_SESSIONS")
        topics = [shown_topic(topic, run, threshold) for topic in run.topics] if run else []
        pending = TopicRun.objects.filter(book_slug=book.slug, status__in=PENDING).first()
        context = {**self.admin_site.each_context(request), "title": f"Topics of questions: {book}",
                   "opts": self.model._meta, "book": book, "books": books_of(request.user), "run": run,
                   "topics": topics, "threshold": threshold, "pending": pending, "days": DEFAULT_DAYS,
                   "day_choices": DAY_CHOICES, "chart": topics_chart(topics),
                   "legend": [(name, COLOURS[name]) for name in CHART_LEVELS.values()]}
        return TemplateResponse(request, "admin/audit/topics.html", context)

    def _recompute_topics(self, request, book: Book) -> HttpResponseRedirect:
        days = int(pick(request.POST.get("days"), [str(d) for d in DAY_CHOICES], str(DEFAULT_DAYS)))
        since, until = period(days)
        run = queue_topics(book.slug, since=since, until=until, requested_by=request.user.get_username())
        messages.success(request, f"Computing the topics of the last {days} days (run {run.pk}): this page shows "
                                  "them when it is done.")
        return HttpResponseRedirect(reverse("admin:audit_topics") + "?" + urlencode({"book": book.slug}))
