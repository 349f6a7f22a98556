"""Where an answer's time goes: ``manage.py bench --profile`` (issue 55). Printed, nothing written.

1. **CPU by process under load**: gunicorn with 2 workers (as ``make run`` starts it) and 8 clients asking distinct
   questions; the CPU seconds each kind of process used (the web workers, Postgres' backends, the load generator)
   from ``/proc``, per answer. Their sum against the machine's cores bounds answers/s: what a cut must shrink.
2. **Sampled stacks under the same load** (py-spy, when installed: ``pip install py-spy``): the frames the web workers
   were on, by own time and by time inside, our functions only for the latter.
3. **In-process under cProfile**: the same questions one after another; the functions with the most own time.
4. **SQL per answer**: each kind of statement's count and milliseconds per answer, from Django's execute wrapper
   (the embedded Postgres is built without ``pg_stat_statements``).
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from bench import latency, machine
from chat.channels.serializers import validate_ask
from chat.pipeline.answering import answer_question

CLIENTS = 8


def profile(questions: list[tuple[str, str]], *, seconds: float = 30.0, log) -> dict:
    """Every part in turn on ``questions`` (``(question, book slug)``, distinct)."""
    results = {"load": under_load(questions, seconds=seconds, log=log)}
    log("  in-process under cProfile …")
    results["cprofile"] = in_process(questions)
    log("  SQL per answer …")
    results["sql"] = sql_per_answer(questions)
    return results


# -- 1 and 2: under load -----------------------------------------------------------------------------
def under_load(questions, *, seconds: float, log, sample: bool = True) -> dict:
    with latency.Gunicorn(workers=2) as server:
        latency.warm_up(server, questions)
        workers = machine.children(server.proc.pid)
        beside = Path(sys.executable).parent / "py-spy"
        spy = (str(beside) if beside.exists() else shutil.which("py-spy")) if sample else None
        folder = Path(tempfile.mkdtemp(prefix="bookchat-profile-"))
        samplers = []
        if spy:
            for pid in workers:
                samplers.append(subprocess.Popen(
                    [spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "100",
                     "--format", "raw", "--output", str(folder / f"{pid}.txt"), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        postgres_before = {pid: machine.cpu_seconds(pid) for pid in machine.named("postgres")}

        def used() -> dict[str, float]:
            return {"web workers": sum(machine.cpu_seconds(p) for p in workers),
                    "load generator": machine.cpu_seconds(os.getpid())}

        before = used()
        log(f"  {CLIENTS} clients for {seconds:.0f} s{' with py-spy sampling the workers' if spy else ''} …")
        load = latency.load(server, questions, clients=CLIENTS, seconds=seconds)
        after = used()
        postgres = sum(machine.cpu_seconds(pid) - postgres_before.get(pid, 0.0) for pid in machine.named("postgres"))
        for sampler in samplers:
            sampler.wait(timeout=seconds + 60)
    answers = max(load["answers"], 1)
    cpu = {kind: (after[kind] - before[kind]) for kind in before} | {"postgres": postgres}
    result = {"answers_per_s": load["answers_per_s"], "answers": load["answers"], "errors": load["errors"],
              "seconds": load["seconds"], "cpus": os.cpu_count(),
              "cpu_ms_per_answer": {kind: spent * 1000 / answers for kind, spent in cpu.items()},
              "cpu_busy_share": sum(cpu.values()) / (load["seconds"] * (os.cpu_count() or 1))}
    if spy:
        result["stacks"] = stack_tops(sorted(folder.glob("*.txt")))
    shutil.rmtree(folder, ignore_errors=True)
    return result


FRAME = re.compile(r"^(?P<function>[^ ]+) \((?P<file>[^:)]+)(?::\d+)?\)$")
OURS = ("bookchat/", "chat/", "ingestion/", "audit/")


def stack_tops(files: list[Path], top: int = 15) -> dict:
    """py-spy's raw (collapsed) stacks: the share of samples each frame was running in (own) and was on the stack
    in (inside; our modules' functions only, each counted once a sample)."""
    own, inside, total = Counter(), Counter(), 0
    for path in files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            n = int(count)
            frames = [_label(frame) for frame in stack.split(";") if frame]
            if not frames:
                continue
            total += n
            own[frames[-1]] += n
            for label in {f for f in frames if any(f"({p}" in f or f" {p}" in f for p in OURS)}:
                inside[label] += n
    share = (lambda c: [(label, round(n / total, 4)) for label, n in c.most_common(top)]) if total else (lambda c: [])
    return {"samples": total, "own": share(own), "inside": share(inside)}


def _label(frame: str) -> str:
    """``function (path:line)`` → ``function (short path)`` (``_short``)."""
    match = FRAME.match(frame.strip())
    return f"{match['function']} ({_short(match['file'])})" if match else frame.strip()


# -- 3: cProfile -----------------------------------------------------------------------------------
def in_process(questions, top: int = 20) -> dict:
    for question, book in questions[:10]:  # warm: the model loaded, the books' rows cached
        answer_question(validate_ask({"question": question, "book": book}, channel="bench"))
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for question, book in questions:
        answer_question(validate_ask({"question": question, "book": book}, channel="bench"))
    profiler.disable()
    elapsed = time.perf_counter() - started
    stats = pstats.Stats(profiler, stream=io.StringIO())
    rows = []
    for (file, line, function), (_, calls, own, inside, _) in stats.stats.items():
        rows.append({"function": f"{function} ({_short(file)}:{line})", "calls_per_answer": calls / len(questions),
                     "own_ms_per_answer": own * 1000 / len(questions),
                     "inside_ms_per_answer": inside * 1000 / len(questions)})
    rows.sort(key=lambda r: -r["own_ms_per_answer"])
    return {"answers": len(questions), "ms_per_answer": elapsed * 1000 / len(questions), "top_own": rows[:top]}


def _short(file: str) -> str:
    """A source file's path from site-packages, the standard library or the checkout."""
    for marker in ("site-packages/", f"/lib/python{sys.version_info.major}.{sys.version_info.minor}/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file.removeprefix(str(Path(__file__).resolve().parent.parent) + "/")


# -- 4: SQL ----------------------------------------------------------------------------------------
def _kind(sql: str) -> str:
    """A statement's shape: its first words and the tables it names."""
    words = sql.split()
    head = " ".join(words[:2]) if words else ""
    tables = sorted(set(re.findall(r'"?((?:ingestion|chat|audit|django)_[a-z_]+)"?', sql)))
    return f"{head} … {', '.join(tables)}" if tables else " ".join(words[:4])


@contextmanager
def statements():
    seen: dict[str, list[float]] = defaultdict(list)

    def wrapper(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            seen[_kind(sql)].append((time.perf_counter() - started) * 1000)

    with connection.execute_wrapper(wrapper):
        yield seen


def sql_per_answer(questions) -> dict:
    with statements() as seen:
        for question, book in questions:
            answer_question(validate_ask({"question": question, "book": book}, channel="bench"))
    n = len(questions)
    rows = [{"statement": kind, "per_answer": len(times) / n, "ms_per_answer": sum(times) / n}
            for kind, times in seen.items()]
    rows.sort(key=lambda r: -r["ms_per_answer"])
    return {"answers": n, "statements_per_answer": sum(r["per_answer"] for r in rows),
            "ms_per_answer": sum(r["ms_per_answer"] for r in rows), "by_statement": rows}


def describe(results: dict) -> str:
    load = results["load"]
    lines = [f"under load: {load['answers_per_s']:.1f} answers/s, {load['errors']} errors, CPU busy "
             f"{load['cpu_busy_share']:.0%} of {load['cpus']} cores; CPU ms per answer: "
             + ", ".join(f"{kind} {ms:.1f}" for kind, ms in load["cpu_ms_per_answer"].items())]
    if "stacks" in load:
        lines.append(f"py-spy ({load['stacks']['samples']} samples), own:")
        lines += [f"  {share:6.1%}  {label}" for label, share in load["stacks"]["own"]]
        lines.append("inside (our functions):")
        lines += [f"  {share:6.1%}  {label}" for label, share in load["stacks"]["inside"]]
    prof = results["cprofile"]
    lines.append(f"cProfile, {prof['ms_per_answer']:.1f} ms an answer in-process (profiled), own ms per answer:")
    lines += [f"  {row['own_ms_per_answer']:6.2f}  {row['calls_per_answer']:7.1f} calls  {row['function']}"
              for row in prof["top_own"]]
    sql = results["sql"]
    lines.append(f"SQL: {sql['statements_per_answer']:.1f} statements, {sql['ms_per_answer']:.1f} ms per answer:")
    lines += [f"  {row['ms_per_answer']:6.2f} ms  {row['per_answer']:4.1f}×  {row['statement']}"
              for row in sql["by_statement"]]
    return "\n".join(lines)
