"""Lexical search: BM25 over the chunks' Postgres ``tsvector`` (english stemming, headings weighted).

Postgres' own ``ts_rank`` has no inverse document frequency, so an OR query over a question's
words is dominated by the words every page shares (the product's name, "page", "file").
Here Postgres does the stemming and the index look-ups: the question's lexemes, each one's
document frequency in the book (stored per book by ``ingestion.indexing.lexicon``; counted live, one
GIN look-up per lexeme, for a chapter or a book without them), and the term frequencies of
the chunks that contain any of the rarer ones; BM25 is computed from those. A lexeme in a heading
counts ``HEADING_TF_WEIGHT`` times, because questions often name a topic that only its
heading spells out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db import connection

from ingestion.indexing.lexicon import BOOK_SEARCH_CONFIG, query_terms, stored_statistics

K1 = 1.2
B = 0.75
HEADING_TF_WEIGHT = 2
# Lexemes found in more than this share of a book's chunks don't select candidates (they still score).
COMMON_SHARE = 0.5
# Most query lexemes looked up; long questions and pasted passages keep their rarest ones.
MAX_LEXEMES = 32
# Most lexemes of a question (and selected passage) scored at all.
MAX_QUERY_LEXEMES = 256
# Passages the candidate scan may read: the rarest lexemes select until the passages containing them add up
# to this many (the rarest always selects). A passage that holds none of those has only common words in
# common with the question, so it can't rank near the top; a dense candidate is scored whatever selects it.
SCAN_BUDGET = 2_000


@dataclass
class LexicalResult:
    scores: dict[str, float] = field(default_factory=dict)  # chunk id → BM25
    idf: dict[str, float] = field(default_factory=dict)  # every query lexeme, absent ones at their highest idf
    matched: dict[str, set[str]] = field(default_factory=dict)  # chunk id → query lexemes it contains
    # What the re-ranker reads: each query lexeme's positions in the query, and for every scored chunk the
    # positions of the query lexemes it holds (heading first, then text, as in its tsvector) and which of
    # them its heading holds.
    query_positions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    positions: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    in_heading: dict[str, set[str]] = field(default_factory=dict)

    def coverage(self, chunk_ids) -> float:
        """IDF-weighted share of the query's lexemes that occur in any of ``chunk_ids``."""
        total = sum(self.idf.values())
        if not total:
            return 0.0
        found = set().union(*(self.matched.get(cid, set()) for cid in chunk_ids)) if chunk_ids else set()
        return sum(self.idf[t] for t in found) / total


def query_lexemes(text: str, book_id: int) -> dict[str, tuple[int, ...]]:
    """The distinct lexemes Postgres makes of ``text`` with the book's stemming (stop words dropped), in order,
    each with its word positions in ``text``."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT lexeme, positions FROM unnest(to_tsvector({BOOK_SEARCH_CONFIG}, %s))",
                       [book_id, text])
        return {lexeme: tuple(positions or ()) for lexeme, positions in cursor.fetchall()}


def _tsquery_literal(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _count_live(cursor, book_id: int, lexemes: list[str], doc_filter: str,
                doc_params: list) -> tuple[int, float, dict[str, int]]:
    """The statistics ``ingestion.indexing.lexicon`` stores, counted from the passages themselves (a chapter's,
    or a book that has none stored)."""
    cursor.execute(f"SELECT count(*), coalesce(avg(length(search_vector)), 1) FROM ingestion_chunk "
                   f"WHERE book_id = %s{doc_filter}", [book_id, *doc_params])
    total, avg_length = cursor.fetchone()
    if not total:
        return 0, 1.0, {}
    parts, params = [], []
    for lexeme in lexemes:
        parts.append(f"SELECT %s, count(*) FROM ingestion_chunk WHERE book_id = %s{doc_filter} "
                     "AND search_vector @@ %s::tsquery")
        params += [lexeme, book_id, *doc_params, _tsquery_literal(lexeme)]
    cursor.execute(" UNION ALL ".join(parts), params)
    return total, avg_length, dict(cursor.fetchall())


def _selecting(df: dict[str, int], total: int, budget: int = SCAN_BUDGET) -> list[str]:
    """The lexemes whose passages become candidates: the rarest, within ``MAX_LEXEMES`` and ``budget`` passages,
    leaving out words most passages share (unless every word is that common)."""
    by_rarity = sorted(df, key=lambda t: (df[t], t))
    rare = [t for t in by_rarity if df[t] <= max(1, COMMON_SHARE * total)][:MAX_LEXEMES] or by_rarity[:3]
    chosen, scanned = [], 0
    for lexeme in rare:
        if chosen and scanned + df[lexeme] > budget:
            break
        chosen.append(lexeme)
        scanned += df[lexeme]
    return chosen


def bm25_search(*, book_id: int, text: str, limit: int, document_ids: list[int] | None = None,
                extra_ids: list[str] = (), stats: tuple[int, float] | None = None,
                scan_budget: int = SCAN_BUDGET) -> LexicalResult:
    """BM25 scores of the best ``limit`` chunks for ``text`` (and of ``extra_ids``, when they match at all).
    ``stats``: the book's stored (passages, mean length), when the caller has read them; ``scan_budget``: the
    passages the candidate scan may read (``SCAN_BUDGET``)."""
    result = LexicalResult()
    doc_filter = " AND document_id = ANY(%s)" if document_ids is not None else ""
    doc_params = [document_ids] if document_ids is not None else []
    with connection.cursor() as cursor:
        if stats is None and document_ids is None:
            stats = stored_statistics(cursor, book_id)
        if stats is not None and document_ids is None:
            terms = query_terms(cursor, book_id, text)
            counts = {t: chunks for t, (chunks, _) in terms.items()}
            if len(counts) > MAX_QUERY_LEXEMES:  # a long passage: the words the book has, rarest first
                kept = sorted(counts, key=lambda t: (counts[t] == 0, counts[t], t))[:MAX_QUERY_LEXEMES]
                counts = {t: counts[t] for t in kept}
            lexemes = list(counts)
            result.query_positions = {t: terms[t][1] for t in lexemes}
            total, avg_length = stats
        else:
            found = query_lexemes(text, book_id)
            lexemes = list(found)[:MAX_QUERY_LEXEMES]
            if not lexemes:
                return result
            result.query_positions = {t: found[t] for t in lexemes}
            total, avg_length, counts = _count_live(cursor, book_id, lexemes, doc_filter, doc_params)
        if not total or not lexemes:
            return result
        result.idf = {t: math.log(1 + (total - counts.get(t, 0) + 0.5) / (counts.get(t, 0) + 0.5)) for t in lexemes}
        df = {t: n for t, n in counts.items() if n}
        if not df:
            return result
        idf = result.idf
        query = " | ".join(_tsquery_literal(t) for t in _selecting(df, total, scan_budget))
        cursor.execute(
            "SELECT c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1) "
            f"  + {HEADING_TF_WEIGHT - 1} * (SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A'), "
            "  length(c.search_vector), u.positions, 'A' = ANY(u.weights) "
            "FROM ingestion_chunk c, unnest(c.search_vector) u "
            f"WHERE c.book_id = %s{doc_filter.replace('document_id', 'c.document_id')} "
            "AND (c.search_vector @@ %s::tsquery OR c.id = ANY(%s)) AND u.lexeme = ANY(%s)",
            [book_id, *doc_params, query, list(extra_ids), list(df)],
        )
        scores: dict[str, float] = {}
        for chunk_id, lexeme, tf, length, positions, in_heading in cursor.fetchall():
            norm = K1 * (1 - B + B * (length or 1) / float(avg_length))
            scores[chunk_id] = scores.get(chunk_id, 0.0) + idf[lexeme] * tf * (K1 + 1) / (tf + norm)
            result.matched.setdefault(chunk_id, set()).add(lexeme)
            result.positions.setdefault(chunk_id, {})[lexeme] = tuple(positions or ())
            if in_heading:
                result.in_heading.setdefault(chunk_id, set()).add(lexeme)
    best = sorted(scores, key=scores.get, reverse=True)[:limit]
    keep = set(best) | (set(extra_ids) & set(scores))
    result.scores = {cid: scores[cid] for cid in keep}
    return result
