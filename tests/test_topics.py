"""Topics of a book's questions (``audit.topics``) on rows made to order, embedded by the real embedder: questions in
three themes (installing, API keys, backups) come out as three topics named by their words, biggest first, with
exact counts and shares, the sections their questions landed on, example questions only when enough conversations
asked (none under the threshold); searches, other books and other periods are left out, questions near no topic are
unclustered; each question counts towards the levels the map of sections counts it in; a failing embedder makes a
failed run that says why; ``latest_topics`` is the newest done run; the daily schedule exists after migrating,
queues a run per book asked about (keeping each book's newest runs, none older than the audit trail's retention,
failing those a stopped worker left), and the queued task computes it."""

from __future__ import annotations

import importlib
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from audit.models import AuditLog, TopicRun
from audit.struggle import struggle_map
from audit.tasks import compute_book_topics, recompute_all_topics
from audit.topics import KEEP_RUNS, LEVELS, STALE_AFTER, compute_topics, latest_topics, levels, queue_topics
from ingestion.models import Book, Chunk, Document

pytestmark = pytest.mark.django_db

SLUG = "topics-book"
SITE = "https://docs.example.org/topics"
INSTALL, KEYS, GONE = f"{SITE}/install#linux", f"{SITE}/keys", f"{SITE}/backups-old"
INSTALL_QUESTIONS = [
    "How do I install bookchat on Ubuntu?", "How do I install bookchat on Ubuntu?",  # one example, not two
    "What are the steps to install bookchat?", "Installing bookchat with pip fails, what do I do?",
    "Can I install bookchat without Docker?", "Which Python version do I need to install bookchat?",
    "How to install bookchat on a Mac?",
]
KEY_QUESTIONS = [
    "How do I create an API key?", "Where do I revoke an API key?", "My API key is rejected, why?",
    "Can an API key be limited to one book?", "How do I rotate API keys?", "What permissions does an API key have?",
]
BACKUP_QUESTIONS = [
    "How do I back up the database?", "How to restore a database backup?", "Where are database backups stored?",
    "Can I schedule database backups?", "How long does a database backup take?",
]
STRAYS = ["What is the boiling point of tungsten in kelvin?", "Who won the football world cup in 1998?"]
SCHEDULE = importlib.import_module("audit.migrations.0007_topicrun").SCHEDULE


@pytest.fixture(autouse=True)
def threshold(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "STRUGGLE_MIN_SESSIONS": 5}
    AuditLog.objects.all().delete()  # another test's committed rows, back after this test's transaction


def make_book() -> Book:
    """Two pages: Install (with its "On Linux" section) and API keys."""
    book = Book.objects.create(slug=SLUG, title="Topics", embedder_name="test", embedder_dimension=3)
    for path, sections in {"install.md": [("", "Install", f"{SITE}/install"),
                                          ("linux", "Install > On Linux", INSTALL)],
                           "keys.md": [("", "API keys", KEYS)]}.items():
        document = Document.objects.create(book=book, path=path, title=sections[0][1], url=sections[0][2])
        for ordinal, (anchor, heading, url) in enumerate(sections):
            Chunk.objects.create(id=f"{path}-{ordinal}", book=book, document=document, ordinal=ordinal,
                                 heading_path=heading, anchor=anchor, url=url, text="text", char_start=0, char_end=4,
                                 line_start=1, line_end=1, token_count=1, embedding_key=f"{path}{ordinal}",
                                 dimensions=3, embedding=[0.0, 0.0, 1.0])
    return book


class Trail:
    """Audit rows made to order, each a minute older than the one before (the first is the newest)."""

    def __init__(self):
        self.now = timezone.now()
        self.made = 0

    def ask(self, question: str, *, url: str = "", session: uuid.UUID | None = None, status: str = "answered",
            level: str = "high", book: str = SLUG, ago: timedelta = timedelta(0), **fields) -> AuditLog:
        self.made += 1
        return AuditLog.objects.create(answer_id=uuid.uuid4(), channel="page", book_slug=book, question=question,
                                       status=status, confidence_level=level, session_id=session, section_url=url,
                                       created_at=self.now - ago - timedelta(minutes=self.made), **fields)


@pytest.fixture
def traffic():
    """Installing: 7 questions from 7 conversations (4 high, one unsure, one answered low, one withheld; a thumbs
    down). API keys: 6 from 2 conversations (3 refused, 3 medium, one judged wrong), 4 on the keys page, 2 on
    installing. Backups: 5, none in a conversation (each counts as its own), on a page the book no longer has or
    none; one needs a doc fix. Two stray questions. Left out: a search, a question of last month, another book's."""
    make_book()
    trail = Trail()
    ids = {"install": [], "keys": [], "backup": []}
    levels = [("answered", "high")] * 4 + [("unsure", "low"), ("answered", "low"), ("withheld", "")]
    for n, (question, (status, level)) in enumerate(zip(INSTALL_QUESTIONS, levels, strict=True)):
        row = trail.ask(question, url=INSTALL, session=uuid.uuid4(), status=status, level=level,
                        feedback_rating="down" if n == 1 else "")
        ids["install"].append(row.id)
    students = [uuid.uuid4(), uuid.uuid4()]
    for n, question in enumerate(KEY_QUESTIONS):
        row = trail.ask(question, url=KEYS if n < 4 else INSTALL, session=students[n % 2],
                        status="not_covered" if n % 2 else "answered", level="low" if n % 2 else "medium",
                        review_status="wrong" if n == 0 else "new")
        ids["keys"].append(row.id)
    for n, question in enumerate(BACKUP_QUESTIONS):
        row = trail.ask(question, url=GONE if n < 3 else "", review_status="needs-doc-fix" if n == 4 else "new")
        ids["backup"].append(row.id)
    for question in STRAYS:
        trail.ask(question)
    trail.ask("How do I install bookchat?", status="searched", level="")
    trail.ask("How do I install bookchat on Debian?", ago=timedelta(days=40))
    trail.ask("How do I install bookchat on Fedora?", book="another-book")
    return trail, ids


def period(trail: Trail) -> dict:
    return {"since": trail.now - timedelta(days=30), "until": trail.now}


def test_questions_in_three_themes_make_three_topics_with_exact_counts(traffic):
    trail, ids = traffic
    run = compute_topics(SLUG, **period(trail), requested_by="alice")
    assert run.status == TopicRun.Status.DONE, run.error
    assert (run.questions, run.unclustered, run.requested_by) == (20, 2, "alice")
    assert run.took_seconds is not None and run.finished_at is not None
    install, keys, backup = run.topics
    assert [t["n"] for t in run.topics] == [1, 2, 3]
    assert "install" in install["terms"] and "key" in keys["terms"] and "backup" in backup["terms"]
    for found in run.topics:
        assert 0 < len(found["terms"]) <= 5 and found["label"] == " · ".join(found["terms"][:3])
    assert [install["ids"], keys["ids"], backup["ids"]] == [ids["install"], ids["keys"], ids["backup"]]
    counted = ("questions", "sessions", "high", "medium", "unsure", "refused", "withheld", "thumbs_down", "wrong",
               "needs_doc_fix", "struggle")
    assert [[t[name] for name in counted] for t in run.topics] == [
        [7, 7, 4, 0, 2, 0, 1, 1, 0, 0, 4],
        [6, 2, 0, 3, 0, 3, 0, 0, 1, 0, 4],
        [5, 5, 5, 0, 0, 0, 0, 0, 0, 1, 1],
    ]
    assert [t["shares"] for t in run.topics] == [{"unsure": 0.2857, "refused": 0.0},
                                                 {"unsure": 0.0, "refused": 0.5}, {"unsure": 0.0, "refused": 0.0}]
    assert [t["score"] for t in run.topics] == [4.0, round(4 * 2 / 6, 4), 1.0]


def test_topics_cite_their_sections_by_heading_and_show_examples_only_from_enough_conversations(traffic, settings):
    trail, _ = traffic
    install, keys, backup = compute_topics(SLUG, **period(trail)).topics
    assert install["sections"] == [{"url": INSTALL, "section": "Install > On Linux", "count": 7}]
    assert keys["sections"] == [{"url": KEYS, "section": "API keys", "count": 4},
                                {"url": INSTALL, "section": "Install > On Linux", "count": 2}]
    assert backup["sections"] == [{"url": GONE, "section": GONE, "count": 3}]  # a page the book no longer has
    assert install["examples"] == [INSTALL_QUESTIONS[n] for n in (0, 2, 3)]  # the most recent distinct ones
    assert keys["examples"] == []  # two conversations: counts only
    assert backup["examples"] == BACKUP_QUESTIONS[:3]  # five questions without a conversation: five
    settings.BOOKCHAT = {**settings.BOOKCHAT, "STRUGGLE_MIN_SESSIONS": 8}
    assert [t["examples"] for t in compute_topics(SLUG, **period(trail)).topics] == [[], [], []]
    text = str(compute_topics(SLUG, **period(trail)).topics)
    assert not any(question in text for question in INSTALL_QUESTIONS + KEY_QUESTIONS + BACKUP_QUESTIONS)


def test_a_failing_embedder_makes_a_failed_run_and_latest_topics_is_the_newest_done_one(traffic, settings):
    trail, _ = traffic
    assert latest_topics(SLUG) is None
    done = compute_topics(SLUG, **period(trail))
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "no-such-embedder"}
    failed = compute_topics(SLUG, **period(trail))
    assert failed.status == TopicRun.Status.FAILED and failed.topics == []
    assert "no-such-embedder" in failed.error and failed.finished_at is not None
    queue_topics(SLUG, **period(trail), requested_by="bob")
    assert latest_topics(SLUG) == done
    assert latest_topics("another-book") is None


def test_an_empty_period_has_no_topics(traffic):
    trail, _ = traffic
    run = compute_topics(SLUG, since=trail.now + timedelta(days=1), until=trail.now + timedelta(days=2))
    assert (run.status, run.questions, run.unclustered, run.topics) == (TopicRun.Status.DONE, 0, 0, [])


def test_the_daily_schedule_queues_a_run_per_book_and_the_task_computes_it(traffic):
    schedule = Schedule.objects.get(name=SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("audit.tasks.recompute_all_topics", "D", -1)
    queued = recompute_all_topics()["queued"]
    runs = TopicRun.objects.filter(pk__in=queued)
    assert sorted(runs.values_list("book_slug", "status", "requested_by")) == [
        ("another-book", "queued", "schedule"), (SLUG, "queued", "schedule")]
    tasks = {entry.task["args"][0]: entry.task for entry in OrmQ.objects.all()}
    assert set(queued) <= set(tasks) and tasks[queued[0]]["func"] == "audit.tasks.compute_book_topics"
    run = runs.get(book_slug=SLUG)
    result = compute_book_topics(run.pk)
    assert result["status"] == "done" and result["topics"] == 3
    run.refresh_from_db()
    assert latest_topics(SLUG) == run and run.questions == 20


def test_the_schedule_keeps_each_books_newest_runs_and_fails_those_a_stopped_worker_left(traffic, settings):
    trail, _ = traffic
    for _ in range(KEEP_RUNS + 2):
        TopicRun.objects.create(book_slug=SLUG, **period(trail), status=TopicRun.Status.DONE)
    left = TopicRun.objects.create(book_slug="another-book", **period(trail), status=TopicRun.Status.RUNNING,
                                   created_at=trail.now - STALE_AFTER - timedelta(minutes=1))
    waiting = TopicRun.objects.create(book_slug="another-book", **period(trail), created_at=trail.now)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "AUDIT_RETENTION_DAYS": 60}
    TopicRun.objects.create(book_slug="another-book", since=trail.now - timedelta(days=61), until=trail.now,
                            status=TopicRun.Status.DONE, created_at=trail.now)  # quotes questions no longer kept
    recompute_all_topics()
    assert not TopicRun.objects.filter(since__lt=trail.now - timedelta(days=60)).exists()
    assert TopicRun.objects.filter(book_slug=SLUG).count() == KEEP_RUNS
    assert TopicRun.objects.filter(book_slug=SLUG, status=TopicRun.Status.QUEUED).count() == 1
    left.refresh_from_db()
    waiting.refresh_from_db()
    assert left.status == TopicRun.Status.FAILED and "worker stopped" in left.error
    assert waiting.status == TopicRun.Status.QUEUED


def test_topics_count_each_level_as_the_map_of_sections_does(traffic):
    """The topics' counts (in Python, per question) and the map's (in SQL, per section) by the same definitions:
    every row's levels, summed by the section it landed on, are the map's counts of that section."""
    trail, _ = traffic
    result = struggle_map(Book.objects.get(slug=SLUG), **period(trail))
    rows = AuditLog.objects.filter(book_slug=SLUG, created_at__gte=period(trail)["since"]).exclude(status="searched")
    by_section = {url: Counter() for url in (INSTALL, KEYS)}
    for row in rows:
        if row.section_url in by_section:
            by_section[row.section_url].update(levels(row))
    assert by_section[INSTALL] and by_section[KEYS]
    for section in result["sections"]:
        counted = by_section.get(section["url"], Counter())
        assert {level: section[level] for level in LEVELS} == {level: counted[level] for level in LEVELS}
