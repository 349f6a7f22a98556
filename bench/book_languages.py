"""Books in other languages: the FastAPI documentation in English, Spanish, Chinese and Portuguese, each indexed as
its own book (``fastapi-<language>``, ``ingest --language``), asked our questions (``bench/questions/i18n/``) per
pair of book language × question language: hit@5, answer contains and false refusals (``chat.quality.evaluation``).

Same-language pairs ask ``fastapi.<l>.jsonl`` of ``fastapi-<l>``; the cross pairs ask the Spanish, Chinese and
Portuguese questions of the English book (``fastapi.<l>.on-en.jsonl``, evidence from the English pages).
``--search-config CONFIG`` indexes the named book's passages with another text-search configuration for the run
(then puts its own back): how the Chinese book was measured with ``simple`` against ``bookchat_cjk``.

    BOOKCHAT_DATA_DIR=... python -m bench.book_languages [--pairs zh/zh en/zh] [--search-config fastapi-zh=simple]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from bench.fit_reranker import _setup

QUESTIONS = Path(__file__).resolve().parent / "questions" / "i18n"
PAIRS = ("en/en", "es/es", "zh/zh", "pt/pt", "en/es", "en/zh", "en/pt")  # book language / question language
SHOWN = ("questions", "hit_at_5", "answer_contains_rate", "false_refusal_rate")


def questions_file(book_language: str, question_language: str) -> Path:
    if book_language == question_language:
        return QUESTIONS / f"fastapi.{question_language}.jsonl"
    if book_language != "en":
        raise ValueError(f"no questions for the {book_language} book in {question_language}")
    return QUESTIONS / f"fastapi.{question_language}.on-en.jsonl"


@contextlib.contextmanager
def search_config(slug: str, config: str | None):
    """The book's passages searched with ``config`` for the block (its lexical statistics counted again), then with
    its own."""
    from ingestion.indexing.lexicon import refresh_lexicon
    from ingestion.models import Book, Chunk

    book = Book.objects.get(slug=slug)
    own = book.search_config
    if config is None or config == own:
        yield
        return

    def use(name: str) -> None:
        Book.objects.filter(pk=book.pk).update(search_config=name)
        Chunk.objects.filter(book=book).update(search_config=name)
        refresh_lexicon(Book.objects.get(pk=book.pk))

    use(config)
    try:
        yield
    finally:
        use(own)


def measure(pair: str) -> dict:
    from chat.quality.evaluation import load_questions, run_evaluation

    book_language, question_language = pair.split("/")
    summary, _ = run_evaluation(load_questions(questions_file(book_language, question_language)),
                                book_slug=f"fastapi-{book_language}")
    return {key: summary[key] for key in SHOWN}


def table(rows: list[tuple[str, dict]]) -> str:
    def cell(value) -> str:
        return "–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = ["| book | questions in | n | hit@5 | answer contains | false refusals |", "|---|---|---|---|---|---|"]
    for pair, figures in rows:
        book_language, question_language = pair.split("/")
        lines.append(f"| fastapi-{book_language} | {question_language} | "
                     + " | ".join(cell(figures[key]) for key in SHOWN) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS), help="book/question languages, like zh/zh")
    parser.add_argument("--search-config", help="SLUG=CONFIG: search that book with CONFIG for the run")
    args = parser.parse_args(argv)
    _setup()
    slug, _, config = (args.search_config or "").partition("=")
    rows = []
    with search_config(slug, config) if slug else contextlib.nullcontext():
        for pair in args.pairs:
            rows.append((pair, measure(pair)))
            print(f"{pair}: {rows[-1][1]}", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
