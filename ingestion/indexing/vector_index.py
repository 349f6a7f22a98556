"""A book's own HNSW index, for a book too big to search exactly.

The migration's HNSW indexes hold every book's passages, so a search limited to one book wades
through the other books' near neighbours (pgvector's iterative scan goes on until it has enough
of this book's): 16 ms and ~9k buffers a question for a 50k-passage book beside a few thousand
other passages, against 3 ms and ~900 buffers in an index of that book alone. So a book with more
than ``EXACT_SEARCH_MAX_CHUNKS`` passages gets one at the end of an indexing run: a partial index
``WHERE dimensions = N AND book_id = ID``, built ``CONCURRENTLY`` so other books go on indexing and
answering meanwhile. A book that shrinks below the limit loses it, and so does a deleted book. The
planner picks it by itself, because the search names the book and the dimensions as literals;
until it exists (or if its build failed) the shared index answers, more slowly.
"""

from __future__ import annotations

from django.db import connection, transaction

from ingestion.models import INDEXED_DIMENSIONS, Book

# Books (or chapters) up to this many passages are searched exactly (a scan of their own rows); bigger ones
# through HNSW, their own index once it is built.
EXACT_SEARCH_MAX_CHUNKS = 5_000


def index_name(book_id: int) -> str:
    return f"chunk_embedding_book_{int(book_id)}"


def _definition(cursor, name: str) -> tuple[bool, str] | None:
    """(valid, definition) of the index called ``name``, or None if there is none."""
    cursor.execute("SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                   "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s", [name])
    return cursor.fetchone()


def sync_book_index(book: Book, passages: int) -> bool:
    """Build (or drop) ``book``'s own HNSW index as its size asks; True when the book has one afterwards."""
    name, dims, book_id = index_name(book.pk), int(book.embedder_dimension), int(book.pk)
    # CONCURRENTLY can't run inside a transaction (a test's, or a caller's): there a plain build does.
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    wanted = passages > EXACT_SEARCH_MAX_CHUNKS and dims in INDEXED_DIMENSIONS
    with connection.cursor() as cursor:
        found = _definition(cursor, name)
        if found is not None:
            valid, definition = found
            # An interrupted build leaves an invalid index; a book re-indexed at another size needs a new one.
            if wanted and valid and f"vector({dims})" in definition:
                return True
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
        if not wanted:
            return False
        if connection.in_atomic_block:  # a table with deferred foreign-key checks pending can't be indexed
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(
            f"CREATE INDEX {concurrently}{name} ON ingestion_chunk USING hnsw "
            f"((embedding::vector({dims})) vector_cosine_ops) WHERE dimensions = {dims} AND book_id = {book_id}"
        )
    return True


def drop_book_index(book_id: int) -> None:
    """Drop a deleted book's own index, if it had one."""
    name = index_name(book_id)
    concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
    with connection.cursor() as cursor:
        if _definition(cursor, name) is not None:
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")


def book_deleted(sender, instance, **kwargs) -> None:
    """``post_delete`` of Book: drop its own index once the deletion commits."""
    book_id = instance.pk
    transaction.on_commit(lambda: drop_book_index(book_id))
