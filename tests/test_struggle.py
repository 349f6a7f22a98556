"""Where students struggle (``manage.py struggle``, ``audit.struggle``): the shared question set about the bundled
manual replayed as student traffic through the API (questions on a selected passage, follow-ups, questions the book
can't answer, off-topic ones, thumbs down, reviewers' verdicts, an assistant's search, a question that timed out, and
traffic of the month before), then the sections, totals and ranking the command prints match what the replay made,
exactly, in the outline's order with the sections nobody asked about; the score and its ties on rows made to order;
and bad options (an unknown book, dates that aren't, a period backwards, injection strings) exit 2 saying why."""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditLog, TopicRun
from audit.topics import compute_topics
from chat.quality.evaluation import load_questions
from ingestion.models import Book, Chunk
from ingestion.reading.outline import book_outline
from tests.conftest import run_command
from tests.support.shared_data import SHARED_DATA, in_session

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
QUESTIONS = Path(__file__).resolve().parent.parent / "bench" / "questions" / "kinds-bookchat-manual.jsonl"
OFF_TOPIC = ("What is the boiling point of tungsten in kelvin?", "Who won the football world cup in 1998?")
COUNTED = ("questions", "sessions", "high", "medium", "unsure", "refused", "withheld", "thumbs_down", "wrong",
           "needs_doc_fix", "previous")
REPLAYED = 30  # questions of each shared set, spread over the set
STRUGGLE = ("unsure", "refused", "withheld", "thumbs_down", "wrong", "needs_doc_fix")


@pytest.fixture(autouse=True)
def quiet_trail(manual_book, settings):
    """No language model, a generous time budget, and an audit trail of this test's answers only (another test's
    committed rows are deleted inside this test's transaction, which puts them back)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0, "GENERATION_SECONDS": 30.0}
    AuditLog.objects.all().delete()


def struggle(*options: str, book: str = BOOK) -> tuple[int, dict | None, str]:
    code, out, err = run_command("struggle", "--book", book, *options, "--json")
    return code, json.loads(out) if out else None, err


def ask(client: Client, question: str, book: str = BOOK, **fields) -> dict:
    response = client.post("/api/v1/ask", content_type="application/json",
                           data=json.dumps({"question": question, "book": book, **fields}))
    assert response.status_code == 200, response.content
    return response.json()


def replay(client: Client) -> list[dict]:
    """Every question of the set as a student would ask it: a follow-up after its first question, in one
    conversation; the others each in a conversation of its own."""
    bodies = []
    for line in QUESTIONS.read_text().splitlines():
        item = json.loads(line)
        if item["kind"] == "follow_up":
            first = ask(client, item["previous"])
            bodies += [first, ask(client, item["question"], session_id=first["session_id"])]
        elif item["kind"] == "selected_text":
            bodies.append(ask(client, item["question"], selected_text=item["selected_text"]))
        else:
            bodies.append(ask(client, item["question"]))
    return bodies + [ask(client, question) for question in OFF_TOPIC]


def landed_on(body: dict) -> str:
    """The link of the section an answer landed on, from what the reader was sent: its first cited source, else
    its first source (the passage it was stored as), else the first section a refusal suggested."""
    cited = [s for s in body["sources"] if s["cited"]] or body["sources"]
    if cited:
        return Chunk.objects.get(id=cited[0]["chunk_id"]).url
    return body["suggestions"][0]["url"]


def answered(body: dict) -> str:
    if body["refusal_reason"] == "unsure" or body["confidence_level"] == "unsure":
        return "unsure"
    if body["refused"]:
        return "refused"
    if body["flagged_for_review"]:
        return "withheld"
    return body["confidence_level"] if body["confidence_level"] in ("high", "medium") else "unsure"


def expected_counts(bodies: list[dict], *, down: set, wrong: set, doc_fix: set, before: set) -> dict[str, Counter]:
    counts: dict[str, Counter] = defaultdict(Counter)
    sessions: dict[str, set] = defaultdict(set)
    for body in bodies:
        url, answer_id = landed_on(body), body["answer_id"]
        if answer_id in before:
            counts[url]["previous"] += 1
            continue
        counts[url]["questions"] += 1
        counts[url][answered(body)] += 1
        counts[url]["thumbs_down"] += answer_id in down
        counts[url]["wrong"] += answer_id in wrong
        counts[url]["needs_doc_fix"] += answer_id in doc_fix
        sessions[url].add(body["session_id"])
    for url, seen in sessions.items():
        counts[url]["sessions"] = len(seen)
    return counts


def check_outline_order(sections: list[dict], book: str = BOOK) -> None:
    """Pages in the sidebar's order, each page's anchors in the order of its passages, every anchor once."""
    pages = [page["path"] for chapter in book_outline(Book.objects.get(slug=book)) for page in chapter["pages"]]
    listed = [s["path"] for s in sections]
    assert sorted(listed, key=pages.index) == listed, "a page's sections are together, pages in sidebar order"
    first = {}
    for path, anchor, ordinal in (Chunk.objects.filter(book__slug=book).order_by("ordinal")
                                  .values_list("document__path", "anchor", "ordinal")):
        first.setdefault((path, anchor), ordinal)
    assert [(s["path"], s["anchor"]) for s in sections] == sorted(
        first, key=lambda key: (pages.index(key[0]), first[key])), "every section once, in its page's order"


def check_ranking(result: dict) -> None:
    sections, ranked = result["sections"], result["ranking"]
    place = {s["url"]: n for n, s in enumerate(sections)}
    assert {r["url"] for r in ranked if r["kind"] == "section"} == {s["url"] for s in sections if s["struggle"]}
    assert {r["n"] for r in ranked if r["kind"] == "topic"} == {t["n"] for t in result["topics"] if t["struggle"]}
    keys = [(-Fraction(r["struggle"] * r["sessions"], r["questions"]), r["kind"] == "topic",
             place[r["url"]] if r["kind"] == "section" else r["n"]) for r in ranked]
    assert keys == sorted(keys), "highest score first; ties: sections in outline order, then topics"
    assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    for entry in ranked:
        assert entry["score"] == round(entry["struggle"] * entry["sessions"] / entry["questions"], 4)


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_the_map_counts_exactly_what_the_replayed_traffic_made(client, settings):
    bodies = replay(client)
    # Readers vote three answers and a refusal down (in the conversation that got them).
    answers = [b for b in bodies if b["sources"]]
    refusals = [b for b in bodies if b["refused"]]
    assert len(answers) >= 6 and len(refusals) >= 3, "the set has answers and refusals"
    down = {b["answer_id"] for b in answers[:3] + refusals[:1]}
    for answer_id in down:
        body = next(b for b in bodies if b["answer_id"] == answer_id)
        vote = client.post(f"/api/v1/answers/{answer_id}/feedback", content_type="application/json",
                           data=json.dumps({"rating": "down", "session_id": body["session_id"]}))
        assert vote.status_code == 201, vote.content
    # A reviewer marks two answers wrong (one voted down) and two as needing a fix in the book (one a refusal),
    # with the admin's actions.
    wrong, doc_fix = {answers[0]["answer_id"], answers[4]["answer_id"]}, {answers[5]["answer_id"],
                                                                          refusals[1]["answer_id"]}
    reviewer = Client()
    reviewer.force_login(User.objects.create(username="struggle-reviewer", is_staff=True, is_superuser=True))
    changelist = reverse("admin:audit_auditlog_changelist")
    for action, ids in (("mark_wrong", wrong), ("mark_needs_doc_fix", doc_fix)):
        pks = list(AuditLog.objects.filter(answer_id__in=ids).values_list("pk", flat=True))
        assert reviewer.post(changelist, {"action": action, "_selected_action": pks}).status_code == 302
    # Not questions, or on no section: an assistant's search, and a question that timed out.
    assert client.get("/api/v1/search", {"q": "prune", "book": BOOK}).status_code == 200
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": 0.000001}
    assert client.post("/api/v1/ask", content_type="application/json",
                       data=json.dumps({"question": "How do I ingest a folder?", "book": BOOK})).status_code == 504
    # The month before: six of the answers were asked forty days ago.
    before = {b["answer_id"] for b in bodies[-6:]}
    AuditLog.objects.filter(answer_id__in=before).update(created_at=timezone.now() - timedelta(days=40))
    assert AuditLog.objects.filter(book_slug=BOOK).exclude(status="searched").count() == len(bodies) + 1

    code, result, err = struggle()
    assert code == 0, err
    expected = expected_counts(bodies, down=down, wrong=wrong, doc_fix=doc_fix, before=before)
    sections = result["sections"]
    by_url = {s["url"]: s for s in sections}
    assert set(expected) <= set(by_url), "every answer landed on a section of the book"
    for section in sections:
        wanted = expected.get(section["url"], Counter())
        assert {k: section[k] for k in COUNTED} == {k: wanted[k] for k in COUNTED}, section["url"]
        assert section["change"] == wanted["questions"] - wanted["previous"]
        assert section["struggle"] == sum(wanted[k] for k in STRUGGLE)
        for level in ("high", "medium", "unsure", "refused", "withheld"):
            share = section["shares"][level]
            assert share == (round(wanted[level] / wanted["questions"], 4) if wanted["questions"] else None)
    assert sum(s["questions"] for s in sections) == len(bodies) - len(before)
    assert result["totals"] == {"questions": len(bodies) - len(before) + 1, "previous": len(before),
                                "unplaced": 1, "unplaced_previous": 0}, "the timed-out question is on no section"
    asked = [s for s in sections if s["questions"]]
    assert len(asked) >= 10, "the set asks about many sections"
    unasked = [s for s in sections if not s["questions"] and not s["previous"]]
    assert len(unasked) > len(asked), "the sections nobody asked about are listed too"
    assert all(s["shares"]["high"] is None and s["score"] == 0 for s in unasked)
    assert all(s["chapter"] and s["section"] and s["url"] for s in sections)
    assert len({s["url"] for s in sections}) == len(sections), "each section has a link of its own"
    check_outline_order(sections)
    check_ranking(result)
    assert result["ranking"], "the replay struggled somewhere"
    assert (result["book"], result["topics"]) == (BOOK, [])
    questions = AuditLog.objects.filter(book_slug=BOOK).values_list("question", flat=True)
    printed = json.dumps(result)
    assert not [q for q in questions if json.dumps(q)[1:-1] in printed], "counts only, never a question"

    # Days chosen: from 45 days ago to today takes in the month before, and nothing comes before it.
    today = timezone.localdate()
    code, wider, _ = struggle("--since", f"{today - timedelta(days=45)}", "--until", f"{today}")
    assert code == 0
    assert wider["totals"]["questions"] == len(bodies) + 1 and wider["totals"]["previous"] == 0
    for section in wider["sections"]:
        wanted = expected.get(section["url"], Counter())
        assert section["questions"] == wanted["questions"] + wanted["previous"] and section["previous"] == 0
    check_ranking(wider)
    code, older, _ = struggle("--until", f"{today - timedelta(days=39)}")
    assert code == 0 and older["totals"]["questions"] == len(before)

    code, out, err = run_command("struggle", "--book", BOOK)
    assert code == 0 and not err
    assert "Where to revise first" in out and f"{result['totals']['questions']} questions" in out
    top = result["ranking"][0]
    assert f"{top['score']:.2f}" in out and top["page"] in out


@pytest.mark.parametrize("corpus", ["docusaurus-docs", "squad2-dev"])
def test_a_shared_question_set_replayed_by_students_is_counted_exactly(ingest_corpus, client, corpus):
    """The development question sets of two real books, asked three to a conversation, with thumbs down and
    reviewers' verdicts on some: every section's counts are what the replay made."""
    assert ingest_corpus(corpus).exit_code == 0
    path = SHARED_DATA / corpus / "questions.jsonl"
    embedded = {row["id"] for row in in_session(corpus, [json.loads(line) for line in path.read_text().splitlines()
                                                         if line.strip()])}
    items = [item for item in load_questions(path) if item.id in embedded]  # of the pages the session embeds
    bodies = []
    for n, item in enumerate(items[::max(1, len(items) // REPLAYED)][:REPLAYED]):
        following = {"session_id": bodies[-1]["session_id"]} if n % 3 else {}
        bodies.append(ask(client, item.question, corpus, **following))
    down = {b["answer_id"] for b in bodies[::5]}
    for body in bodies[::5]:
        vote = client.post(f"/api/v1/answers/{body['answer_id']}/feedback", content_type="application/json",
                           data=json.dumps({"rating": "down", "session_id": body["session_id"]}))
        assert vote.status_code == 201, vote.content
    wrong, doc_fix = {b["answer_id"] for b in bodies[1::7]}, {b["answer_id"] for b in bodies[2::7]}
    AuditLog.objects.filter(answer_id__in=wrong).update(review_status="wrong")
    AuditLog.objects.filter(answer_id__in=doc_fix).update(review_status="needs-doc-fix")

    code, result, err = struggle(book=corpus)
    assert code == 0, err
    expected = expected_counts(bodies, down=down, wrong=wrong, doc_fix=doc_fix, before=set())
    by_url = {s["url"]: s for s in result["sections"]}
    assert set(expected) <= set(by_url), "every answer landed on a section of the book"
    for section in result["sections"]:
        wanted = expected.get(section["url"], Counter())
        assert {k: section[k] for k in COUNTED} == {k: wanted[k] for k in COUNTED}, section["url"]
    assert result["totals"]["questions"] == len(bodies) and result["totals"]["unplaced"] == 0
    assert sum(sum(row["counts"]) for row in result["heat"]["chapters"]) == len(bodies), "the heat strip too"
    check_outline_order(result["sections"], corpus)
    check_ranking(result)

    # Its topics: every question in one topic or none, each topic's counts those of its questions' answers.
    run = compute_topics(corpus, since=timezone.now() - timedelta(days=1), until=timezone.now())
    assert run.status == "done", run.error
    assert sum(t["questions"] for t in run.topics) + run.unclustered == run.questions == len(bodies)
    answered_as = {b["answer_id"]: b for b in bodies}
    answer_of = dict(AuditLog.objects.filter(book_slug=corpus).values_list("id", "answer_id"))
    for found in run.topics:
        members = [answered_as[str(answer_of[i])] for i in found["ids"]]
        wanted = sum(expected_counts(members, down=down, wrong=wrong, doc_fix=doc_fix, before=set()).values(),
                     Counter())
        assert {k: found[k] for k in COUNTED if k not in ("sessions", "previous")} == {
            k: wanted[k] for k in COUNTED if k not in ("sessions", "previous")}
        assert found["sessions"] == len({b["session_id"] for b in members})
    code, result, err = struggle(book=corpus)
    assert code == 0 and len(result["topics"]) == len(run.topics)
    check_ranking(result)


def make_row(url: str, *, status="answered", level="high", session=None, **fields) -> AuditLog:
    sources = [] if status in ("not_covered", "unsure") else [
        {"n": 1, "url": "https://elsewhere.example/x", "cited": False},
        {"n": 2, "url": f"{url}{'' if '#' in url else '#'}:~:text=the%20first%20words", "cited": True}]
    values = {"answer_id": uuid.uuid4(), "channel": "api", "book_slug": BOOK, "question": "q", "status": status,
              "confidence_level": level, "session_id": session or uuid.uuid4(), "sources": sources,
              "suggestions": [{"title": "t", "heading_path": "h", "url": url}]}
    return AuditLog.objects.create(**(values | fields))


def test_score_weighs_the_trouble_per_question_by_students_and_ties_keep_the_outline_order():
    sections = struggle()[1]["sections"]
    assert not any(s["questions"] for s in sections), "no traffic yet"
    a, b, c, d, e = (s["url"] for s in sections[3:8])
    student = uuid.uuid4()
    make_row(a, status="not_covered", level="low", session=student)  # one student, twice refused: 2 ÷ 2 × 1 = 1
    make_row(a, status="not_covered", level="low", session=student)
    make_row(b, status="unsure", level="low")  # 1 ÷ 1 × 1 = 1
    for n in range(4):  # four students, one voted down: 1 ÷ 4 × 4 = 1
        make_row(c, level="medium", feedback_rating="down" if n == 0 else "")
    for n in range(3):  # three students, unsure, withheld, answered but judged wrong: 3 ÷ 3 × 3 = 3
        make_row(d, **[{"status": "unsure", "level": "low"}, {"status": "withheld", "level": "low"},
                       {"review_status": "wrong"}][n])
    make_row(e, session=student)  # answered well: no struggle, not ranked
    make_row(e, status="searched", level="")  # an assistant's search: not a question
    make_row(e, book_slug="another-book", status="not_covered")  # another book's
    make_row(e, created_at=timezone.now() - timedelta(days=31), review_status="needs-doc-fix")  # the month before
    make_row("https://docs.example.org/gone#renamed")  # a section the book no longer has
    make_row(e, status="timeout", sources=[], suggestions=[])
    make_row(e, sources={"not": "a list"}, suggestions=[], feedback_rating="up")  # a row written oddly

    code, result, err = struggle()
    assert code == 0, err
    ranked = [(r["url"], r["score"], r["struggle"], r["questions"], r["sessions"]) for r in result["ranking"]]
    assert ranked == [(d, 3.0, 3, 3, 3), (a, 1.0, 2, 2, 1), (b, 1.0, 1, 1, 1), (c, 1.0, 1, 4, 4)]
    by_url = {s["url"]: s for s in result["sections"]}
    assert (by_url[a]["refused"], by_url[a]["shares"]["refused"]) == (2, 1.0)
    assert (by_url[c]["medium"], by_url[c]["thumbs_down"], by_url[c]["shares"]["medium"]) == (4, 1, 1.0)
    assert (by_url[d]["unsure"], by_url[d]["withheld"], by_url[d]["high"], by_url[d]["wrong"]) == (1, 1, 1, 1)
    assert by_url[d]["shares"] == {"high": 0.3333, "medium": 0.0, "unsure": 0.3333, "refused": 0.0,
                                   "withheld": 0.3333, "staff": 0.0}
    assert {k: by_url[e][k] for k in ("questions", "sessions", "high", "previous", "needs_doc_fix", "change")} == {
        "questions": 1, "sessions": 1, "high": 1, "previous": 1, "needs_doc_fix": 0, "change": 0}
    assert result["totals"] == {"questions": 14, "previous": 1, "unplaced": 3, "unplaced_previous": 0}


@pytest.mark.parametrize(("options", "code", "says"), [
    (("--book", "no-such-book"), "unknown_book", "unknown book 'no-such-book'"),
    (("--book", "x'; DROP TABLE audit_auditlog; --"), "unknown_book", "unknown book"),
    (("--book", "bookchat-manual\x00"), "unknown_book", "unknown book"),
    (("--book", BOOK, "--since", "2026-02-30"), "bad_date", "bad --since '2026-02-30': expected a date as YYYY-MM-DD"),
    (("--book", BOOK, "--since", "yesterday"), "bad_date", "bad --since 'yesterday'"),
    (("--book", BOOK, "--until", "20261128"), "bad_date", "bad --until '20261128'"),
    (("--book", BOOK, "--since", "2026-01-01'; DROP TABLE audit_auditlog; --"), "bad_date", "bad --since"),
    (("--book", BOOK, "--until", "9999-12-31"), "bad_date", "past the last day"),
    (("--book", BOOK, "--since", "2026-03-02", "--until", "2026-03-01"), "bad_period",
     "--until (2026-03-01) is before --since (2026-03-02)"),
    (("--book", BOOK, "--since", f"{timezone.now().year + 1}-01-01"), "bad_period", "the period is empty"),
])
def test_bad_options_exit_2_saying_why(options, code, says):
    status, out, err = run_command("struggle", *options)
    assert status == 2 and says in err and not out
    status, out, _ = run_command("struggle", *options, "--json")
    assert status == 2 and json.loads(out)["error"] == code and says in json.loads(out)["message"]
    with connection.cursor() as cursor:  # nothing was dropped
        cursor.execute("SELECT count(*) FROM audit_auditlog")


def test_a_long_period_from_the_first_day_counts_everything():
    make_row(struggle()[1]["sections"][0]["url"], created_at=timezone.now() - timedelta(days=4000))
    code, result, err = struggle("--since", "0001-01-01")
    assert code == 0, err
    assert result["totals"]["questions"] == 1 and result["sections"][0]["questions"] == 1
    code, result, err = struggle("--until", "0001-01-05")  # the 30 days before it start before the first day
    assert code == 0, err
    assert result["since"].startswith("0001-01-01") and result["totals"]["questions"] == 0


def test_the_newest_computed_topics_are_listed_and_ranked_with_the_sections():
    url = struggle()[1]["sections"][3]["url"]
    for _ in range(2):  # one student, refused twice: 2 ÷ 2 × 1 = 1
        make_row(url, status="not_covered", level="low", session=uuid.UUID(int=7))
    now = timezone.now()

    def topic(n: int, label: str, struggled: int, questions: int, sessions: int) -> dict:
        return {"n": n, "terms": label.split(" · "), "label": label, "questions": questions, "sessions": sessions,
                "unsure": struggled, "refused": 0, "struggle": struggled,
                "score": round(struggled * sessions / questions, 4), "examples": [], "sections": [],
                "ids": [1, 2, 3]}

    older = [topic(1, "old", 9, 9, 9)]
    TopicRun.objects.create(book_slug=BOOK, since=now - timedelta(days=60), until=now - timedelta(days=30),
                            status="done", finished_at=now - timedelta(days=30), topics=older,
                            created_at=now - timedelta(days=30))
    TopicRun.objects.create(book_slug=BOOK, since=now - timedelta(days=30), until=now, status="failed")
    topics = [topic(1, "ports · serve · web", 6, 10, 8), topic(2, "keys · rotate", 1, 5, 5),
              topic(3, "widget · css", 0, 4, 4)]
    run = TopicRun.objects.create(book_slug=BOOK, since=now - timedelta(days=30), until=now, status="done",
                                  finished_at=now, took_seconds=1.5, questions=25, unclustered=6, topics=topics,
                                  created_at=now - timedelta(minutes=1))
    code, result, err = struggle()
    assert code == 0, err
    assert [t["label"] for t in result["topics"]] == ["ports · serve · web", "keys · rotate", "widget · css"]
    assert not any("ids" in t for t in result["topics"]), "the questions' ids stay in the admin"
    assert result["topics_computed"] | {"at": None} == {
        "run": run.pk, "at": None, "since": (now - timedelta(days=30)).isoformat(), "until": now.isoformat(),
        "questions": 25, "unclustered": 6, "took_seconds": 1.5}
    ranked = [(e["kind"], e.get("label") or e["url"], e["score"]) for e in result["ranking"]]
    assert ranked == [("topic", "ports · serve · web", 4.8), ("section", url, 1.0), ("topic", "keys · rotate", 1.0)]
    code, out, _ = run_command("struggle", "--book", BOOK)
    assert code == 0
    assert "Topics of 25 questions" in out and "topic 1: ports · serve · web" in out
