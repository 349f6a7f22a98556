"""Answer latency per stage in-process, over HTTP (gunicorn on loopback), and throughput under load."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
from django.conf import settings
from django.db import connection

from audit import recording
from bench import machine
from bench.stats import summary
from bookchat.management.commands.serve import gunicorn_command, gunicorn_environment
from chat.channels.serializers import validate_ask
from chat.pipeline.answering import answer_question
from chat.pipeline.retrieval import vector_literal
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book

STAGES = ("validate", "embed", "dense", "lexical", "fusion", "generation", "grounding", "audit_write", "end_to_end")


def in_process(questions: list[tuple[str, str]], *, log) -> dict:
    """Every question through validate → answer (the audit write included, timed on its own)."""
    samples: dict[str, list[float]] = {stage: [] for stage in STAGES}
    samples["raw_topk"] = []
    write = recording.write
    audit_ms: list[float] = []

    def timed_write(record):
        started = time.perf_counter()
        try:
            return write(record)
        finally:
            audit_ms.append((time.perf_counter() - started) * 1000)

    recording.write = timed_write
    books = {b.slug: b for b in Book.objects.all()}
    try:
        for question, book in questions:
            started = time.perf_counter()
            ask = validate_ask({"question": question, "book": book}, channel="bench")
            validated = time.perf_counter()
            response = answer_question(ask)
            ended = time.perf_counter()
            samples["validate"].append((validated - started) * 1000)
            samples["end_to_end"].append((ended - started) * 1000)
            for stage in ("embed", "dense", "lexical", "fusion", "generation", "grounding"):
                samples[stage].append(float(response.timings_ms.get(stage, 0.0)))
            samples["raw_topk"].append(raw_topk_ms(books[book], question))
    finally:
        recording.write = write
    samples["audit_write"] = audit_ms
    return {stage: summary(values) for stage, values in samples.items()}


def raw_topk_ms(book: Book, question: str) -> float:
    """The physical minimum of a dense search: one pgvector top-5 on the book's rows (vector already made)."""
    vector = vector_literal(get_embedder().embed_query(question))
    dims = book.embedder_dimension
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM ingestion_chunk WHERE book_id = %s AND dimensions = {dims} "
                       f"ORDER BY embedding::vector({dims}) <=> %s::vector({dims}) LIMIT 5", [book.pk, vector])
        cursor.fetchall()
    return (time.perf_counter() - started) * 1000


# -- over HTTP -----------------------------------------------------------------------------------------------
def database_environment() -> dict[str, str]:
    """The environment of another process (a server, a command) that works on this process's database and data
    folder, with its secret key: the benchmark's servers, and the test session's."""
    db = connection.settings_dict
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "bookchat.settings",
        "DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "BOOKCHAT_SECRET_KEY": settings.SECRET_KEY, "BOOKCHAT_DATA_DIR": str(settings.DATA_DIR),
        "BOOKCHAT_LOG_LEVEL": "WARNING",
    }


class Gunicorn:
    """bookchat under gunicorn on a free loopback port, started as `make run` starts it (``serve.gunicorn_command``:
    the same worker class, threads and timeouts), with the anonymous API, no rate limits and no access log;
    ``env`` adds or overrides environment variables (tests point the LLM at their server)."""

    def __init__(self, workers: int = 2, env: dict[str, str] | None = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = database_environment() | {
            "BOOKCHAT_DEBUG": "false", "BOOKCHAT_ALLOWED_HOSTS": "127.0.0.1", "BOOKCHAT_ANONYMOUS_API": "true",
            "BOOKCHAT_RATE_ANONYMOUS": "",
        } | (env or {})
        command = gunicorn_command(bind=f"127.0.0.1:{self.port}", workers=workers, access_log=False)
        self.proc = subprocess.Popen([*command, "--log-level", "warning"], cwd=Path(settings.BASE_DIR),
                                     env=gunicorn_environment(env), start_new_session=True)

    def __enter__(self) -> Gunicorn:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/api/v1/health", timeout=5).status_code == 200:
                    return self
            time.sleep(0.3)
        self.__exit__()
        raise RuntimeError("gunicorn did not start")

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def worker_rss_mb(self) -> list[float]:
        return [rss for pid in machine.children(self.proc.pid) if (rss := machine.rss_mb(pid)) is not None]


# gunicorn closes a kept-alive connection after 2 s idle; httpx keeps one 5 s by default, and a request sent on a
# connection gunicorn is closing at that moment fails with a ReadError that says nothing about bookchat. Every
# client of a server started here drops its idle connections after 1 s.
KEEPALIVE_EXPIRY = 1.0
KEEP_ALIVE = httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def warm_up(server: Gunicorn, questions, *, workers: int = 2) -> None:
    """Each worker loads the embedder on its first question; don't time that."""
    with httpx.Client(base_url=server.url, timeout=60, limits=KEEP_ALIVE) as client:
        for question, book in questions[: workers * 4]:
            client.post("/api/v1/ask", json={"question": question, "book": book})


def over_http(server: Gunicorn, questions, *, log) -> dict:
    ask, first_token = [], []
    errors = 0
    with httpx.Client(base_url=server.url, timeout=60, limits=KEEP_ALIVE) as client:
        for question, book in questions:
            started = time.perf_counter()
            response = client.post("/api/v1/ask", json={"question": question, "book": book})
            ask.append((time.perf_counter() - started) * 1000)
            errors += response.status_code != 200
            started = time.perf_counter()
            with client.stream("POST", "/api/v1/ask/stream", json={"question": question, "book": book}) as stream:
                seen = None
                for line in stream.iter_lines():
                    if seen is None and line.startswith("event: token"):
                        seen = (time.perf_counter() - started) * 1000
                    if line.startswith("event: final") or line.startswith("event: error"):
                        errors += line.startswith("event: error")
                first_token.append(seen if seen is not None else (time.perf_counter() - started) * 1000)
    return {"ask": summary(ask), "stream_first_token": summary(first_token), "errors": errors}


def mcp_over_http(server: Gunicorn, questions, *, key: str) -> dict:
    """The same questions through the MCP server at ``/mcp`` (``chat.channels.mcp_http``), with the official SDK's
    client as an assistant uses it (one session, each tool call one POST): ``search_book`` and ``ask_book``."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timings: dict[str, list[float]] = {"search_book": [], "ask_book": []}
    errors = 0

    async def run() -> None:
        nonlocal errors
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
            async with Client(transport, mode="legacy") as client:
                for question, book in questions:
                    for name, arguments in (("search_book", {"query": question, "book": book}),
                                            ("ask_book", {"question": question, "book": book})):
                        started = time.perf_counter()
                        result = await client.call_tool(name, arguments)
                        timings[name].append((time.perf_counter() - started) * 1000)
                        errors += bool(result.is_error)

    anyio.run(run)
    return {**{name: summary(values) for name, values in timings.items()}, "errors": errors}


def load(server: Gunicorn | list[Gunicorn], questions, *, clients: int, seconds: float) -> dict:
    """``clients`` concurrent clients asking distinct questions back to back for ``seconds``; given several servers
    (web nodes), the requests go to each in turn, as a round-robin balancer sends them."""
    servers = server if isinstance(server, list) else [server]
    latencies: list[float] = []
    errors = {"count": 0, "kinds": {}}
    cursor = {"next": 0}

    async def client_loop(client: httpx.AsyncClient, stop_at: float) -> None:
        while time.monotonic() < stop_at:
            question, book = questions[cursor["next"] % len(questions)]
            url = servers[cursor["next"] % len(servers)].url
            cursor["next"] += 1
            started = time.perf_counter()
            try:
                response = await client.post(f"{url}/api/v1/ask", json={"question": question, "book": book})
                ok = response.status_code == 200
                kind = str(response.status_code)
            except httpx.HTTPError as exc:
                ok, kind = False, type(exc).__name__
            if ok:
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                errors["count"] += 1
                errors["kinds"][kind] = errors["kinds"].get(kind, 0) + 1

    async def run() -> float:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients,
                              keepalive_expiry=KEEPALIVE_EXPIRY)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            started = time.monotonic()
            await asyncio.gather(*(client_loop(client, started + seconds) for _ in range(clients)))
            return time.monotonic() - started

    elapsed = asyncio.run(run())
    return {"clients": clients, "seconds": elapsed, "answers": len(latencies),
            "answers_per_s": len(latencies) / elapsed, **{k: v for k, v in summary(latencies).items() if k != "n"},
            "errors": errors["count"], "error_kinds": json.dumps(errors["kinds"]) if errors["kinds"] else "",
            "nodes": len(servers), "worker_rss_mb": [mb for each in servers for mb in each.worker_rss_mb()]}
