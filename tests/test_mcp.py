"""The books as an MCP server, driven by the official SDK's own client (``mcp.Client``) over both transports:
stdio (``manage.py mcp`` as a desktop assistant starts it) and Streamable HTTP at ``/mcp`` on a real gunicorn
started as ``make run`` starts it. Each session initializes, lists the tools (with their schemas), searches,
asks (a cited answer and a refusal), reads a page, gets tool errors for bad arguments and goes on; the audit
trail has every call with channel ``mcp``; over HTTP a missing or wrong key is 401 and the call past the rate
limit is refused with when to retry, as the API refuses it.
"""

from __future__ import annotations

import json
import re
import sys
import time
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from audit.models import AuditLog
from bench.latency import Gunicorn
from tests.conftest import REPO, server_environment

BOOK = "bookchat-manual"
ON_TOPIC = "How do I ingest a folder of Markdown?"
OFF_TOPIC = "What is the boiling point of mercury in Kelvin?"
CITATION = re.compile(r"\[\d+\]")

# Tool calls that are questions (counted by the rate limit), with what each must give: None for a result, else a
# piece of the tool error's message. Bad arguments are counted too, as the API counts a bad request.
QUESTIONS = [
    ("search_book", {"query": ON_TOPIC, "limit": 3}, None),
    ("ask_book", {"question": ON_TOPIC}, None),
    ("ask_book", {"question": OFF_TOPIC}, None),
    ("search_book", {"query": "   "}, "query is empty"),
    ("search_book", {"query": "ingest", "limit": 10_000}, "limit must be from 1 to 10, not 10000"),
    ("search_book", {"query": "ingest", "limit": "5"}, "limit must be a whole number"),
    ("ask_book", {"question": 42}, "question must be a string"),
    ("ask_book", {"question": "why " * 300}, "the limit is 1000"),
    ("ask_book", {"question": "How?", "book": "no-such-book"}, "no-such-book"),
    ("ask_book", {"question": "How?", "colour": "blue"}, "ask_book has no argument 'colour'"),
]


async def exercise(client: Client) -> dict:
    """The session every transport must hold: what it saw, for the caller's own checks."""
    seen: dict = {}
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"search_book", "ask_book", "list_books"}
    for tool in tools.values():
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object", tool.name
    assert tools["search_book"].input_schema["properties"]["limit"]["maximum"] == 10
    assert tools["search_book"].input_schema["required"] == ["query"]
    seen["tools"] = list(tools.values())
    assert "cite" in (client.instructions or "") and "doesn't cover" in client.instructions

    results = []
    for name, arguments, error in QUESTIONS:
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        if error is None:
            assert not result.is_error, text
        else:
            assert result.is_error and error in text, (name, arguments, text)
        results.append(result)
    search, answer, refusal = (r.structured_content for r in results[:3])

    passages = search["passages"]
    assert search["covered"] and len(passages) == 3
    assert any("#" in p["url"] for p in passages), "section URLs carry their anchors"
    assert all(p["text"] and p["heading_path"] and p["page_title"] and p["score"] > 0 for p in passages)

    assert not answer["refused"] and not answer["flagged_for_review"], answer["answer"]
    assert CITATION.search(answer["answer"]) and any(s["cited"] and s["url"] for s in answer["sources"])
    assert "Sources:" in results[1].content[0].text

    assert refusal["refused"] and not CITATION.search(refusal["answer"]), refusal["answer"]
    assert refusal["sources"] == [] and refusal["suggestions"], "related sections, as links"
    assert "Related sections (links, not citations)" in results[2].content[0].text

    page = await client.read_resource(passages[0]["page"])
    seen["page"] = page.contents[0].text
    assert page.contents[0].mime_type == "text/markdown" and seen["page"].startswith("# ")
    assert passages[0]["text"][:40] in seen["page"]
    assert (await client.list_resources()).resources, "the pages are listed"

    listed = await client.call_tool("list_books", {})  # the session goes on
    books = listed.structured_content["books"]
    assert [b["slug"] for b in books] == [BOOK] and books[0]["pages"] > 0
    for name, result in [*((name, r) for (name, _, error), r in zip(QUESTIONS, results, strict=True)
                           if error is None), ("list_books", listed)]:
        jsonschema.validate(result.structured_content, tools[name].output_schema)  # each says what it gives
    seen["results"] = results
    return seen


def audited_mcp_rows(since, *, at_least: int) -> list[AuditLog]:
    """The rows written since ``since`` on the mcp channel (over HTTP they are written after the response)."""
    for _ in range(100):
        rows = list(AuditLog.objects.filter(created_at__gte=since, channel="mcp").order_by("created_at"))
        if len(rows) >= at_least:
            return rows
        time.sleep(0.1)
    return rows


def check_audit(rows: list[AuditLog]) -> None:
    statuses = [r.status for r in rows]
    assert statuses.count("searched") == 1 and statuses.count("answered") == 1, statuses
    assert statuses.count("not_covered") == 1, statuses
    search = next(r for r in rows if r.status == "searched")
    assert search.question == ON_TOPIC and len(search.sources) == 3 and not search.answer
    answered = next(r for r in rows if r.status == "answered")
    assert answered.book_slug == BOOK and CITATION.search(answered.answer)


@pytest.mark.django_db
@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_an_assistant_over_stdio_searches_asks_and_reads_the_manual(manual_book, served):
    from django.utils import timezone

    since = timezone.now()
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--book", BOOK], cwd=str(REPO),
                                   env=server_environment())

    async def run() -> dict:
        async with Client(params, mode="legacy") as client:  # legacy: the initialize handshake
            assert client.server_info.name == "bookchat"
            return await exercise(client)

    seen = anyio.run(run)
    print("\n".join(f"{t.name}: {t.description}" for t in seen["tools"]))
    check_audit(audited_mcp_rows(since, at_least=3))


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_mcp_command_refuses_an_unknown_book(manual_book):
    import subprocess

    run = subprocess.run([sys.executable, "manage.py", "mcp", "--book", "no-such-book"], cwd=REPO,
                         env=server_environment(), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 1 and "no book 'no-such-book'" in run.stderr and run.stdout == ""


@pytest.fixture
def mcp_key(secret_key) -> str:
    return secret_key("mcp-test")


@asynccontextmanager
async def over_http(url: str, key: str):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        yield streamable_http_client(url, http_client=http)


@pytest.mark.django_db
@pytest.mark.drill  # a served MCP endpoint asked past its limit: ~12 s
def test_an_assistant_over_http_needs_a_key_and_keeps_to_the_api_rate_limit(mcp_key):
    from django.utils import timezone

    since = timezone.now()
    env = {"BOOKCHAT_ANONYMOUS_API": "false", "BOOKCHAT_RATE_KEY": f"{len(QUESTIONS)}/day"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    with Gunicorn(workers=2, env=env) as server:
        url = f"{server.url}/mcp"
        for headers in ({}, {"Authorization": "Bearer sk_not-a-key"}):
            refused = httpx.post(url, json=initialize, headers=accept | headers, timeout=30)
            assert refused.status_code == 401, refused.text
            assert refused.headers["WWW-Authenticate"].startswith("Bearer") and "tools" not in refused.text
        # Stateless: no stream to open, no session to end; answered at once, never held open.
        for method in ("GET", "DELETE"):
            other = httpx.request(method, url, headers=accept | {"Authorization": f"Bearer {mcp_key}"}, timeout=10)
            assert other.status_code == 405 and other.headers["Allow"] == "POST", other.text

        async def run() -> tuple[dict, object]:
            async with over_http(url, mcp_key) as transport, Client(transport, mode="legacy") as client:
                seen = await exercise(client)
                over = await client.call_tool("search_book", {"query": ON_TOPIC})
            async with over_http(url, mcp_key) as transport, Client(transport) as modern:  # 2026-07-28, stateless
                books = await modern.call_tool("list_books", {})
            assert not books.is_error
            return seen, over

        seen, over = anyio.run(run)
        assert over.is_error, "the call past the limit is refused"
        message = over.content[0].text
        assert re.search(r"too many questions \(the limit is \d+ per day\); try again in \d+ s", message), message
        assert "error: rate_limited" in message and "retry after:" in message
        api = httpx.post(f"{server.url}/api/v1/ask", json={"question": ON_TOPIC},
                         headers={"Authorization": f"Bearer {mcp_key}"}, timeout=30)
        assert api.status_code == 429 and int(api.headers["Retry-After"]) > 0, "one bucket for the key"
        assert api.json()["message"].split(";")[0] == message.split(";")[0]
    rows = audited_mcp_rows(since, at_least=3)
    check_audit(rows)
    assert {r.api_key_name for r in rows} == {"mcp-test"} and all(r.client_ip_hash for r in rows)


@pytest.mark.django_db
def test_searches_are_audited_but_the_dashboard_counts_only_answers_as_answers():
    import uuid

    from audit.dashboard import dashboard, review_queue_filter

    for status, level in (("searched", ""), ("searched", ""), ("answered", "high")):
        AuditLog.objects.create(answer_id=uuid.uuid4(), channel="mcp", book_slug="mcp-dashboard", question="q",
                                status=status, confidence_level=level, confidence=0.9 if level else None)
    figures = dashboard(days=1, book="mcp-dashboard")
    assert (figures["total"], figures["searches"], figures["mix"]["high"], figures["mix"]["low"]) == (1, 2, 1, 0)
    assert not AuditLog.objects.filter(review_queue_filter(), book_slug="mcp-dashboard").exists()


@pytest.mark.django_db
def test_the_tools_give_what_the_api_gives(client):
    """ask_book's output is the API's Answer (the keys an assistant reads; each source also names its page) and
    list_books' the API's Books, as the API's schema states them, with no reference left to resolve."""
    from chat.channels.mcp_server import ASK_KEYS, ask_output, books_output

    api = json.loads(client.get("/api/v1/schema?format=json").content)["components"]["schemas"]
    ask, books = ask_output(), books_output()
    assert "$ref" not in json.dumps([ask, books])
    assert list(ask["properties"]) == list(ASK_KEYS) and "answer_html" in api["Answer"]["properties"]
    assert ask["properties"]["confidence"] == api["Answer"]["properties"]["confidence"]
    source = ask["properties"]["sources"]["items"]
    assert set(source["properties"]) == {*api["Source"]["properties"], "page"} and "page" in source["required"]
    assert books["properties"]["books"]["items"]["properties"].keys() == api["Book"]["properties"].keys()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "x"}, ask)  # what the API requires, the tool's output requires


@pytest.mark.django_db
def test_the_tools_take_their_inputs_from_the_api_contract(client, settings):
    """One contract: a tool's question, book, version, locale and selected text are the API's AskRequest fields,
    limits included, as its schema states them; only the search's names differ (query, limit)."""
    from chat.channels.mcp_server import ask_input, search_input

    settings.BOOKCHAT = {**settings.BOOKCHAT, "MAX_QUESTION_CHARS": 321, "MAX_SELECTED_CHARS": 654}
    api = json.loads(client.get("/api/v1/schema?format=json").content)["components"]["schemas"]["AskRequest"]
    ask, search = ask_input(), search_input()
    assert ask["properties"]["question"] == api["properties"]["question"]
    assert ask["properties"]["question"]["maxLength"] == 321 and ask["properties"]["selected_text"]["maxLength"] == 654
    for name in ("version", "locale"):
        assert {k: v for k, v in ask["properties"][name].items() if k != "description"} == \
            {k: v for k, v in api["properties"][name].items() if k != "description"}
    assert "enum" not in ask["properties"]["book"], "which books depends on the caller: list_books says"
    assert search["properties"]["query"]["maxLength"] == 321 and search["properties"]["query"]["minLength"] == 1
    assert (search["properties"]["limit"]["minimum"], search["properties"]["limit"]["maximum"]) == (1, 10)
    assert ask["additionalProperties"] is False and search["additionalProperties"] is False
