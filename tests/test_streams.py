"""A stream doesn't hold a worker: on gunicorn started as `make run` starts it (``serve.gunicorn_command``), twenty
readers streaming answers from an LLM that writes 0.1 s a token all get their ``final`` event, all twenty are open
at the same moment, and ``/api/v1/health`` answers while they run. With sync workers (one request per process) the
streams queued two at a time and health waited behind them. Checked by what happens, not how fast: how fast is
``make bench``'s (bench/streams.py)."""

from __future__ import annotations

import pytest

from bench.latency import Gunicorn
from bench.streams import TOKEN_SECONDS, held_streams
from bookchat.base.conf import setting

BOOK = "bookchat-manual"
QUESTION = "How do I ingest a folder?"
STREAMS = 20


@pytest.mark.drill  # gunicorn holding twenty streams: make drills
def test_twenty_streams_are_held_at_once_and_health_answers_meanwhile(openai_server, manual_book, served):
    openai_server.reset()
    openai_server.token_delay = TOKEN_SECONDS
    llm = {"BOOKCHAT_LLM_BASE_URL": openai_server.base_url, "BOOKCHAT_LLM_API_KEY": "test",
           "BOOKCHAT_LLM_MODEL": "test-model"}
    try:
        with Gunicorn(workers=setting("WEB_WORKERS"), env=llm) as server:
            measured = held_streams(server.url, [(QUESTION, BOOK)], streams=STREAMS)
        asked_the_llm = sum(path.startswith("/v1/chat/completions") for path, _ in openai_server.requests)
    finally:
        openai_server.reset()

    assert measured["errors"] == [], measured
    assert measured["completed"] == STREAMS, measured
    assert asked_the_llm == STREAMS, "every stream waited on the LLM's tokens"
    assert measured["held_at_once"] == STREAMS, f"streams waited for a free worker: {measured}"
    assert measured["health_before_half_ended"] >= 3, f"health waited behind the streams: {measured}"
