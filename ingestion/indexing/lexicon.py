"""A book's lexical statistics, kept beside its passages: how many there are, their mean tsvector length,
and each lexeme's document frequency.

BM25 needs all three for every question. Counted live they cost a pass over every passage's
tsvector plus one GIN look-up per query word, which grows with the book (about 0.2 s for the
average length alone at 50k passages); read from here they are one indexed look-up. They are
refreshed inside the book's indexing lock at the end of every run that changed a page, with
``ts_stat``, in one transaction, so a reader sees the old or the new figures, never a mix. A book
without them (older than this table, or a run that stopped before the refresh) is counted live,
and so is a search limited to a chapter.
"""

from __future__ import annotations

from django.db import connection, transaction

from ingestion.models import Book, SearchStats


def refresh_lexicon(book: Book) -> SearchStats:
    """Recount ``book``'s passages, their mean length and every lexeme's document frequency."""
    book_id = int(book.pk)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*), coalesce(avg(length(search_vector)), 1) FROM ingestion_chunk "
                       "WHERE book_id = %s", [book_id])
        chunks, average = cursor.fetchone()
        cursor.execute("DELETE FROM ingestion_lexemecount WHERE book_id = %s", [book_id])
        # ts_stat takes its query as text: the id is an int, formatted here, never user text.
        cursor.execute(
            "INSERT INTO ingestion_lexemecount (book_id, lexeme, chunks) "
            "SELECT %s, word, ndoc FROM ts_stat(%s)",
            [book_id, f"SELECT search_vector FROM ingestion_chunk WHERE book_id = {book_id}"],
        )
        stats, _ = SearchStats.objects.update_or_create(
            book=book, defaults={"chunks": chunks, "average_length": float(average)})
    return stats


def stored_statistics(cursor, book_id: int, *, timeout_ms: int | None = None) -> tuple[int, float] | None:
    """(passages, mean tsvector length) of the book, or None when it has none stored yet. ``timeout_ms``: also
    ``SET LOCAL statement_timeout`` for the rest of the transaction, in the same round trip."""
    if timeout_ms is None:
        cursor.execute("SELECT chunks, average_length FROM ingestion_searchstats WHERE book_id = %s", [book_id])
        return cursor.fetchone()
    cursor.execute("SELECT set_config('statement_timeout', %s, true), s.chunks, s.average_length "
                   "FROM (SELECT 1) one LEFT JOIN ingestion_searchstats s ON s.book_id = %s",
                   [str(int(timeout_ms)), book_id])
    _, chunks, average_length = cursor.fetchone()
    return None if chunks is None else (chunks, average_length)


# The book's text-search configuration, in SQL: a question is stemmed the way its passages were.
BOOK_SEARCH_CONFIG = "(SELECT search_config::regconfig FROM ingestion_book WHERE id = %s)"


def lexeme_counts(cursor, book_id: int, text: str) -> dict[str, int]:
    """The distinct lexemes Postgres makes of ``text`` (the book's stemming, stop words dropped), each with the
    number of the book's passages that contain it (0 for a word the book lacks)."""
    return {lexeme: chunks for lexeme, (chunks, _) in query_terms(cursor, book_id, text).items()}


def query_terms(cursor, book_id: int, text: str) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Like :func:`lexeme_counts`, with each lexeme's word positions in ``text``: ``{lexeme: (chunks,
    positions)}`` (the re-ranker reads the positions for the question's phrases)."""
    cursor.execute(
        "SELECT q.lexeme, coalesce(c.chunks, 0), q.positions "
        f"FROM unnest(bookchat_to_tsvector({BOOK_SEARCH_CONFIG}, %s)) AS q "
        "LEFT JOIN ingestion_lexemecount c ON c.book_id = %s AND c.lexeme = q.lexeme ORDER BY q.lexeme",
        [book_id, text, book_id],
    )
    return {lexeme: (chunks, tuple(positions or ())) for lexeme, chunks, positions in cursor.fetchall()}
