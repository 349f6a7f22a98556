"""Questions in other languages, evaluated per language beside the same questions in English.

``python -m bench.crosslingual`` (with ``BOOKCHAT_DATA_DIR`` naming a data folder where the books are indexed)
reads ``bench/questions/i18n/<book>.<language>.jsonl``: each line a question of one of our English sets translated,
with its English original (``question_en``) and the same evidence and answers (the books are in English). For each
book it evaluates the English originals and each translation through the real pipeline (``chat.quality.evaluation``)
and prints, per language, hit@5, answer contains, false refusals, refusals of the off-topic and unanswerable
questions, and how far "high" keeps its promise (right when high, and the share of the answerable questions
answered high: its coverage) — the table BENCHMARKS.md ("Questions in other languages") keeps.

docusaurus-docs is the development set (40 questions in Spanish, French, Urdu and Chinese: what the method was
measured on); mdbook-guide's even-numbered questions in Spanish, Urdu and Chinese are the held-out set, run after
the method was fixed. ``--json PATH`` also writes the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

SETS = Path(__file__).resolve().parent / "questions" / "i18n"
BOOKS = ("docusaurus-docs", "mdbook-guide")
COLUMNS = ("questions", "hit@5", "contains", "false refusals", "refused off-topic", "refused unanswerable",
           "right when high", "answered high")


def language_sets(book: str) -> dict[str, Path]:
    """The translated sets of ``book``, by language."""
    return {path.name.split(".")[-2]: path for path in sorted(SETS.glob(f"{book}.*.jsonl"))}


def english_originals(path: Path):
    """The English originals of a translated set, as questions."""
    from chat.quality.evaluation import load_questions  # noqa: PLC0415 (Django is set up by main)

    originals = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.strip():
            item = json.loads(line)
            originals[item["id"]] = item["question_en"]
    return [dataclasses.replace(q, id=q.id.rsplit("-", 1)[0], question=originals[q.id]) for q in load_questions(path)]


def figures(summary: dict) -> dict:
    """What the table shows of an evaluation's summary."""
    confidence = summary.get("confidence") or {}
    return {"questions": summary.get("questions"), "hit@5": summary.get("hit_at_5"),
            "contains": summary.get("answer_contains_rate"), "false refusals": summary.get("false_refusal_rate"),
            "refused off-topic": summary.get("refusal_rate_out_of_scope"),
            "refused unanswerable": summary.get("refusal_rate_unanswerable"),
            "right when high": (confidence.get("precision") or {}).get("high"),
            "answered high": confidence.get("answerable_high"),
            "high answers": (confidence.get("levels") or {}).get("high")}


def evaluate_book(book: str, log, languages: list[str] | None = None) -> dict[str, dict]:
    """Figures per language for ``book``: English first, then each translation (only ``languages`` when given,
    ``en`` among them for the English originals)."""
    from chat.quality.evaluation import load_questions, run_evaluation  # noqa: PLC0415

    sets = language_sets(book)
    if not sets:
        return {}
    results = {}
    if not languages or "en" in languages:
        started = time.monotonic()
        results["en"] = figures(run_evaluation(english_originals(next(iter(sets.values()))), book_slug=book)[0])
        log(f"{book} en: {time.monotonic() - started:.0f} s")
    for language, path in sets.items():
        if languages and language not in languages:
            continue
        started = time.monotonic()
        results[language] = figures(run_evaluation(load_questions(path), book_slug=book)[0])
        log(f"{book} {language}: {time.monotonic() - started:.0f} s")
    return results


def _cell(value) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def render(results: dict[str, dict[str, dict]]) -> str:
    """One Markdown table per book, a row per language."""
    out = []
    for book, languages in results.items():
        out.append(f"{book}\n\n| language | " + " | ".join(COLUMNS) + " |\n|---|" + "---|" * len(COLUMNS))
        for language, row in languages.items():
            cells = [_cell(row.get(c)) for c in COLUMNS]
            cells[-2] = f"{cells[-2]} (of {row.get('high answers') or 0})"
            out.append(f"| {language} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crosslingual", description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", action="append", choices=BOOKS, help="only this book (repeatable)")
    parser.add_argument("--language", action="append",
                        help="only this language (repeatable; en: the English originals), to iterate fast")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--offsets", action="store_true",
                        help="only measure the language offsets with the configured embedder and write them "
                             "(chat/data/language_offsets.json)")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    import django  # noqa: PLC0415

    django.setup()
    if args.offsets:
        from chat.pipeline.crosslingual import write_offsets  # noqa: PLC0415

        print(f"wrote {write_offsets()}")
        return 0
    results = {}
    for book in args.book or BOOKS:
        results[book] = evaluate_book(book, lambda line: print(line, file=sys.stderr, flush=True),
                                      args.language)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
