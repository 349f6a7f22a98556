"""``evaluate --search``: the book's search measured with each question in full and as a reader has typed it three
words in (chat/quality/search_evaluation.py), with no audit row."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditLog
from chat.quality.search_evaluation import content_words, typed_prefix
from ingestion.models import Book
from tests.conftest import run_command

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"


@pytest.mark.parametrize("question, typed", [
    ("How do I install bookchat?", "How do I"),  # "I" keeps its one letter: nothing shorter to cut to
    ("Which setting changes the port?", "Which setting chan"),
    ("Where are passages stored", "Where are pass"),
    ("Ports?", "Por"),
    ("", ""),
])
def test_typed_prefix_cuts_the_third_word_to_its_first_half(question, typed):
    assert typed_prefix(question) == typed


def test_content_words_drop_the_books_stop_words(manual_book):
    book = Book.objects.get(slug=BOOK)
    assert content_words("How do I configure the sidebar categories?", book.pk) == "configure sidebar categories?"
    assert content_words("", book.pk) == ""


def test_evaluate_search_reports_full_and_typed_hits_and_records_nothing(manual_book, tmp_path):
    questions = tmp_path / "q.jsonl"
    rows = [{"question": "How do I ingest a folder of Markdown?", "evidence": ["takes one PATH"]},
            {"question": "Which setting changes the port?", "evidence": ["PORT"]},
            {"question": "What is the capital of Peru?", "kind": "out_of_scope"}]
    questions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, out, err = run_command("evaluate", "--questions", str(questions), "--book", BOOK, "--search", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["questions"] == 2, "only answerable questions with evidence are searched"
    assert summary["full_hit_at_5"] >= 0.5
    assert 0 <= summary["typed_hit_at_5"] <= 1 and 0 <= summary["typed_content_hit_at_5"] <= 1
    assert summary["full_p95_ms"] > 0 and summary["typed_p95_ms"] > 0 and summary["typed_content_p95_ms"] > 0
    assert not AuditLog.objects.exists()

    code, out, _ = run_command("evaluate", "--questions", str(questions), "--book", BOOK, "--search")
    assert code == 0 and "as typed (3 words, the last cut): hit@1" in out and "content words only: hit@1" in out


def test_evaluate_search_refuses_compare(manual_book, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "How do I ingest?", "evidence": ["ingest"]}) + "\n")
    code, _, err = run_command("evaluate", "--questions", str(questions), "--search", "--compare", "default",
                               "TOP_K=3")
    assert code == 2 and "--search and --compare don't go together" in err
