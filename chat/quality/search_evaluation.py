"""How well the book's search finds the section a question is about, as a reader would type it into a search box
(``evaluate --search``: the figures search as you type is judged by).

For each answerable question with evidence, three queries go through the book's search box as it ships
(``chat.pipeline.typeahead``: the last word also stands for the book's words that begin with it, hybrid search,
the re-ranker, sections grouped by page as a reader is shown them), with no audit row:
- **full**: the question's words as they are;
- **typed**: what a reader has typed three words in: the question's first three words, the third cut to a
  prefix (its first half, at least two characters), as in "How do I ins";
- **typed_content**: the same over the question's content words only (those the book's text-search configuration
  keeps: "how", "do", "I" are stop words), as in "configure sidebar categ": what a reader types into a search box,
  where a question's opening words say little.
A hit is one of the first ``top_k`` sections shown that holds one of the question's evidence strings
(``evaluation._hit_rank``) in one of its passages found: the reader lands on the section. A page without headings
is one section (squad2-dev's articles), so there a hit is the right article.
Reported: hit@1 and hit@5 of each, and the p50/p95 of retrieval time per query. Nothing here is tuned on these
questions; the numbers say how far search as typed is from search as asked.
"""

from __future__ import annotations

import math
import re
import time

import numpy as np
from django.db import connection

from chat.pipeline.deadline import Deadline
from chat.pipeline.editions import resolve_book
from chat.pipeline.typeahead import by_page, typed_search
from chat.quality.evaluation import SHOULD_REFUSE, Question, _hit_rank
from ingestion.indexing.lexicon import BOOK_SEARCH_CONFIG

TYPED_WORDS = 3
MODES = {"full": "full question", "typed": f"as typed ({TYPED_WORDS} words, the last cut)",
         "typed_content": "as typed, content words only"}  # each mode and its line's label
WORD = re.compile(r"\S+")


def typed_prefix(question: str, words: int = TYPED_WORDS) -> str:
    """The first ``words`` words of ``question``, the last one cut to its first half (at least two characters, and
    without the punctuation that ends it): what a reader has typed so far."""
    parts = WORD.findall(question)[:words]
    if not parts:
        return ""
    last = parts[-1].rstrip("?.!,;:")
    keep = max(2, math.ceil(len(last) / 2))
    return " ".join([*parts[:-1], last[:keep]])


def content_words(question: str, book_id: int) -> str:
    """The words of ``question`` the book's text-search configuration keeps (not stop words), in order."""
    words = WORD.findall(question)
    if not words:
        return ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT w FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, i) "
                       f"WHERE bookchat_to_tsvector({BOOK_SEARCH_CONFIG}, w) <> ''::tsvector ORDER BY i",
                       [words, book_id])
        return " ".join(row[0] for row in cursor.fetchall())


def run_search_evaluation(questions: list[Question], *, book_slug: str | None = None, top_k: int = 5) -> dict:
    """The summary (and per-question records) of searching ``questions`` in full and as typed."""
    book = resolve_book(book_slug)
    wanted = [q for q in questions if q.kind not in SHOULD_REFUSE and q.evidence]
    records, seconds = [], {mode: [] for mode in MODES}
    for q in wanted:
        record = {"id": q.id, "question": q.question}
        queries = {"full": q.question, "typed": typed_prefix(q.question),
                   "typed_content": typed_prefix(content_words(q.question, book.pk) or q.question)}
        for mode, query in queries.items():
            started = time.monotonic()
            found, _ = typed_search(book, query, deadline=Deadline())
            seconds[mode].append((time.monotonic() - started) * 1000)
            section_text: dict[tuple[int, str], str] = {}
            for chunk in found.pool:  # a section shown stands for its passages that were found
                key = (chunk.document_id, chunk.anchor)
                section_text[key] = f"{section_text.get(key, '')}\n{chunk.text}"
            shown = [section_text[(c.document_id, c.anchor)] for page in by_page(found.pool) for c in page][:top_k]
            record[mode] = {"query": query, "hit_rank": _hit_rank(shown, q.evidence)}
        records.append(record)

    def hit_at(mode: str, k: int) -> float | None:
        if not records:
            return None
        return round(sum(r[mode]["hit_rank"] is not None and r[mode]["hit_rank"] <= k for r in records)
                     / len(records), 3)

    summary = {"book": book.slug, "questions": len(records), "top_k": top_k,
               **{f"{mode}_{metric}": value for mode in MODES
                  for metric, value in (("hit_at_1", hit_at(mode, 1)), (f"hit_at_{top_k}", hit_at(mode, top_k)),
                                        ("p50_ms", ms_percentile(seconds[mode], 50)),
                                        ("p95_ms", ms_percentile(seconds[mode], 95)))}}
    return {"summary": summary, "records": records}


def ms_percentile(values: list[float], q: float) -> float | None:
    """The ``q``th percentile of ``values`` (ms), as ``evaluate``'s latencies are computed, to 0.1 ms."""
    return round(float(np.percentile(values, q)), 1) if values else None


def render_search_summary(s: dict) -> str:
    k = s["top_k"]
    lines = [f"Search on book {s['book']!r}: {s['questions']} answerable questions with evidence."]
    for mode, label in MODES.items():
        lines.append(f"  {label}: hit@1 {s[f'{mode}_hit_at_1']}, hit@{k} {s[f'{mode}_hit_at_{k}']}; "
                     f"p50 {s[f'{mode}_p50_ms']} ms, p95 {s[f'{mode}_p95_ms']} ms")
    return "\n".join(lines)
