"""Where ../shared/data is (``BOOKCHAT_SHARED_DATA`` overrides it). Tests that need it are in the "shared-data"
group of ``NEEDS`` (tests/conftest.py): missing, it stops the session unless ``BOOKCHAT_TEST_SKIP`` names it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("BOOKCHAT_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        from tests.conftest import require  # conftest imports this module

        require("shared-data")
    return SHARED_DATA


def shared_corpus(name: str) -> Path:
    """The ``docs/`` folder of one corpus in ../shared/data."""
    path = shared_data() / name / "docs"
    if not path.is_dir():
        pytest.fail(f"{path} is absent: {SHARED_DATA} is not the whole shared test data")
    return path


def all_present(names) -> bool:
    """Whether every corpus in ``names`` is there (to start work on them before a test asks)."""
    return all((SHARED_DATA / name / "docs").is_dir() for name in names)


# The pages the session embeds of the corpora it doesn't embed whole: those the questions the tests ask cite (a question
# file of the corpus's own or of ours, each with how many of its first questions: None, all) and the extra pages
# named. docusaurus-docs: those the first 12 questions of its first set (what `evaluate --limit 12` asks) and our code
# questions cite, and cli.mdx (test_corpora checks its anchors): 18 of the 92 pages, 29 % of the text. squad2-dev:
# two of its five articles (40 % of the text). The tests ask only the questions of the pages embedded
# (``in_session``). Embedding them whole made the books' ingests the longest thing `make test` waited on (~8
# minutes beside the tests for docusaurus-docs, then ~2 for squad2-dev). Every page is still read, parsed and
# chunked by test_corpora (a dry run, and the chunker's passages checked); `make bench` embeds and measures the
# whole corpora.
REPO = Path(__file__).resolve().parents[2]
CODE_QUESTIONS = REPO / "bench" / "questions" / "code-docusaurus.jsonl"
SESSION_PAGES = {"docusaurus-docs": ((("questions.jsonl", 12), (CODE_QUESTIONS, None)), ("cli.mdx",)),
                 "squad2-dev": ((), ("01-normans.md", "04-sky-united-kingdom.md"))}


def session_pages(name: str) -> set[str] | None:
    """The pages (paths relative to ``docs/``) the session embeds of corpus ``name``; None: all of them."""
    if name not in SESSION_PAGES:
        return None
    source = shared_corpus(name)
    question_files, extra = SESSION_PAGES[name]
    wanted = set(extra)
    for questions, first in question_files:
        path = source.parent / questions if isinstance(questions, str) else questions
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        wanted |= {row.get("doc") for row in rows[:first]}
    return wanted


def in_session(name: str, rows: list[dict]) -> list[dict]:
    """The question rows of corpus ``name`` whose page the session embeds."""
    pages = session_pages(name)
    return [row for row in rows if pages is None or row.get("doc") in pages]


def session_corpus(name: str, folder: Path) -> Path:
    """The ``docs/`` folder the test session ingests for corpus ``name``: the shared one, or for a corpus in
    ``SESSION_PAGES`` a copy in ``folder`` with only the pages its questions cite (partials, category files and
    assets all kept, so those pages read as they do in the whole corpus)."""
    source = shared_corpus(name)
    wanted = session_pages(name)
    if wanted is None:
        return source
    target = folder / name / "docs"
    if target.is_dir():
        return target

    def left_out(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).relative_to(source)
        return {name for name in names if name.endswith((".md", ".mdx")) and not name.startswith("_")
                and (here / name).as_posix() not in wanted}

    shutil.copytree(source, target, ignore=left_out)
    return target
