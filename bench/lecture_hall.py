"""A lecture hall asking at once (issue 73): 300 students behind one campus address and one publishable key, each
in a conversation of their own, while the book's CI publishes one edited page.

The load, over ``SECONDS`` against a running web server and task worker:
- students arrive in ``BURSTS`` (half of them within the first minute), each a browser with the widget: the
  publishable key in the query string and an allowed ``Origin``, from 127.0.0.1. A student asks ``QUESTIONS_EACH``
  held-back questions (``bench.lecture_book``: written for this drill on the book's five pages; no fitting reads
  them), thinking ``THINK_SECONDS``
  between them; before each, they type: ``GET /api/v1/search`` with three prefixes of the question (and the
  conversation's ``session_id`` once there is one). The first question carries no ``session_id``, the later ones
  the one the answer returned. Every third student asks through ``/api/v1/ask/stream``, as the widget does.
- one client asks ``ABUSER_PER_MINUTE`` questions a minute in one conversation, from the students' address: it alone
  should be throttled.
- one client from another address (127.0.0.2) opens a new conversation with every question, as fast as
  ``NEWCOMER_CONNECTIONS`` connections let it, until its address ceiling refuses it ``NEWCOMER_REFUSALS`` times.
- ``PUBLISH_AT`` seconds in, one page of the book is edited and published through the publishing API: the
  seconds from the POST until its status says ``done``, and until a search finds the new sentence ("live"; the
  searching reader is at an address of its own, 127.0.0.3, so that the students' limits never delay it).

``hall`` runs it and returns the figures: answers a second, p50/p95/p99 of each kind of request (search, ask, a
stream's first byte and its whole), the status of every request by client, the publish's seconds, and the CPU
seconds of the server's process trees (from /proc) per answer. ``tests/test_lecture_hall.py`` asserts on them (a
drill); ``manage.py bench --lecture-hall`` and ``make bench`` measure them (``measure``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import lecture_book, machine
from bench.stats import fmt, summary

STUDENTS = 300
SECONDS = 300.0
# (seconds into the drill, students arriving), each burst's arrivals spread over BURST_SPREAD seconds.
BURSTS = ((0.0, 90), (25.0, 60), (80.0, 45), (140.0, 45), (195.0, 30), (235.0, 30))
BURST_SPREAD = 10.0
QUESTIONS_EACH = 2
THINK_SECONDS = (15.0, 45.0)
TYPING_SECONDS = 0.4  # between a student's searches as they type
STREAMED_EVERY = 3  # every third student asks through the stream
ABUSER_PER_MINUTE = 100
ABUSER_AT, ABUSER_SECONDS = 20.0, 120.0
NEWCOMER_AT, NEWCOMER_CONNECTIONS, NEWCOMER_REFUSALS, NEWCOMER_SECONDS = 150.0, 8, 20, 120.0
PUBLISH_AT = 45.0
POLL_SECONDS = 0.2
TIMEOUT = 60.0

STUDENTS_ADDRESS, NEWCOMER_ADDRESS, READER_ADDRESS = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def typed(question: str) -> list[str]:
    """What a student has typed when each of their three searches goes: a third, two thirds, all but the mark."""
    text = question.rstrip("?")
    return [text[: len(text) * n // 3].strip() for n in (1, 2, 3)]


def arrivals(rng: random.Random) -> list[float]:
    """When each student opens the chapter (seconds into the drill)."""
    return sorted(start + rng.uniform(0, BURST_SPREAD) for start, count in BURSTS for _ in range(count))


# -- the record ----------------------------------------------------------------------------------------------
@dataclass
class Tally:
    """Every request's outcome, by client (``students``, ``abuser``, ``newcomer``): a 429 is counted as throttled,
    any other answer but a 200 (and a stream without its final event) as an error."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in
                                                                 ("search", "ask", "stream_first_byte", "stream")})
    statuses: dict[str, Counter] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    answers: int = 0
    no_retry_after: int = 0

    def count(self, who: str, kind: str, response: httpx.Response | None, detail: str = "") -> None:
        status = response.status_code if response is not None else "failed"
        self.statuses.setdefault(who, Counter())[f"{kind} {status}"] += 1
        if status == 429 and not response.headers.get("Retry-After", "").isdigit():
            self.no_retry_after += 1
        answered = status == 200 and not detail
        if answered and kind in ("ask", "stream"):
            self.answers += 1
        elif not answered and status != 429:  # a refusal, a 5xx, a failed connection or stream: an error
            self.errors.append(f"{who} {kind}: {status} {detail}"[:300])

    def throttled(self, who: str, *, searches: bool = False) -> int:
        """The client's questions (or searches) refused with 429."""
        return sum(n for outcome, n in self.statuses.get(who, Counter()).items()
                   if outcome.endswith(" 429") and outcome.startswith("search") == searches)


# -- the clients -------------------------------------------------------------------------------------------
@dataclass
class Hall:
    url: str
    book: str
    widget_key: str
    questions: list[str]
    tally: Tally = field(default_factory=Tally)

    def client(self, address: str, connections: int) -> httpx.AsyncClient:
        """The students' connections. An idle one is dropped after 1 s, before gunicorn's keep-alive (2 s) closes it:
        httpx would otherwise send a request down a connection the server is closing, and fail it (``ReadError``)
        where a browser sends it again on a new one."""
        transport = httpx.AsyncHTTPTransport(local_address=address, limits=httpx.Limits(
            max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=1.0))
        return httpx.AsyncClient(base_url=self.url, transport=transport, timeout=TIMEOUT,
                                 params={"key": self.widget_key}, headers={"Origin": lecture_book.ORIGIN})

    async def search(self, http: httpx.AsyncClient, text: str, session_id: str | None, who: str) -> None:
        params = {"q": text, "book": self.book} | ({"session_id": session_id} if session_id else {})
        started = time.perf_counter()
        response = await self._request(http.get("/api/v1/search", params=params), who, "search")
        if response is not None:
            self.tally.ms["search"].append((time.perf_counter() - started) * 1000)
            self.tally.count(who, "search", response, "" if response.status_code == 200 else response.text[:200])

    async def ask(self, http: httpx.AsyncClient, question: str, session_id: str | None, who: str) -> dict | None:
        body = {"question": question, "book": self.book} | ({"session_id": session_id} if session_id else {})
        started = time.perf_counter()
        response = await self._request(http.post("/api/v1/ask", json=body), who, "ask")
        if response is None:
            return None
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            self.tally.count(who, "ask", response, response.text[:200])
            return None
        self.tally.ms["ask"].append(elapsed)
        self.tally.count(who, "ask", response)
        return response.json()

    async def stream(self, http: httpx.AsyncClient, question: str, session_id: str | None, who: str) -> dict | None:
        body = {"question": question, "book": self.book} | ({"session_id": session_id} if session_id else {})
        started = time.perf_counter()
        first, final, error, event = None, None, "", None
        try:
            async with http.stream("POST", "/api/v1/ask/stream", json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    self.tally.count(who, "stream", response, response.text[:200])
                    return None
                async for line in response.aiter_lines():
                    first = first or time.perf_counter()
                    if line.startswith("event: "):
                        event = line[len("event: "):]
                    elif line.startswith("data: ") and event in ("final", "error"):
                        final, error = (json.loads(line[6:]), "") if event == "final" else (None, line[6:200])
        except httpx.HTTPError as exc:
            self.tally.count(who, "stream", None, f"{type(exc).__name__}: {exc}")
            return None
        if final is None:
            error = error or "the stream ended without its final event"
        else:
            self.tally.ms["stream_first_byte"].append((first - started) * 1000)
            self.tally.ms["stream"].append((time.perf_counter() - started) * 1000)
        self.tally.count(who, "stream", response, error)
        return final

    async def _request(self, call, who: str, kind: str) -> httpx.Response | None:
        try:
            return await call
        except httpx.HTTPError as exc:
            self.tally.count(who, kind, None, f"{type(exc).__name__}: {exc}")
            return None

    async def student(self, http: httpx.AsyncClient, number: int, at: float, started: float,
                      rng: random.Random) -> None:
        await asyncio.sleep(max(0.0, started + at - time.monotonic()))
        session_id = None
        for turn in range(QUESTIONS_EACH):
            question = self.questions[(number * QUESTIONS_EACH + turn) % len(self.questions)]
            for text in typed(question):
                await self.search(http, text, session_id, "students")
                await asyncio.sleep(TYPING_SECONDS)
            asking = self.stream if number % STREAMED_EVERY == 0 else self.ask
            answer = await asking(http, question, session_id, "students")
            session_id = str(answer["session_id"]) if answer and answer.get("session_id") else session_id
            if turn + 1 < QUESTIONS_EACH:
                await asyncio.sleep(rng.uniform(*THINK_SECONDS))

    async def abuser(self, http: httpx.AsyncClient, started: float) -> None:
        """``ABUSER_PER_MINUTE`` questions a minute, whatever it is told, in one conversation."""
        await asyncio.sleep(max(0.0, started + ABUSER_AT - time.monotonic()))
        session_id, every = None, 60.0 / ABUSER_PER_MINUTE
        ends = time.monotonic() + ABUSER_SECONDS
        for n in itertools.count():
            due = started + ABUSER_AT + n * every
            if due >= ends:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            answer = await self.ask(http, self.questions[n % len(self.questions)], session_id, "abuser")
            session_id = str(answer["session_id"]) if answer else session_id

    async def newcomer(self, http: httpx.AsyncClient, started: float) -> None:
        """A new conversation with every question, on ``NEWCOMER_CONNECTIONS`` connections at once, until the
        address ceiling has refused it ``NEWCOMER_REFUSALS`` times (or ``NEWCOMER_SECONDS`` have passed)."""
        await asyncio.sleep(max(0.0, started + NEWCOMER_AT - time.monotonic()))
        ends = time.monotonic() + NEWCOMER_SECONDS
        asked = itertools.count()

        async def connection() -> None:
            while self.tally.throttled("newcomer") < NEWCOMER_REFUSALS and time.monotonic() < ends:
                await self.ask(http, self.questions[next(asked) % len(self.questions)], None, "newcomer")

        await asyncio.gather(*(connection() for _ in range(NEWCOMER_CONNECTIONS)))


# -- the publish during the load ---------------------------------------------------------------------------
async def publish_edit(hall: Hall, http: httpx.AsyncClient, *, slug: str, site: Path, key: str,
                       started: float) -> dict:
    """``PUBLISH_AT`` seconds in: the edited page published; seconds from the POST to ``done`` and to live (a search
    by ``http``, a reader at an address of its own, finds the new sentence)."""
    await asyncio.sleep(max(0.0, started + PUBLISH_AT - time.monotonic()))
    lecture_book.edit_site(site)
    body = lecture_book.archive(site)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=hall.url, timeout=TIMEOUT) as publisher:
        posted = time.monotonic()
        response = await publisher.post(f"/api/v1/books/{slug}/sources", content=body,
                                        headers=headers | {"Content-Type": "application/gzip"})
        if response.status_code != 202:
            return {"status": "refused", "done_seconds": None, "live_seconds": None,
                    "error": f"{response.status_code} {response.text[:300]}"}
        while (status := (await publisher.get(response.json()["status_url"], headers=headers)).json())["status"] \
                not in ("done", "failed") and time.monotonic() - posted < 120:
            await asyncio.sleep(POLL_SECONDS)
        done = time.monotonic() - posted
        live = None
        while status["status"] == "done" and time.monotonic() - posted < 120:
            found = await http.get("/api/v1/search", params={"q": lecture_book.LIVE_QUERY, "book": hall.book})
            hall.tally.count("live check", "search", found)
            if found.status_code == 200 and "Quenneville" in found.text:
                live = time.monotonic() - posted
                break
            await asyncio.sleep(POLL_SECONDS)
    return {"status": status["status"], "done_seconds": round(done, 2),
            "live_seconds": None if live is None else round(live, 2), "error": status.get("error")}


# -- the drill -------------------------------------------------------------------------------------------------
def process_cpu_seconds(pids: list[int]) -> dict[int, float]:
    return {pid: machine.cpu_seconds(pid) for pid in pids}


def hall(url: str, *, book: str, widget_key: str, publishing_key: str, site: Path,
         server_pids: Callable[[], list[int]], seed: int = 73) -> dict:
    """The whole drill against the server at ``url`` (``book`` published from ``site`` with ``publishing_key``);
    ``server_pids``: the web server's and the task worker's processes now (their CPU is measured)."""
    hall_ = Hall(url, book, widget_key, lecture_book.held_back_questions())
    rng = random.Random(seed)
    cpu_before, load_before = process_cpu_seconds(server_pids()), os.getloadavg()[0]

    async def run() -> dict:
        started = time.monotonic()
        async with hall_.client(STUDENTS_ADDRESS, 200) as students, hall_.client(STUDENTS_ADDRESS, 1) as abuser, \
                hall_.client(NEWCOMER_ADDRESS, NEWCOMER_CONNECTIONS) as newcomer, \
                hall_.client(READER_ADDRESS, 1) as reader:
            tasks = [hall_.student(students, n, at, started, rng) for n, at in enumerate(arrivals(rng))]
            published = asyncio.create_task(publish_edit(hall_, reader, slug=book, site=site, key=publishing_key,
                                                         started=started))
            await asyncio.gather(*tasks, hall_.abuser(abuser, started), hall_.newcomer(newcomer, started))
            figures = await published
        return {"publish": figures, "seconds": time.monotonic() - started}

    outcome = asyncio.run(run())
    cpu_after = process_cpu_seconds(server_pids())
    cpu = sum(cpu_after[pid] - cpu_before.get(pid, 0.0) for pid in cpu_after)
    tally = hall_.tally
    return {"students": STUDENTS, "seconds": round(outcome["seconds"], 1), "answers": tally.answers,
            "answers_per_s": tally.answers / outcome["seconds"],
            "latency_ms": {kind: summary(values) for kind, values in tally.ms.items()},
            "throttled": {who: tally.throttled(who) for who in ("students", "abuser", "newcomer")},
            "throttled_searches": {who: tally.throttled(who, searches=True) for who in ("students", "live check")},
            "requests": {who: dict(counts) for who, counts in tally.statuses.items()},
            "publish": outcome["publish"], "cpu_seconds": round(cpu, 1),
            "cpu_per_answer_ms": cpu / tally.answers * 1000 if tally.answers else None,
            "no_retry_after": tally.no_retry_after, "load_before": load_before, "load_after": os.getloadavg()[0],
            "errors": tally.errors}


def describe(f: dict) -> str:
    lat, publish = f["latency_ms"], f["publish"]

    def p(kind: str) -> str:
        s = lat[kind]
        return "—" if not s["n"] else f"{s['p50']:.0f}/{s['p95']:.0f}/{s['p99']:.0f} ms (n {s['n']})"

    return (f"lecture hall: {f['students']} students, {f['answers']} answers in {f['seconds']:.0f} s "
            f"({f['answers_per_s']:.1f}/s); p50/p95/p99 search {p('search')}, ask {p('ask')}, stream first byte "
            f"{p('stream_first_byte')}, stream {p('stream')}; throttled: students {f['throttled']['students']} "
            f"questions and {f['throttled_searches']['students']} searches, "
            f"the 100-a-minute client {f['throttled']['abuser']}, the new-conversation client "
            f"{f['throttled']['newcomer']}; publish done {publish.get('done_seconds')} s, live "
            f"{publish.get('live_seconds')} s; CPU {f['cpu_seconds']:.0f} s, "
            f"{f['cpu_per_answer_ms'] or 0:.0f} ms per answer; {len(f['errors'])} errors")


LIVE_TARGET_SECONDS = 10.0


def target(f: dict | None) -> tuple[str, str, bool | None]:
    """The issue's target as ``report.targets`` lists them: (target, measured, holds)."""
    name = (f"a lecture hall ({STUDENTS} students, one address, one key): no error, no student throttled, the "
            f"abusers throttled, the edited page live ≤ {LIVE_TARGET_SECONDS:.0f} s")
    if not f:
        return name, "not run", None
    live = f["publish"].get("live_seconds")
    students = f["throttled"]["students"] + f["throttled_searches"]["students"]
    holds = (not f["errors"] and students == 0 and f["throttled"]["abuser"] > 0
             and f["throttled"]["newcomer"] > 0 and live is not None and live <= LIVE_TARGET_SECONDS)
    return name, (f"{len(f['errors'])} errors, students' requests throttled {students}, live "
                  f"{live if live is not None else '—'} s"), holds


def table(f: dict) -> list[str]:
    """The figures as Markdown lines: a heading, a sentence, a table."""
    publish, requests = f["publish"], f["requests"]
    asked = {who: sum(n for outcome, n in requests.get(who, {}).items() if not outcome.startswith("search"))
             for who in ("students", "abuser", "newcomer")}
    searched = sum(n for outcome, n in requests.get("students", {}).items() if outcome.startswith("search"))
    lines = [f"### The lecture-hall drill ({STUDENTS} students behind one address and one publishable key for "
             f"{SECONDS / 60:.0f} min, one page published meanwhile; bench/lecture_hall.py)", "",
             f"{f['answers']} answers in {f['seconds']:.0f} s ({f['answers_per_s']:.1f} a second); CPU of the web "
             f"server's and the task worker's processes {f['cpu_seconds']:.0f} s, {f['cpu_per_answer_ms']:.0f} ms "
             f"per answer. The edited page: done {publish.get('done_seconds')} s after its POST, live (found by "
             f"search) {publish.get('live_seconds')} s. Throttled (429): the students {f['throttled']['students']} "
             f"of {asked['students']} questions and {f['throttled_searches']['students']} of {searched} searches, "
             f"the 100-a-minute client {f['throttled']['abuser']} of "
             f"{asked['abuser']}, the new-conversation client {f['throttled']['newcomer']} of {asked['newcomer']}; "
             f"{len(f['errors'])} errors. The machine's load average (1 min): {f['load_before']:.1f} before, "
             f"{f['load_after']:.1f} after.", "",
             "| request | n | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|"]
    names = {"search": "search (as typed)", "ask": "ask", "stream_first_byte": "stream, first byte",
             "stream": "stream, whole"}
    for kind, s in f["latency_ms"].items():
        lines.append(f"| {names[kind]} | {s['n']} | {fmt(s['p50'], 0)} | {fmt(s['p95'], 0)} | {fmt(s['p99'], 0)} |")
    return lines


def printed(f: dict) -> str:
    """``manage.py bench --lecture-hall``'s output: the sentence, then the Markdown of BENCHMARKS.md."""
    return describe(f) + "\n\n" + "\n".join(table(f))


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += machine.children(current)
    return found


def measure(data: Path, *, log) -> dict:
    """``make bench``'s run: ``serve --role web`` (gunicorn as ``make run`` starts it) and ``serve --role worker``
    on the development database, the book published as ``bench-hall``, the drill, everything removed after."""
    import tempfile

    from bench.latency import Gunicorn
    from bench.publishing_bench import Worker
    from bookchat.base.conf import setting

    slug = "bench-hall"
    lecture_book.forget_hall(slug)
    publishing_key, widget_key = lecture_book.hall_keys(slug)
    try:
        with tempfile.TemporaryDirectory(prefix="bookchat-bench-hall-") as scratch, Worker(Path(scratch)) as worker, \
                Gunicorn(workers=setting("WEB_WORKERS"), env={"BOOKCHAT_DATA_DIR": worker.data_dir}) as web:
            site = lecture_book.make_site(data, Path(scratch))
            log(f"  publishing {len(lecture_book.PAGES)} pages of docusaurus-docs as {slug} …")
            first = lecture_book.publish(web.url, slug, site, publishing_key)
            if first["status"] != "done":
                raise RuntimeError(f"the first publish failed: {first.get('error')}")
            log(f"  {STUDENTS} students for {SECONDS:.0f} s …")
            return hall(web.url, book=slug, widget_key=widget_key, publishing_key=publishing_key, site=site,
                        server_pids=lambda: tree_pids(web.proc.pid) + tree_pids(worker.proc.pid))
    finally:
        with contextlib.suppress(Exception):
            lecture_book.forget_hall(slug)
