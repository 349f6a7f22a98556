"""Streams held open at once: N readers start ``/api/v1/ask/stream`` together against one server started as
`make run` starts it, with an LLM that writes ``TOKEN_SECONDS`` a token (the tests' OpenAI-compatible server),
while one client asks ``/api/v1/health`` back to back. Reported per N: streams that ended with a ``final``
event (and how many of those the LLM wrote, rather than the extractive fallback past the generation budget),
the most streams open at the same moment (from headers to last byte), time to the first token, and health's
latency meanwhile, and how many health answers came back before half of the streams had ended (with workers
that serve one request at a time, health waits in the queue behind them and gets none).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time

import httpx

from bench.latency import KEEP_ALIVE
from bench.stats import pct

TOKEN_SECONDS = 0.1
STREAM_TIMEOUT = 60.0


async def _stream(http: httpx.AsyncClient, body: dict) -> dict:
    started = time.monotonic()
    out = {"opened": None, "first_token": None, "closed": None, "final": None, "error": None}
    try:
        async with http.stream("POST", "/api/v1/ask/stream", json=body) as response:
            out["opened"] = time.monotonic() - started
            if response.status_code != 200:
                out["error"] = str(response.status_code)
                await response.aread()
                return out
            event = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[len("event: "):]
                    if event == "token" and out["first_token"] is None:
                        out["first_token"] = time.monotonic() - started
                elif line.startswith("data: ") and event in ("final", "error"):
                    out[event] = json.loads(line[len("data: "):])
    except httpx.HTTPError as exc:
        out["error"] = type(exc).__name__
    finally:
        out["closed"] = time.monotonic() - started
    return out


def held_at_once(results: list[dict]) -> int:
    """The most streams open at one moment: between their headers arriving and their last byte."""
    edges = sorted(itertools.chain.from_iterable(((r["opened"], 1), (r["closed"], -1)) for r in results
                                                 if r["opened"] is not None))
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def held_streams(url: str, questions: list[tuple[str, str]], *, streams: int) -> dict:
    """Start ``streams`` streams at once (each on a connection of its own) and measure them and health."""
    health_ms: list[float] = []
    health_answered: list[float] = []  # when each health answer arrived, monotonic
    health_errors: list[str] = []

    async def poll_health(done: asyncio.Event) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=10, limits=KEEP_ALIVE) as http:
            while not done.is_set():
                started = time.perf_counter()
                try:
                    response = await http.get("/api/v1/health")
                    if response.status_code != 200:
                        health_errors.append(str(response.status_code))
                    else:
                        health_answered.append(time.monotonic())
                except httpx.HTTPError as exc:
                    health_errors.append(type(exc).__name__)
                health_ms.append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(0.1)

    async def run() -> tuple[list[dict], float]:
        limits = httpx.Limits(max_connections=streams, max_keepalive_connections=0)
        bodies = [{"question": q, "book": b} for q, b in itertools.islice(itertools.cycle(questions), streams)]
        done = asyncio.Event()
        health = asyncio.create_task(poll_health(done))
        await asyncio.sleep(0.3)  # health's idle latency first
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=url, timeout=STREAM_TIMEOUT, limits=limits) as http:
            results = await asyncio.wait_for(asyncio.gather(*(_stream(http, body) for body in bodies)),
                                             timeout=STREAM_TIMEOUT + 10)
        elapsed = time.monotonic() - started
        done.set()
        await asyncio.wait_for(health, timeout=15)
        return results, elapsed, started

    results, elapsed, started = asyncio.run(run())
    closed = sorted(r["closed"] for r in results)
    half_ended = started + closed[len(closed) // 2]
    finals = [r["final"] for r in results if r["final"] is not None]
    first_token_ms = [r["first_token"] * 1000 for r in results if r["first_token"] is not None]
    errors = [r["error"] if isinstance(r["error"], str) else r["error"].get("error") for r in results if r["error"]]
    return {"streams": streams, "completed": len(finals),
            "by_llm": sum(f["generator"] != "extractive" for f in finals), "held_at_once": held_at_once(results),
            "seconds": elapsed, "first_token_p50": pct(first_token_ms, 50), "first_token_p95": pct(first_token_ms, 95),
            "health_p50": pct(health_ms, 50), "health_max": max(health_ms, default=None), "health_n": len(health_ms),
            "health_before_half_ended": sum(started <= t < half_ended for t in health_answered),
            "errors": sorted(errors) + health_errors}
