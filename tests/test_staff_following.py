"""Staff answers follow the book (``chat.pipeline.staff_following``, run by ``chat.receivers`` → ``chat.tasks`` after
an indexing run): a run that deletes a cited section (an ingest; a publish from CI, followed by the task queued
behind its sync) sends its staff answer to review, naming the section, and the question is then answered by the
book; a typo fix leaves it served; the measure of a section's change; re-embedding a question another embedder
made."""

from __future__ import annotations

import pytest

from chat.models import StaffAnswer
from chat.pipeline.answering import answer_question
from chat.pipeline.questions import AskRequest
from chat.pipeline.staff_answers import cite, keep
from chat.pipeline.staff_following import SMALL_EDIT, follow_book, review_reason, section_similarity, typo
from chat.tasks import follow_staff_answers
from ingestion.indexing.ingesting import index_path
from ingestion.models import Book, Chunk

pytestmark = pytest.mark.django_db

SLUG = "staff-following"
QUESTION = "Can the greenhouse sensors report to a phone over Bluetooth?"
PAGE = """# Greenhouse sensors

## Wiring the sensors

Each sensor connects to the controller with three wires: power, ground and signal. Keep the signal wire shorter
than two metres, or the readings drift as the cable picks up noise from the pumps and the lights. Label both ends
of every cable before you fix it to the frame, so that a sensor can be replaced without tracing its wire through the
whole greenhouse. A sensor that reads zero after wiring usually has its power and ground swapped at the controller.

## Reading the humidity

The controller reads the humidity sensor every ten seconds and keeps the last hour of readings in memory. The
display shows the mean of the last minute, which smooths out the jumps when the door opens. Readings above ninety
percent for a whole hour switch the fans on; they stay on until the humidity falls below seventy percent, so that
the fans don't start and stop every few seconds around one value.
"""
WITHOUT_WIRING = PAGE.split("## Wiring the sensors")[0] + "## Reading" + PAGE.split("## Reading", 1)[1]


def index(book_dir, text: str) -> Book:
    book_dir.write("sensors.md", text)
    index_path(book_dir.root, book_slug=SLUG)
    return Book.objects.get(slug=SLUG)


def staff_answer_on_wiring(book: Book) -> StaffAnswer:
    wiring = Chunk.objects.get(book=book, heading_path__endswith="Wiring the sensors")
    return keep(book=book, question=QUESTION, answer="Not over Bluetooth: wire them as shown [1].",
                citations=cite(book, [wiring.id]))


def ask(question: str):
    return answer_question(AskRequest(question=question, book=SLUG, channel="api"))


@pytest.fixture(autouse=True)
def quick(no_llm, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SENTENCE_VECTORS": "off"}


def test_a_run_that_deletes_a_cited_section_sends_its_staff_answer_to_review(book_dir):
    book = index(book_dir, PAGE)
    kept = staff_answer_on_wiring(book)
    assert ask(QUESTION).staff_answer.id == kept.pk, "served while its section is there"

    index(book_dir, WITHOUT_WIRING)
    kept.refresh_from_db()
    assert kept.status == StaffAnswer.Status.NEEDS_REVIEW
    assert "“Wiring the sensors” (sensors.md) is no longer in the book" in kept.review_reason
    answer = ask(QUESTION)
    assert answer.staff_answer is None and answer.confidence_level != "staff", "the book answers now"


def test_a_typo_fix_leaves_the_staff_answer_served_and_a_rewrite_does_not(book_dir):
    book = index(book_dir, PAGE)
    kept = staff_answer_on_wiring(book)
    index(book_dir, PAGE.replace("connects to the controller", "conects to the controler"))
    kept.refresh_from_db()
    assert kept.status == StaffAnswer.Status.ACTIVE and kept.review_reason == ""
    assert ask(QUESTION).staff_answer.id == kept.pk

    index(book_dir, PAGE.replace("three wires: power, ground and signal", "a single cable with a plug"))
    kept.refresh_from_db()
    assert kept.status == StaffAnswer.Status.NEEDS_REVIEW
    assert "“Wiring the sensors” (sensors.md) changed: its words are" in kept.review_reason


def test_a_retired_staff_answer_stays_retired_and_the_report_says_what_was_done(book_dir):
    book = index(book_dir, PAGE)
    kept = staff_answer_on_wiring(book)
    StaffAnswer.objects.filter(pk=kept.pk).update(status=StaffAnswer.Status.RETIRED)
    book_dir.write("sensors.md", WITHOUT_WIRING)
    report = index_path(book_dir.root, book_slug=SLUG)
    kept.refresh_from_db()
    assert kept.status == StaffAnswer.Status.RETIRED
    assert "staff_answers" not in report.after, "no active staff answer: nothing to follow"


def test_the_task_reports_and_a_deleted_book_does_nothing(book_dir):
    book = index(book_dir, PAGE)
    kept = staff_answer_on_wiring(book)
    Chunk.objects.filter(book=book, heading_path__endswith="Wiring the sensors").delete()
    assert follow_staff_answers(book.pk) == {"checked": 1, "needs_review": [kept.pk], "reembedded": 0}
    assert follow_staff_answers(0) == {"book": None}


def test_a_question_another_embedder_made_is_embedded_again(book_dir):
    book = index(book_dir, PAGE)
    kept = staff_answer_on_wiring(book)
    StaffAnswer.objects.filter(pk=kept.pk).update(embedder="an-old-embedder", question_vector=[0.0] * 384)
    assert ask(QUESTION).staff_answer is None, "skipped meanwhile"
    assert follow_book(book)["reembedded"] == 1
    kept.refresh_from_db()
    assert kept.embedder != "an-old-embedder" and ask(QUESTION).staff_answer.id == kept.pk


@pytest.mark.parametrize(("then", "now", "small"), [
    ("Keep the signal wire short.", "Keep the signal wire short.", True),
    ("Keep the signal wire short.", "**Keep** the *signal* wire short!", True),  # markup, punctuation
    ("Each sensor connects to the controller with three wires.",
     "Each sensor conects to the controler with three wires.", True),  # typos
    ("Each sensor connects to the controller with three wires.",
     "Each sensor connects to the controller with two wires.", False),  # a word of meaning, short section
    ("The default edition is 2015 for every code block in the book.",
     "The default edition is 2018 for every code block in the book.", False),  # a number is never a typo
    ("Wire it. " * 30, "Wire it. " * 30 + "Never wire it to the mains, which destroys the controller.", False),
    ("", "", True),
])
def test_what_counts_as_a_small_edit(then, now, small):
    assert (section_similarity(then, now) >= SMALL_EDIT) is small


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("teh", "the", True), ("recieve", "receive", True), ("controler", "controller", True),
    ("true", "false", False), ("2015", "2018", False), ("port", "ports", True),
    ("abc", "xyz", False),
])
def test_a_typo_is_a_near_spelling_of_letters(a, b, expected):
    assert typo(a, b) is expected


@pytest.mark.parametrize("citations", [
    [{}],
    [{"document": None, "heading_path": None, "text": None}],
    [{"document": "../../etc/passwd", "heading_path": "'; DROP TABLE ingestion_chunk; --", "text": "x"}],
])
def test_a_malformed_citation_reads_as_a_section_gone(book_dir, citations):
    book = index(book_dir, PAGE)
    assert "is no longer in the book" in review_reason(book, citations)
    assert Chunk.objects.filter(book=book).exists()


def test_a_publish_that_deletes_a_cited_section_sends_its_staff_answer_to_review_behind_the_sync(client, settings,
                                                                                                   tmp_path):
    """Published from CI (``POST /api/v1/books/{slug}/sources``, the sync run as the worker runs it): the sync queues
    the following of the book's staff answers behind it, and once the worker has run it the staff answer citing the
    deleted page waits for review and the question gets the book's answer."""
    from django_q.models import OrmQ

    from chat import tasks
    from tests.test_publishing import PAGES, publish_and_run

    settings.DATA_DIR = tmp_path
    slug, key = published_book_key()
    assert publish_and_run(client, slug, key, PAGES)["status"] == "done"
    book = Book.objects.get(slug=slug)
    ferry = Chunk.objects.get(book=book, document__path="boats.md")
    question = "Is there a night ferry to Gull Island?"
    kept = keep(book=book, question=question, answer="No: only the nine o'clock ferry [1].",
                citations=cite(book, [ferry.id]))
    asked = answer_question(AskRequest(question=question, book=slug, channel="api"))
    assert asked.staff_answer.id == kept.pk, "served while its page is there"

    OrmQ.objects.all().delete()  # tasks queued by earlier tests that ran a worker are not ours
    without_boats = {name: text for name, text in PAGES.items() if name != "docs/boats.md"}
    assert publish_and_run(client, slug, key, without_boats)["status"] == "done"
    queued = [package for package in OrmQ.objects.all() if package.func() == "chat.tasks.follow_staff_answers"]
    assert [package.args() for package in queued] == [(book.pk,)], "queued behind the sync, for the worker"
    tasks.follow_staff_answers(*queued[0].args())
    kept.refresh_from_db()
    assert kept.status == StaffAnswer.Status.NEEDS_REVIEW and "is no longer in the book" in kept.review_reason
    asked = answer_question(AskRequest(question=question, book=slug, channel="api"))
    assert asked.staff_answer is None and asked.confidence_level != "staff"


def published_book_key() -> tuple[str, str]:
    """A fresh slug and the secret key that publishes it (as test_publishing's ``book`` fixture makes them)."""
    import uuid

    from chat.channels.keys import api_key_create
    from chat.models import ApiKey

    slug = f"published-{uuid.uuid4().hex[:8]}"
    _, raw = api_key_create(kind=ApiKey.SECRET, publish_book=slug)
    return slug, raw
