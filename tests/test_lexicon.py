"""What indexing keeps beside a book for search: its lexical statistics (``ingestion.indexing.lexicon``), which match
what counting the passages gives after indexing, editing, pruning and a failed page, and from which BM25
scores exactly as if it counted live, within its candidate-scan budget; and a big book's own HNSW index
(``ingestion.indexing.vector_index``), built, searched, and dropped when the book shrinks or goes."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

import chat.pipeline.lexical as lexical
from chat.pipeline.lexical import _selecting, bm25_search
from chat.pipeline.retrieval import retrieve
from ingestion.indexing import vector_index
from ingestion.indexing.lexicon import lexeme_counts, refresh_lexicon, stored_statistics
from ingestion.indexing.vector_index import index_name
from ingestion.models import Book, Chunk, LexemeCount, SearchStats
from tests.test_ingest_command import GUIDE, INTRO, ingest, make_book

pytestmark = pytest.mark.django_db


def live_counts(book: Book) -> tuple[int, float, dict[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), avg(length(search_vector)) FROM ingestion_chunk WHERE book_id = %s",
                       [book.pk])
        total, average = cursor.fetchone()
        cursor.execute("SELECT u.lexeme, count(*) FROM ingestion_chunk c, unnest(c.search_vector) u "
                       "WHERE c.book_id = %s GROUP BY u.lexeme", [book.pk])
        return total, float(average), dict(cursor.fetchall())


def assert_current(book: Book) -> None:
    total, average, frequencies = live_counts(book)
    stats = SearchStats.objects.get(book=book)
    assert stats.chunks == total > 0
    assert stats.average_length == pytest.approx(average)
    assert dict(LexemeCount.objects.filter(book=book).values_list("lexeme", "chunks")) == frequencies


def test_indexing_stores_the_counts_and_every_change_refreshes_them(book_dir):
    make_book(book_dir)
    assert ingest(str(book_dir.root), "--book", "lex")[0] == 0
    book = Book.objects.get(slug="lex")
    assert_current(book)
    assert LexemeCount.objects.get(book=book, lexeme="anchor").chunks >= 1

    book_dir.write("guides/writing.md", GUIDE + "\n## Glossary\n\nA zeugma yokes two words to one verb.\n")
    assert ingest(str(book_dir.root), "--book", "lex")[0] == 0
    assert_current(book)
    assert LexemeCount.objects.get(book=book, lexeme="zeugma").chunks == 1

    (book_dir.root / "guides" / "writing.md").unlink()
    assert ingest(str(book_dir.root), "--book", "lex", "--prune")[0] == 0
    assert_current(book)
    assert not LexemeCount.objects.filter(book=book, lexeme="zeugma").exists()


def test_a_failed_page_leaves_counts_that_match_what_was_stored(book_dir):
    make_book(book_dir)
    book_dir.write("broken.mdx", "# Broken\n\n<Tabs>\n  <TabItem value=\"a\">\n\nnever closed\n")
    code, report = ingest(str(book_dir.root), "--book", "lex-partial")
    assert code != 0 and report["files_failed"] == 1 and report["files_indexed"] == 2
    assert_current(Book.objects.get(slug="lex-partial"))


def test_an_unchanged_run_keeps_the_counts_without_recounting(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "lex-same")
    before = SearchStats.objects.get(book__slug="lex-same").refreshed_at
    code, report = ingest(str(book_dir.root), "--book", "lex-same")
    assert code == 0 and report["files_unchanged"] == 2
    assert SearchStats.objects.get(book__slug="lex-same").refreshed_at == before


def test_bm25_from_stored_counts_equals_bm25_counted_live(book_dir):
    make_book(book_dir)
    book_dir.write("more.md", INTRO.replace("Getting started", "Installing").replace("installer", "setup"))
    ingest(str(book_dir.root), "--book", "lex-bm25")
    book = Book.objects.get(slug="lex-bm25")
    for question in ("How do I install it?", "What do headings get?", "anchor installer virtual environment",
                     "zzzz unknownword"):
        stored = bm25_search(book_id=book.pk, text=question, limit=10)
        SearchStats.objects.filter(book=book).delete()  # no stored counts: BM25 counts live
        live = bm25_search(book_id=book.pk, text=question, limit=10)
        refresh_lexicon(book)
        assert stored.scores == pytest.approx(live.scores)
        assert stored.idf == pytest.approx(live.idf)


def test_lexeme_counts_stem_like_the_search_vector_and_count_absent_words_as_zero(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "lex-stem")
    book = Book.objects.get(slug="lex-stem")
    with connection.cursor() as cursor:
        counts = lexeme_counts(cursor, book.pk, "The headings, and a quixotic word")
    assert counts["head"] >= 1 and counts["quixot"] == 0
    assert "the" not in counts and "and" not in counts  # stop words


def test_rarest_lexemes_select_within_the_scan_budget():
    df = {"rare": 3, "uncommon": 40, "middling": 80, "common": 900}
    assert _selecting(df, total=2_000, budget=100) == ["rare", "uncommon"]  # 3 + 40 fit; + 80 would pass 100
    assert _selecting(df, total=2_000) == ["rare", "uncommon", "middling", "common"]  # 1,023 within SCAN_BUDGET
    assert _selecting({"frequent": 700, "often": 800}, total=2_000, budget=100) == ["frequent"]  # the rarest always
    # Words in most passages select only when every word is that common.
    assert _selecting({"the-product": 1_900, "page": 1_500}, total=2_000) == ["page"]


# -- a big book's own HNSW index (ingestion.indexing.vector_index) --------------------------------------------------
def own_index(book: Book) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index_name(book.pk)])
        row = cursor.fetchone()
    return row[0] if row else None


def test_a_book_over_the_exact_search_limit_gets_its_own_index_and_searches_it(book_dir, monkeypatch):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "lex-big")
    book = Book.objects.get(slug="lex-big")
    exact = [c.id for c in retrieve(book=book, question="How do I install it?", top_k=3).chunks]
    assert own_index(book) is None

    monkeypatch.setattr(vector_index, "EXACT_SEARCH_MAX_CHUNKS", 2)
    book_dir.write("more.md", "# More\n\nAnother page, so the run changes the book.\n")
    ingest(str(book_dir.root), "--book", "lex-big")
    definition = own_index(book)
    assert definition is not None and "hnsw" in definition and f"book_id = {book.pk}" in definition
    approximate = [c.id for c in retrieve(book=book, question="How do I install it?", top_k=3).chunks]
    assert approximate == exact  # a few passages: HNSW finds them all
    # Whether the planner picks it is a matter of cost on a real book's size: `make bench` measures that.

    monkeypatch.setattr(vector_index, "EXACT_SEARCH_MAX_CHUNKS", 5_000)
    (book_dir.root / "more.md").unlink()
    ingest(str(book_dir.root), "--book", "lex-big", "--prune")
    assert own_index(book) is None  # back under the limit: dropped


def test_deleting_a_book_drops_its_own_index(book_dir, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(vector_index, "EXACT_SEARCH_MAX_CHUNKS", 2)
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "lex-gone")
    book = Book.objects.get(slug="lex-gone")
    kept = Book(pk=book.pk)
    assert own_index(kept) is not None
    with django_capture_on_commit_callbacks(execute=True):
        book.delete()
    assert own_index(kept) is None


def test_a_passage_of_more_words_than_are_scored_keeps_the_words_the_book_has(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "lex-long")
    book = Book.objects.get(slug="lex-long")
    filler = " ".join(f"a{n:04d}q" for n in range(300))  # sorts before the book's words, and isn't in it
    result = bm25_search(book_id=book.pk, text=f"{filler} virtual environment", limit=5)
    assert len(result.idf) == lexical.MAX_QUERY_LEXEMES
    assert result.scores  # the book's own words are among those scored, though they sort last
    assert {"virtual", "environ"} <= set().union(*result.matched.values())


def test_the_statistics_read_also_sets_the_searchs_timeout_in_one_round_trip(book_dir):
    make_book(book_dir)
    assert ingest(str(book_dir.root), "--book", "lex")[0] == 0
    book = Book.objects.get(slug="lex")
    bare = Book.objects.create(slug="no-stats", title="No stats", embedder_name=book.embedder_name,
                               embedder_dimension=book.embedder_dimension)
    for target, expected in ((book, SearchStats.objects.get(book=book)), (bare, None)):
        with transaction.atomic(), connection.cursor() as cursor:
            stats = stored_statistics(cursor, target.pk, timeout_ms=1234)
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "1234ms"  # SET LOCAL: for the rest of the transaction
            if expected is None:
                assert stats is None
            else:
                assert stats == (expected.chunks, pytest.approx(expected.average_length))


def test_the_bounded_scan_scores_what_the_full_scan_scores_and_reads_less(book_dir, monkeypatch):
    make_book(book_dir)
    book_dir.write("more.md", INTRO.replace("Getting started", "Installing").replace("installer", "setup"))
    ingest(str(book_dir.root), "--book", "lex-bound")
    book = Book.objects.get(slug="lex-bound")
    extra = list(Chunk.objects.filter(book=book).order_by("id").values_list("id", flat=True)[:2])
    pruned = 0
    for question in ("How do I install it?", "What do headings get?", "anchor installer virtual environment",
                     "install the installer in a virtual environment", "zzzz unknownword"):
        for limit in (1, 2, 10):
            monkeypatch.setattr(lexical, "BOUNDED_FROM", 10**9)
            full = bm25_search(book_id=book.pk, text=question, limit=limit, extra_ids=extra)
            monkeypatch.setattr(lexical, "BOUNDED_FROM", 1)
            bounded = bm25_search(book_id=book.pk, text=question, limit=limit, extra_ids=extra)
            assert list(bounded.scores.items()) == list(full.scores.items())  # the same floats, in the same order
            assert bounded.present == full.present and bounded.idf == full.idf
            for chunk_id in full.scores:
                assert bounded.matched[chunk_id] == full.matched[chunk_id]
                assert bounded.positions[chunk_id] == full.positions[chunk_id]
                assert bounded.in_heading.get(chunk_id) == full.in_heading.get(chunk_id)
            pruned += len(bounded.positions) < len(full.positions)
    assert pruned  # some passages that could not rank were never read


@pytest.mark.parametrize("tf", [1, 2, 3, 7, 40, 100, 101, 250])
@pytest.mark.parametrize("headings", [0, 1])
def test_the_most_term_frequency_read_from_ts_rank_bounds_the_true_one(tf, headings):
    positions = ",".join(f"{n}{'A' if n <= headings else ''}" for n in range(1, tf + 1))
    with connection.cursor() as cursor:
        cursor.execute("SELECT ts_rank('{1,1,1,1}', %s::tsvector, 'word'::tsquery)", [f"word:{positions} other:500"])
        rank = cursor.fetchone()[0]
    most = lexical._most_tf(rank)
    counted = tf + (lexical.HEADING_TF_WEIGHT - 1) * min(headings, tf)  # as the full scan counts it
    if tf >= lexical.MOST_TF:
        assert most is None  # past the table (MOST_TF itself can't be told from more): unbounded
    else:
        assert most == tf * lexical.HEADING_TF_WEIGHT >= counted
