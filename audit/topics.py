"""Topics of a book's questions: the questions of a period grouped by meaning, each topic named by its most
distinctive terms, with its counts (as the map of where students struggle counts a section's, ``audit.struggle``),
example questions and the sections its answers cite. Computed by a background task, on a schedule and on demand,
into a ``TopicRun``.

**The questions** are the book's audit rows of ``[since, until)`` but an assistant's searches, the newest
``MAX_QUESTIONS``, each embedded once as a query with the book's embedder (``audit.gaps.question_vectors``; the
vector is kept on its row).

**Grouping.** HDBSCAN (scikit-learn) over the unit vectors: Euclidean distance between unit vectors orders pairs as
their cosine does. It finds dense groups of any number and shape and leaves the questions near none of them out
(``unclustered``) rather than forcing them into a topic. A topic has at least ``MIN_TOPIC_SIZE`` questions, and at
least ``MIN_TOPIC_SHARE`` of the period's, so that a busy period lists its main topics, not hundreds of small ones.

**Names.** Class-based TF-IDF over the topics' words (each topic's questions as one document, the unclustered as one
more; English stop words left out): a term weighs its share of the topic's words × log(1 + A / its count in all
the questions), A the average number of words per document. A topic's ``terms`` are its ``TERMS`` heaviest.

**Per topic**: ``questions``, ``sessions`` and the counts of ``audit.struggle`` with the same definitions (unsure:
held back as unsure, or answered below the medium level; refused: not covered; …), the shares of unsure and refused
answers, ``struggle`` and ``score`` (``audit.struggle.score``), the ``SECTIONS`` sections its questions landed on
most, and the ids of its questions.

**Privacy.** A topic asked about in fewer distinct conversations than ``STRUGGLE_MIN_SESSIONS`` has no example
question; one with enough has its ``EXAMPLES`` most recent distinct questions. A run over a period that began
before the audit trail's retention is deleted with the questions it quotes.

**Runs.** ``compute_topics`` computes one now; ``queue_topics`` queues one for the task worker; every day the
schedule (``audit.tasks.recompute_all_topics``) queues one of the last ``DEFAULT_DAYS`` days for every book asked
about, keeps each book's newest ``KEEP_RUNS`` and marks failed those a stopped worker left. ``latest_topics`` is the
newest done run of a book.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import datetime, timedelta

import numpy as np
from django.db import transaction
from django.utils import timezone

from audit.gaps import question_vectors
from audit.models import AuditLog, TopicRun
from audit.struggle import DEFAULT_DAYS, STRUGGLE, outline_sections, score
from bookchat.base.broker import queue_in_database
from bookchat.base.conf import setting
from bookchat.base.queues import BACKGROUND, queue_task
from ingestion.models import Book

logger = logging.getLogger(__name__)

S = AuditLog.Status
R = AuditLog.Review
MAX_QUESTIONS = 5000  # the newest of the period: HDBSCAN's time grows faster than the number of questions
MIN_TOPIC_SIZE = 3
MIN_TOPIC_SHARE = 0.005  # of the period's questions: 25 of 5,000
UNCLUSTERED = -1  # HDBSCAN's label for a question in no topic
TERMS = 5
LABEL_TERMS = 3
EXAMPLES = 3
SECTIONS = 3
KEEP_RUNS = 30  # per book: the schedule deletes older finished runs
STALE_AFTER = timedelta(days=1)  # a run queued this long ago and not finished never will be (its worker stopped)
TASK = "audit.tasks.compute_book_topics"
SCHEDULED = "schedule"  # ``requested_by`` of the schedule's runs
LEVELS = ("high", "medium", "unsure", "refused", "withheld", "staff", "thumbs_down", "wrong", "needs_doc_fix")
SHARED = ("unsure", "refused")  # the levels whose share of a topic's questions it shows
_FIELDS = ("id", "answer_id", "session_id", "question", "resolved_question", "question_vector", "status",
           "confidence_level", "feedback_rating", "review_status", "section_url", "created_at")


def compute_topics(book_slug: str, *, since: datetime, until: datetime, requested_by: str = "") -> TopicRun:
    """A new run of ``book_slug``'s topics over ``[since, until)``, computed now (``run_topics``)."""
    run = TopicRun.objects.create(book_slug=book_slug, since=since, until=until, requested_by=requested_by)
    return run_topics(run)


def queue_topics(book_slug: str, *, since: datetime, until: datetime, requested_by: str) -> TopicRun:
    """A new run, queued for the background task worker (``audit.tasks.compute_book_topics``). With the Postgres
    broker the task is queued in the caller's transaction (the worker sees both or neither); with Redis, once it
    commits: a worker popping the task at once must find the run."""
    run = TopicRun.objects.create(book_slug=book_slug, since=since, until=until, requested_by=requested_by)

    def enqueue() -> None:
        queue_task(BACKGROUND, TASK, run.pk, task_name=f"topics-{book_slug}-{run.pk}", group="topics")

    if queue_in_database():
        enqueue()
    else:
        transaction.on_commit(enqueue)
    return run


def queue_every_book(*, days: int = DEFAULT_DAYS) -> list[TopicRun]:
    """A queued run of the last ``days`` days for every book asked a question in them, and each book's older
    finished runs but the newest ``KEEP_RUNS`` deleted: what the daily schedule does (after ``fail_stale_runs`` and
    ``forget_old_runs``)."""
    fail_stale_runs()
    forget_old_runs()
    until = timezone.now()
    since = until - timedelta(days=days)
    slugs = (AuditLog.objects.filter(created_at__gte=since, created_at__lt=until).exclude(status=S.SEARCHED)
             .exclude(book_slug="").order_by("book_slug").values_list("book_slug", flat=True).distinct())
    runs = []
    for slug in slugs:
        runs.append(queue_topics(slug, since=since, until=until, requested_by=SCHEDULED))
        kept = TopicRun.objects.filter(book_slug=slug).values("pk")[:KEEP_RUNS]
        TopicRun.objects.filter(book_slug=slug, status__in=[TopicRun.Status.DONE, TopicRun.Status.FAILED]).exclude(
            pk__in=kept).delete()
    return runs


def fail_stale_runs() -> int:
    """Mark failed the runs queued more than ``STALE_AFTER`` ago and still queued or running (their task worker
    stopped before it finished them); how many."""
    return TopicRun.objects.filter(
        status__in=[TopicRun.Status.QUEUED, TopicRun.Status.RUNNING], created_at__lt=timezone.now() - STALE_AFTER,
    ).update(status=TopicRun.Status.FAILED, finished_at=timezone.now(),
             error=f"not finished {STALE_AFTER.days} day after it was queued: the task worker stopped or never ran it")


def forget_old_runs() -> int:
    """Delete the runs over periods that began before the audit trail's retention (``AUDIT_RETENTION_DAYS``): the
    questions they quote are no longer kept; how many."""
    cutoff = timezone.now() - timedelta(days=setting("AUDIT_RETENTION_DAYS"))
    deleted, _ = TopicRun.objects.filter(since__lt=cutoff).delete()
    return deleted


def latest_topics(book_slug: str) -> TopicRun | None:
    """The newest done run of the book's topics, if any."""
    return TopicRun.newest_done(book_slug)


def run_topics(run: TopicRun) -> TopicRun:
    """Compute ``run``'s topics and save it done, with the time it took; or failed with the error, which is logged,
    not raised (the schedule goes on with the next book, the page shows why)."""
    run.status = TopicRun.Status.RUNNING
    run.save(update_fields=["status"])
    started = time.perf_counter()
    try:
        with transaction.atomic():  # a database error inside leaves the run's own transaction usable
            rows = period_questions(run.book_slug, since=run.since, until=run.until)
            labels = cluster(question_vectors(rows)) if rows else np.array([], dtype=int)
            run.topics = describe(run.book_slug, rows, labels)
        run.questions, run.unclustered = len(rows), int((labels == UNCLUSTERED).sum())
        run.status = TopicRun.Status.DONE
    except Exception as error:  # whatever failed, the run records it
        logger.exception("topics of %s (run %s) failed", run.book_slug, run.pk)
        run.status, run.error = TopicRun.Status.FAILED, f"{type(error).__name__}: {error}"
    run.took_seconds = round(time.perf_counter() - started, 3)
    run.finished_at = timezone.now()
    run.save()
    return run


def period_questions(book_slug: str, *, since: datetime, until: datetime) -> list[AuditLog]:
    """The book's questions of ``[since, until)`` (not an assistant's searches), the newest ``MAX_QUESTIONS``,
    newest first."""
    return list(AuditLog.objects.filter(book_slug=book_slug, created_at__gte=since, created_at__lt=until)
                .exclude(status=S.SEARCHED).order_by("-created_at", "-id").only(*_FIELDS)[:MAX_QUESTIONS])


def cluster(vectors: np.ndarray) -> np.ndarray:
    """Each vector's topic (0, 1, …) or ``UNCLUSTERED``, by HDBSCAN over unit vectors."""
    size = max(MIN_TOPIC_SIZE, round(len(vectors) * MIN_TOPIC_SHARE))
    if len(vectors) <= size:  # too few to tell a dense group from the rest
        return np.full(len(vectors), UNCLUSTERED)
    from sklearn.cluster import HDBSCAN  # here: scikit-learn takes a second to import, and every process loads this

    return HDBSCAN(min_cluster_size=size, metric="euclidean", copy=True).fit(vectors).labels_


def describe(book_slug: str, rows: list[AuditLog], labels: np.ndarray) -> list[dict]:
    """The topics of ``rows`` (newest first) as ``labels`` group them: biggest first (ties: the one asked most
    recently first), numbered from 1."""
    groups: dict[int, list[AuditLog]] = {}
    for row, label in zip(rows, labels, strict=True):
        if label != UNCLUSTERED:
            groups.setdefault(int(label), []).append(row)
    ordered = sorted(groups.values(), key=lambda group: (-len(group), -group[0].created_at.timestamp()))
    unclustered = [row for row, label in zip(rows, labels, strict=True) if label == UNCLUSTERED]
    documents = [" ".join(_text(row) for row in group) for group in [*ordered, unclustered] if group]
    terms = distinctive_terms(documents)
    names = section_names(book_slug, {row.section_url for row in rows if row.section_url})
    min_sessions = setting("STRUGGLE_MIN_SESSIONS")
    return [topic(n, group, terms[n - 1], names, min_sessions=min_sessions) for n, group in enumerate(ordered, 1)]


def _text(row: AuditLog) -> str:
    return row.resolved_question or row.question


def distinctive_terms(documents: list[str]) -> list[list[str]]:
    """Each document's ``TERMS`` most distinctive terms by class-based TF-IDF (the module's docstring), heaviest
    first (ties in alphabetical order); none for a document of stop words only."""
    from sklearn.feature_extraction.text import CountVectorizer  # here, as HDBSCAN in ``cluster``

    vectorizer = CountVectorizer(stop_words="english")
    try:
        counts = vectorizer.fit_transform(documents).toarray().astype(float)
    except ValueError:  # no document has a word that is not a stop word
        return [[] for _ in documents]
    words = counts.sum(axis=1, keepdims=True)
    frequency = counts / np.where(words == 0, 1.0, words)
    weights = frequency * np.log(1 + counts.sum() / len(documents) / counts.sum(axis=0))
    vocabulary = vectorizer.get_feature_names_out()
    best = []
    for row in weights:
        order = np.lexsort((vocabulary, -row))
        best.append([str(vocabulary[i]) for i in order[:TERMS] if row[i] > 0])
    return best


def section_names(book_slug: str, urls: set[str]) -> dict[str, str]:
    """Section link → its heading path (its page's title at a page's top), for those of ``urls`` the book has."""
    book = Book.objects.filter(slug=book_slug).first()
    if book is None or not urls:
        return {}
    names: dict[str, str] = {}
    for section in outline_sections(book):
        if section["url"] in urls:
            names.setdefault(section["url"], section["heading_path"] or section["section"])
    return names


def topic(n: int, rows: list[AuditLog], terms: list[str], names: dict[str, str], *, min_sessions: int) -> dict:
    """One topic of ``rows`` (newest first), as ``TopicRun.topics`` holds it."""
    counts = Counter(level for row in rows for level in levels(row))
    questions = len(rows)
    sessions = len({row.session_id or row.answer_id for row in rows})
    struggle = sum(counts[name] for name in STRUGGLE)
    return {
        "n": n, "terms": terms, "label": " · ".join(terms[:LABEL_TERMS]),
        "questions": questions, "sessions": sessions, **{level: counts[level] for level in LEVELS},
        "shares": {level: round(counts[level] / questions, 4) if questions else None for level in SHARED},
        "struggle": struggle, "score": score(struggle, questions, sessions),
        "examples": examples(rows) if sessions >= min_sessions else [],
        "sections": [{"url": url, "section": names.get(url, url), "count": count}
                     for url, count in Counter(row.section_url for row in rows if row.section_url)
                     .most_common(SECTIONS)],
        "ids": [row.id for row in rows],
    }


def levels(row: AuditLog) -> list[str]:
    """What a question counts towards, by the definitions of ``audit.struggle``'s counts."""
    answered = row.status == S.ANSWERED
    below_medium = answered and row.confidence_level not in ("high", "medium")
    return [level for level, counted in (
        ("high", answered and row.confidence_level == "high"),
        ("medium", answered and row.confidence_level == "medium"),
        ("unsure", row.status == S.UNSURE or below_medium),
        ("refused", row.status == S.NOT_COVERED),
        ("withheld", row.status == S.WITHHELD),
        ("staff", row.status == S.STAFF),
        ("thumbs_down", row.feedback_rating == "down"),
        ("wrong", row.review_status == R.WRONG),
        ("needs_doc_fix", row.review_status == R.NEEDS_DOC_FIX),
    ) if counted]


def examples(rows: list[AuditLog]) -> list[str]:
    """The ``EXAMPLES`` most recent distinct questions of ``rows`` (newest first)."""
    distinct = list(dict.fromkeys(row.question for row in rows))
    return distinct[:EXAMPLES]
