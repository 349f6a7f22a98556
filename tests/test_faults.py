"""Reliability drills: the database going away under a real gunicorn, the audit table unwritable, and an LLM
that hangs, drops the connection or sends garbage. The other drills live beside the feature they test (see
CONTRIBUTING.md, "Reliability drills"): a worker SIGKILLed mid-ingest in test_uploads, a full disk while archiving in
test_retention, the audit table renamed mid-session in test_audit.

The database outage is made on the test server itself, for the gunicorn workers only: they connect with
their own ``application_name``, so the drill can end exactly their sessions (``pg_terminate_backend``, what
a server shutdown does to its clients) and refuse new ones (``ALLOW_CONNECTIONS false``), then let them back
in. From the workers' side that is a database that stopped and came back; the test session's own
connection, opened before, is untouched.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager

import httpx
import psycopg
import pytest
from django.db import connection

from audit import recording
from bench.latency import KEEP_ALIVE, Gunicorn

BOOK = "bookchat-manual"
QUESTION = "How do I ingest a folder?"
WORKERS_APP_NAME = "bookchat-fault-drill"


def ask_body(question: str = QUESTION) -> dict:
    return {"question": question, "book": BOOK}


def sse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


# -- the database stops mid-request and comes back ---------------------------------------------------------
@contextmanager
def database_outage(name: str):
    """End the gunicorn workers' database sessions and refuse new connections until the block exits."""
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], user=db["USER"], dbname="postgres", autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                  "WHERE application_name = %s", [WORKERS_APP_NAME]).fetchone()[0]
            assert ended >= 1, "the workers had no database session to end"
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@pytest.mark.slow
@pytest.mark.drill  # gunicorn and a real outage of the database: ~15 s
def test_database_outage_answers_503_and_the_workers_recover_without_a_restart(openai_server, manual_book, served):
    openai_server.reset()
    llm = {"BOOKCHAT_LLM_BASE_URL": openai_server.base_url, "BOOKCHAT_LLM_API_KEY": "test",
           "BOOKCHAT_LLM_MODEL": "test-model", "PGAPPNAME": WORKERS_APP_NAME}
    with (Gunicorn(workers=2, env=llm) as server,
          httpx.Client(base_url=server.url, timeout=30, limits=KEEP_ALIVE) as http):
        workers = sorted(server_workers(server))
        for _ in range(4):  # both workers load the embedder and hold a database connection
            assert http.post("/api/v1/ask", json=ask_body()).status_code == 200

        # Two requests in flight (one per worker), waiting on the model, when the database goes away.
        openai_server.chat_mode, openai_server.delay = "slow", 1.5
        outcomes: dict[str, httpx.Response] = {}
        in_flight = [threading.Thread(target=lambda p=path: outcomes.__setitem__(p, httpx.post(
            server.url + p, json=ask_body(), timeout=30))) for path in ("/api/v1/ask", "/api/v1/ask/stream")]
        asked = len(openai_server.requests)
        for thread in in_flight:
            thread.start()
        wait_until(lambda: len(openai_server.requests) >= asked + 2, seconds=20)
        with database_outage(connection.settings_dict["NAME"]):
            for thread in in_flight:
                thread.join(timeout=30)
            openai_server.chat_mode = "answer"
            mid_ask, mid_stream = outcomes["/api/v1/ask"], outcomes["/api/v1/ask/stream"]
            assert mid_ask.status_code == 503, mid_ask.text
            assert mid_ask.json() == {"error": "database_unavailable", "field": None,
                                      "message": "bookchat's database is unavailable at the moment; try again shortly"}
            assert mid_stream.status_code == 200  # its headers went out before the database did
            assert sse_events(mid_stream.text)[-1] == ("error", mid_ask.json())

            during = [http.post("/api/v1/ask", json=ask_body()), http.post("/api/v1/ask/stream", json=ask_body()),
                      http.get("/api/v1/books")]
            assert [r.status_code for r in during] == [503, 503, 503]
            assert all(r.json()["error"] == "database_unavailable" for r in during)
            health = http.get("/api/v1/health")
            assert health.status_code == 503 and health.json()["database"]["ok"] is False
            page = http.get("/")
            assert page.status_code == 503 and page.headers["Content-Type"].startswith("text/html")
            assert "database is unavailable" in page.text
            assert all("Traceback" not in r.text for r in [mid_ask, mid_stream, *during, health, page])

        # Back: the same workers answer again, each on a new connection (CONN_HEALTH_CHECKS).
        after = [http.post("/api/v1/ask", json=ask_body()) for _ in range(4)]
        assert [r.status_code for r in after] == [200] * 4, after[-1].text
        assert after[-1].json()["generator"] == "test-model"
        assert http.get("/api/v1/health").status_code == 200
        assert http.get("/").status_code == 200
        assert sorted(server_workers(server)) == workers, "gunicorn did not restart its workers"


def server_workers(server: Gunicorn) -> list[int]:
    from bench import machine

    return machine.children(server.proc.pid)


def wait_until(condition, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


# -- the audit table is unwritable: answers are served, health counts the failures ---------------------------
@pytest.mark.django_db
def test_failed_audit_writes_are_counted_in_health_which_stays_ok(client, manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "DEADLINE_SECONDS": 60.0,
                         "RETRIEVAL_SECONDS": 30.0}
    before = recording.write_failures()
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditlog RENAME TO audit_auditlog_unwritable")
    try:
        answered = client.post("/api/v1/ask", data=ask_body(), content_type="application/json")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE audit_auditlog_unwritable RENAME TO audit_auditlog")
    assert answered.status_code == 200 and answered.json()["sources"]
    health = client.get("/api/v1/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    audit = health.json()["audit"]
    assert audit["write_failures"] == before + 1
    assert audit["last_error"] == "ProgrammingError" and audit["last_failure_at"]


# -- the LLM hangs, drops the connection or sends garbage ------------------------------------------------------
GENERATION_SECONDS = 1.0
DEADLINE_SECONDS = 10.0


@pytest.fixture
def llm(settings, openai_server, manual_book, client):
    """The LLM on the test server with a short generation budget, warmed up first: the embedder's and the
    openai client's first loads must not eat the budgets under test."""
    openai_server.reset()
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": openai_server.base_url, "LLM_API_KEY": "test",
                         "LLM_MODEL": "test-model", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0,
                         "GENERATION_SECONDS": 30.0}
    assert client.post("/api/v1/ask", data=ask_body(), content_type="application/json").status_code == 200
    openai_server.requests.clear()
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": DEADLINE_SECONDS, "RETRIEVAL_SECONDS": 5.0,
                         "GENERATION_SECONDS": GENERATION_SECONDS}
    yield openai_server
    openai_server.reset()


def stream(client) -> tuple[list[tuple[str, dict]], float]:
    started = time.monotonic()
    response = client.post("/api/v1/ask/stream", data=ask_body(), content_type="application/json")
    assert response.status_code == 200, response.content
    text = b"".join(response.streaming_content).decode()
    return sse_events(text), time.monotonic() - started


@pytest.mark.django_db
@pytest.mark.parametrize("mode, notice", [
    ("hang", "did not answer within 1.0 s"),  # a few words, then nothing, the connection open
    ("drop", "was cut off"),  # a few words, then the connection closes: not the whole answer
    ("garbage", "returned an empty answer"),  # HTTP 200 with an HTML page
    ("wrong_schema", "returned an empty answer"),  # JSON events that are not chat chunks
    ("empty_choices", "returned an empty answer"),
    ("error", "InternalServerError"),  # HTTP 500
])
def test_a_broken_llm_falls_back_to_the_books_sentences_within_the_budget(client, llm, mode, notice):
    llm.chat_mode, llm.delay = mode, 5.0
    events, seconds = stream(client)
    kind, final = events[-1]
    assert kind == "final" and [k for k, _ in events].count("final") == 1
    assert seconds < DEADLINE_SECONDS
    # The budget cut the model off: generation ended nearer the budget than the model's own delay (2 s either side).
    assert final["timings_ms"]["generation"] < (GENERATION_SECONDS + llm.delay) / 2 * 1000, "the budget held"
    assert final["generator"] == "extractive" and notice in final["notice"]
    assert final["grounding"]["passed"] and not final["flagged_for_review"]
    assert "[1]" in final["answer"] or "[2]" in final["answer"]

    answered = client.post("/api/v1/ask", data=ask_body(), content_type="application/json")
    assert answered.status_code == 200 and answered.json()["generator"] == "extractive"
    assert notice in answered.json()["notice"]


@pytest.mark.django_db
@pytest.mark.drill  # waits out the real deadline (~8 s): run with the drills, for make test's time
def test_an_llm_hanging_past_the_deadline_ends_the_stream_with_a_timeout_in_time(client, llm, settings):
    # The generation budget is capped by what is left of the deadline; past it: 504, never a half answer.
    deadline = 4.0
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": deadline, "GENERATION_SECONDS": 30.0}
    llm.chat_mode, llm.delay = "hang", 8.0
    events, seconds = stream(client)
    assert len(llm.requests) == 1, "the model was asked, and hung"
    assert events[-1][0] == "error" and events[-1][1]["error"] == "timeout"
    assert "final" not in [k for k, _ in events]
    # Ended by the deadline, not by the model: nearer the one than the other (2 s either side).
    before_the_model = (deadline + llm.delay) / 2
    assert seconds < before_the_model
    started = time.monotonic()
    answered = client.post("/api/v1/ask", data=ask_body(), content_type="application/json")
    assert answered.status_code == 504 and answered.json()["error"] == "timeout"
    assert time.monotonic() - started < before_the_model
