"""Lexical search: BM25 over the chunks' Postgres ``tsvector`` (english stemming, headings weighted).

Postgres' own ``ts_rank`` has no inverse document frequency, so an OR query over a question's
words is dominated by the words every page shares (the product's name, "page", "file").
Here Postgres does the stemming and the index look-ups: the question's lexemes, each one's
document frequency in the book (stored per book by ``ingestion.indexing.lexicon``; counted live, one
GIN look-up per lexeme, for a chapter or a book without them), and the term frequencies of
the chunks that contain any of the rarer ones; BM25 is computed from those. A lexeme in a heading
counts ``HEADING_TF_WEIGHT`` times, because questions often name a topic that only its
heading spells out. On a big scan (``BOUNDED_FROM``) the term frequencies are read only for the passages whose
upper bound can still rank: the same scores, for less reading (``_bounded_scan``).
"""

from __future__ import annotations

import bisect
import itertools
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
# From this many passages to scan, the scan first reads each passage's term frequency of each query lexeme (one
# ``ts_rank`` look-up each, no positions) and bounds its score by them, every occurrence counted as a heading's; it
# then reads the positions of the passages whose bound can still reach the ``limit``-th best score. The same
# scores for every passage that can rank, for less reading on a big book (BENCHMARKS.md): unnesting a
# passage's whole tsvector is what the full scan spends most of its time on.
BOUNDED_FROM = 500
# Most query lexemes bounded one by one; a longer query (a pasted passage) is scanned in full.
BOUNDED_LEXEMES = 24


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
    present: set[str] = field(default_factory=set)  # the query lexemes any scanned passage holds

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
        cursor.execute(f"SELECT lexeme, positions FROM unnest(bookchat_to_tsvector({BOOK_SEARCH_CONFIG}, %s))",
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
        selecting = _selecting(df, total, scan_budget)
        query = " | ".join(_tsquery_literal(t) for t in selecting)
        where = (f"c.book_id = %s{doc_filter.replace('document_id', 'c.document_id')} "
                 "AND (c.search_vector @@ %s::tsquery OR c.id = ANY(%s))")
        where_params = [book_id, *doc_params, query, list(extra_ids)]
        scanning = sum(df[t] for t in selecting) + len(extra_ids)
        if scanning >= BOUNDED_FROM and len(df) <= BOUNDED_LEXEMES:
            scores = _bounded_scan(cursor, result, where, where_params, df=df, idf=idf, avg_length=avg_length,
                                   limit=limit, extra_ids=extra_ids)
        else:
            scores = {}
            cursor.execute(f"SELECT {ROW_COLUMNS} FROM ingestion_chunk c, unnest(c.search_vector) u "
                           f"WHERE {where} AND u.lexeme = ANY(%s)", [*where_params, list(df)])
            _score_rows(cursor.fetchall(), scores, result, idf=idf, avg_length=avg_length)
            result.present = {t for terms in result.matched.values() for t in terms}
    best = sorted(scores, key=scores.get, reverse=True)[:limit]
    keep = set(best) | (set(extra_ids) & set(scores))
    result.scores = {cid: scores[cid] for cid in keep}
    return result


# Each scanned passage's rows: one per query lexeme it holds, with its term frequency (a heading's occurrences
# counted HEADING_TF_WEIGHT times), the passage's length, the lexeme's positions and whether its heading has it.
ROW_COLUMNS = ("c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1) "
               f"  + {HEADING_TF_WEIGHT - 1} * (SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A'), "
               "  length(c.search_vector), u.positions, 'A' = ANY(u.weights)")


def _score_rows(rows, scores: dict[str, float], result: LexicalResult, *, idf: dict[str, float],
                avg_length: float) -> None:
    for chunk_id, lexeme, tf, length, positions, in_heading in rows:
        norm = K1 * (1 - B + B * (length or 1) / float(avg_length))
        scores[chunk_id] = scores.get(chunk_id, 0.0) + idf[lexeme] * tf * (K1 + 1) / (tf + norm)
        result.matched.setdefault(chunk_id, set()).add(lexeme)
        result.positions.setdefault(chunk_id, {})[lexeme] = tuple(positions or ())
        if in_heading:
            result.in_heading.setdefault(chunk_id, set()).add(lexeme)


def _bounded_scan(cursor, result: LexicalResult, where: str, where_params: list, *, df: dict[str, int],
                  idf: dict[str, float], avg_length: float, limit: int, extra_ids) -> dict[str, float]:
    """The scan's scores of every passage that can rank in the best ``limit`` (and of the ``extra_ids`` that hold
    a query lexeme), reading positions only for those (``BOUNDED_FROM``). In the order a full scan gives them, so
    that ties rank as they would.

    A passage's bound: each query lexeme it holds scored at the most term frequency it can have. Postgres'
    ``ts_rank`` with every weight 1 and a one-lexeme query is ``sum(1/j², j = 1..tf) / (π²/6)``, which gives tf
    back (``_most_tf``), read for a cheap lookup per lexeme; every occurrence counted as a heading's makes it an
    upper bound."""
    lexemes = list(df)
    ranks = ", ".join(f"ts_rank('{{1,1,1,1}}', c.search_vector, {_tsquery_literal(t)}::tsquery)" for t in lexemes)
    cursor.execute(f"SELECT c.id, length(c.search_vector), ARRAY[{ranks}] FROM ingestion_chunk c WHERE {where}",
                   where_params)
    order, bound = [], {}
    for chunk_id, length, held in cursor.fetchall():
        norm = K1 * (1 - B + B * (length or 1) / float(avg_length))
        most = 0.0
        for lexeme, rank in zip(lexemes, held, strict=True):
            if rank > 0:
                tf = _most_tf(rank)
                most += idf[lexeme] * (K1 + 1) * (1.0 if tf is None else tf / (tf + norm))
                result.present.add(lexeme)
        if most:  # an extra passage that holds none of them scores nothing, as in a full scan
            order.append(chunk_id)
            bound[chunk_id] = most
    exact: dict[str, float] = {}

    def read(ids: list[str]) -> None:
        if ids:
            cursor.execute(f"SELECT {ROW_COLUMNS} FROM ingestion_chunk c, unnest(c.search_vector) u "
                           "WHERE c.id = ANY(%s) AND u.lexeme = ANY(%s)", [ids, lexemes])
            _score_rows(cursor.fetchall(), exact, result, idf=idf, avg_length=avg_length)

    by_bound = sorted(order, key=lambda cid: -bound[cid])
    first = set(by_bound[:limit]) | (set(extra_ids) & bound.keys())
    read(list(first))
    reached = sorted(exact.values(), reverse=True)[limit - 1] if len(exact) >= limit else float("-inf")
    read([cid for cid in by_bound[limit:] if cid not in first and bound[cid] >= reached])
    return {cid: exact[cid] for cid in order if cid in exact}


# ts_rank's value for a lexeme held tf times, tf = 0..MOST_TF (see _bounded_scan); from MOST_TF on (which a rank
# can't tell from more), tf is unbounded.
MOST_TF = 100
_RANK_OF_TF = [total / 1.64493406685  # Postgres' own constant for π²/6
               for total in itertools.accumulate((1 / tf ** 2 for tf in range(1, MOST_TF + 1)), initial=0.0)]
# Postgres sums in single precision: a rank read back may be off by this much, less than the step between two
# term frequencies up to MOST_TF (1/101² / (π²/6) ≈ 6e-5).
RANK_TOLERANCE = 3e-5


def _most_tf(rank: float) -> float | None:
    """The most term frequency a lexeme's ``ts_rank`` (every weight 1) allows, counted as a heading's (each
    occurrence ``HEADING_TF_WEIGHT`` times); None past ``MOST_TF``: unbounded."""
    most = bisect.bisect_right(_RANK_OF_TF, rank + RANK_TOLERANCE) - 1
    return None if most >= MOST_TF else float(most * HEADING_TF_WEIGHT)
