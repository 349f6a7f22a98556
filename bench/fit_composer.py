"""Choose the extractive composer's hand-set weights (``chat/pipeline/extractive.py``) on development question sets,
each book left out in turn.

    .venv/bin/python -m bench.fit_composer --fit squad2-dev:../shared/data/squad2-dev/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions.jsonl \\
        --fit docusaurus-docs:../shared/data/docusaurus-docs/questions-2.jsonl \\
        --fit mdbook-guide:bench/questions/mdbook-guide.jsonl \\
        --fit mkdocs-material:bench/questions/mkdocs-material.jsonl

Every answerable question is asked through the pipeline as ``evaluate`` asks it, and what the composer
was given (the question as searched, the five excerpts with their scores and unit cosines, the selected
text) is kept (``var/bench/composer-*.pickle``; delete it after re-indexing). The composer is then run
again on those inputs for every combination of ``GRID`` (450) and each answer judged as ``evaluate`` judges it
(``answer_right``: it holds one of the question's short answers). A combination's score on a set of books
is the mean of their shares right (every book weighing the same). Left out in turn, each book gets the
combination that scores best on the others; its share right under that combination is printed beside the
current constants' and the best combination on all books.

It measures the composer alone: grounding, the scope and answerability checks and the unsure refusal
come after it and are not re-run (``evaluate`` shows them).
"""

from __future__ import annotations

import itertools
import sys

from bench.fit_reranker import _current, _setup, book_of, cached, fit_arguments, load_sets

GRID = {
    "RANK_PRIOR": (0.1, 0.3, 0.45, 0.6, 1.0),
    "SIMILARITY_WEIGHT": (0.0, 2.0, 4.0, 8.0, 12.0, 16.0),
    "ADD_SHARE": (0.6, 0.8),
    "HOW_TO_BONUS": (0.0, 0.25, 0.5),
}


def collect(book: str, path: str) -> list[dict]:
    return cached("composer", book, path, lambda: _collect(book, path))


def _collect(book: str, path: str) -> list[dict]:
    from django.test.utils import override_settings

    from bookchat.base.conf import setting
    from chat.pipeline import generation
    from chat.pipeline.editions import resolve_book
    from chat.quality.evaluation import SHOULD_REFUSE, evaluate_question, load_questions

    target = resolve_book(book)
    seen: list[tuple] = []
    compose = generation.compose_extractive

    def spy(question, sources, **kwargs):
        seen.append((question, [(s.heading_path, s.text, s.score, s.similarities) for s in sources], kwargs))
        return compose(question, sources, **kwargs)

    out = []
    generation.compose_extractive = spy
    try:
        with override_settings(BOOKCHAT={**_current(), "ANSWERABILITY": "off", "UNSURE_ANSWERS": "answer"}):
            for q in load_questions(path):
                if q.kind in SHOULD_REFUSE or not q.answers:
                    continue
                seen.clear()
                evaluate_question(q, book=target.slug, top_k=setting("TOP_K"), answer_all=True)
                if seen:
                    out.append({"id": q.id, "question": q, "composed": seen[-1]})
    finally:
        generation.compose_extractive = compose
    return out


def share_right(rows: list[dict], constants: dict) -> float:
    """The share of ``rows`` the composer answers right with ``constants`` set on its module."""
    from chat.pipeline import extractive
    from chat.pipeline.generation import Excerpt
    from chat.quality.evaluation import answer_right

    saved = {name: getattr(extractive, name) for name in constants}
    try:
        for name, value in constants.items():
            setattr(extractive, name, value)
        right = 0
        for row in rows:
            question, sources, kwargs = row["composed"]
            excerpts = [Excerpt(n, *source) for n, source in enumerate(sources, 1)]
            answer = extractive.compose_extractive(question, excerpts, **kwargs)
            right += bool(answer and answer_right(row["question"], answer, refused=False))
        return right / len(rows) if rows else 0.0
    finally:
        for name, value in saved.items():
            setattr(extractive, name, value)


def main(argv=None) -> int:
    args = fit_arguments(__doc__.split("\n")[0], argv)
    _setup()
    from chat.pipeline import extractive

    sets = load_sets(args, collect)
    books: dict[str, list[dict]] = {}
    for spec in args.fit:
        books.setdefault(book_of(spec), []).extend(sets[spec])
    current = {name: getattr(extractive, name) for name in GRID}
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    table = {i: {book: share_right(rows, combo) for book, rows in books.items()} for i, combo in enumerate(combos)}
    now = {book: share_right(rows, current) for book, rows in books.items()}

    def best(on: list[str]) -> int:
        return max(table, key=lambda i: (sum(table[i][b] for b in on) / len(on), -i))

    overall = best(list(books))
    print(f"current {current}; best on all books {combos[overall]}")
    print(f"{'book (left out)':24} {'n':>5} {'current':>8} {'left out':>9} {'best on all':>12}  chosen on the others")
    for book, rows in books.items():
        chosen = best([b for b in books if b != book])
        print(f"{book:24} {len(rows):>5} {now[book]:>8.3f} {table[chosen][book]:>9.3f} {table[overall][book]:>12.3f}  "
              f"{combos[chosen]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
