"""Shared fixtures: the real embedded Postgres (via pytest-django), corpora ingested once per session,
tiny books built on disk, and the test OpenAI-compatible server.

Corpora are ingested into the test database outside any test transaction (on a thread of
their own, see ``committed``) and shared by the whole session, so no test here may use
``transaction=True`` (it would truncate them).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.openai_server import FakeOpenAIServer
from tests.support.served import forget_answers_since
from tests.support.shared_data import SHARED_DATA, all_present, shared_corpus

REPO = Path(__file__).resolve().parent.parent
CORPORA = ("docusaurus-docs", "physical-ai-book", "physical-ai-book-2", "squad2-dev")
# Corpora embedded for real in the test session (the others are checked without embedding: see test_corpora).
EMBEDDED_CORPORA = ("docusaurus-docs", "squad2-dev")


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


def committed(fn):
    """Run ``fn`` on a thread of its own, so its writes commit outside the calling test's transaction
    (Django's connections are per thread) and stay for the rest of the session."""
    from django.db import connections

    outcome = {}

    def target():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised in the caller
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@dataclass
class CorpusRun:
    name: str
    exit_code: int
    report: dict
    seconds: float


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """The test database, always. pytest-django creates it only when a selected test is marked ``django_db``,
    so ``pytest -k browser`` alone (browser tests are not marked, see test_browser) would otherwise run
    against the development database."""
    from django.test.utils import setup_databases, teardown_databases

    with django_db_blocker.unblock():
        config = setup_databases(verbosity=request.config.option.verbose, interactive=False, aliases={"default"})
    yield
    with django_db_blocker.unblock():
        teardown_databases(config, verbosity=request.config.option.verbose)


@pytest.fixture(scope="session", autouse=True)
def anonymous_api():
    """Most tests call the API without a key, as `make run` (DEBUG on) allows; tests of keys turn this off
    with ``override_settings``."""
    from django.conf import settings

    from bookchat import conf

    settings.BOOKCHAT["ANONYMOUS_API"] = "true"
    # Tests ask far more often than a person: the per-IP and per-session limits are tested on their own.
    settings.BOOKCHAT["RATE_ANONYMOUS"] = ""
    settings.BOOKCHAT["RATE_PAGE"] = ""
    # Sentence vectors cost ~0.6× a book's embedding time: off for the session (and the servers it starts), so
    # the corpora index at the passages' own speed; tests/test_sentences.py turns them on for its own books.
    settings.BOOKCHAT["SENTENCE_VECTORS"] = "off"
    os.environ["BOOKCHAT_SENTENCE_VECTORS"] = "off"
    conf._cache = None
    yield


MANUAL = "bookchat-manual"


class BackgroundBooks:
    """Books ingested while the rest of the suite runs: the bundled manual and the embedded corpora, one
    ``manage.py ingest`` process per book, one after the other, at the lowest CPU priority (``nice 19``, OpenMP
    threads that sleep when idle), so that they take only the cores the tests leave idle and never slow a test
    down. The tests that need none of them run first, those that use a corpus last
    (``pytest_collection_modifyitems``), and each waits for its book (``result``)."""

    def __init__(self, books: list[tuple[str, Path]]):
        self.books = books
        self.runs: dict[str, CorpusRun] = {}
        self.done = {name: threading.Event() for name, _ in books}
        self.processes: list = []
        self.stopped = False

    def start(self) -> None:
        threading.Thread(target=self._run_all, name="background-books", daemon=True).start()

    def _run_all(self) -> None:
        for name, path in self.books:
            started = time.monotonic()
            if not self.stopped:
                # nice(1), not a preexec_fn: this thread forks while the tests' threads run.
                process = subprocess.Popen(
                    ["nice", "-n", "19", sys.executable, "manage.py", "ingest", str(path), "--book", name, "--json"],
                    cwd=REPO, env=server_environment() | {"OMP_WAIT_POLICY": "PASSIVE"}, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                self.processes.append(process)
                out, err = process.communicate()
                try:
                    report = json.loads(out)
                except ValueError:
                    report = {"errors": [f"ingest printed no report (exit {process.returncode}): {err[-2000:]}"]}
                self.runs[name] = CorpusRun(name, process.returncode, report, time.monotonic() - started)
            self.done[name].set()

    def result(self, name: str) -> CorpusRun | None:
        if name not in self.done:
            return None
        self.done[name].wait()
        return self.runs.get(name)

    def stop(self) -> None:
        self.stopped = True
        for process in self.processes:
            if process.poll() is None:
                process.kill()


def server_environment() -> dict[str, str]:
    """The environment of a process that works on this session's test database and data folder."""
    from bench.latency import database_environment

    return database_environment() | {"BOOKCHAT_SENTENCE_VECTORS": "off"}


# Test modules that work on servers, databases and files of their own, never on the session's books: they run
# first, while the books are ingested.
SELF_CONTAINED = ("test_nodes.py", "test_packaging.py", "test_embedded_db.py")


def pytest_collection_modifyitems(session, config, items) -> None:
    """The self-contained tests first, then the rest, and those that use an embedded corpus last, so that the
    books' ingestion (``BackgroundBooks``) overlaps the suite."""
    def needs(item, fixture: str) -> bool:
        return fixture in getattr(item, "fixturenames", ())

    def stage(item) -> int:
        if needs(item, "ingest_corpus"):
            return 2
        return 0 if item.path.name in SELF_CONTAINED else 1

    items[:] = sorted(items, key=stage)  # stable: the order within a stage is kept
    config.stash[BOOKS_WANTED] = ((MANUAL,) if any(needs(item, "manual_book") for item in items) else ()) + \
        (EMBEDDED_CORPORA if any(needs(item, "ingest_corpus") for item in items) else ())


BOOKS_WANTED = pytest.StashKey[tuple]()


@pytest.fixture(scope="session", autouse=True)
def books_in_background(request):
    """Starts ``BackgroundBooks`` with the books the selected tests use (the manual first; squad2-dev before
    docusaurus-docs: it is small)."""
    wanted = request.config.stash.get(BOOKS_WANTED, ())
    books = [(MANUAL, REPO / "docs")] if MANUAL in wanted else []
    if set(EMBEDDED_CORPORA) <= set(wanted) and all_present(EMBEDDED_CORPORA):
        books += [(name, SHARED_DATA / name / "docs") for name in ("squad2-dev", "docusaurus-docs")]
    if not books:
        yield None
        return
    request.getfixturevalue("django_db_setup")
    background = BackgroundBooks(books)
    background.start()
    yield background
    background.stop()


def ingested(name: str, path: Path, background: BackgroundBooks | None, django_db_blocker) -> CorpusRun:
    """Book ``name``'s ingest: its background run when the session started one, else one made here (committed,
    on a thread of its own)."""
    run = background.result(name) if background is not None else None
    if run is None:
        started = time.monotonic()
        with django_db_blocker.unblock():
            code, out, _ = committed(lambda: run_command("ingest", str(path), "--book", name, "--json"))
        run = CorpusRun(name, code, json.loads(out), time.monotonic() - started)
    return run


@pytest.fixture(scope="session")
def ingest_corpus(django_db_setup, django_db_blocker, books_in_background):
    """``ingest_corpus(name)`` ingests ../shared/data/<name>/docs into book <name> once per session (the embedded
    corpora in the background, ``BackgroundBooks``)."""
    runs: dict[str, CorpusRun] = {}

    def ingest(name: str) -> CorpusRun:
        path = shared_corpus(name)
        if name not in runs:
            runs[name] = ingested(name, path, books_in_background, django_db_blocker)
        return runs[name]

    return ingest


@pytest.fixture(scope="session")
def manual_book(django_db_setup, django_db_blocker, books_in_background) -> dict:
    """The bundled manual in docs/, ingested once per session as book ``bookchat-manual`` (in the background,
    ``BackgroundBooks``, when the session started it)."""
    run = ingested(MANUAL, REPO / "docs", books_in_background, django_db_blocker)
    assert run.exit_code == 0, run.report
    return run.report


@pytest.fixture
def no_llm(settings):
    """No LLM is configured whatever the environment says, and the time budget is generous, so that a loaded
    test machine doesn't turn behaviour tests into 504s (the deadline tests set their own)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0, "GENERATION_SECONDS": 30.0}


@pytest.fixture
def secret_key(manual_book, served, django_db_blocker):
    """``secret_key(name)``: the raw value of a new secret API key for the bundled manual (``book=None``: for
    every book), committed so that a server the test starts sees it; deleted after the test."""
    from chat.models import ApiKey
    from ingestion.models import Book

    names = []

    def issue(name: str, book: str | None = "bookchat-manual") -> str:
        def create() -> str:
            key = ApiKey(name=name, kind=ApiKey.SECRET, book=Book.objects.get(slug=book) if book else None)
            raw = key.issue()
            key.save()
            return raw

        names.append(name)
        with django_db_blocker.unblock():
            return committed(create)

    yield issue
    with django_db_blocker.unblock():
        committed(lambda: ApiKey.objects.filter(name__in=names).delete())


@pytest.fixture
def served(django_db_blocker):
    """Forget, after the test, the answers a real server committed during it."""
    from django.utils import timezone

    since = timezone.now()
    yield
    with django_db_blocker.unblock():
        forget_answers_since(since)


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
