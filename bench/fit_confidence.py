"""Fit the confidence model (``chat/pipeline/confidence.py``) and its three cuts on development question sets, and
check them on books the model was not fitted on.

    .venv/bin/python -m bench.fit_confidence --fit squad2-dev:../shared/data/squad2-dev/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions-2.jsonl \\
        --fit docusaurus-docs:bench/questions/kinds-docusaurus-docs.jsonl \\
        --fit mdbook-guide:bench/questions/mdbook-guide.jsonl \\
        --fit mdbook-guide:bench/questions/kinds-mdbook-guide.jsonl \\
        --fit mkdocs-material:bench/questions/mkdocs-material.jsonl \\
        --fit mkdocs-material:bench/questions/kinds-mkdocs-material.jsonl \\
        --check bookchat-manual:bench/questions/kinds-bookchat-manual.jsonl \\
        --pool docusaurus-docs --pool mdbook-guide --pool mkdocs-material

Each ``BOOK:FILE`` names an indexed book and a question file (the ``bench/questions/`` ones are ours, written for
the mdBook guide, Material for MkDocs, Docusaurus's docs and the bundled manual; ``kinds-*`` hold the
selected-text, follow-up and rare-word unanswerable questions; ingest the shared books as ``mdbook-guide`` from the
book root and ``mkdocs-material`` from the site root). The manual's set is only checked (``--check``): with 20
judged answers, as a fitting book weighing a fifth it turned the weight of coverage negative, and held out of the
fit altogether it is a book the model never saw. Every question is asked through
the pipeline as ``evaluate`` asks it, but answered whatever the scope and answerability checks
decide and never held back as unsure (``evaluate_question(answer_all=True)``), so that each
answer's features and whether it is right (``chat.quality.evaluation.answer_right``) are known; what the
two checks decided is kept beside them. Kept in ``var/bench/confidence-*.pickle`` (delete it
after re-indexing or after changing a feature).

The model is a logistic regression (``bench.fit_reranker.fit``, L2) on the judged answers to the
questions that should be answered and that the checks let through, every book weighing the same.
Answers to unanswerable and off-topic questions are not among its examples: SQuAD 2.0's
unanswerable questions are rewrites of answerable ones that keep their words, and as wrong answers
they turn the weight of covering the question's words negative, which is wrong on every other book
(BENCHMARKS.md, "Confidence"); the documentation books' own, taken as wrong examples, pushed the high cut
above all but four of their answers. They count where the cuts are chosen instead.

Cross-book: each book's sets are predicted by the model fitted on the other books, and the cuts
are chosen on those held-out predictions (an answer ``confidence.barred`` from high counts below it):
``HIGH`` is the lowest cut from which the answers are ≥ ``HIGH_PRECISION`` right with every book weighing
the same, with the ``--pool`` books' answers taken together, and for each kind of question with at least
``KIND_ANSWERS`` answers; and from which at most ``MAX_UNANSWERABLE_HIGH`` of the pooled books' unanswerable
questions are answered (SQuAD 2.0's are reported, not held to it). ``MEDIUM`` is the lowest cut below it where
the answers between the two are ≥ ``MEDIUM_PRECISION`` right, the same ways; below it an answer is unsure.
``FLOOR``, below which an unsure answer is held back, the lowest cut under ``MEDIUM`` that
refuses the most of the questions that should be refused (unanswerable and off-topic, each set's
share weighing the same) while no set's false refusals (answerable questions refused by either
check or for being unsure) exceed ``MAX_FALSE_REFUSALS``, or the checks' own plus
``EXTRA_FALSE_REFUSALS`` where those already do. Then the figures of each set under its held-out model, of
each kind over every book, and the constants to paste (``MISSING`` too: the fitting books' mean
sentence gap, for a book without sentence vectors).

Each set's figures include the calibration error a perfectly calibrated model would show on the same answers by
chance (``ece_by_chance``): on a few dozen answers it is 0.1–0.16, so a book's own ECE says little. ``--pool BOOK``
(repeated) adds one row of those books' held-out answers together, e.g. the documentation books.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from bench.fit_reranker import _current, _setup, book_of, cached, fit, fit_arguments, load_sets
from chat.pipeline.scoring import logistic_array

HIGH_PRECISION = 0.90
MEDIUM_PRECISION = 0.60
MAX_FALSE_REFUSALS = 0.05
KIND_ANSWERS = 30  # a kind of question with this many judged answers keeps each level's promise on its own
MAX_UNANSWERABLE_HIGH = 0.02  # of the unanswerable questions the checks let through, answered high
EXTRA_FALSE_REFUSALS = 0.01


def collect(book: str, path: str) -> list[dict]:
    """Per question: its kind, features, ``right``, and what the scope and answerability checks decided."""
    return cached("confidence", book, path, lambda: _collect(book, path))


def _collect(book: str, path: str) -> list[dict]:
    from django.test.utils import override_settings

    from bookchat.base.conf import setting
    from chat.pipeline.calibration import book_calibration
    from chat.pipeline.editions import resolve_book
    from chat.quality.evaluation import evaluate_question, load_questions

    target = resolve_book(book)
    gate = bool(book_calibration(target).get("answerability"))
    out = []
    with override_settings(BOOKCHAT={**_current(), "ANSWERABILITY": "off", "UNSURE_ANSWERS": "answer"}):
        for q in load_questions(path):
            r = evaluate_question(q, book=target.slug, top_k=setting("TOP_K"), answer_all=True)
            if "error" in r:
                continue
            out.append({"id": r["id"], "kind": r["kind"], "features": r["features"], "right": r["right"],
                        "withheld": r["withheld"], "in_scope": r["in_scope"],
                        "answerable": r["answerable"] is not False or not gate, "answer": r["answer"],
                        "question": r["question"]})
    return out


def matrix(rows: list[dict]) -> np.ndarray:
    """Rows' ``FEATURES`` (0 for a question that drafted no answer, which has none)."""
    from chat.pipeline.confidence import FEATURES

    return np.asarray([[r["features"].get(name, 0.0) for name in FEATURES] for r in rows], dtype=np.float64)


def passes_checks(r: dict) -> bool:
    return r["in_scope"] and r["answerable"] and not r["withheld"]


def should_refuse(r: dict) -> bool:
    from chat.quality.evaluation import SHOULD_REFUSE

    return r["kind"] in SHOULD_REFUSE


def judged(r: dict) -> bool:
    """An answer to a question that should be answered, let through by the checks, whose rightness is known."""
    return passes_checks(r) and not should_refuse(r) and r["right"] is not None and bool(r["features"])


def fit_model(sets: dict[str, list[dict]], specs: list[str], *, l2: float) -> tuple[np.ndarray, float]:
    """The logistic model on the judged answers of ``specs``, every book weighing the same."""
    groups, weights = [], []
    books = {book_of(spec) for spec in specs}
    for spec in specs:
        rows = [r for r in sets[spec] if judged(r)]
        of_book = sum(1 for other in specs if book_of(other) == book_of(spec) for r in sets[other] if judged(r))
        x, y = matrix(rows), np.asarray([float(r["right"]) for r in rows])
        groups += [(x[i:i + 1], y[i:i + 1]) for i in range(len(rows))]
        weights += [1.0 / (of_book * len(books))] * len(rows)
    scale = len(groups) / sum(weights)
    return fit(groups, l2=l2, weights=[w * scale for w in weights])


def missing_means(sets: dict[str, list[dict]], specs: list[str]) -> dict[str, float]:
    """``MISSING``: the mean sentence gap of the judged answers of ``specs``, every book weighing the same (what a
    book without sentence vectors is given)."""
    by_book: dict[str, list[float]] = {}
    for spec in specs:
        by_book.setdefault(book_of(spec), []).extend(r["features"]["unit_gap"] for r in sets[spec]
                                                      if judged(r) and "unit_gap" in r["features"])
    means = [float(np.mean(gaps)) for gaps in by_book.values() if gaps]
    return {"unit_gap": round(float(np.mean(means)), 3) if means else 0.0}


def predict(rows: list[dict], weights: np.ndarray, bias: float) -> np.ndarray:
    """Each row's probability (0 for a question that drafted no answer)."""
    p = logistic_array(matrix(rows) @ weights + bias)
    return np.where([bool(r["features"]) for r in rows], p, 0.0)


def never_high(r: dict) -> bool:
    """An answer that can't be high, whatever its probability (``confidence.barred``); kept on the row, as the cuts
    are tried by the hundred."""
    if "_never_high" not in r:
        from chat.pipeline.confidence import barred

        r["_never_high"] = bool(r["features"]) and bool(barred(r["question"], r["answer"], r["features"]))
    return r["_never_high"]


def level(r: dict, prob: float, high: float, medium: float) -> str:
    return "high" if prob >= high and not never_high(r) else "medium" if prob >= medium else "unsure"


def outcome(rows: list[dict], p: np.ndarray, high: float, medium: float, floor: float, *,
            by_chance: bool = False) -> dict:
    """A set's figures when answers below ``floor`` are refused as unsure: what ``evaluate`` reports of its
    confidence (``chat.quality.evaluation.confidence_report``: precision and count per level, the share of questions
    that should be answered answered high, the calibration error, and with ``by_chance`` the one a perfectly
    calibrated model would show on them by chance; how well it tells right from wrong), the refusals per kind and
    the share of unanswerable questions answered high."""
    from chat.quality.evaluation import confidence_report

    refused = [not passes_checks(r) or prob < floor for r, prob in zip(rows, p, strict=True)]
    levels = [level(r, prob, high, medium) for r, prob in zip(rows, p, strict=True)]
    report = confidence_report([
        {"kind": r["kind"], "confidence": float(prob), "confidence_level": lvl, "right": r["right"], "refused": ref,
         "withheld": False}
        for r, prob, ref, lvl in zip(rows, p, refused, levels, strict=True)], by_chance=by_chance)

    def share(flags: list[bool], keep) -> float | None:
        kept = [flag for r, flag in zip(rows, flags, strict=True) if keep(r)]
        return sum(kept) / len(kept) if kept else None

    by_checks = [not passes_checks(r) for r in rows]
    high_answers = [not ref and lvl == "high" for ref, lvl in zip(refused, levels, strict=True)]
    return {
        "high": report["precision"]["high"], "n_high": report["levels"]["high"],
        "medium": report["precision"]["medium"], "n_medium": report["levels"]["medium"],
        "unsure": report["precision"]["unsure"], "n_unsure": report["levels"]["unsure"],
        "answerable_high": report["answerable_high"],
        "unanswerable_high": share(high_answers, lambda r: r["kind"] == "unanswerable"),
        "unanswerable_refused": share(refused, lambda r: r["kind"] == "unanswerable"),
        "out_of_scope_refused": share(refused, lambda r: r["kind"] == "out_of_scope"),
        "false_refusals": share(refused, lambda r: not should_refuse(r)),
        "checks_false_refusals": share(by_checks, lambda r: not should_refuse(r)),
        "ece": report["ece"],
        "ece_by_chance": report["ece_by_chance"],
        "discrimination": report["discrimination"],
    }


Answer = tuple[float, bool, bool]  # a judged held-out answer: (probability, right, never high)


def band(items: list[Answer], cut: float, below: float) -> list[bool]:
    """Whether each answer from ``cut`` to ``below`` is right (only answers that may be high count as high)."""
    return [y for prob, y, barred in items if cut <= prob < below and not (barred and below > 1.0)]


def plain_precision(items: list[Answer], cut: float, below: float = 2.0) -> float:
    at = band(items, cut, below)
    return sum(at) / len(at) if at else 1.0


@dataclass(frozen=True)
class HeldOutAnswers:
    """What the high and medium cuts are chosen on: the judged held-out answers by book, by kind, and the pooled
    books' together; and, of the pooled books (every book when there is no pool), the unanswerable questions the
    checks let through with an answer, as (probability, never high), and how many unanswerable questions were asked."""

    by_book: dict[str, list[Answer]]
    by_kind: dict[str, list[Answer]]
    pooled: list[Answer]
    kinds: dict[str, list[Answer]]  # the kinds with at least KIND_ANSWERS answers: each must keep the promises alone
    unanswerable: list[tuple[float, bool]]
    asked_unanswerable: int

    @classmethod
    def of(cls, held: dict[str, tuple[list[dict], np.ndarray]], pool: list[str]) -> HeldOutAnswers:
        answers: dict[str, list[Answer]] = {}
        by_kind: dict[str, list[Answer]] = {}
        unanswerable: list[tuple[float, bool]] = []
        asked_unanswerable = 0  # the pooled books' unanswerable questions, answered or not
        for spec, (rows, p) in held.items():
            asked_unanswerable += sum(r["kind"] == "unanswerable" and (book_of(spec) in pool or not pool)
                                      for r in rows)
            for r, prob in zip(rows, p, strict=True):
                if judged(r):
                    item = (prob, bool(r["right"]), never_high(r))
                    answers.setdefault(book_of(spec), []).append(item)
                    by_kind.setdefault(r["kind"], []).append(item)
                elif (r["kind"] == "unanswerable" and passes_checks(r) and r["features"]
                      and (book_of(spec) in pool or not pool)):  # SQuAD 2.0's: see the module docstring
                    unanswerable.append((prob, never_high(r)))
        pooled = [item for book in pool for item in answers.get(book, [])]
        kinds = {kind: items for kind, items in by_kind.items() if len(items) >= KIND_ANSWERS}
        return cls(answers, by_kind, pooled, kinds, unanswerable, asked_unanswerable)

    def precision(self, cut: float, below: float = 2.0) -> float:
        """The share right of the answers from ``cut`` to ``below``, each answer weighing 1 / its book's judged
        answers (so every book weighs the same in all, and a book's few answers above a cut weigh little)."""
        right = total = 0.0
        for items in self.by_book.values():
            at = band(items, cut, below)
            right += sum(at) / len(items)
            total += len(at) / len(items)
        return right / total if total else 1.0

    def high_holds(self, cut: float) -> bool:
        return (self.precision(cut) >= HIGH_PRECISION and plain_precision(self.pooled, cut) >= HIGH_PRECISION
                and all(plain_precision(items, cut) >= HIGH_PRECISION for items in self.kinds.values())
                and sum(prob >= cut and not barred for prob, barred in self.unanswerable) <= MAX_UNANSWERABLE_HIGH
                * max(1, self.asked_unanswerable))

    def medium_holds(self, cut: float, high: float) -> bool:
        return (self.precision(cut, high) >= MEDIUM_PRECISION
                and all(plain_precision(items, cut, high) >= MEDIUM_PRECISION for items in self.kinds.values()))

    def describe(self, high: float, medium: float) -> str:
        """How right the answers are from the high cut and between the two cuts, in all and per kind."""
        return (f"held-out answers right: {self.precision(high):.3f} from the high cut"
                + (f" ({plain_precision(self.pooled, high):.3f} of the pooled books')" if self.pooled else "")
                + f", {self.precision(medium, high):.3f} between high and medium (aimed for: {HIGH_PRECISION}, "
                f"{MEDIUM_PRECISION}); per kind, high / medium: "
                + ", ".join(f"{kind} {plain_precision(items, high):.3f} / {plain_precision(items, medium, high):.3f} "
                            f"(n {len(items)})" for kind, items in self.by_kind.items()))


def choose_cuts(held: dict[str, tuple[list[dict], np.ndarray]], pool: list[str] = ()) -> tuple[float, float, float]:
    """``HIGH``, ``MEDIUM`` and ``FLOOR`` from held-out predictions (see the module docstring); ``pool``: books whose
    answers taken together must also be ``HIGH_PRECISION`` right from ``HIGH``."""
    answers = HeldOutAnswers.of(held, pool)
    grid = np.round(np.arange(0.05, 0.991, 0.005), 3)
    high = next((float(c) for c in grid if answers.high_holds(c)), 0.99)
    medium = next((float(c) for c in grid[grid < high] if answers.medium_holds(c, high)), high)
    floor = choose_floor(held, high, medium)
    print(answers.describe(high, medium), file=sys.stderr)
    return high, medium, floor


def choose_floor(held: dict[str, tuple[list[dict], np.ndarray]], high: float, medium: float) -> float:
    """``FLOOR``, from 0 up to ``medium``, as the module docstring says: no set's false refusals over what it is
    allowed."""
    floor, best = 0.0, -1.0  # 0: nothing held back for its confidence alone
    for cut in np.round(np.arange(0.0, medium + 1e-9, 0.005), 3):
        ok, refused = True, []
        for rows, p in held.values():
            o = outcome(rows, p, high, medium, cut)
            allowed = max(MAX_FALSE_REFUSALS, o["checks_false_refusals"] + EXTRA_FALSE_REFUSALS)
            ok = ok and o["false_refusals"] <= allowed
            refused += [o[kind] for kind in ("unanswerable_refused", "out_of_scope_refused") if o[kind] is not None]
        gain = sum(refused) / len(refused) if refused else 0.0
        if ok and gain > best + 1e-9:  # the lowest cut that refuses the most of what should be refused
            floor, best = float(cut), gain
    return floor


def main(argv=None) -> int:
    args = fit_arguments(__doc__.split("\n")[0], argv, pools=True)
    _setup()
    from chat.pipeline.confidence import FEATURES

    sets = load_sets(args, collect)
    weights, bias = fit_model(sets, args.fit, l2=args.l2)
    held = {}
    for spec in args.fit:  # each book left out in turn: its sets are predicted by a model fitted on the others
        others = [o for o in args.fit if book_of(o) != book_of(spec)] or [spec]
        held[spec] = (sets[spec], predict(sets[spec], *fit_model(sets, others, l2=args.l2)))
    for spec in args.check:
        held[spec] = (sets[spec], predict(sets[spec], weights, bias))
    high, medium, floor = choose_cuts({spec: held[spec] for spec in args.fit}, args.pool)
    print(f"cuts on held-out predictions: high {high:.3f}, medium {medium:.3f}, floor {floor:.3f}")
    columns = ("high", "n_high", "medium", "n_medium", "unsure", "n_unsure", "answerable_high", "unanswerable_high",
               "unanswerable_refused", "out_of_scope_refused", "false_refusals", "checks_false_refusals", "ece",
               "ece_by_chance", "discrimination")
    print(f"{'set (held out)':58} " + " ".join(f"{c[:12]:>12}" for c in columns))
    pooled = [spec for spec in held if book_of(spec) in args.pool]
    if pooled:  # a few dozen answers a book can't show an ECE of 0.08 (ece_by_chance): together they may
        held[f"pooled: {', '.join(args.pool)}"] = ([r for spec in pooled for r in held[spec][0]],
                                                   np.concatenate([held[spec][1] for spec in pooled]))
    from chat.quality.evaluation import KINDS

    for kind in KINDS:  # each kind's held-out answers over every book
        of_kind = [(r, prob) for spec in args.fit for r, prob in zip(*held[spec], strict=True) if r["kind"] == kind]
        if of_kind:
            held[f"kind: {kind}"] = ([r for r, _ in of_kind], np.asarray([prob for _, prob in of_kind]))
    for spec, (rows, p) in held.items():
        o = outcome(rows, p, high, medium, floor, by_chance=True)
        print(f"{spec[-58:]:58} " + " ".join(
            f"{'—':>12}" if o[c] is None else f"{o[c]:>12.3f}" if isinstance(o[c], float) else f"{o[c]:>12}"
            for c in columns))
    print("WEIGHTS = (" + ", ".join(f"{w:.4f}" for w in weights) + ")")
    print(f"BIAS = {bias:.4f}")
    print("MISSING = {" + ", ".join(f'"{k}": {v}' for k, v in missing_means(sets, args.fit).items()) + "}")
    print(f"HIGH = {high:.3f}")
    print(f"MEDIUM = {medium:.3f}")
    print(f"FLOOR = {floor:.3f}")
    print("# " + ", ".join(FEATURES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
