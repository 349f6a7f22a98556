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
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.openai_server import FakeOpenAIServer
from tests.support.served import forget_answers_since
from tests.support.shared_data import all_present, shared_corpus

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


class BackgroundCorpora:
    """The embedded corpora, ingested while the rest of the suite runs: one ``manage.py ingest`` process per
    corpus, one after the other, at the lowest CPU priority (``nice 19``, OpenMP threads that sleep when idle),
    so that they take only the cores the tests leave idle and never slow a test down. The tests that use them
    run last (``pytest_collection_modifyitems``) and wait for their corpus."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.runs: dict[str, CorpusRun] = {}
        self.done = {name: threading.Event() for name in names}
        self.processes: list = []
        self.stopped = False

    def start(self) -> None:
        threading.Thread(target=self._run_all, name="background-corpora", daemon=True).start()

    def _run_all(self) -> None:
        import subprocess
        import sys

        for name in self.names:
            started = time.monotonic()
            if not self.stopped:
                process = subprocess.Popen(
                    [sys.executable, "manage.py", "ingest", str(shared_corpus(name)), "--book", name, "--json"],
                    cwd=REPO, env=server_environment() | {"OMP_WAIT_POLICY": "PASSIVE"}, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(19))
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
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "bookchat.settings",
        "DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "BOOKCHAT_SECRET_KEY": settings.SECRET_KEY, "BOOKCHAT_DATA_DIR": str(settings.DATA_DIR),
        "BOOKCHAT_LOG_LEVEL": "WARNING", "BOOKCHAT_SENTENCE_VECTORS": "off",
    }


def pytest_collection_modifyitems(session, config, items) -> None:
    """The tests that use an embedded corpus run last, so that its ingestion (``BackgroundCorpora``) overlaps
    the rest of the suite."""
    uses = [item for item in items if "ingest_corpus" in getattr(item, "fixturenames", ())]
    if uses:
        items[:] = [item for item in items if item not in uses] + uses
    config.stash[CORPORA_WANTED] = bool(uses)


CORPORA_WANTED = pytest.StashKey[bool]()


@pytest.fixture(scope="session", autouse=True)
def corpora_in_background(request):
    """Starts ``BackgroundCorpora`` when a selected test uses an embedded corpus (squad2-dev first: it is small)."""
    if not request.config.stash.get(CORPORA_WANTED, False) or not all_present(EMBEDDED_CORPORA):
        yield None
        return
    request.getfixturevalue("django_db_setup")
    corpora = BackgroundCorpora(("squad2-dev", "docusaurus-docs"))
    corpora.start()
    yield corpora
    corpora.stop()


@pytest.fixture(scope="session")
def ingest_corpus(django_db_setup, django_db_blocker, corpora_in_background):
    """``ingest_corpus(name)`` ingests ../shared/data/<name>/docs into book <name> once per session (the embedded
    corpora in the background, ``BackgroundCorpora``)."""
    runs: dict[str, CorpusRun] = {}

    def ingest(name: str) -> CorpusRun:
        path = shared_corpus(name)
        background = corpora_in_background.result(name) if corpora_in_background is not None else None
        if name not in runs and background is not None:
            runs[name] = background
        if name not in runs:
            started = time.monotonic()
            with django_db_blocker.unblock():
                code, out, _ = committed(lambda: run_command("ingest", str(path), "--book", name, "--json"))
            runs[name] = CorpusRun(name, code, json.loads(out), time.monotonic() - started)
        return runs[name]

    return ingest


@pytest.fixture(scope="session")
def manual_book(django_db_setup, django_db_blocker) -> dict:
    """The bundled manual in docs/, ingested once per session as book ``bookchat-manual``."""
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(REPO / "docs"), "--book", "bookchat-manual",
                                                     "--json"))
    report = json.loads(out)
    assert code == 0, report
    return report


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
