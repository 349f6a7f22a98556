"""``manage.py handoffs list|answer|decline`` and ``manage.py staffanswers list|add|retire`` (``audit/management/
commands/handoffs.py``, ``staffanswers.py``, and the services they call, ``audit.staff_answer_actions``), on the real
database and the bundled manual: human text and JSON, each answer, decline, add and retirement logged as a staff
action, and the wrong arguments, in a table, exiting 2 with the reason and changing nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from audit.models import Handoff
from audit.staff_answer_actions import add_staff_answer, edit_staff_answer, retire_staff_answer, serve_again
from bookchat.base.errors import RequestError
from bookchat.base.models import StaffCommand
from chat.models import StaffAnswer
from ingestion.models import Book, Chunk
from tests.conftest import run_command

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
H = Handoff.Status
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def manual(manual_book, no_llm) -> Book:
    return Book.objects.get(slug=BOOK)


@pytest.fixture
def section(manual) -> Chunk:
    return Chunk.objects.filter(book=manual, document__path="using/01-ingest.md", anchor__gt="").order_by(
        "ordinal").first()


@pytest.fixture
def answer_file(tmp_path):
    path = tmp_path / "answer.md"
    path.write_text("Not directly: export them as **Markdown**, then upload them [1].\n", encoding="utf-8")
    return str(path)


def handoff(book_slug: str = BOOK, question: str = "Can I import pages from Notion?", **fields) -> Handoff:
    return Handoff.objects.create(answer_id=uuid.uuid4(), book_slug=book_slug, channel="api", note="Please help.",
                                  conversation=[{"question": question, "answer": "…", "sources": []}], **fields)


def test_handoffs_are_listed_open_first_and_oldest_first_as_text_and_json():
    closed = handoff(question="closed one", status=H.DECLINED, declined_reason="no")
    first, second = handoff(question="first open"), handoff(question="second open")
    Book.objects.create(slug="beta", title="Beta", embedder_name="test", embedder_dimension=3)
    handoff(book_slug="beta", question="another book's")
    code, out, _ = run_command("handoffs", "list", "--book", BOOK)
    assert code == 0 and out.index("first open") < out.index("second open") < out.index("closed one")
    assert "another book" not in out and "note: Please help." in out
    code, out, _ = run_command("handoffs", "list", "--book", BOOK, "--json", "--status", "open")
    listed = json.loads(out)
    assert code == 0 and [h["id"] for h in listed["handoffs"]] == [first.pk, second.pk]
    assert listed["handoffs"][0]["question"] == "first open" and listed["handoffs"][0]["conversation"]
    assert closed.pk not in [h["id"] for h in listed["handoffs"]]
    code, out, _ = run_command("handoffs", "list", "--book", "beta", "--status", "answered")
    assert code == 0 and out.strip() == "No hand-off of beta is answered."


def test_a_hand_off_is_answered_from_a_file_citing_a_section_and_logged(section, answer_file):
    h = handoff()
    code, out, err = run_command("handoffs", "answer", str(h.pk), "--book", BOOK, "--answer-file", answer_file,
                                 "--source", section.url, "--json")
    assert code == 0, err
    result = json.loads(out)
    h.refresh_from_db()
    assert result["status"] == "answered" and result["citations"] == [section.url]
    assert h.reply.startswith("Not directly") and h.staff_answer is not None, "kept by default"
    command = StaffCommand.objects.get()
    assert (command.command, command.action) == (f"manage.py handoffs answer {h.pk} --book {BOOK}",
                                                 "answered a hand-off")
    other = handoff()
    code, out, _ = run_command("handoffs", "answer", str(other.pk), "--book", BOOK, "--answer-file", answer_file,
                               "--source", section.id, "--no-keep")
    assert code == 0 and out.startswith(f"Answered hand-off {other.pk} citing 1 section(s).")
    assert Handoff.objects.get(pk=other.pk).staff_answer is None and StaffAnswer.objects.count() == 1


def test_a_hand_off_is_declined_with_a_reason_and_logged():
    h = handoff()
    code, out, _ = run_command("handoffs", "decline", str(h.pk), "--book", BOOK, "--reason", "Not in this course.")
    assert code == 0 and "Declined hand-off" in out
    h.refresh_from_db()
    assert (h.status, h.declined_reason) == (H.DECLINED, "Not in this course.")
    assert StaffCommand.objects.get().action == "declined a hand-off"


HANDOFF_REFUSALS = [  # (arguments after the hand-off's id, how it is refused)
    (["--book", "no-such-book", "--reason", "x"], "unknown_book", "decline"),
    (["--book", "beta", "--reason", "x"], "unknown_handoff", "decline"),  # another book's
    (["--book", BOOK, "--reason", "  "], "empty_reason", "decline"),
    (["--book", BOOK, "--reason", "x" * 2001], "reason_too_long", "decline"),
    (["--book", BOOK, "--answer-file", "{missing}"], "unreadable_file", "answer"),
    (["--book", BOOK, "--answer-file", "{binary}"], "not_text", "answer"),
    (["--book", BOOK, "--answer-file", "{latin1}"], "not_text", "answer"),
    (["--book", BOOK, "--answer-file", "{huge}"], "answer_too_long", "answer"),
    (["--book", BOOK, "--answer-file", "{empty}"], "empty_answer", "answer"),
    (["--book", BOOK, "--answer-file", "{answer}", "--source", "https://elsewhere.example/x"], "not_a_section",
     "answer"),
    (["--book", BOOK, "--answer-file", "{answer}"], "invalid_citation", "answer"),  # [1] without a source
]


@pytest.mark.parametrize(("arguments", "error", "action"), HANDOFF_REFUSALS)
def test_what_handoffs_refuses_exits_2_saying_why_and_changes_nothing(tmp_path, answer_file, arguments, error,
                                                                      action):
    Book.objects.create(slug="beta", title="Beta", embedder_name="test", embedder_dimension=3)
    files = {"missing": str(tmp_path / "missing.md"), "answer": answer_file}
    for name, data in (("binary", b"\x89PNG\x00\x00"), ("latin1", "Caf\xe9".encode("latin-1")),
                       ("huge", b"x" * 80_001), ("empty", b"  \n")):
        (tmp_path / name).write_bytes(data)
        files[name] = str(tmp_path / name)
    h = handoff()
    code, out, _ = run_command("handoffs", action, str(h.pk), *[a.format(**files) for a in arguments], "--json")
    assert code == 2 and json.loads(out)["error"] == error, out
    fresh = Handoff.objects.get(pk=h.pk)
    assert fresh.status == H.OPEN and not fresh.reply and not StaffCommand.objects.exists()


@pytest.mark.parametrize(("arguments", "said"), [
    (["decline", "999999", "--book", BOOK, "--reason", "x"], "has no hand-off '999999'"),
    (["decline", "abc", "--book", BOOK, "--reason", "x"], "has no hand-off 'abc'"),
    (["decline", "9" * 40, "--book", BOOK, "--reason", "x"], "has no hand-off"),
])
def test_an_unknown_hand_off_is_refused_in_human_text_on_stderr(arguments, said):
    code, out, err = run_command("handoffs", *arguments)
    assert code == 2 and out == "" and said in err and err.startswith("handoffs: ")


def test_a_closed_hand_off_is_not_answered_or_declined_again(answer_file, section):
    h = handoff(status=H.DECLINED, declined_reason="no")
    code, out, _ = run_command("handoffs", "answer", str(h.pk), "--book", BOOK, "--answer-file", answer_file,
                               "--source", section.url, "--json")
    assert code == 2 and json.loads(out)["error"] == "handoff_closed"
    code, out, _ = run_command("handoffs", "decline", str(h.pk), "--book", BOOK, "--reason", "again", "--json")
    assert code == 2 and json.loads(out)["error"] == "handoff_closed"
    assert Handoff.objects.get(pk=h.pk).declined_reason == "no"


@pytest.mark.parametrize("arguments", [
    [], ["list"], ["answer", "1", "--book", BOOK], ["decline", "1", "--book", BOOK], ["close", "--book", BOOK],
    ["list", "--book", BOOK, "--status", "lost"], ["list", "--book", BOOK, "--colour"],
])
def test_missing_or_unknown_arguments_are_refused_by_the_parser(arguments):
    with pytest.raises(CommandError):  # from a shell: argparse's exit status 2, with the usage
        call_command("handoffs", *arguments)


def test_a_wrong_argument_exits_2_from_the_shell():
    result = subprocess.run([sys.executable, "manage.py", "staffanswers", "add", "--book", BOOK], cwd=REPO,
                            env=os.environ, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--question" in result.stderr and "--answer-file" in result.stderr


# -- staff answers -----------------------------------------------------------------------------------------------
def test_a_staff_answer_is_added_listed_and_retired(section, answer_file):
    code, out, err = run_command("staffanswers", "add", "--book", BOOK, "--question", "Can I import from Notion?",
                                 "--answer-file", answer_file, "--source", section.url, "--json")
    assert code == 0, err
    added = json.loads(out)
    assert added["status"] == "active" and added["citations"][0]["url"] == section.url
    found = StaffAnswer.objects.get(pk=added["id"])
    assert found.question_vector is not None and found.book.slug == BOOK
    code, out, _ = run_command("staffanswers", "list", "--book", BOOK)
    assert code == 0 and "Can I import from Notion?" in out and "served    0" in out
    code, out, _ = run_command("staffanswers", "retire", str(found.pk), "--book", BOOK)
    assert code == 0 and "no longer served" in out
    assert StaffAnswer.objects.get(pk=found.pk).status == StaffAnswer.Status.RETIRED
    code, out, _ = run_command("staffanswers", "list", "--book", BOOK, "--status", "active", "--json")
    assert json.loads(out)["staff_answers"] == []
    assert list(StaffCommand.objects.order_by("at").values_list("action", flat=True)) == [
        "added a staff answer", "retired a staff answer"]


STAFF_ANSWER_REFUSALS = [
    (["add", "--book", "no-such-book", "--question", "q?", "--answer-file", "{answer}"], "unknown_book"),
    (["add", "--book", BOOK, "--question", "  ", "--answer-file", "{answer}", "--source", "{url}"], "empty_question"),
    (["add", "--book", BOOK, "--question", "x" * 1001, "--answer-file", "{answer}", "--source", "{url}"],
     "question_too_long"),
    (["add", "--book", BOOK, "--question", "q?", "--answer-file", "{answer}", "--source", "/not/a/section"],
     "not_a_section"),
    (["add", "--book", BOOK, "--question", "q?", "--answer-file", "{answer}", *["--source", "{url}"] * 11],
     "too_many_citations"),
    (["add", "--book", BOOK, "--question", "q?", "--answer-file", "{missing}"], "unreadable_file"),
    (["retire", "999999", "--book", BOOK], "unknown_staff_answer"),
    (["retire", "not-a-number", "--book", BOOK], "unknown_staff_answer"),
    (["retire", "{beta_answer}", "--book", BOOK], "unknown_staff_answer"),  # another book's
    (["retire", "{retired}", "--book", BOOK], "already_retired"),
]


@pytest.mark.parametrize(("arguments", "error"), STAFF_ANSWER_REFUSALS)
def test_what_staffanswers_refuses_exits_2_saying_why_and_changes_nothing(manual, section, answer_file, tmp_path,
                                                                          arguments, error):
    beta = Book.objects.create(slug="beta", title="Beta", embedder_name="test", embedder_dimension=3)
    beta_answer = StaffAnswer.objects.create(book=beta, question="q", answer="a")
    retired = StaffAnswer.objects.create(book=manual, question="old", answer="a", status=StaffAnswer.Status.RETIRED)
    values = {"answer": answer_file, "url": section.url, "missing": str(tmp_path / "missing.md"),
              "beta_answer": str(beta_answer.pk), "retired": str(retired.pk)}
    code, out, _ = run_command("staffanswers", *[a.format(**values) for a in arguments], "--json")
    assert code == 2 and json.loads(out)["error"] == error, out
    assert StaffAnswer.objects.count() == 2 and not StaffCommand.objects.exists()
    assert StaffAnswer.objects.get(pk=beta_answer.pk).status == StaffAnswer.Status.ACTIVE


def test_the_staff_answer_services_refuse_what_they_cannot_do(manual, section):
    found = add_staff_answer(book=manual, question="Can I import from Notion?", answer="Export first [1].",
                             citations=[section.url])
    with pytest.raises(RequestError) as refused:
        serve_again(found)
    assert refused.value.code == "already_served"
    retire_staff_answer(found)
    with pytest.raises(RequestError) as refused:
        retire_staff_answer(found)
    assert refused.value.code == "already_retired"
    with pytest.raises(RequestError) as refused:
        edit_staff_answer(found, question="q?", answer="See [2].", citations=[section.url])
    assert refused.value.code == "invalid_citation"
    assert StaffAnswer.objects.get(pk=found.pk).answer == "Export first [1]."
