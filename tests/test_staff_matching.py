"""Staff answers served to the same question (``chat.pipeline.staff_matching``, ``answering.take_over``), on the real
database, embedder and bundled manual: served at level ``staff`` through the pipeline, the API, the stream, the
page's turn and MCP, with its audit row; the book's high answer wins; a retired, waiting or other book's staff answer
is never served; thumbs count on the staff answer; and what matching refuses."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from audit.models import AuditLog
from audit.struggle import struggle_map
from audit.struggle_admin import LEVEL_ROWS
from audit.topics import levels
from chat.channels.access import AssistantClient
from chat.channels.mcp_server import ASK_KEYS, BookTools, render_answer
from chat.channels.page import turn_context
from chat.models import StaffAnswer, Turn
from chat.pipeline import staff_matching
from chat.pipeline.answering import answer_question, prepare
from chat.pipeline.questions import AskRequest
from chat.pipeline.staff_answers import cite, keep
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, Chunk

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
STAFF_QUESTION = "Can I import my chapters straight from a Notion workspace?"
STAFF_REPLY = "Not directly: export the pages from Notion as Markdown, then upload them [1]."


@pytest.fixture(autouse=True)
def manual(manual_book, no_llm):
    return Book.objects.get(slug=BOOK)


def a_section(book: Book) -> Chunk:
    return Chunk.objects.filter(book=book, document__path="using/01-ingest.md", anchor__gt="").order_by(
        "ordinal").first()


def staff_answer(book: Book, question: str = STAFF_QUESTION, answer: str = STAFF_REPLY, **fields) -> StaffAnswer:
    kept = keep(book=book, question=question, answer=answer, citations=cite(book, [a_section(book).id]))
    if fields:
        StaffAnswer.objects.filter(pk=kept.pk).update(**fields)
        kept.refresh_from_db()
    return kept


def ask(question: str, channel: str = "api", **fields):
    return answer_question(AskRequest(question=question, book=BOOK, channel=channel, **fields))


def post(client, path: str, body: dict):
    return client.post(path, data=json.dumps(body), content_type="application/json")


def test_the_same_question_is_served_the_staff_answer_at_level_staff(manual):
    kept = staff_answer(manual)
    answer = ask(STAFF_QUESTION)
    assert answer.confidence_level == "staff" and answer.staff_answer.id == kept.pk
    assert answer.answer == STAFF_REPLY and not answer.refused and answer.refusal_reason is None
    assert answer.confidence_note.startswith("Answered by the course staff on ")
    assert str(kept.answered_at.year) in answer.confidence_note
    assert answer.staff_answer.answered_at == kept.answered_at.isoformat()
    assert [s.chunk_id for s in answer.sources] == [a_section(manual).id] and answer.sources[0].cited
    assert a_section(manual).url.split("#")[0] in answer.answer_html and "<script" not in answer.answer_html
    assert answer.generator == "staff" and answer.suggestions == [] and answer.grounding is None
    row = AuditLog.objects.get(answer_id=answer.answer_id)
    assert (row.status, row.confidence_level, row.answer) == (AuditLog.Status.STAFF, "staff", STAFF_REPLY)
    assert row.draft_answer, "the book's own answer is kept for reviewers"
    assert row.sources[0]["chunk_id"] == a_section(manual).id and not row.refused
    kept.refresh_from_db()
    assert kept.served == 1


def test_a_staff_answers_markup_is_sanitised(manual):
    staff_answer(manual, answer="See [1]. <script>alert(1)</script><img src=x onerror=alert(1)>")
    html = ask(STAFF_QUESTION).answer_html
    assert "<script" not in html and "<img" not in html, "markup is shown as text, never made"
    assert "&lt;script&gt;" in html


def test_a_question_about_something_else_gets_the_books_answer(manual):
    staff_answer(manual)
    answer = ask("How do I set the port bookchat serves on?")
    assert answer.confidence_level != "staff" and answer.staff_answer is None
    assert StaffAnswer.objects.get().served == 0


# Questions the manual answers in its own words; the test takes the first answered at high.
ANSWERED_HIGH = ("What does the --prune option of ingest do?", "How do I create a secret API key?",
                 "How do I ingest a folder?", "What is the default book?", "How do I back up bookchat?")


def test_the_books_high_answer_wins_over_a_staff_answer(manual):
    question = next((q for q in ANSWERED_HIGH if ask(q).confidence_level == "high"), None)
    assert question, "one of the manual's questions is answered at high"
    staff_answer(manual, question=question, answer="Ask your teacher [1].")
    prepared = prepare(AskRequest(question=question, book=BOOK, channel="api"))
    assert prepared.staff is not None, "it matches"
    answer = ask(question)
    assert answer.confidence_level == "high" and answer.staff_answer is None
    assert StaffAnswer.objects.get().served == 0


@pytest.mark.parametrize("status", [StaffAnswer.Status.RETIRED, StaffAnswer.Status.NEEDS_REVIEW])
def test_a_retired_or_waiting_staff_answer_is_never_served(manual, status):
    staff_answer(manual, status=status)
    assert ask(STAFF_QUESTION).staff_answer is None


def test_a_staff_answer_stopped_between_match_and_answer_is_not_served(manual):
    from chat.pipeline.answering import answer_prepared

    kept = staff_answer(manual)
    prepared = prepare(AskRequest(question=STAFF_QUESTION, book=BOOK, channel="api"))
    assert prepared.staff.id == kept.pk
    StaffAnswer.objects.filter(pk=kept.pk).update(status=StaffAnswer.Status.RETIRED)
    assert answer_prepared(prepared).response.staff_answer is None


def test_another_books_staff_answer_is_never_served(manual):
    other = Book.objects.create(slug="another-course", title="Another", embedder_name=manual.embedder_name,
                                embedder_dimension=manual.embedder_dimension)
    embedder = get_embedder()
    StaffAnswer.objects.create(book=other, question=STAFF_QUESTION, answer="Elsewhere.", embedder=embedder.name,
                               question_vector=list(map(float, embedder.embed_query(STAFF_QUESTION))))
    assert ask(STAFF_QUESTION).staff_answer is None


def test_a_vector_of_another_embedder_is_skipped(manual):
    staff_answer(manual, embedder="another-embedder")
    assert ask(STAFF_QUESTION).staff_answer is None


def test_nothing_is_matched_with_staff_answers_off(manual, settings):
    staff_answer(manual)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "STAFF_ANSWERS": False}
    assert ask(STAFF_QUESTION).staff_answer is None


def test_a_follow_up_and_a_question_about_selected_text_are_not_matched(manual):
    staff_answer(manual)
    first = ask("How do I ingest a folder?")
    assert ask(STAFF_QUESTION, selected_text="ingest a folder of Markdown files").staff_answer is None
    follow_up = prepare(AskRequest(question="And can I import it from Notion?", book=BOOK, channel="api",
                                   session_id=uuid.UUID(first.session_id)))
    assert follow_up.follows and follow_up.staff is None


def test_evaluation_questions_are_served_but_not_counted(manual):
    kept = staff_answer(manual)
    assert ask(STAFF_QUESTION, channel="evaluate").staff_answer.id == kept.pk
    kept.refresh_from_db()
    assert kept.served == 0


def test_the_level_reaches_the_api_the_stream_the_page_and_mcp(manual, client):
    kept = staff_answer(manual)
    body = post(client, "/api/v1/ask", {"question": STAFF_QUESTION, "book": BOOK}).json()
    assert body["confidence_level"] == "staff" and body["staff_answer"]["id"] == kept.pk
    assert body["answer"] == STAFF_REPLY and body["sources"][0]["chunk_id"] == a_section(manual).id

    raw = b"".join(post(client, "/api/v1/ask/stream", {"question": STAFF_QUESTION, "book": BOOK})
                   .streaming_content).decode()
    events = [(dict(line.split(": ", 1) for line in block.splitlines())) for block in raw.split("\n\n") if block]
    final = json.loads(next(e["data"] for e in events if e["event"] == "final"))
    tokens = "".join(json.loads(e["data"])["text"] for e in events if e["event"] == "token")
    assert final["confidence_level"] == "staff" and tokens == STAFF_REPLY

    shown = turn_context(Turn.objects.get(answer_id=body["answer_id"]), None)
    assert shown["level"] == "staff" and shown["level_note"].startswith("Answered by the course staff on ")
    assert shown["sources"][0].chunk_id == a_section(manual).id and not shown["refused"]

    result, text = BookTools(AssistantClient()).ask_book({"question": STAFF_QUESTION, "book": BOOK})
    assert "staff_answer" in ASK_KEYS and result["staff_answer"]["id"] == kept.pk
    assert result["confidence_level"] == "staff" and result["sources"][0]["page"].startswith("bookchat://")
    assert "course staff's answer" in text and "Confidence:" not in text
    assert StaffAnswer.objects.get().served == 3, "the API, the stream and MCP asked (the page showed a turn)"


def test_the_schema_names_the_staff_level(client):
    schemas = json.loads(client.get("/api/v1/schema?format=json").content)["components"]["schemas"]
    level = schemas["Answer"]["properties"]["confidence_level"]
    refs = re.findall(r"#/components/schemas/(\w+)", json.dumps(level))  # an enum of its own, by reference
    enum = level.get("enum") or schemas[refs[0]]["enum"]
    assert "staff" in enum
    assert "staff_answer" in schemas["Answer"]["properties"]


def test_mcps_text_of_a_book_answer_is_unchanged():
    result = {"answer": "A [1].", "sources": [], "refused": False, "suggestions": [], "confidence": 0.9,
              "confidence_level": "high", "confidence_note": "Right."}
    assert render_answer(result).endswith("Confidence: 0.90 (high). Right.")


def test_thumbs_on_a_staff_answer_count_on_it_and_a_changed_vote_moves(manual, client):
    kept = staff_answer(manual)
    body = post(client, "/api/v1/ask", {"question": STAFF_QUESTION, "book": BOOK}).json()
    vote = {"session_id": body["session_id"]}
    feedback = f"/api/v1/answers/{body['answer_id']}/feedback"

    def thumbs():
        kept.refresh_from_db()
        return kept.thumbs_up, kept.thumbs_down

    for rating, expected in (("up", (1, 0)), ("up", (1, 0)), ("down", (0, 1)), ("up", (1, 0))):
        assert post(client, feedback, {**vote, "rating": rating}).status_code in (200, 201)
        assert thumbs() == expected
    assert post(client, feedback, {**vote, "rating": "sideways"}).status_code == 400
    assert thumbs() == (1, 0), "a refused vote changes nothing"


def test_thumbs_on_the_books_answer_leave_staff_answers_alone(manual, client):
    kept = staff_answer(manual)
    body = post(client, "/api/v1/ask", {"question": "How do I ingest a folder?", "book": BOOK}).json()
    post(client, f"/api/v1/answers/{body['answer_id']}/feedback", {"session_id": body["session_id"],
                                                                    "rating": "down"})
    kept.refresh_from_db()
    assert (kept.thumbs_up, kept.thumbs_down) == (0, 0)


def test_a_vote_count_never_goes_below_zero_nor_counts_a_bad_rating(manual):
    kept = staff_answer(manual)
    staff_matching.count_vote(kept.pk, before="down", after="up")
    staff_matching.count_vote(kept.pk, before=None, after="sideways")
    staff_matching.count_vote(kept.pk + 1000, before=None, after="up")
    kept.refresh_from_db()
    assert (kept.thumbs_up, kept.thumbs_down) == (1, 0)


def test_the_struggle_map_and_topics_count_a_staff_answered_question(manual):
    staff_answer(manual)
    answer = ask(STAFF_QUESTION)
    row = AuditLog.objects.get(answer_id=answer.answer_id)
    assert levels(row) == ["staff"]
    assert AuditLog.objects.filter(LEVEL_ROWS["staff"], pk=row.pk).exists()
    sections = struggle_map(manual)["sections"]
    landed = next(s for s in sections if s["url"] == row.section_url)
    assert landed["staff"] == 1 and landed["questions"] == 1 and landed["struggle"] == 0
    assert landed["shares"]["staff"] == 1.0


@pytest.mark.parametrize(("question", "vector"), [
    ("", [0.1] * 384),
    ("   ", [0.1] * 384),
    ("How?", None),
])
def test_matching_without_words_or_a_vector_finds_nothing(manual, question, vector):
    staff_answer(manual)
    assert staff_matching.candidates(book=manual, question=question, vector=vector) == []


def test_matching_reads_a_question_as_data(manual):
    staff_answer(manual)
    for hostile in ("'); DROP TABLE chat_staffanswer; --", "%(book)s %s \x01", "<script>x</script> Notion"):
        staff_matching.match(book=manual, question=hostile, vector=get_embedder().embed_query(hostile))
    assert StaffAnswer.objects.count() == 1


def test_a_vector_of_another_length_matches_nothing(manual):
    staff_answer(manual)
    assert staff_matching.candidates(book=manual, question=STAFF_QUESTION, vector=[0.5, 0.5, 0.5]) == []


def test_a_staff_answer_with_a_broken_citation_is_served_without_it(manual):
    kept = staff_answer(manual)
    StaffAnswer.objects.filter(pk=kept.pk).update(citations=[{"url": "x"}, "not a citation", *kept.citations])
    answer = ask(STAFF_QUESTION)
    assert answer.staff_answer.id == kept.pk and [s.chunk_id for s in answer.sources] == [a_section(manual).id]


def test_the_note_names_the_day_in_words():
    from datetime import datetime

    assert staff_matching.answered_note(datetime(2026, 3, 4, 12)) == "Answered by the course staff on 4 March 2026"



def test_the_audit_admin_shows_and_filters_the_staff_level(manual, admin_client):
    staff_answer(manual)
    ask(STAFF_QUESTION)
    ask("How do I set the port bookchat serves on?")
    listed = admin_client.get("/admin/audit/auditlog/", {"confidence_level": "staff"}).content.decode()
    assert STAFF_QUESTION in listed and "set the port" not in listed
    by_status = admin_client.get("/admin/audit/auditlog/", {"status__exact": "staff"}).content.decode()
    assert STAFF_QUESTION in by_status and "answered by the course staff" in by_status


def test_a_near_copy_of_a_staff_question_is_served_and_a_swapped_rare_word_is_not(manual):
    """A near copy (only a stop word more) is that question whatever the fitted weights say; the same words with
    the one that names the thing asked about swapped are another question."""
    kept = staff_answer(manual)
    copy = ask("So, can I import my chapters straight from a Notion workspace?")
    assert copy.confidence_level == "staff" and copy.staff_answer.id == kept.pk
    other = ask("Can I import my chapters straight from a Confluence workspace?")
    assert other.staff_answer is None


def test_a_near_copy_needs_both_the_vector_and_only_common_words():
    near = {"cosine": staff_matching.COPY_COSINE, "unshared": staff_matching.COPY_UNSHARED}
    assert staff_matching.near_copy(near)
    assert not staff_matching.near_copy(near | {"cosine": staff_matching.COPY_COSINE - 0.01})
    assert not staff_matching.near_copy(near | {"unshared": 0.28}), "the development sets' closest near-miss"


def test_a_question_far_from_the_staff_question_is_not_served_its_answer_however_well_the_words_fit(manual):
    """The staff answer's words answer "How do I ingest a folder?" well, but its question is another one."""
    staff_answer(manual, question="What is the best recipe for chocolate chip cookies?",
                 answer="The book doesn't bake: ingest your recipes as a folder of Markdown instead [1].")
    found = staff_matching.candidates(book=manual, question="How do I ingest a folder?",
                                      vector=get_embedder().embed_query("How do I ingest a folder?"))
    assert found and found[0].features["cosine"] < staff_matching.QUESTION_FLOOR and found[0].score == 0.0
    assert ask("How do I ingest a folder?").staff_answer is None
