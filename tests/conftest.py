"""Shared fixtures: the real embedded Postgres (via pytest-django), corpora ingested once per session,
tiny books built on disk, and the test OpenAI-compatible server.

Corpora are ingested into the test database outside any test transaction and shared by the
whole session, so no test here may use ``transaction=True`` (it would truncate them).
"""

from __future__ import annotations

import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("BOOKCHAT_SHARED_DATA", REPO.parent / "shared" / "data"))
CORPORA = ("docusaurus-docs", "physical-ai-book", "physical-ai-book-2", "squad2-dev")


def shared_corpus(name: str) -> Path:
    """The ``docs/`` folder of a corpus in ../shared/data; skip (or fail in CI) when it is absent."""
    path = SHARED_DATA / name / "docs"
    if not path.is_dir():
        reason = f"{path} is absent (the shared test data ships only beside the project's own checkout)"
        if os.environ.get("BOOKCHAT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"BOOKCHAT_REQUIRE_SHARED_DATA=1 but {reason}")
        pytest.skip(reason)
    return path


def run_command(*args: str) -> tuple[int, str, str]:
    """Run a management command in-process: (exit status, stdout, stderr)."""
    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@dataclass
class CorpusRun:
    name: str
    exit_code: int
    report: dict
    seconds: float


@pytest.fixture(scope="session")
def ingest_corpus(django_db_setup, django_db_blocker):
    """``ingest_corpus(name)`` ingests ../shared/data/<name>/docs into book <name> once per session."""
    runs: dict[str, CorpusRun] = {}

    def ingest(name: str) -> CorpusRun:
        path = shared_corpus(name)
        if name not in runs:
            started = time.monotonic()
            with django_db_blocker.unblock():
                code, out, _ = run_command("ingest", str(path), "--book", name, "--json")
            runs[name] = CorpusRun(name, code, json.loads(out), time.monotonic() - started)
        return runs[name]

    return ingest


@pytest.fixture
def book_dir(tmp_path):
    """A writable folder for a tiny book; ``write(rel_path, text)`` adds a page."""

    class BookDir:
        root = tmp_path / "book"

        def write(self, rel_path: str, content: str | bytes) -> Path:
            path = self.root / rel_path
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            return path

    BookDir.root.mkdir()
    return BookDir()


@pytest.fixture(scope="session")
def openai_server():
    with FakeOpenAIServer() as server:
        yield server


def pytest_unconfigure(config) -> None:
    """Stop the embedded Postgres if this test session started it."""
    from bookchat import embedded_db

    if embedded_db.started_here:
        from django.conf import settings
        from django.db import connections

        connections.close_all()
        embedded_db.stop(Path(settings.DATA_DIR))
