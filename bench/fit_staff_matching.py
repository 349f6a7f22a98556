"""Fit the staff-answer matcher (``chat/pipeline/staff_matching.py``: its weights and threshold) on development sets
with held-out folds, and measure it end to end.

    .venv/bin/python -m bench.fit_staff_matching \\
        --set mdbook-guide:bench/questions/staff-mdbook-guide.jsonl \\
        --set docusaurus-docs:bench/questions/staff-docusaurus-docs.jsonl [--measure]

Each ``BOOK:FILE`` names an indexed book (ingest the shared books as ``mdbook-guide`` from the book root and
``docusaurus-docs`` from its ``docs/``) and a development set written for it: questions the course staff answered
(``kind: staff``, with the staff's ``answer``), each with paraphrases another student asks (``paraphrase``,
``staff``: its id), which must be served that staff answer, and near-misses (``near_miss``), which share many of its
words but ask something else and must be served no staff answer. Every staff question of a set is kept as a staff
answer of its book (in a transaction rolled back at the end), and every paraphrase and near-miss compared with them
as a student's question is (``staff_matching.candidates``: the ``CANDIDATES`` nearest by vector, the selected one
first, each with its ``FEATURES``); kept in ``var/bench/staff-*.pickle`` (delete it after re-indexing or after
changing a feature). A staff question asked again word for word matches without the weights, so it is left out.

The weights are a logistic regression (``bench.fit_reranker.fit``, L2 ``--l2``, 0.1) on each question's selected
candidate, right when the question is a paraphrase and the candidate its own staff answer, every book weighing the
same. The threshold is the lowest score from which at most ``MAX_NEAR_MISSES`` of the near-misses would be served:
serving another question's answer costs more than not serving a paraphrase, whose student then gets the book's own
answer. Held out: each set's staff questions are split into ``FOLDS`` folds, and each fold's questions decided by
weights and a threshold chosen on the other folds; then each book by those chosen on the other book (cross-book).
The constants to paste are fitted on every set.

``--measure`` asks every question of every set through the pipeline as ``evaluate`` does (with the constants in
the module, whatever this run fitted), with ``BOOKCHAT_STAFF_ANSWERS`` off (the book's own answer and level) and
then with the set's staff answers kept, and counts: staff questions and paraphrases served their staff answer,
served another's, and matched but kept by the book's high answer; near-misses served one; and questions the book
answers at high that a staff answer took over (by design, none).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from bench.fit_reranker import _setup, cached, fit

FOLDS = 5
MAX_NEAR_MISSES = 0.02
TRADE_OFF = (0.3, 0.4, 0.5, 0.7)  # other thresholds the report shows, on the held-out scores


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def collect(book: str, path: str) -> list[dict]:
    """Per question that isn't a staff question (one asked again word for word is matched as such, without the
    weights): its kind, its staff question's id, and its candidates (staff question id → features, the selected one
    first)."""
    return cached("staff", book, path, lambda: _collect(book, path))


def _collect(book: str, path: str) -> list[dict]:
    from django.db import transaction

    from chat.pipeline.staff_matching import candidates
    from ingestion.indexing.embedders import get_embedder

    rows, embedder = load(path), get_embedder()
    out = []
    with transaction.atomic():
        ids = kept_staff_answers(book, rows)
        by_pk = {pk: key for key, pk in ids.items()}
        for row in rows:
            if row["kind"] == "staff":
                continue
            staff = row["staff"]
            found = candidates(book=resolve(book), question=row["question"],
                               vector=embedder.embed_query(row["question"]))
            out.append({"id": row["id"], "kind": row["kind"], "staff": staff, "case": f"{book}:{staff}",
                        "candidates": {by_pk[c.id]: c.features for c in found}})
        transaction.set_rollback(True)
    return out


def resolve(book: str):
    from chat.pipeline.editions import resolve_book

    return resolve_book(book)


def kept_staff_answers(book: str, rows: list[dict]) -> dict[str, int]:
    """Keep every staff question of ``rows`` as a staff answer of ``book`` (inside the caller's transaction): their
    ids by the set's ids."""
    from chat.pipeline.staff_answers import keep

    target = resolve(book)
    return {row["id"]: keep(book=target, question=row["question"], answer=row.get("answer") or "See the staff.",
                            citations=[]).pk
            for row in rows if row["kind"] == "staff"}


# -- fitting ------------------------------------------------------------------------------------------------------
def selected(q: dict) -> tuple[str | None, list[float]]:
    """The staff answer a question is compared with (its first candidate, as ``match`` takes it) and its features."""
    from chat.pipeline.staff_matching import FEATURES

    for key, features in q["candidates"].items():
        return key, [features[name] for name in FEATURES]
    return None, []


def pairs(questions: list[dict], books: int) -> tuple[list, list[float]]:
    """``fit``'s groups (one per question with a candidate: its selected candidate's features, right when it is a
    paraphrase's own staff answer) and weights (every book the same)."""
    per_book: dict[str, int] = {}
    for q in questions:
        per_book[book_of_case(q)] = per_book.get(book_of_case(q), 0) + 1
    groups, weights = [], []
    for q in questions:
        key, x = selected(q)
        if key is None:
            continue
        groups.append((np.asarray([x]), np.asarray([float(q["kind"] == "paraphrase" and key == q["staff"])])))
        weights.append(len(questions) / (books * per_book[book_of_case(q)]))
    return groups, weights


def book_of_case(q: dict) -> str:
    return q["case"].split(":")[0]


def decide(questions: list[dict], weights: np.ndarray, bias: float, threshold: float) -> list[dict]:
    """Each question's outcome: served (its selected candidate's probability at or above ``threshold``) and whether
    that is its own staff answer."""
    from chat.pipeline.scoring import logistic_array
    from chat.pipeline.staff_matching import QUESTION_FLOOR, near_copy

    out = []
    for q in questions:
        key, x = selected(q)
        p = float(logistic_array(np.asarray(x) @ weights + bias)) if key is not None else 0.0
        if key is not None:
            features = q["candidates"][key]
            p = 1.0 if near_copy(features) else p if features["cosine"] >= QUESTION_FLOOR else 0.0
        out.append({"kind": q["kind"], "served": key is not None and p >= threshold, "own": key == q["staff"],
                    "score": p})
    return out


def figures(decided: list[dict]) -> dict:
    """Paraphrases served their own staff answer, served another's, and near-misses served one (shares and
    counts)."""
    paraphrases = [d for d in decided if d["kind"] == "paraphrase"]
    near = [d for d in decided if d["kind"] == "near_miss"]

    def share(items, keep) -> tuple[float, int, int]:
        hits = sum(1 for d in items if keep(d))
        return (hits / len(items) if items else 0.0), hits, len(items)

    return {"paraphrases_served": share(paraphrases, lambda d: d["served"] and d["own"]),
            "paraphrases_served_another": share(paraphrases, lambda d: d["served"] and not d["own"]),
            "near_misses_served": share(near, lambda d: d["served"])}


def choose(questions: list[dict], books: int, l2: float) -> tuple[np.ndarray, float, float]:
    """Weights fitted on ``questions``, and the lowest threshold from which they serve at most ``MAX_NEAR_MISSES``
    of its near-misses (tried at each question's own score)."""
    weights, bias = _fit(questions, books, l2)
    scores = sorted({d["score"] for d in decide(questions, weights, bias, 0.0)})
    for threshold in scores:
        if figures(decide(questions, weights, bias, threshold))["near_misses_served"][0] <= MAX_NEAR_MISSES:
            return weights, bias, threshold
    return weights, bias, 1.0


def _fit(questions: list[dict], books: int, l2: float) -> tuple[np.ndarray, float]:
    groups, weights = pairs(questions, books)
    return fit(groups, l2=l2, weights=weights)


def held_out(sets: dict[str, list[dict]], l2: float) -> tuple[list[dict], dict[str, list[dict]]]:
    """Every question decided by weights and a threshold chosen without its staff question (``FOLDS`` folds), and
    each book's by those chosen on the other books."""
    questions = [q for rows in sets.values() for q in rows]
    fold_of = {}
    for rows in sets.values():
        for n, case in enumerate(dict.fromkeys(q["case"] for q in rows)):
            fold_of[case] = n % FOLDS
    decided = []
    for fold in range(FOLDS):
        train = [q for q in questions if fold_of[q["case"]] != fold]
        weights, bias, threshold = choose(train, len(sets), l2)
        decided += decide([q for q in questions if fold_of[q["case"]] == fold], weights, bias, threshold)
    across = {}
    for spec, rows in sets.items():
        others = [q for other, o in sets.items() if other != spec for q in o]
        if others:
            across[spec] = decide(rows, *choose(others, len(sets) - 1, l2))
    return decided, across


def fitting_report(sets: dict[str, list[dict]], l2: float) -> str:
    """The held-out and cross-book figures, and the constants fitted on every set."""
    from chat.pipeline.staff_matching import FEATURES

    decided, across = held_out(sets, l2)
    lines = ["| held out | paraphrases served | served another's | near-misses served |", "|---|---|---|---|",
             row(f"{FOLDS} folds, every set", figures(decided))]
    lines += [row(f"{spec.split(':')[0]}, fitted on the other book", figures(d)) for spec, d in across.items()]
    # What another threshold would trade, on the same held-out scores (each fold's own model's).
    lines += [row(f"{FOLDS} folds, at {cut:.1f} instead", figures([{**d, "served": d["score"] >= cut}
                                                                    for d in decided]))
              for cut in TRADE_OFF]
    weights, bias, threshold = choose([q for rows in sets.values() for q in rows], len(sets), l2)
    lines += ["", "WEIGHTS = {" + ", ".join(f'"{n}": {w:.3f}' for n, w in zip(FEATURES, weights, strict=True))
              + "}", f"BIAS = {bias:.3f}", f"THRESHOLD = {threshold:.6f}"]
    return "\n".join(lines)


def row(name: str, f: dict) -> str:
    return "| " + " | ".join([name] + [f"{100 * s:.1f} % ({h}/{n})" for s, h, n in f.values()]) + " |"


# -- measuring ----------------------------------------------------------------------------------------------------
def measure(book: str, path: str) -> dict:
    """Every question of the set asked through the pipeline (channel ``evaluate``), its book's own answer and then
    with the set's staff answers kept: counts of what the module docstring lists."""
    from django.db import transaction
    from django.test.utils import override_settings

    from bench.fit_reranker import _current

    rows = load(path)
    counts = dict.fromkeys(("staff_served", "staff", "paraphrases_served", "paraphrases", "kept_by_high",
                            "served_another", "near_misses_served", "near_misses", "high", "high_taken"), 0)
    with override_settings(BOOKCHAT={**_current(), "STAFF_ANSWERS": False}):
        own = {row["id"]: asked(book, row["question"]) for row in rows}
    with transaction.atomic():
        ids = kept_staff_answers(book, rows)
        for row in rows:
            got = asked(book, row["question"])
            level = own[row["id"]].confidence_level
            served = got.staff_answer.id if got.staff_answer else None
            mine = ids.get(row["id"] if row["kind"] == "staff" else row.get("staff"))
            count(counts, row["kind"], served, mine, level, staff_matched(book, row["question"]) == mine)
        transaction.set_rollback(True)
    return counts


def asked(book: str, question: str):
    from chat.pipeline.answering import answer_question
    from chat.pipeline.questions import AskRequest

    return answer_question(AskRequest(question=question, book=book, channel="evaluate"))


def staff_matched(book: str, question: str) -> int | None:
    from chat.pipeline.staff_matching import match
    from ingestion.indexing.embedders import get_embedder

    found = match(book=resolve(book), question=question, vector=get_embedder().embed_query(question))
    return found.id if found else None


def count(counts: dict, kind: str, served: int | None, mine: int | None, level: str, matched_mine: bool) -> None:
    """One question's outcome added to ``counts``."""
    counts["high"] += level == "high"
    counts["high_taken"] += level == "high" and served is not None
    if kind == "near_miss":
        counts["near_misses"] += 1
        counts["near_misses_served"] += served is not None
        return
    name = "staff" if kind == "staff" else "paraphrases"
    counts[name] += 1
    counts[f"{name}_served"] += served == mine
    counts["served_another"] += served is not None and served != mine
    counts["kept_by_high"] += served is None and level == "high" and matched_mine


def measuring_report(specs: list[str]) -> str:
    lines = ["| set | staff questions served | paraphrases served | matched, kept by the book's high answer | "
             "served another's | near-misses served | book's answer high | of them taken over |",
             "|---|---|---|---|---|---|---|---|"]
    for spec in specs:
        c = measure(*spec.split(":", 1))
        lines.append(f"| {spec.split(':')[0]} | {c['staff_served']}/{c['staff']} | "
                     f"{c['paraphrases_served']}/{c['paraphrases']} "
                     f"({100 * c['paraphrases_served'] / max(1, c['paraphrases']):.1f} %) | {c['kept_by_high']} | "
                     f"{c['served_another']} | {c['near_misses_served']}/{c['near_misses']} "
                     f"({100 * c['near_misses_served'] / max(1, c['near_misses']):.1f} %) | {c['high']} | "
                     f"{c['high_taken']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", action="append", default=[], required=True, help="BOOK:FILE (repeat)")
    parser.add_argument("--l2", type=float, default=0.1)
    parser.add_argument("--measure", action="store_true", help="also ask every question through the pipeline")
    args = parser.parse_args(argv)
    _setup()
    sets = {spec: collect(*spec.split(":", 1)) for spec in args.set}
    for spec, rows in sets.items():
        print(f"{spec}: {len(rows)} questions", file=sys.stderr)
    print(fitting_report(sets, args.l2))
    if args.measure:
        print()
        print(measuring_report(args.set))
    return 0


if __name__ == "__main__":
    sys.exit(main())
