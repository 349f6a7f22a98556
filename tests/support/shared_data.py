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


# The pages of docusaurus-docs the session embeds: those its first question set and our code questions cite, and
# cli.mdx (test_corpora checks its anchors): 30 of the 92 pages, 45 % of the text. Embedding all of it was the
# longest job of `make test` (~8 minutes beside the tests). Every page is still read, parsed and chunked by
# test_corpora (a dry run, and the chunker's passages checked); `make bench` embeds and measures the whole corpus.
REPO = Path(__file__).resolve().parents[2]
SESSION_PAGES = {"docusaurus-docs": (("questions.jsonl", REPO / "bench" / "questions" / "code-docusaurus.jsonl"),
                                     ("cli.mdx",))}


def session_corpus(name: str, folder: Path) -> Path:
    """The ``docs/`` folder the test session ingests for corpus ``name``: the shared one, or for a corpus in
    ``SESSION_PAGES`` a copy in ``folder`` with only the pages its questions cite (partials, category files and
    assets all kept, so those pages read as they do in the whole corpus)."""
    source = shared_corpus(name)
    if name not in SESSION_PAGES:
        return source
    target = folder / name / "docs"
    if target.is_dir():
        return target
    question_files, extra = SESSION_PAGES[name]
    wanted = set(extra)
    for questions in question_files:
        path = source.parent / questions if isinstance(questions, str) else questions
        wanted |= {json.loads(line).get("doc") for line in path.read_text().splitlines() if line.strip()}

    def left_out(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).relative_to(source)
        return {name for name in names if name.endswith((".md", ".mdx")) and not name.startswith("_")
                and (here / name).as_posix() not in wanted}

    shutil.copytree(source, target, ignore=left_out)
    return target
