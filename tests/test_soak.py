"""Load: an 8-client, 60-second soak over real gunicorn (2 workers, as `make run` starts it) mixing asks,
streams and feedback while `manage.py ingest` indexes a small book in the background. It must show no
errors, an answer p95 within 2× the idle p95, and worker RSS growth of at most 10 %.

How the load is defined. Eight clients asking back to back would keep 2 workers' queues full by
construction (each answer would wait behind ~3 others, whatever the code does), so the soak is an open
workload at about half of capacity instead:
- capacity: two clients (one per worker) run the mix back to back; the answers a second they get is what
  this machine serves, Postgres, the clients and anything else running on it included.
- idle: one client runs the same mix back to back; its answer p95 is the reference.
- soak: 8 clients, each waiting a think time (uniform in 0.5–1.5 × its mean) after each request, the mean
  chosen so that together they offer a third of the measured capacity (see ``LOAD_SHARE``).
- the p95s compared are of answers (asks and streams, timed by the client to the last byte); feedback is
  a few milliseconds and is checked for errors only.
- RSS is each worker's VmRSS after the warm-up (every question asked once, every path run, in rounds until
  every worker has served them, so the caches it fills are full) and at the end: caches don't count as
  growth, anything that grows per request does.
- the ingest (6 new pages and the book's calibration, in a process of its own at the CPU niceness `make
  run` gives its task worker, `BOOKCHAT_TASK_NICENESS`) starts 5 s into the soak and must succeed. Without
  that niceness the embedder's spinning OpenMP threads took both cores for as long as it ran, and the soak
  p95 was ~4× the idle one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench import machine
from bench.latency import Gunicorn
from bench.stats import pct
from bookchat.conf import setting
from ingestion.models import Book, Chunk
from tests.conftest import REPO, committed
from tests.support.served import forget_answers_since

pytestmark = pytest.mark.slow

BOOK = "bookchat-manual"
CLIENTS = 8
SOAK_SECONDS = 60.0
INGEST_AFTER_SECONDS = 5.0
IDLE_ANSWERS = 80
CAPACITY_ANSWERS = 60
# Of the measured capacity: about half, leaving room for the ingest. On a quiet machine at 0.5 the minutes
# without an ingest already showed an answer p95 of ~1.6x idle (queueing alone), and the ingest's seconds up
# to ~2.1x; at 0.4 a CI run on a busy machine still reached 1.9-2.5x. A third keeps the assertion about the
# code (leaks, lock-ups, an ingest starving answers) rather than about the queue.
LOAD_SHARE = 0.33
# Warm-up rounds at most, until no worker grows by more than WARM_SETTLED in one (see warm_every_worker).
WARM_ROUNDS = 4
WARM_SETTLED = 0.03
# One client's requests, in turn: feedback is on the answer just received.
MIX = ("ask", "feedback", "stream", "ask", "stream")


class Load:
    """Clients running ``MIX`` against one server; records answer latencies and every error."""

    def __init__(self, url: str, questions: list[str]):
        self.url, self.questions = url, itertools.cycle(questions)
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
            except (httpx.HTTPError, AssertionError) as exc:
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
            if think_seconds:
                await asyncio.sleep(random.uniform(0.5, 1.5) * think_seconds)

    async def ask(self, http: httpx.AsyncClient) -> dict:
        response = await http.post("/api/v1/ask", json={"question": next(self.questions), "book": BOOK})
        assert response.status_code == 200, f"{response.status_code} {response.text[:200]}"
        return response.json()

    async def stream(self, http: httpx.AsyncClient) -> dict:
        body = {"question": next(self.questions), "book": BOOK}
        async with http.stream("POST", "/api/v1/ask/stream", json=body) as response:
            assert response.status_code == 200, response.status_code
            text = "".join([chunk async for chunk in response.aiter_text()])
        final = text.split("event: final\ndata: ", 1)
        assert len(final) == 2, f"no final event: {text[-200:]}"
        return json.loads(final[1].split("\n", 1)[0])

    async def feedback(self, http: httpx.AsyncClient, answer: dict) -> None:
        response = await http.post(f"/api/v1/answers/{answer['answer_id']}/feedback",
                                   json={"rating": random.choice(["up", "down"]), "session_id": answer["session_id"]})
        assert response.status_code in (200, 201), f"{response.status_code} {response.text[:200]}"


def run_clients(load: Load, *, clients: int, stop, think_seconds: float = 0.0, during=None,
                keep_alive: bool = True) -> None:
    async def main() -> None:
        # Idle connections are dropped after 1 s, before gunicorn's 2 s keep-alive closes them: a request sent on a
        # connection the server is closing at that moment fails with a ReadError that says nothing about bookchat.
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients if keep_alive else 0,
                              keepalive_expiry=1.0)
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


def warm_every_worker(server: Gunicorn, questions: list[str]) -> None:
    """Every question once over every path of the mix, in rounds, until each worker has served them: a gthread
    worker takes whichever connection it wins, so one worker may take a whole round while the other never
    loads the embedder. A fresh connection per request lets both compete; a round after which no worker grew
    by more than WARM_SETTLED found them all warm."""
    for _ in range(WARM_ROUNDS):
        before = worker_rss_mb(server)
        warm = Load(server.url, questions)
        run_clients(warm, clients=2, stop=lambda warm=warm: len(warm.answers_ms) >= len(questions), keep_alive=False)
        assert not warm.errors, warm.errors[:5]
        after = worker_rss_mb(server)
        if all(after[pid] / before[pid] - 1 <= WARM_SETTLED for pid in before if pid in after):
            return


def soak_questions() -> list[str]:
    sections = committed(lambda: list(Chunk.objects.filter(book__slug=BOOK)
                                      .values_list("heading_path", flat=True).distinct()))
    topics = sorted({path.split(" > ")[-1] for path in sections})
    return [f"What does the book say about {topic.lower()}?" for topic in topics][:32]


def small_book(root) -> None:
    section = " ".join(f"Sentence {n} of this section is about tides, ships and harbour lights." for n in range(8))
    for n in range(6):
        parts = "".join(f"## Part {k}\n\n{section} Chapter {n} part {k}.\n\n" for k in range(2))
        (root / f"{n:02d}-chapter.md").write_text(f"# Chapter {n}\n\n{parts}", encoding="utf-8")


def start_ingest(root, slug: str) -> subprocess.Popen:
    db = connection.settings_dict
    env = os.environ | {"DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
                        "BOOKCHAT_SECRET_KEY": settings.SECRET_KEY, "BOOKCHAT_DATA_DIR": str(settings.DATA_DIR)}
    return subprocess.Popen([sys.executable, "manage.py", "ingest", str(root), "--book", slug, "--json"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.nice(setting("TASK_NICENESS")))


def worker_rss_mb(server: Gunicorn) -> dict[int, float]:
    return {pid: machine.rss_mb(pid) for pid in machine.children(server.proc.pid)}


def test_eight_clients_for_a_minute_with_an_ingest_running(manual_book, tmp_path, django_db_blocker):
    since = timezone.now()
    slug = f"soak-{uuid.uuid4().hex[:8]}"
    small_book(tmp_path)
    with django_db_blocker.unblock():
        questions = soak_questions()
    try:
        with Gunicorn(workers=2) as server:
            warm_every_worker(server, questions)
            capacity = Load(server.url, questions)
            capacity_started = time.monotonic()
            run_clients(capacity, clients=2, stop=lambda: len(capacity.answers_ms) >= CAPACITY_ANSWERS)
            answers_per_s = len(capacity.answers_ms) / (time.monotonic() - capacity_started)
            assert not capacity.errors, capacity.errors[:5]
            rss_start = worker_rss_mb(server)

            idle = Load(server.url, questions)
            run_clients(idle, clients=1, stop=lambda: len(idle.answers_ms) >= IDLE_ANSWERS)
            assert not idle.errors, idle.errors[:5]
            service_s = pct(idle.answers_ms, 50) / 1000
            # A client's turn of the mix: its answers, a vote, and a think time after each request.
            answers_per_turn = sum(kind != "feedback" for kind in MIX)
            turn_s = CLIENTS * answers_per_turn / (LOAD_SHARE * answers_per_s)
            think_s = max(0.0, (turn_s - answers_per_turn * service_s) / len(MIX))

            soak = Load(server.url, questions)
            started = time.monotonic()
            ingest: dict = {}

            def start_and_watch_ingest() -> None:
                elapsed = time.monotonic() - started
                if "proc" not in ingest and elapsed >= INGEST_AFTER_SECONDS:
                    ingest["proc"], ingest["started"] = start_ingest(tmp_path, slug), elapsed
                if "proc" in ingest and "ended" not in ingest and ingest["proc"].poll() is not None:
                    ingest["ended"] = elapsed

            run_clients(soak, clients=CLIENTS, think_seconds=think_s, during=start_and_watch_ingest,
                        stop=lambda: time.monotonic() - started >= SOAK_SECONDS)
            out, err = ingest["proc"].communicate(timeout=120)
            rss_end = worker_rss_mb(server)
    finally:
        with django_db_blocker.unblock():
            forget_answers_since(since)
            committed(lambda: Book.objects.filter(slug=slug).delete())

    idle_p95, soak_p95 = pct(idle.answers_ms, 95), pct(soak.answers_ms, 95)
    growth = {pid: rss_end[pid] / rss_start[pid] - 1 for pid in rss_start}
    print(f"\nsoak: capacity {answers_per_s:.1f} answers/s, service time {service_s * 1000:.0f} ms, think "
          f"{think_s:.2f} s; idle p95 {idle_p95:.0f} ms "
          f"({len(idle.answers_ms)} answers), soak p95 {soak_p95:.0f} ms ({len(soak.answers_ms)} answers, "
          f"{len(soak.feedback_ms)} votes, {len(soak.answers_ms) / SOAK_SECONDS:.1f}/s); ingest "
          f"{ingest['started']:.0f}–{ingest.get('ended', SOAK_SECONDS):.0f} s; worker RSS "
          + ", ".join(f"{rss_start[p]:.0f}→{rss_end[p]:.0f} MB" for p in rss_start))

    assert not soak.errors, f"{len(soak.errors)} errors: {soak.errors[:5]}"
    assert ingest["proc"].returncode == 0, err[-2000:]
    assert json.loads(out)["files_indexed"] == 6
    assert soak.feedback_ms and len(soak.answers_ms) >= 0.5 * LOAD_SHARE * answers_per_s * SOAK_SECONDS
    assert soak_p95 <= 2 * idle_p95, f"soak p95 {soak_p95:.0f} ms > 2 × idle p95 {idle_p95:.0f} ms"
    assert set(rss_end) == set(rss_start), "a worker was replaced"
    assert max(growth.values()) <= 0.10, f"worker RSS grew {max(growth.values()):.1%}"
