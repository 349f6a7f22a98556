"""Runs every benchmark in order and returns one results dict (what ``report`` renders)."""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from audit.models import AuditLog
from bench import (
    first_start,
    latency,
    lecture_hall,
    machine,
    publishing_bench,
    quality,
    scale,
    soak,
    streams,
    struggle_bench,
    typing,
)
from bench.ingestion_bench import bench_corpus
from bench.stats import over_runs
from bookchat.base.conf import setting
from chat.quality.evaluation import load_questions
from ingestion.indexing.ingesting import index_book
from ingestion.models import Book

ANSWERED_BOOKS = ("squad2-dev", "docusaurus-docs")  # the corpora with question sets
SEARCH_BOOK = "docusaurus-docs"  # a documentation site: what a search box is for
# Qdrant's local mode is a brute-force Python store, meant (its own warning says) for up to 20,000 points.
QDRANT_LOCAL_MAX = 20_000


def plan(quick: bool) -> dict:
    if quick:
        return {"corpora": ["squad2-dev"], "books": ["squad2-dev"], "questions": 60, "runs": 1, "http_questions": 40,
                "load": [(1, 8.0), (4, 8.0)], "nodes_load": (8, 8.0),
                "sizes": [1000], "scale_questions": 40, "qdrant": True,
                "quality_limit": 150, "reindex_repeats": 2, "streams": [5, 10, 20, 40], "soak_seconds": None,
                "publish_repeats": 0, "lecture_hall": False}
    return {"corpora": ["squad2-dev", "docusaurus-docs", "physical-ai-book", "physical-ai-book-2"],
            "books": list(ANSWERED_BOOKS), "questions": 300, "runs": 3, "http_questions": 200,
            "load": [(1, 60.0), (4, 60.0), (8, 60.0), (16, 60.0)], "nodes_load": (8, 30.0),
            "sizes": [1000, 10000, 50000],
            "scale_questions": 200, "qdrant": True, "quality_limit": None, "reindex_repeats": 3,
            "streams": [5, 10, 20, 40, 80], "soak_seconds": 60.0, "publish_repeats": 3,
            "lecture_hall": True}


def run(*, data: Path, quick: bool, log, save_to: Path | None = None) -> dict:
    """Every benchmark in turn; one that fails is reported (in ``failures``) and the others still run. The
    results are saved after each one."""
    p = plan(quick)
    started_at = datetime.now(UTC)
    bench_run = BenchRun(data=data, plan=p, log=log, save_to=save_to, results=blank_results(quick, p, started_at))
    bench_run.questions = indexed_questions(data, p["books"], p["questions"], log)
    for title, key, measure in bench_run.sections():
        bench_run.section(title, key, measure)
    results = bench_run.results
    results["seconds"] = (datetime.now(UTC) - started_at).total_seconds()
    deleted, _ = AuditLog.objects.filter(created_at__gte=started_at).delete()
    results["audit_rows_written"] = deleted
    if save_to:
        save(results, save_to)
    return results


def blank_results(quick: bool, p: dict, started_at: datetime) -> dict:
    """The results before any benchmark: the plan, the machine, the start, and an empty place for each benchmark."""
    return {"quick": quick, "plan": dict(p), "machine": machine.describe(),
            "started": started_at.isoformat(timespec="seconds"), "failures": {}, "ingestion": [],
            "in_process": None, "http": None, "load": [], "nodes": [], "streams": [], "scale": [],
            "soak": None, "search": None, "publishing": None, "lecture_hall": None, "struggle": None,
            "first_start": None,
            "quality": {}, "serving": {"workers": setting("WEB_WORKERS"), "threads": setting("WEB_THREADS")}}


def indexed_questions(data: Path, books: list[str], count: int, log) -> list[tuple[str, str]]:
    """Removes the synthetic books an interrupted run left, indexes ``books`` (those with question sets) and
    returns ``count`` of their questions, mixed (``mixed_questions``)."""
    # A synthetic book left by an interrupted run shares the chunk table's indexes with every book measured here: a
    # 50,000-passage one slowed the searches of the small books and the health check (which counts every book's
    # passages) in a run of 2026-11-27.
    leftover, _ = Book.objects.filter(slug__startswith="bench-scale-").delete()
    if leftover:
        log("== removed the synthetic books an earlier run left behind")
    log("== books: making sure the corpora with question sets are indexed")
    for book in books:
        index_book(path=data / book / "docs", book_slug=book, trigger="bench")
    return mixed_questions(data, books, count)


@dataclass
class BenchRun:
    """One run of the benchmarks: the plan, the corpora's folder, the log, the questions and the results, saved
    after each benchmark. Each measurement returns what its key in the results holds; those that measure in steps
    (over HTTP and under load, the streams, scale) fill their lists as they go, so one that fails midway keeps the
    steps it finished."""

    data: Path
    plan: dict
    log: Callable[[str], object]
    save_to: Path | None
    results: dict
    questions: list[tuple[str, str]] = field(default_factory=list)

    def section(self, title: str, key: str, measure: Callable[[], object]) -> None:
        self.log(f"== {title}")
        try:
            self.results[key] = measure()
        except Exception as exc:
            self.log(f"  FAILED: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            self.results["failures"][title] = f"{type(exc).__name__}: {exc}"
        if self.save_to:
            save(self.results, self.save_to)

    def sections(self) -> list[tuple[str, str, Callable[[], object]]]:
        """The plan's benchmarks in the order they run: (title in the log and in ``failures``, key in the results,
        what measures it)."""
        p = self.plan
        chosen = [
            ("ingestion", "ingestion", self.ingested),
            (f"answer latency in-process: {len(self.questions)} questions × {p['runs']} runs", "in_process",
             self.in_process),
            ("over HTTP (gunicorn, 2 workers, loopback) and under load", "http", self.over_http),
            ("web nodes: two against one on this machine", "nodes", self.web_nodes),
            ("search as typed: a keystroke-by-keystroke replay over HTTP", "search", self.searched),
            ("streams held open at once (LLM at 0.1 s a token)", "streams", self.held_open)]
        if p["soak_seconds"]:
            chosen.append((f"soak: {soak.CLIENTS} clients for {p['soak_seconds']:.0f} s with an ingest running",
                           "soak", self.soaked))
        chosen.append(("make run from a clean data folder", "first_start", self.started))
        if p["publish_repeats"]:
            chosen.append(("publishing from CI: one edited page of docusaurus-docs, POST to done", "publishing",
                           self.published))
        if p["lecture_hall"]:
            chosen.append((f"a lecture hall: {lecture_hall.STUDENTS} students behind one address and one key for "
                           f"{lecture_hall.SECONDS:.0f} s, one page published meanwhile", "lecture_hall", self.hall))
        if struggle_bench.BOOK in p["books"]:
            chosen.append((f"where students struggle: {struggle_bench.ROWS:,} audit rows of {struggle_bench.BOOK}",
                           "struggle", self.struggle_map))
        return [*chosen, ("scale", "scale", self.scaled), ("quality (evaluate)", "quality", self.evaluated)]

    def ingested(self) -> list[dict]:
        return [bench_corpus(name, self.data / name / "docs", repeats=self.plan["reindex_repeats"], log=self.log)
                for name in self.plan["corpora"]]

    def in_process(self) -> dict:
        runs = [latency.in_process(self.questions, log=self.log) for _ in range(self.plan["runs"])]
        return {stage: {q: over_runs([r[stage][q] for r in runs]) for q in ("p50", "p95", "p99")}
                for stage in runs[0]}

    def over_http(self) -> dict:
        p, questions, results = self.plan, self.questions, self.results
        # No key limit on this server: the MCP run asks twice per question through one secret key.
        with latency.Gunicorn(workers=2, env={"BOOKCHAT_RATE_KEY": ""}) as server, bench_key() as key:
            latency.warm_up(server, questions)
            results["http"] = latency.over_http(server, questions[: p["http_questions"]], log=self.log)
            results["http"]["mcp"] = latency.mcp_over_http(server, questions[: p["http_questions"]], key=key)
            for clients, seconds in p["load"]:
                self.log(f"  {clients} clients for {seconds:.0f} s …")
                results["load"].append(latency.load(server, questions, clients=clients, seconds=seconds))
        return results["http"]

    def web_nodes(self) -> list[dict]:
        # A web node is `serve --role web`: one gunicorn as make run starts it. Both on this machine's cores, so
        # the figure shows that a second node doesn't lower throughput or fail requests, not that it doubles it.
        clients, seconds = self.plan["nodes_load"]
        measured = []
        for count in (1, 2):
            servers = [latency.Gunicorn(workers=setting("WEB_WORKERS")) for _ in range(count)]
            with contextlib.ExitStack() as stack:
                for server in servers:
                    stack.enter_context(server)
                    latency.warm_up(server, self.questions)
                self.log(f"  {count} web node(s), {clients} clients for {seconds:.0f} s …")
                measured.append(latency.load(servers, self.questions, clients=clients, seconds=seconds))
        return measured

    def searched(self) -> dict:
        books = self.plan["books"]
        figures = typing.over_http(self.data, SEARCH_BOOK if SEARCH_BOOK in books else books[0], log=self.log)
        self.log("  " + typing.describe(figures))
        return figures

    def held_open(self) -> list[dict]:
        # The tests' OpenAI-compatible server plays an LLM writing streams.TOKEN_SECONDS a token.
        from tests.support.openai_server import FakeOpenAIServer

        book = self.plan["books"][0]
        answerable = [(q.question, book) for q in load_questions(self.data / book / "questions.jsonl")
                      if q.kind == "answerable"][:100]
        with FakeOpenAIServer() as llm:
            llm.token_delay = streams.TOKEN_SECONDS
            env = {"BOOKCHAT_LLM_BASE_URL": llm.base_url, "BOOKCHAT_LLM_API_KEY": "bench",
                   "BOOKCHAT_LLM_MODEL": "bench-llm"}
            with latency.Gunicorn(workers=setting("WEB_WORKERS"), env=env) as server:
                latency.warm_up(server, answerable)
                for count in self.plan["streams"]:
                    self.log(f"  {count} streams at once …")
                    self.results["streams"].append(streams.held_streams(server.url, answerable, streams=count))
        return self.results["streams"]

    def soaked(self) -> dict:
        figures = soak.measured_soak(self.data, self.plan["books"][0], seconds=self.plan["soak_seconds"])
        self.log("  " + soak.describe(figures))
        return figures

    def started(self) -> dict:
        figures = first_start.first_start(log=self.log)
        self.log("  " + first_start.describe(figures))
        return figures

    def published(self) -> dict:
        figures = publishing_bench.publishing(self.data, repeats=self.plan["publish_repeats"], log=self.log)
        self.log("  " + publishing_bench.describe(figures))
        return figures

    def hall(self) -> dict:
        figures = lecture_hall.measure(self.data, log=self.log)
        self.log("  " + lecture_hall.describe(figures))
        return figures

    def struggle_map(self) -> dict:
        return struggle_bench.struggle(log=self.log)

    def scaled(self) -> list[dict]:
        squad = [q for q in load_questions(self.data / "squad2-dev" / "questions.jsonl")
                 if q.kind == "answerable" and q.evidence][: self.plan["scale_questions"]]
        if not scale.filler_chunks(Book.objects.get(slug="squad2-dev")).exists():  # e.g. a fresh clone, QUICK
            self.log("  indexing the bundled manual (docs/): the synthetic books' filler comes from other books")
            index_book(path=Path(settings.BASE_DIR) / "docs", book_slug="bookchat-manual", title="bookchat manual",
                       trigger="bench")
        typed = typing.typed_queries(self.data, "squad2-dev")[: self.plan["scale_questions"]]
        for size in self.plan["sizes"]:
            book = scale.build_book(size, log=self.log)
            try:
                self.scale_one(book, size, squad, typed)
            finally:
                Book.objects.filter(slug=book.slug).delete()
        return self.results["scale"]

    def scale_one(self, book: Book, size: int, squad: list, typed: list[str]) -> None:
        """One synthetic book's figures, added to the results' ``scale`` as soon as pgvector's are measured."""
        build, index_mb = scale.hnsw_build_seconds(book)
        entry = {"size": size, "hnsw_build_seconds": build, "hnsw_mb": index_mb,
                 "disk_per_1k_mb": scale.disk_per_1k_mb(book, index_mb),
                 "stores": [scale.measure(book, squad)],
                 "search": typing.at_scale(book, typed)}
        self.results["scale"].append(entry)
        if self.plan["qdrant"] and (size <= QDRANT_LOCAL_MAX or setting("QDRANT_URL")):
            entry["stores"].append(scale.measure_qdrant(book, squad, log=self.log))
        elif self.plan["qdrant"]:
            self.log(f"  Qdrant: not measured at {size:,} chunks in local mode (set BOOKCHAT_QDRANT_URL)")

    def evaluated(self) -> dict:
        return {book: quality.evaluate(book, self.data / book / "questions.jsonl", limit=self.plan["quality_limit"])
                for book in self.plan["books"]}


@contextlib.contextmanager
def bench_key():
    """A secret API key for the run (MCP over HTTP needs one), deleted afterwards."""
    from chat.models import ApiKey

    key = ApiKey(name="bench (make bench)", kind=ApiKey.SECRET)
    raw = key.issue()
    key.save()
    try:
        yield raw
    finally:
        ApiKey.objects.filter(pk=key.pk).delete()


def mixed_questions(data: Path, books: list[str], count: int) -> list[tuple[str, str]]:
    """Distinct questions, alternating between the books, so no answer is a cache hit of another."""
    per_book = {b: [q.question for q in load_questions(data / b / "questions.jsonl") if q.kind != "follow_up"]
                for b in books}
    out, seen = [], set()
    while len(out) < count and any(per_book.values()):
        for book, items in per_book.items():
            while items:
                question = items.pop(0)
                if question not in seen:
                    seen.add(question)
                    out.append((question, book))
                    break
    return out[:count]


def save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))


def elapsed(started: float) -> str:
    return f"{time.monotonic() - started:.0f} s"
