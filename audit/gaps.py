"""Coverage gaps: questions the book could not answer well, grouped by meaning, so authors see what is missing.

The questions are the refused ("not covered" or unsure), withheld and low-confidence answers of the
period, and the searches that found nothing or led nowhere, the classic search-analytics signals: none of
their words is in the book (``matched`` "meaning" or "none") or the best match is off the book's topic (not
``covered``); or, from a search box that reports which section a reader opens (the widget, the chat page with
JavaScript: ``reports_opens`` on the row), sections were shown and the reader opened none ("no-click"; counted
once the reader has had ``TYPING_SECONDS`` to choose). A search box searches on every keystroke, so of one
reader's searches in a row only the last is kept: a search is dropped when the same client searched a longer text
that begins with it within ``TYPING_SECONDS`` after it ("kuber" before "kubernetes"), whatever either found.
And the questions the course staff marked "the book should cover this" on a hand-off (``audit.handoffs``), whatever
bookchat answered: a gap counts them (``staff``), and one that holds any comes before the groups of its size.

Each is embedded once (as a query, with the book's embedder; the vector is kept on
its audit row) and grouped greedily: a question joins the group whose centre is closest if
its cosine to it is at least ``threshold``, else it starts a group. Greedy grouping is
linear in questions × groups, needs no cluster count, and is stable enough for a few
thousand questions; groups are listed biggest first with their most recent questions and
the sections that came closest.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.db.models import Q
from django.utils import timezone

from audit.models import AuditLog, Handoff
from ingestion.indexing.embedders import get_embedder

S = AuditLog.Status
# Cosine between two questions' e5 query vectors from which they count as the same topic: paraphrases score
# ~0.9 and up, questions on neighbouring topics ~0.85, unrelated ones ~0.75.
DEFAULT_THRESHOLD = 0.88
MAX_QUESTIONS = 2000
MAX_SEARCHES = 20_000  # searches of the period read to find the last of each reader's typing (newest first)
TYPING_SECONDS = 60
EXAMPLES = 5


@dataclass
class Gap:
    count: int = 0
    refused: int = 0
    searched: int = 0  # of ``count``, searches (that found nothing, or whose sections nobody opened)
    unopened: int = 0  # of ``searched``, those whose sections were shown and none was opened
    staff: int = 0  # of ``count``, questions the course staff marked "the book should cover this"
    books: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    sections: Counter = field(default_factory=Counter)
    links: dict[str, str] = field(default_factory=dict)  # section (heading path) → its URL
    last_asked: datetime | None = None
    ids: list[int] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.examples[0] if self.examples else ""

    @property
    def book_list(self) -> list[str]:
        return [name for name, _ in self.books.most_common()]

    @property
    def nearest_sections(self) -> list[str]:
        return [name for name, _ in self.sections.most_common(3)]


def _period(*, days: int, book: str | None, within: list[str] | None):
    rows = AuditLog.objects.filter(created_at__gte=timezone.now() - timedelta(days=days))
    if within is not None:  # a reviewer restricted to some books
        rows = rows.filter(book_slug__in=within)
    return rows.filter(book_slug=book) if book else rows


def gap_questions(*, days: int, book: str | None = None, within: list[str] | None = None):
    """The questions of the period the book answered badly or not at all (searches: ``gap_searches``)."""
    return _period(days=days, book=book, within=within).filter(
        Q(status__in=[S.NOT_COVERED, S.UNSURE, S.WITHHELD]) | Q(status=S.ANSWERED, confidence_level="low"))


def found_nothing(row: AuditLog) -> bool:
    retrieval = row.retrieval or {}
    return retrieval.get("covered") is False or retrieval.get("matched") in ("meaning", "none")


def opened_nothing(row: AuditLog, now: datetime) -> bool:
    """A search from a box that reports opened sections, whose reader has had time to choose and opened none."""
    retrieval = row.retrieval or {}
    return (bool(retrieval.get("reports_opens")) and not retrieval.get("opened")
            and (now - row.created_at).total_seconds() > TYPING_SECONDS)


def gap_searches(*, days: int, book: str | None = None, within: list[str] | None = None) -> list[int]:
    """The ids of the period's searches that are gaps: the last of each reader's typing (``last_typed``) that
    found nothing or whose sections nobody opened."""
    now = timezone.now()
    searches = list(_period(days=days, book=book, within=within).filter(status=S.SEARCHED).order_by("-created_at")
                    .only("id", "question", "status", "channel", "retrieval", "created_at", "client_ip_hash")
                    [:MAX_SEARCHES])
    return [row.id for row in last_typed(searches) if found_nothing(row) or opened_nothing(row, now)]


def last_typed(rows: list[AuditLog]) -> list[AuditLog]:
    """``rows`` (newest first) without the searches a reader went on typing: a search is dropped when a later one
    from the same client, within ``TYPING_SECONDS``, begins with its text and is longer."""
    kept, later = [], {}  # client → its newer searches within TYPING_SECONDS of the row at hand (newest first)
    for row in rows:
        if row.status != S.SEARCHED:
            kept.append(row)
            continue
        newer = later.setdefault(row.client_ip_hash or row.id, deque())
        while newer and (newer[0].created_at - row.created_at).total_seconds() > TYPING_SECONDS:
            newer.popleft()  # too late for this row, and for every older one
        typed_on = any(len(n.question) > len(row.question) and n.question.startswith(row.question) for n in newer)
        newer.append(row)
        if not typed_on:
            kept.append(row)
    return kept


def staff_marked(*, days: int, book: str | None = None, within: list[str] | None = None):
    """The period's questions whose hand-off the course staff marked "the book should cover this" (their answers'
    audit rows, whatever bookchat answered)."""
    marked = Handoff.objects.filter(status=Handoff.Status.COVERAGE).values("answer_id")
    return _period(days=days, book=book, within=within).filter(answer_id__in=marked)


def coverage_gaps(*, days: int = 90, book: str | None = None, within: list[str] | None = None,
                  threshold: float = DEFAULT_THRESHOLD, limit: int = MAX_QUESTIONS) -> list[Gap]:
    searches = gap_searches(days=days, book=book, within=within)
    marked = set(staff_marked(days=days, book=book, within=within).values_list("id", flat=True))
    rows = list(AuditLog.objects.filter(Q(id__in=gap_questions(days=days, book=book, within=within).values("id"))
                                        | Q(id__in=searches) | Q(id__in=marked)).order_by("-created_at")
                .only("id", "question", "resolved_question", "book_slug", "status", "channel", "suggestions",
                      "sources", "retrieval", "created_at", "question_vector")[:limit])
    if not rows:
        return []
    vectors = question_vectors(rows)
    gaps: list[Gap] = []
    centres: list[np.ndarray] = []
    for row, vector in zip(reversed(rows), vectors[::-1], strict=True):  # oldest first: groups settle early
        best, similarity = -1, -1.0
        if centres:
            scores = np.stack(centres) @ vector
            best = int(scores.argmax())
            similarity = float(scores[best])
        if similarity >= threshold:
            gap = gaps[best]
            centre = centres[best] * gap.count + vector
            centres[best] = centre / (np.linalg.norm(centre) or 1.0)
        else:
            gap = Gap()
            gaps.append(gap)
            centres.append(vector)
        _add(gap, row)
        gap.staff += row.id in marked
    for gap in gaps:
        gap.examples = gap.examples[::-1][:EXAMPLES]  # most recent first
    return sorted(gaps, key=lambda g: (-g.count, -bool(g.staff), -(g.last_asked.timestamp() if g.last_asked else 0)))


def _add(gap: Gap, row: AuditLog) -> None:
    gap.count += 1
    gap.refused += row.status in (S.NOT_COVERED, S.UNSURE)
    gap.searched += row.status == S.SEARCHED
    gap.unopened += row.status == S.SEARCHED and not found_nothing(row)
    gap.books[row.book_slug] += 1
    gap.ids.append(row.id)
    if row.question not in gap.examples:
        gap.examples.append(row.question)
    for near in (row.suggestions or [])[:1] or (row.sources or [])[:1]:
        section = near.get("heading_path") or near.get("title") or ""
        gap.sections[section] += 1
        if near.get("url"):
            gap.links.setdefault(section, near["url"])
    gap.last_asked = max(filter(None, [gap.last_asked, row.created_at]))


def question_vectors(rows: list[AuditLog]) -> np.ndarray:
    """Unit vectors of the rows' questions, embedding (and storing) the ones not embedded yet."""
    embedder = get_embedder()
    missing = [r for r in rows if r.question_vector is None or len(r.question_vector) != embedder.dimension]
    if missing:
        fresh = embedder.embed_queries([r.resolved_question or r.question for r in missing])
        for row, vector in zip(missing, fresh, strict=True):
            row.question_vector = vector
        AuditLog.objects.bulk_update(missing, ["question_vector"], batch_size=500)
    matrix = np.array([np.asarray(r.question_vector, dtype=np.float32) for r in rows])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


# -- for the book's authors -----------------------------------------------------------------------------------------
MARKDOWN_GAPS = 30  # groups in an export, biggest first
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~])")


def gaps_markdown(gaps: list[Gap], *, book: str | None, days: int, limit: int = MARKDOWN_GAPS) -> str:
    """The coverage gaps as Markdown to paste into an issue of the book's repository: what readers asked that the
    book doesn't answer well, how often, and the closest sections with their links. Readers' words are escaped (no
    link, image, HTML or mention can come from a question)."""
    questions = sum(gap.count for gap in gaps)
    scope = f"the book `{book}`" if book else "every book"
    lines = [f"## What readers asked that the book doesn't answer well ({scope}, last {days} days)", "",
             f"bookchat's coverage gaps: {questions} questions refused, withheld or answered with low confidence, "
             "handed to the course staff who said the book should cover them, and "
             f"searches that found nothing or whose results nobody opened, in {len(gaps)} "
             f"group{'s' if len(gaps) != 1 else ''} of similar questions. The biggest groups come first.", ""]
    if not gaps:
        lines.append("No gap in this period.")
    for number, gap in enumerate(gaps[:limit], 1):
        asked = f"asked {gap.count} time{'s' if gap.count != 1 else ''}"
        details = [f"{gap.refused} refused"] if gap.refused else []
        if gap.searched:
            details.append(f"{gap.searched} searches")
        if gap.staff:
            details.append(f"{gap.staff} marked by the course staff: the book should cover this")
        when = f", last on {gap.last_asked:%Y-%m-%d}" if gap.last_asked else ""
        lines += [f"### {number}. {markdown_escape(gap.label)}", "",
                  f"- {asked}{' (' + ', '.join(details) + ')' if details else ''}{when}",
                  "- questions: " + "; ".join(f"“{markdown_escape(q)}”" for q in gap.examples)]
        sections = [f"[{markdown_escape(name)}]({markdown_link(gap.links[name])})" if gap.links.get(name)
                    else markdown_escape(name) for name in gap.nearest_sections if name]
        lines.append(f"- closest sections: {', '.join(sections)}" if sections else "- closest sections: none")
        if not book and len(gap.books) > 1:
            lines.append(f"- books: {', '.join(markdown_escape(name) for name in gap.book_list)}")
        lines.append("")
    if len(gaps) > limit:
        lines.append(f"… and {len(gaps) - limit} smaller groups (the admin's Coverage gaps page lists them all).")
    return "\n".join(lines).rstrip() + "\n"


def markdown_escape(text: str) -> str:
    """Readers' text as plain Markdown: punctuation escaped, one line, and no @mention (a zero-width space after @)."""
    flat = " ".join(str(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat).replace("@", "@\u200b")


def markdown_link(url: str) -> str:
    """A URL as a Markdown link target: only http(s), with what would end the target percent-encoded."""
    if not url.lower().startswith(("https://", "http://", "/")):
        return "#"
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
