"""The LLM path against a real model server: llama.cpp's (llama-cpp-python's OpenAI-compatible server) on Gemma 3
270M, started from the manual's recipe as it is written (``tests/support/llama_server.py``). `make llm-test` runs
these (marker ``llm``: the server is compiled first); `make test` leaves them out.

A base model of 270M parameters answers badly, and that is what is tested: whatever it writes reaches the reader
as its answer when the passages it cites support it, and otherwise as a withheld answer or the book's own sentences,
with the audit trail and the review queue saying which. What a real server can't be made to do on demand (HTTP
errors, malformed streams, refusing ``stream_options``) stays with the fake one (``tests/test_generation.py``)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import asdict

import httpx
import pytest

from bench.latency import Gunicorn
from bookchat.base.errors import DeadlineExceeded
from chat.pipeline import generation
from chat.pipeline.answering import WITHHELD_MESSAGE, answer_events, answer_question, prepare
from chat.pipeline.answers import Answer
from chat.pipeline.deadline import Deadline
from chat.pipeline.generation import GenerationFailed, GenerationInput, OpenAIChatGenerator, Usage
from chat.pipeline.questions import AskRequest
from tests import test_browser
from tests.support.llama_server import LlamaServer, assemble_model, read_recipe
from tests.support.served import written_row
from tests.test_browser import ask_widget, open_docs

# The browser tests' fixtures: the live server with a docs site beside it, Chromium, its pages, a widget key.
servers, browser, open_page, widget_key = (test_browser.servers, test_browser.browser, test_browser.open_page,
                                           test_browser.widget_key)

pytestmark = [pytest.mark.llm, pytest.mark.slow, pytest.mark.needs("llm")]

BOOK = "bookchat-manual"
MODEL = "gemma-3-270m"


@pytest.fixture(scope="session")
def gemma(tmp_path_factory):
    return assemble_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def llama(gemma, tmp_path_factory):
    with LlamaServer(gemma, tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


@pytest.fixture
def real_llm(settings, llama, manual_book):
    """bookchat configured by the recipe's settings (retrieval given time, so that a busy machine doesn't make the
    search run out first)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, **llama.settings, "RETRIEVAL_SECONDS": 30.0}
    generation._cache.clear()
    yield llama
    generation._cache.clear()


def ask(question: str, **fields) -> Answer:
    return answer_question(AskRequest(question=question, book=BOOK, **fields))


def fresh(question: str) -> str:
    """The question made new to the server, so that no prompt it read before shortens its reading."""
    return f"{question} ({uuid.uuid4().hex[:8]})"


def sse(response: httpx.Response):
    """(seconds since the request, event, data) of each Server-Sent Event, as it arrives."""
    started, event = time.monotonic(), None
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            yield time.monotonic() - started, event, json.loads(line.removeprefix("data:").strip())


def audit_row(answer_id: str):
    from audit.models import AuditLog

    return AuditLog.objects.get(answer_id=answer_id)


def test_the_manuals_recipe_is_what_runs(llama):
    recipe = read_recipe()
    assert {"BOOKCHAT_LLM_BASE_URL", "BOOKCHAT_LLM_API_KEY", "BOOKCHAT_LLM_MODEL"} <= set(recipe.settings)
    assert recipe.settings["BOOKCHAT_LLM_BASE_URL"] == f"http://127.0.0.1:{recipe.port}/v1"
    expected = list(recipe.arguments)
    expected[expected.index("--model") + 1] = str(llama.command[llama.command.index("--model") + 1])
    expected[expected.index("--port") + 1] = str(llama.port)
    assert llama.command[1:3] == ["-m", "llama_cpp.server"] and llama.command[3:] == expected
    listed = httpx.get(f"{llama.base_url}/models").json()["data"]
    assert [m["id"] for m in listed] == [recipe.settings["BOOKCHAT_LLM_MODEL"]]


def test_a_streamed_answer_arrives_token_by_token_over_the_api(llama, manual_book, served):
    env = llama.environment() | {"BOOKCHAT_RETRIEVAL_SECONDS": "30"}
    with Gunicorn(workers=1, env=env) as server, httpx.Client(base_url=server.url, timeout=60) as http, \
            http.stream("POST", "/api/v1/ask/stream", json={"question": "How do I ingest a folder?", "book": BOOK}) \
            as response:
        assert response.status_code == 200
        events = list(sse(response))
    kinds = [event for _, event, _ in events]
    assert kinds[-1] == "final" and kinds.count("final") == 1 and "error" not in kinds
    tokens = [(at, data["text"]) for at, event, data in events if event == "token"]
    final = events[-1][2]
    assert final["generator"] in (MODEL, "extractive")
    if final["generator"] == "extractive":  # the model wrote, then its text was found to copy its prompt
        assert "language model" in final["notice"]
    assert len(tokens) >= 5, "the model's words came as they were written"
    assert tokens[-1][0] - tokens[0][0] > 0.3, f"the tokens arrived over time, not at once: {tokens[:3]}…"
    usage = final["llm_usage"]
    assert usage["completion_tokens"] > 0 and usage["counted_by"] in ("server", "bookchat")


@pytest.mark.django_db
def test_token_counts_match_the_servers_usage(real_llm, settings):
    """The server sends no ``usage`` in a stream; bookchat's count of the streamed pieces must then be the server's
    own count for the same request asked without streaming (greedy, so that both write the same text)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_TEMPERATURE": 0.0, "LLM_MAX_TOKENS": 60}
    prepared = prepare(AskRequest(question="Which setting changes the port?", book=BOOK))
    generator = OpenAIChatGenerator()
    data = GenerationInput(question=prepared.request.question, book_title=prepared.book.title,
                           excerpts=[generation.Excerpt(n, c.heading_path, c.text)
                                     for n, c in enumerate(prepared.retrieval.chunks, 1)])
    usage = Usage()
    with contextlib.suppress(GenerationFailed):  # a copied prompt is refused after the stream: the count stands
        list(generator.stream(data, budget_seconds=60.0, usage=usage))
    reply = real_llm.complete(generator.messages(data), temperature=0.0, max_tokens=60)
    assert reply["usage"]["completion_tokens"] > 0
    if usage.counted_by == "server":
        assert usage.prompt_tokens == reply["usage"]["prompt_tokens"]
    assert usage.completion_tokens == reply["usage"]["completion_tokens"], (usage, reply["usage"])


@pytest.mark.django_db
def test_what_the_model_writes_is_grounded_withheld_or_replaced_and_the_review_queue_says_which(
        real_llm, admin_client):
    """Each answer the model was asked for is one of three: its text, grounded in the passages it cites; withheld by
    the grounding check, and queued for review; or, when it copied its prompt instead of answering (what this base
    model mostly does), the book's own sentences with a notice, queued for review with the model's failure on its
    row. The audit row holds what the reader was sent."""
    from audit.dashboard import review_queue_filter
    from audit.models import AuditLog

    questions = ["How do I ingest a folder?", "What does the widget need on a docs site?",
                 "How do I stream an answer?"]
    responses = [ask(q) for q in questions]
    queue = set(AuditLog.objects.filter(review_queue_filter()).values_list("answer_id", flat=True))
    outcomes = []
    for r in responses:
        row = audit_row(r.answer_id)
        assert row.generator == r.generator and row.answer == r.answer
        assert row.llm_usage == asdict(r.llm_usage) and r.llm_usage.completion_tokens > 0, "the model was asked"
        if r.generator == MODEL and r.flagged_for_review:
            outcomes.append("withheld")
            assert r.answer == WITHHELD_MESSAGE and not r.grounding.passed
            assert row.status == "withheld" and row.flagged and not row.generation_failure
            assert uuid.UUID(r.answer_id) in queue
        elif r.generator == MODEL:
            outcomes.append("grounded")
            assert r.grounding.passed and r.grounding.cited_sources, r.grounding
            assert set(r.grounding.cited_sources) <= {s.n for s in r.sources}
            assert not row.generation_failure
        else:
            outcomes.append("replaced")
            assert r.generator == "extractive" and "language model" in r.notice
            assert r.grounding.passed and not r.flagged_for_review and not row.flagged
            assert row.generation_failure in generation.FAILURE_REASONS, row.generation_failure
            assert row.generation_failure_message in r.notice
            assert uuid.UUID(r.answer_id) in queue, "an answer the model never wrote is queued for review"
    page = admin_client.get("/admin/audit/reviewqueueitem/").content.decode()
    for question, r in zip(questions, responses, strict=True):
        assert (question in page) == (uuid.UUID(r.answer_id) in queue), question
    print("the model's answers:", outcomes)


@pytest.mark.django_db
def test_a_model_slower_than_its_share_is_replaced_by_the_books_sentences(real_llm, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "GENERATION_SECONDS": 0.5}
    response = ask(fresh("How do I ingest a folder?"))
    assert response.generator == "extractive"
    assert "did not answer within 0.5 s" in response.notice
    assert response.grounding.passed and not response.flagged_for_review
    assert response.timings_ms["generation"] < 2500, "it did not wait for the model"


@pytest.mark.django_db
def test_a_model_slower_than_the_deadline_is_a_504(real_llm, settings, client):
    prepared = prepare(AskRequest(question=fresh("Which setting changes the port?"), book=BOOK))
    prepared.deadline = Deadline(0.5)  # retrieval done on the generous deadline; 0.5 s left for the model
    with pytest.raises(DeadlineExceeded) as raised:
        list(answer_events(prepared))
    assert raised.value.status == 504 and "during generation" in raised.value.message

    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": 1.5, "RETRIEVAL_SECONDS": 1.0}
    response = client.post("/api/v1/ask", {"question": fresh("How do I stream an answer?"), "book": BOOK},
                           content_type="application/json")
    assert response.status_code == 504, response.content[:300]
    assert response.json()["error"] == "timeout"


def test_the_server_killed_mid_stream_ends_it_with_the_books_sentences_and_nothing_half_saved(
        gemma, tmp_path, manual_book, served, django_db_blocker):
    from chat.models import Turn

    with LlamaServer(gemma, tmp_path / "server.log") as doomed:
        env = doomed.environment() | {"BOOKCHAT_RETRIEVAL_SECONDS": "30", "BOOKCHAT_LLM_MAX_TOKENS": "400"}
        with Gunicorn(workers=1, env=env) as server, httpx.Client(base_url=server.url, timeout=60) as http, \
                http.stream("POST", "/api/v1/ask/stream",
                            json={"question": "How do I ingest a folder?", "book": BOOK}) as response:
            events, streamed = [], ""
            for _, event, data in sse(response):
                events.append((event, data))
                if event == "token":
                    streamed += data["text"]
                    doomed.kill()
    kinds = [event for event, _ in events]
    assert "token" in kinds and kinds[-1] == "final" and "error" not in kinds
    final = events[-1][1]
    assert final["generator"] == "extractive"
    assert "server could not be reached or closed the connection" in final["notice"], final["notice"]
    assert final["grounding"]["passed"] and not final["flagged_for_review"]
    assert not final["answer"].startswith(streamed.strip()), "the final answer is not the model's cut-off text"
    with django_db_blocker.unblock():
        row = written_row(final["answer_id"])
        assert (row.answer, row.generator) == (final["answer"], "extractive")
        assert row.status in ("answered", "unsure") and not row.flagged
        assert row.generation_failure == "connection", row.generation_failure
        turn = Turn.objects.get(answer_id=final["answer_id"])
        assert turn.answer == final["answer"]


# -- the page and the widget, in Chromium --------------------------------------------------------------------------
@pytest.fixture
def live_llm(settings, llama, servers, django_db_blocker):
    """The live server's threads answer with the real model (the recipe's settings), and the test may read what they
    committed."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, **llama.settings, "RETRIEVAL_SECONDS": 30.0, "ANONYMOUS_API": "false"}
    generation._cache.clear()
    with django_db_blocker.unblock():
        yield servers
    generation._cache.clear()


@pytest.mark.needs("browser")
def test_the_page_streams_the_models_words_then_shows_the_final_answer(live_llm, open_page):
    bookchat, _ = live_llm
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}")
    page.fill("#question", "How do I ingest a folder?")
    page.press("#question", "Enter")
    page.wait_for_function("() => { const el = document.querySelector('article.turn.pending .answer-text');"
                           " return el && el.textContent.length > 20 && el.textContent !== '…'; }", timeout=60_000)
    streaming = page.locator("article.turn.pending .answer-text.streaming")
    assert streaming.get_attribute("aria-busy") == "true", "the model's words show while it writes"
    turn = page.locator("article.turn:not(.pending)").last
    turn.wait_for(timeout=60_000)
    row = written_row(turn.get_attribute("data-answer-id"))
    assert row.generator in (MODEL, "extractive") and row.llm_usage["completion_tokens"] > 0
    assert turn.locator(".answer-text").text_content().strip(), "the final answer replaced the stream"
    assert errors == []


@pytest.mark.needs("browser")
def test_the_widget_streams_the_models_words_then_shows_the_final_answer(live_llm, open_page, widget_key):
    _, docs = live_llm
    page, errors = open_docs(open_page, docs, widget_key(docs.origin))
    page.locator(".bc-launcher").click()
    ask_widget(page, "How do I stream an answer?")
    page.wait_for_function("() => { const a = document.querySelector('#bookchat-widget').shadowRoot"
                           ".querySelector('.bc-answer[data-state=streaming] .bc-answer-text');"
                           " return a && a.textContent.length > 20; }", timeout=60_000)
    answer = page.locator(".bc-answer[data-state=done]").last
    answer.wait_for(timeout=60_000)
    row = written_row(answer.get_attribute("data-answer-id"))
    assert row.generator in (MODEL, "extractive") and row.llm_usage["completion_tokens"] > 0
    assert answer.locator(".bc-answer-text").text_content().strip(), "the final answer replaced the stream"
    assert errors == []
