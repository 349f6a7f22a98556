"""``manage.py evaluate --questions FILE.jsonl``: retrieval and answer quality on a question set.

Prints a table (overall, then per kind), or with ``--json`` one summary object; ``--details FILE``
writes one JSON line per question (with the features the confidence model read); ``--plot FILE.svg`` draws
the reliability diagram and the risk–coverage curve. ``--compare A B`` runs the questions under two settings specs
(``default`` or ``NAME=VALUE,...``) and prints them side by side. ``--search`` measures the book's search
instead, with each question in full and as typed three words in (``chat.quality.search_evaluation``).
Exit status: 0 evaluated, 2 bad file or options (unknown book, bad line, bad compare spec).
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from bookchat.base.errors import BookchatError
from chat.quality.comparison import describe, parse_settings_spec, run_comparison, stale_calibration
from chat.quality.evaluation import ANSWER_KIND_METRICS, KINDS, SHOULD_REFUSE, load_questions, run_evaluation
from chat.quality.plots import confidence_svgs
from chat.quality.search_evaluation import render_search_summary, run_search_evaluation


class Command(BaseCommand):
    help = "Evaluate retrieval and answers on a questions.jsonl file."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("questions_file", nargs="?", help="The questions file (or use --questions).")
        parser.add_argument("--questions", dest="questions", help="The questions file (JSON lines).")
        parser.add_argument("--book", help="Book slug (needed when several books are indexed).")
        parser.add_argument("--limit", type=int, help="Evaluate only the first N questions.")
        parser.add_argument("--details", help="Write one JSON line per question to this file.")
        parser.add_argument("--plot", help="Write the confidence's reliability diagram and risk–coverage curve to "
                                           "this SVG file.")
        parser.add_argument("--json", action="store_true", help="Print the summary as one JSON object.")
        parser.add_argument("--compare", nargs=2, metavar=("A", "B"),
                            help="Run the questions under two settings specs, each `default` or NAME=VALUE[,...] "
                                 "(e.g. --compare default FUSION=rrf,TOP_K=3), and print them side by side.")
        parser.add_argument("--search", action="store_true",
                            help="Measure search instead of answers: each answerable question in full, and as typed "
                                 "(its first three words, the third cut to a prefix): hit@1, hit@5, time per query.")

    def handle(self, *args, **options) -> None:
        path = options["questions"] or options["questions_file"]
        try:
            if not path:
                raise BookchatError("give the questions file: evaluate --questions FILE.jsonl", code="usage")
            if options["limit"] is not None and options["limit"] < 1:
                raise BookchatError("--limit must be 1 or more", code="usage")
            specs = [parse_settings_spec(spec) for spec in options["compare"]] if options["compare"] else None
            questions = load_questions(path, limit=options["limit"])
            progress = _Progress(sys.stderr) if sys.stderr.isatty() else None
            if options["search"]:
                if specs:
                    raise BookchatError("--search and --compare don't go together", code="usage")
                searched = run_search_evaluation(questions, book_slug=options["book"])
                summary, records = searched["summary"], searched["records"]
            elif specs:
                summary, records = run_comparison(questions, *specs, book_slug=options["book"], progress=progress)
            else:
                summary, records = run_evaluation(questions, book_slug=options["book"], progress=progress)
            if progress:
                progress.close()
        except BookchatError as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"error": exc.code, "message": str(exc)}))
            else:
                self.stderr.write(f"evaluate: {exc}")
            sys.exit(2)
        if options["details"]:
            with open(options["details"], "w", encoding="utf-8") as fh:
                for record in records:
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        if options["search"]:
            self.stdout.write(json.dumps(summary) if options["json"] else render_search_summary(summary))
            return
        if options["plot"]:
            sides = {"": summary} if not specs else {"A": summary["a"]["summary"], "B": summary["b"]["summary"]}
            with open(options["plot"], "w", encoding="utf-8") as fh:
                fh.write(confidence_svgs({f"{s['book']} {side}".strip(): s["confidence"] for side, s in sides.items()}))
        if options["json"]:
            self.stdout.write(json.dumps(summary, ensure_ascii=False))
        elif specs:
            self.stdout.write(render_comparison(summary, *(describe(spec) for spec in specs)))
        else:
            self.stdout.write(render_summary(summary))


class _Progress:
    def __init__(self, stream):
        self.stream = stream

    def __call__(self, done: int, total: int) -> None:
        width = 30
        filled = int(width * done / total)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} questions")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r" + " " * 60 + "\r")
        self.stream.flush()


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _right_at(c: dict, level: str) -> str:
    """A level's precision with its 95 % interval ("0.900 [0.596–0.982]"), or "—"."""
    interval = c["precision_interval"][level]
    return _fmt(c["precision"][level]) + (f" [{interval[0]:.3f}–{interval[1]:.3f}]" if interval else "")


def render_summary(s: dict) -> str:
    c = s["confidence"]
    rows = [
        ("book", s["book"]), ("questions", f"{s['questions']} {s['kinds']}"), ("errors", s["errors"]),
        ("hit@1 / @3 / @5", f"{_fmt(s['hit_at_1'])} / {_fmt(s['hit_at_3'])} / {_fmt(s['hit_at_5'])}"),
        ("MRR@10", _fmt(s["mrr_at_10"])), ("answer contains", _fmt(s["answer_contains_rate"])),
        ("citation precision", _fmt(s["citation_precision"])),
        ("refusal rate (out of scope + unanswerable)", _fmt(s["refusal_rate"])),
        ("  out of scope", _fmt(s["refusal_rate_out_of_scope"])),
        ("  unanswerable", _fmt(s["refusal_rate_unanswerable"])),
        ("false refusal rate", _fmt(s["false_refusal_rate"])), ("withheld", _fmt(s["withheld_rate"])),
        *([("code answered as code", _fmt(s["code_answered_as_code"]))] if s["code_answered_as_code"] is not None
          else []),
        ("confidence levels", s["confidence_levels"]),
        ("  right when high / medium / unsure", " / ".join(_right_at(c, lvl) for lvl in ("high", "medium", "unsure"))
         + f"  (of {c['judged']} judged answers)"),
        ("  answerable answered high", _fmt(c["answerable_high"])),
        ("  calibration error (ECE)", _fmt(c["ece"]) + (f"  ({_fmt(c['ece_by_chance'])} by chance alone)"
                                                         if c["ece_by_chance"] is not None else "")),
        ("  right answers ranked above wrong ones", _fmt(c["discrimination"])),
        ("  refused: not covered / unanswerable / unsure", " / ".join(str(n) for n in c["refusals"].values())),
        ("latency p50 / p95", f"{s['latency_ms_p50']} / {s['latency_ms_p95']} ms"),
        ("scope threshold", f"{_fmt(s['scope_threshold'])} ({s['scope_threshold_source']})"
         + ("" if not s["calibration"] or s["calibration"]["current"]
            else "; measured with other settings: run `manage.py calibrate`")),
        ("generator / fusion / top k", f"{s['generator']} / {s['fusion']} / {s['top_k']}"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
    return "\n".join([*lines, "", render_by_kind(s["by_kind"]), "", render_levels_by_kind(s["confidence_by_kind"])])


LABELS = {
    "n": "questions", "hit_at_1": "hit@1", "hit_at_3": "hit@3", "hit_at_5": "hit@5", "mrr_at_10": "MRR@10",
    "answer_contains_rate": "answer contains", "citation_precision": "citation precision",
    "refusal_rate": "refusal rate", "refusal_rate_out_of_scope": "refusal rate: out of scope",
    "refusal_rate_unanswerable": "refusal rate: unanswerable", "false_refusal_rate": "false refusal rate",
    "withheld_rate": "withheld", "refused_rate": "refused", "latency_ms_p50": "latency p50 (ms)",
    "latency_ms_p95": "latency p95 (ms)", "scope_threshold": "scope threshold", "top_k": "top k",
    "code_answered_as_code": "code answered as code",
}
KIND_METRICS = ("n", *ANSWER_KIND_METRICS, "code_answered_as_code", "refused_rate")
TOP_LEVEL = ("questions", "errors", "hit_at_1", "hit_at_3", "hit_at_5", "mrr_at_10", "answer_contains_rate",
             "citation_precision", "refusal_rate", "refusal_rate_out_of_scope", "refusal_rate_unanswerable",
             "false_refusal_rate", "withheld_rate", "code_answered_as_code", "latency_ms_p50", "latency_ms_p95",
             "scope_threshold", "generator", "fusion", "top_k")


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Columns aligned: the first to the left, the others to the right."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w)
                               in enumerate(zip(row, widths, strict=True))).rstrip() for row in [header, *rows])


def render_by_kind(by_kind: dict) -> str:
    """Per-kind figures: a column per kind present, a row per metric, ``—`` where it does not apply."""
    kinds = list(by_kind)
    rows = [[LABELS[m], *(_fmt(by_kind[k].get(m)) for k in kinds)] for m in KIND_METRICS
            if any(m in by_kind[k] for k in kinds)]
    return _table(["by kind", *kinds], rows)


def render_levels_by_kind(levels: dict) -> str:
    """Per kind, a row per level: the answers at it and, for a kind that should be answered, the share right."""
    rows = []
    for kind, figures in levels.items():
        for level, n in figures["answers"].items():
            right = figures.get("precision", {}).get(level)
            rows.append([kind, level, str(n), "—" if right is None else _fmt(right)])
    return _table(["kind", "level", "answers", "right"], rows)


def _difference(a, b) -> str:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers:
        return "—" if a is None or b is None else ""
    diff = b - a
    return f"{diff:+.3f}" if isinstance(diff, float) else f"{diff:+d}"


def render_comparison(result: dict, a_name: str, b_name: str) -> str:
    """``metric | A | B | B − A``: the settings compared, the top-level metrics, then each kind's."""
    a, b = result["a"]["summary"], result["b"]["summary"]
    rows = [[name, _fmt(value), _fmt(result["b"]["settings"][name]), _difference(value, result["b"]["settings"][name])]
            for name, value in result["a"]["settings"].items()]
    for key in TOP_LEVEL:
        rows.append([LABELS.get(key, key), _fmt(a[key]), _fmt(b[key]), _difference(a[key], b[key])])
    for level in ("high", "medium", "unsure", "low"):
        va, vb = a["confidence_levels"].get(level), b["confidence_levels"].get(level)
        rows.append([f"confidence {level}", _fmt(va), _fmt(vb), _difference(va, vb)])
    kinds = [k for k in KINDS if k in a["by_kind"] or k in b["by_kind"]]
    for kind in kinds:
        metrics = ("n", "refused_rate") if kind in SHOULD_REFUSE else ("n", *ANSWER_KIND_METRICS)
        for metric in metrics:
            va, vb = a["by_kind"].get(kind, {}).get(metric), b["by_kind"].get(kind, {}).get(metric)
            rows.append([f"{kind}: {LABELS[metric]}", _fmt(va), _fmt(vb), _difference(va, vb)])
    lines = [f"A: {a_name}", f"B: {b_name}", f"book: {a['book']}", "", _table(["metric", "A", "B", "B − A"], rows)]
    stale = [run for run, s in (("A", a), ("B", b)) if stale_calibration(s)]
    if stale:
        runs = "runs A and B" if len(stale) == 2 else f"run {stale[0]}"
        lines += ["", f"note: the scope threshold was calibrated under other settings than {runs} used; to judge "
                      "refusals fairly, run `manage.py calibrate` with those settings."]
    return "\n".join(lines)
