"""Our question sets (``bench/questions/``) still match their books: every evidence string and every selected passage
is in the book, and no short answer of a selected-text question is inside the selection it asks about (the answer
must come from around it). A page edit that breaks one fails here, not as a silent drop in ``evaluate``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chat.pipeline.terms import normalise
from chat.quality.evaluation import load_questions
from tests.support.shared_data import REPO, shared_data

QUESTIONS = REPO / "bench" / "questions"
# Each set's book: the bundled manual, or a corpus in ../shared/data (its Markdown root).
BOOKS = {"bookchat-manual": lambda: REPO / "docs",
         "docusaurus-docs": lambda: shared_data() / "docusaurus-docs" / "docs",
         "mkdocs-material": lambda: shared_data() / "mkdocs-material" / "docs",
         "mdbook-guide": lambda: shared_data() / "mdbook-guide" / "src"}
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def _texts(root: Path) -> tuple[str, str]:
    """The book's Markdown, normalised as written and as rendered (links as their text, no HTML tags)."""
    raw = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.md*")))
    return normalise(raw), normalise(_TAG.sub("", _LINK.sub(r"\1", raw)))


@pytest.mark.parametrize("book", sorted(BOOKS))
def test_the_kinds_set_matches_its_book(book):
    questions = load_questions(QUESTIONS / f"kinds-{book}.jsonl")
    written, rendered = _texts(BOOKS[book]())
    kinds = {q.kind for q in questions}
    assert {"selected_text", "follow_up", "unanswerable"} <= kinds
    for q in questions:
        for evidence in q.evidence:
            assert normalise(evidence) in written, f"{q.id}: evidence not in the book: {evidence[:80]}"
        if q.kind == "selected_text":
            selection = normalise(_TAG.sub("", _LINK.sub(r"\1", q.selected_text)))
            assert selection in rendered, f"{q.id}: the selection is not in the book"
            assert not any(normalise(a) in selection for a in q.answers), f"{q.id}: an answer is in the selection"
        if q.kind == "follow_up":
            assert q.previous.strip(), f"{q.id}: a follow-up names the question before it"
