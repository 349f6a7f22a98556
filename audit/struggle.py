"""Where students struggle: every section of a book in its outline's order, how many questions landed on each in a
period and how well the book answered them, and the sections ranked by struggle ("where to revise first").

**Where a question lands.** On one section, the one written on its audit row (``audit.landing``): its answer's
first cited source, else its first source, else, for a refusal, the first of the closest sections it suggested. A
section is a heading of a page, the place links land on (``Chunk.anchor``; empty for a page's top, before its first
H2), known by its link (``Chunk.url``). A question whose section the book no longer has (a page renamed or the book
moved to another URL since) or that has none (it timed out or failed before retrieving) counts in ``totals`` as
``unplaced``, in no section. An assistant's searches (status ``searched``) are not questions and are not counted.
The rows are the audit trail's of exactly this book slug (an edition of a site is a book of its own).

**Per section**, for the period ``[since, until)``:

- ``questions``: how many landed on it; ``sessions``: in how many distinct conversations (a question without one
  counts as its own);
- ``high``, ``medium``: answered at that confidence level; ``unsure``: held back as unsure, shown as the closest
  passage, or answered below the medium level; ``refused``: not covered in the book; ``withheld``: by the grounding
  check; ``staff``: answered by the course staff's answer to the same question (the book's own answer was not high:
  not struggle, since the student got an answer, but the section it landed on is where the book fell short); each
  with its share of ``questions`` in ``shares`` (null when no question landed);
- ``thumbs_down``: readers' votes; ``wrong``, ``needs_doc_fix``: reviewers' verdicts;
- ``previous``: questions in the equal period just before ``since``; ``change``: ``questions - previous``.

Sections nobody asked about are listed with zeros: what students skip.

**Struggle and its score.** ``struggle = unsure + refused + withheld + thumbs_down + wrong + needs_doc_fix`` (one
answer may count more than once: unsure and voted down), and

    score = struggle / questions × sessions

the trouble per question, weighted by how many students asked: 4 unsure and 2 thumbs down in 10 questions from 8
conversations score 6 / 10 × 8 = 4.8; 3 refusals asked by one student in a row score 3 / 3 × 1 = 1. ``ranking``
lists the sections with any struggle, highest score first, ties in the outline's order.

**Privacy.** Aggregates only: no question, answer or client appears in what this module returns.

**By week**, ``heat``: the questions of each chapter per week (weeks start on Monday), for the heat strip.

The counts come from one SQL query that groups the period's rows by section and by section and week (``_COUNTS``),
so the time it takes grows with the audit rows in the period, not with Python work per row.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from fractions import Fraction

from django.db import connection
from django.utils import timezone

from audit.models import AuditLog, TopicRun
from bookchat.base.errors import BookchatError
from ingestion.indexing.chunking import HEADING_SEPARATOR
from ingestion.models import Book, Chunk
from ingestion.reading.outline import book_outline

S = AuditLog.Status
R = AuditLog.Review
DEFAULT_DAYS = 30
LEVELS = ("high", "medium", "unsure", "refused", "withheld", "staff")  # the shares of a section's questions
COUNTS = ("questions", "sessions", *LEVELS, "thumbs_down", "wrong", "needs_doc_fix", "previous")
STRUGGLE = ("unsure", "refused", "withheld", "thumbs_down", "wrong", "needs_doc_fix")

# The period's rows and the period's before, grouped by the section each landed on (``AuditLog.section_url``), and
# by section and week (the weeks start on Monday, in the server's time zone; ``week`` is null on the first grouping):
# one scan of the rows for both.
_COUNTS = f"""
SELECT section_url, CASE WHEN GROUPING(week) = 0 THEN week END,
       COUNT(*) FILTER (WHERE current),
       COUNT(DISTINCT conversation) FILTER (WHERE current),
       COUNT(*) FILTER (WHERE current AND status = %(answered)s AND confidence_level = 'high'),
       COUNT(*) FILTER (WHERE current AND status = %(answered)s AND confidence_level = 'medium'),
       COUNT(*) FILTER (WHERE current AND (status = %(unsure)s
                                           OR status = %(answered)s AND confidence_level NOT IN ('high', 'medium'))),
       COUNT(*) FILTER (WHERE current AND status = %(not_covered)s),
       COUNT(*) FILTER (WHERE current AND status = %(withheld)s),
       COUNT(*) FILTER (WHERE current AND status = %(staff)s),
       COUNT(*) FILTER (WHERE current AND feedback_rating = 'down'),
       COUNT(*) FILTER (WHERE current AND review_status = %(wrong)s),
       COUNT(*) FILTER (WHERE current AND review_status = %(needs_doc_fix)s),
       COUNT(*) FILTER (WHERE NOT current)
  FROM (SELECT created_at >= %(since)s AS current, status, confidence_level, feedback_rating, review_status,
               section_url, COALESCE(session_id, answer_id) AS conversation,
               date_trunc('week', created_at AT TIME ZONE %(zone)s)::date AS week
          FROM {AuditLog._meta.db_table}
         WHERE book_slug = %(book)s AND created_at >= %(before)s AND created_at < %(until)s
           AND status <> %(searched)s) asked
 GROUP BY GROUPING SETS ((section_url), (section_url, week))
"""


class StruggleError(BookchatError):
    code = "bad_period"


def struggle_map(book: Book, *, since: datetime | None = None, until: datetime | None = None) -> dict:
    """``{"book", "since", "until", "totals", "sections", "ranking", "heat", "topics", "topics_computed"}`` for
    ``book`` over ``[since, until)`` (default: the last ``DEFAULT_DAYS`` days); the topics are the newest computed
    (``newest_topics``), over a period of their own."""
    until = until or timezone.now()
    since = since or _earlier(until, timedelta(days=DEFAULT_DAYS))
    if timezone.is_naive(since) or timezone.is_naive(until):
        raise StruggleError("since and until need a time zone")
    if since >= until:
        raise StruggleError(f"the period is empty: since ({since.isoformat()}) is not before until "
                            f"({until.isoformat()})")
    sections = outline_sections(book)
    counted, weekly = _counts(book.slug, since, until)
    by_url = {}
    for section in sections:
        by_url.setdefault(section["url"], section)
        section.update(dict.fromkeys(COUNTS, 0))
    totals = {"questions": 0, "previous": 0, "unplaced": 0, "unplaced_previous": 0}
    for url, numbers in counted.items():
        totals["questions"] += numbers["questions"]
        totals["previous"] += numbers["previous"]
        section = by_url.get(url) if url else None
        if section is None:
            totals["unplaced"] += numbers["questions"]
            totals["unplaced_previous"] += numbers["previous"]
        else:
            section.update(numbers)
    for section in sections:
        _derive(section)
    topics, computed = newest_topics(book.slug)
    return {"book": book.slug, "since": since.isoformat(), "until": until.isoformat(), "totals": totals,
            "sections": sections, "ranking": ranking(sections, topics),
            "heat": _heat(weekly, since, until, by_url), "topics": topics, "topics_computed": computed}


def newest_topics(book_slug: str) -> tuple[list[dict], dict | None]:
    """The book's newest computed topics (``audit.topics``; without their questions' ids) and which run computed
    them, when and over which period; ``([], None)`` before the first computation."""
    run = TopicRun.newest_done(book_slug)
    if run is None:
        return [], None
    return [{k: v for k, v in topic.items() if k != "ids"} for topic in run.topics], {
        "run": run.pk, "at": run.finished_at.isoformat(), "since": run.since.isoformat(),
        "until": run.until.isoformat(), "questions": run.questions, "unclustered": run.unclustered,
        "took_seconds": run.took_seconds}


def _heat(weekly: dict[tuple[str, date], int], since: datetime, until: datetime, by_url: dict[str, dict]) -> dict:
    """``{"weeks": [Monday, …], "chapters": [{"chapter", "counts": [per week]}, …]}``: the period's questions of
    each chapter per week (``weekly``: by section link and Monday), chapters in the outline's order (questions on no
    section are left out)."""
    first = timezone.localtime(since).date()
    last = timezone.localtime(until - timedelta(microseconds=1)).date()
    monday = first - timedelta(days=first.weekday())
    weeks = [monday + timedelta(weeks=n) for n in range((last - monday).days // 7 + 1)]
    column = {week: n for n, week in enumerate(weeks)}
    chapters = {section["chapter"]: [0] * len(weeks) for section in by_url.values()}
    for (url, week), count in weekly.items():
        if (section := by_url.get(url)) is not None and week in column:
            chapters[section["chapter"]][column[week]] += count
    return {"weeks": [week.isoformat() for week in weeks],
            "chapters": [{"chapter": name, "counts": counts} for name, counts in chapters.items()]}


def outline_sections(book: Book) -> list[dict]:
    """The book's sections in the outline's order: its pages in sidebar order (``book_outline``), in each page its
    anchors in the order their passages come. ``section`` is the heading (the last part of the heading path, the
    page's title at its top), ``heading_path`` the longest of its passages' (a passage that runs on into the next
    sections has a shorter one)."""
    anchors: dict[str, dict[str, dict]] = {}  # page path → anchor → its section, in passage order
    passages = (Chunk.objects.filter(book=book).order_by("document_id", "ordinal")
                .values_list("document__path", "anchor", "heading_path", "url"))
    for path, anchor, heading_path, url in passages:
        page = anchors.setdefault(path, {})
        known = page.get(anchor)
        if known is None:
            page[anchor] = {"anchor": anchor, "url": url, "heading_path": heading_path}
        elif heading_path.count(HEADING_SEPARATOR) > known["heading_path"].count(HEADING_SEPARATOR):
            known["heading_path"] = heading_path
    sections = []
    for chapter in book_outline(book):
        for page in chapter["pages"]:
            for found in anchors.get(page["path"], {}).values():
                sections.append({
                    "chapter": chapter["chapter"] or page["label"], "page": page["label"], "path": page["path"],
                    "section": found["heading_path"].rsplit(HEADING_SEPARATOR, 1)[-1] or page["title"],
                    "anchor": found["anchor"], "url": found["url"], "heading_path": found["heading_path"],
                })
    return sections


def _counts(book_slug: str, since: datetime, until: datetime) -> tuple[dict[str, dict[str, int]],
                                                                         dict[tuple[str, date], int]]:
    """The counts by section link (``COUNTS``), and the period's questions by section link and week."""
    params = {"book": book_slug, "since": since, "until": until, "before": _earlier(since, until - since),
              "searched": S.SEARCHED, "answered": S.ANSWERED, "unsure": S.UNSURE, "not_covered": S.NOT_COVERED,
              "withheld": S.WITHHELD, "staff": S.STAFF, "wrong": R.WRONG, "needs_doc_fix": R.NEEDS_DOC_FIX,
              "zone": timezone.get_current_timezone_name()}
    counted, weekly = {}, {}
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS, params)
        for url, week, *numbers in cursor.fetchall():
            if week is None:
                counted[url] = dict(zip(COUNTS, numbers, strict=True))
            elif numbers[0]:  # a week of the period before has no question of this one
                weekly[url, week] = numbers[0]
    return counted, weekly


def _earlier(moment: datetime, by: timedelta) -> datetime:
    """``moment - by``, or the first moment there is (a period that starts near year 1)."""
    try:
        return moment - by
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def _derive(section: dict) -> None:
    """A section's shares, change, struggle and score, from its counts."""
    asked = section["questions"]
    section["shares"] = {level: round(section[level] / asked, 4) if asked else None for level in LEVELS}
    section["change"] = asked - section["previous"]
    section["struggle"] = sum(section[name] for name in STRUGGLE)
    section["score"] = score(section["struggle"], asked, section["sessions"])


def score(struggle: int, questions: int, sessions: int) -> float:
    """The trouble per question, weighted by how many students asked (the module's docstring)."""
    return round(struggle * sessions / questions, 4) if questions else 0.0


def ranking(sections: list[dict], topics: list[dict] = ()) -> list[dict]:
    """The sections and topics with any struggle, highest score first; ties: sections in the outline's order, then
    topics in theirs (``sorted`` is stable). Each entry says its ``kind``: ``section`` (with its place in the book)
    or ``topic`` (with its number ``n`` and ``label``)."""
    entries = [{"kind": "section", **{k: s[k] for k in (*_PLACE, *_RANKED)}} for s in sections if s["struggle"]]
    entries += [{"kind": "topic", **{k: t[k] for k in ("n", "label", *_RANKED)}} for t in topics if t["struggle"]]
    entries.sort(key=lambda e: -Fraction(e["struggle"] * e["sessions"], e["questions"]))
    return [{"rank": n, **entry} for n, entry in enumerate(entries, 1)]


_PLACE = ("chapter", "page", "section", "anchor", "url")
_RANKED = ("score", "struggle", "questions", "sessions")
