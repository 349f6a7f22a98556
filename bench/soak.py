"""Load with an ingest beside it: 8 clients mixing asks, streams and feedback over real gunicorn (2 workers, as
`make run` starts it) while `manage.py ingest` indexes a small book in a process of its own.

``soak`` is both the test suite's liveness drill (tests/test_soak.py: every request answered, the ingest done,
no worker replaced, worker memory not growing) and ``make bench``'s measurement, which adds the answer p95 under
that load against the idle p95. The suite asserts outcomes only; how fast is the benchmark's.

How the measured load is defined. Eight clients asking back to back would keep 2 workers' queues full by
construction (each answer would wait behind ~3 others, whatever the code does), so the soak is an open workload
at a share of capacity instead:
- capacity: two clients (one per worker) run the mix back to back; the answers a second they get is what this
  machine serves, Postgres, the clients and anything else running on it included.
- idle: one client runs the same mix back to back; its answer p95 is the reference.
- soak: 8 clients, each waiting a think time (uniform in 0.5–1.5 × its mean) after each request, the mean chosen
  so that together they offer ``LOAD_SHARE`` of the measured capacity. Unmeasured (the suite), the think time is
  ``THINK_SECONDS`` and capacity and idle are not run.
- the p95s compared are of answers (asks and streams, timed by the client to the last byte); feedback is a few
  milliseconds and is checked for errors only.
- RSS is each worker's VmRSS after the warm-up (every question asked once, every path run, in rounds until every
  worker has served them, so the caches it fills are full) and at the end: caches don't count as growth.
- the ingest (6 new pages and the book's calibration, at the CPU niceness `make run` gives its task worker,
  ``BOOKCHAT_TASK_NICENESS``) starts ``INGEST_AFTER_SECONDS`` into the soak; the soak runs until both its
  seconds are up and the ingest has ended, so the ingest always runs under load. Without that niceness the
  embedder's spinning OpenMP threads took both cores for as long as it ran, and the soak p95 was ~4× the idle one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import machine
from bench.latency import KEEPALIVE_EXPIRY, Gunicorn, database_environment
from bench.stats import pct
from bookchat.base.conf import setting

CLIENTS = 8
INGEST_AFTER_SECONDS = 2.0
IDLE_ANSWERS = 80
CAPACITY_ANSWERS = 60
# Of the measured capacity: on a quiet machine at 0.5 the minutes without an ingest already showed an answer p95
# of ~1.6x idle (queueing alone), and the ingest's seconds up to ~2.1x; at 0.4 a busy machine reached 1.9-2.5x.
LOAD_SHARE = 0.33
THINK_SECONDS = 1.0  # unmeasured: each client's mean think time
# Warm-up rounds at most, until no worker grows by more than WARM_SETTLED in one (see warm_every_worker).
WARM_ROUNDS = 4
WARM_SETTLED = 0.03
# One client's requests, in turn: feedback is on the answer just received.
MIX = ("ask", "feedback", "stream", "ask", "stream")
INGEST_PAGES = 6


class Load:
    """Clients running ``MIX`` against one server; records answer latencies and every error."""

    def __init__(self, url: str, questions: list[str], book: str):
        self.url, self.questions, self.book = url, itertools.cycle(questions), book
        self.answers_ms: list[float] = []
        self.feedback_ms: list[float] = []
        self.errors: list[str] = []

    async def client(self, http: httpx.AsyncClient, *, stop, think_seconds: float = 0.0) -> None:
        last = None
        for kind in itertools.cycle(MIX):
            if stop():
                return
            started = time.perf_counter()
            try:
                if kind == "feedback":
                    if last is not None:
                        await self.feedback(http, last)
                        self.feedback_ms.append((time.perf_counter() - started) * 1000)
                else:
                    last = await (self.ask(http) if kind == "ask" else self.stream(http))
                    self.answers_ms.append((time.perf_counter() - started) * 1000)
            except (httpx.HTTPError, ValueError) as exc:
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
            if think_seconds:
                await asyncio.sleep(random.uniform(0.5, 1.5) * think_seconds)

    async def ask(self, http: httpx.AsyncClient) -> dict:
        response = await http.post("/api/v1/ask", json={"question": next(self.questions), "book": self.book})
        if response.status_code != 200:
            raise ValueError(f"{response.status_code} {response.text[:200]}")
        return response.json()

    async def stream(self, http: httpx.AsyncClient) -> dict:
        body = {"question": next(self.questions), "book": self.book}
        async with http.stream("POST", "/api/v1/ask/stream", json=body) as response:
            if response.status_code != 200:
                raise ValueError(str(response.status_code))
            text = "".join([chunk async for chunk in response.aiter_text()])
        final = text.split("event: final\ndata: ", 1)
        if len(final) != 2:
            raise ValueError(f"no final event: {text[-200:]}")
        return json.loads(final[1].split("\n", 1)[0])

    async def feedback(self, http: httpx.AsyncClient, answer: dict) -> None:
        response = await http.post(f"/api/v1/answers/{answer['answer_id']}/feedback",
                                   json={"rating": random.choice(["up", "down"]), "session_id": answer["session_id"]})
        if response.status_code not in (200, 201):
            raise ValueError(f"{response.status_code} {response.text[:200]}")


def run_clients(load: Load, *, clients: int, stop, think_seconds: float = 0.0, during=None,
                keep_alive: bool = True) -> None:
    async def main() -> None:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients if keep_alive else 0,
                              keepalive_expiry=KEEPALIVE_EXPIRY)
        async with httpx.AsyncClient(base_url=load.url, timeout=60, limits=limits) as http:
            tasks = [asyncio.create_task(load.client(http, stop=stop, think_seconds=think_seconds))]
            for _ in range(clients - 1):  # staggered, so the clients don't think in step
                await asyncio.sleep(think_seconds / clients)
                tasks.append(asyncio.create_task(load.client(http, stop=stop, think_seconds=think_seconds)))
            while not all(task.done() for task in tasks):
                if during:
                    during()
                await asyncio.sleep(0.2)
            for task in tasks:
                task.result()

    asyncio.run(main())


def worker_rss_mb(server: Gunicorn) -> dict[int, float]:
    return {pid: machine.rss_mb(pid) for pid in machine.children(server.proc.pid)}


def warm_every_worker(server: Gunicorn, questions: list[str], book: str) -> list[str]:
    """Every question once over every path of the mix, in rounds, until each worker has served them: a gthread
    worker takes whichever connection it wins, so one worker may take a whole round while the other never
    loads the embedder. A fresh connection per request lets both compete; a round after which no worker grew
    by more than WARM_SETTLED found them all warm. Returns the errors seen."""
    errors: list[str] = []
    for _ in range(WARM_ROUNDS):
        before = worker_rss_mb(server)
        warm = Load(server.url, questions, book)
        run_clients(warm, clients=2, stop=lambda warm=warm: len(warm.answers_ms) >= len(questions), keep_alive=False)
        errors += warm.errors
        after = worker_rss_mb(server)
        if all(after[pid] / before[pid] - 1 <= WARM_SETTLED for pid in before if pid in after):
            break
    return errors


def write_small_book(root: Path) -> None:
    section = " ".join(f"Sentence {n} of this section is about tides, ships and harbour lights." for n in range(8))
    for n in range(INGEST_PAGES):
        parts = "".join(f"## Part {k}\n\n{section} Chapter {n} part {k}.\n\n" for k in range(2))
        (root / f"{n:02d}-chapter.md").write_text(f"# Chapter {n}\n\n{parts}", encoding="utf-8")


def start_ingest(root: Path, slug: str) -> subprocess.Popen:
    repo, niceness = Path(__file__).resolve().parent.parent, setting("TASK_NICENESS")
    return subprocess.Popen([sys.executable, "manage.py", "ingest", str(root), "--book", slug, "--json"], cwd=repo,
                            env=database_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.nice(niceness))


def measured_soak(data: Path, book: str, *, seconds: float) -> dict:
    """The measured soak over ``book``'s answerable questions (its ``questions.jsonl`` in ``data``): ``make bench``
    and ``manage.py bench --soak``. The book must be indexed."""
    from chat.quality.evaluation import load_questions
    from ingestion.models import Book

    asked = [q.question for q in load_questions(data / book / "questions.jsonl") if q.kind == "answerable"][:32]
    with tempfile.TemporaryDirectory() as root:
        try:
            return soak(asked, book, ingest_root=Path(root), ingest_slug="bench-soak", seconds=seconds, measured=True)
        finally:
            Book.objects.filter(slug="bench-soak").delete()


def soak(questions: list[str], book: str, *, ingest_root: Path, ingest_slug: str, seconds: float,
         measured: bool) -> dict:
    """Warm up, (measured: capacity and idle,) then the soak with the ingest; the figures and every error.
    The caller deletes the ingested book."""
    write_small_book(ingest_root)
    figures: dict = {"clients": CLIENTS, "seconds": seconds, "errors": []}
    with Gunicorn(workers=2) as server:
        figures["errors"] += warm_every_worker(server, questions, book)
        think_s = THINK_SECONDS
        if measured:
            capacity = Load(server.url, questions, book)
            capacity_started = time.monotonic()
            run_clients(capacity, clients=2, stop=lambda: len(capacity.answers_ms) >= CAPACITY_ANSWERS)
            answers_per_s = len(capacity.answers_ms) / (time.monotonic() - capacity_started)
            idle = Load(server.url, questions, book)
            run_clients(idle, clients=1, stop=lambda: len(idle.answers_ms) >= IDLE_ANSWERS)
            figures["errors"] += capacity.errors + idle.errors
            service_s = pct(idle.answers_ms, 50) / 1000
            # A client's turn of the mix: its answers, a vote, and a think time after each request.
            answers_per_turn = sum(kind != "feedback" for kind in MIX)
            turn_s = CLIENTS * answers_per_turn / (LOAD_SHARE * answers_per_s)
            think_s = max(0.0, (turn_s - answers_per_turn * service_s) / len(MIX))
            figures |= {"capacity_answers_per_s": answers_per_s, "idle_p95": pct(idle.answers_ms, 95),
                        "idle_answers": len(idle.answers_ms)}
        rss_start = worker_rss_mb(server)

        load = Load(server.url, questions, book)
        started = time.monotonic()
        ingest: dict = {}

        def start_and_watch_ingest() -> None:
            elapsed = time.monotonic() - started
            if "proc" not in ingest and elapsed >= INGEST_AFTER_SECONDS:
                ingest["proc"], ingest["started"] = start_ingest(ingest_root, ingest_slug), elapsed
            if "proc" in ingest and "ended" not in ingest and ingest["proc"].poll() is not None:
                ingest["ended"] = elapsed

        run_clients(load, clients=CLIENTS, think_seconds=think_s, during=start_and_watch_ingest,
                    stop=lambda: time.monotonic() - started >= seconds and "ended" in ingest)
        elapsed = time.monotonic() - started
        out, err = ingest["proc"].communicate(timeout=120)
        rss_end = worker_rss_mb(server)
    figures["errors"] += load.errors
    figures |= {
        "think_seconds": think_s, "soak_seconds": elapsed, "answers": len(load.answers_ms),
        "votes": len(load.feedback_ms), "soak_p95": pct(load.answers_ms, 95),
        "ingest": {"returncode": ingest["proc"].returncode, "started": ingest["started"], "ended": ingest["ended"],
                   "report": json.loads(out) if ingest["proc"].returncode == 0 else None, "stderr": err[-2000:]},
        "rss_start_mb": rss_start, "rss_end_mb": rss_end,
        "rss_growth": max((rss_end[p] / rss_start[p] - 1 for p in rss_start if p in rss_end), default=None),
    }
    if measured:
        figures["p95_ratio"] = figures["soak_p95"] / figures["idle_p95"]
    return figures


def describe(f: dict) -> str:
    measured = (f"capacity {f['capacity_answers_per_s']:.1f} answers/s, idle p95 {f['idle_p95']:.0f} ms, "
                if "idle_p95" in f else "")
    return (f"soak: {measured}think {f['think_seconds']:.2f} s; {f['answers']} answers and {f['votes']} votes in "
            f"{f['soak_seconds']:.0f} s, p95 {f['soak_p95']:.0f} ms; ingest {f['ingest']['started']:.0f}–"
            f"{f['ingest']['ended']:.0f} s; worker RSS "
            + ", ".join(f"{f['rss_start_mb'][p]:.0f}→{f['rss_end_mb'].get(p, 0):.0f} MB" for p in f["rss_start_mb"]))

