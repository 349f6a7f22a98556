"""Sentence vectors (chat/pipeline/sentences.py) on real Postgres with the real embedder: made once per passage when a
book is indexed and shared by equal passages, the best five passages re-sorted by them, the composer's
lead chosen by them, and a book that lacks them answering as before.

The session turns ``SENTENCE_VECTORS`` off (conftest) so that the large corpora index at the passages' own
speed; each test here turns it on for its own books."""

from __future__ import annotations

import json
import logging
import math
from types import SimpleNamespace

import numpy as np
import pytest

from bookchat.base.errors import BookchatError
from chat.models import SentenceVectors
from chat.pipeline.answering import answer_question
from chat.pipeline.extractive import compose_extractive
from chat.pipeline.questions import AskRequest
from chat.pipeline.retrieval import RetrievedChunk, retrieve
from chat.pipeline.sentences import BIAS, WEIGHTS, attach, fill_book, resort, sentence_key, unit_texts
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, Chunk
from tests.conftest import committed, run_command

pytestmark = pytest.mark.django_db

PAGES = {
    "navigation.md": "# Page navigation\n\nEvery doc shows a link to the next page and a link to the previous page at "
                     "the bottom. The links to the next page and the previous page follow the order of the sidebar.\n",
    "front-matter.md": "# Front matter\n\nThe pagination of a single document can be hidden: set "
                       "`pagination_next: null` in its front matter. Titles and descriptions are set there too.\n",
    "themes.md": "# Themes\n\nA theme gives the site its colours and its layout. Dark mode is a theme option.\n",
}


@pytest.fixture
def vectors_on(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SENTENCE_VECTORS": "on"}


def ingest(root, slug: str) -> dict:
    code, out, _ = committed(lambda: run_command("ingest", str(root), "--book", slug, "--json"))
    assert code == 0, out
    return json.loads(out)


def write_pages(book_dir, pages=PAGES) -> None:
    for name, text in pages.items():
        book_dir.write(name, text)


def stored(slug: str) -> dict[str, SentenceVectors]:
    return {v.chunk_id: v for v in SentenceVectors.objects.filter(chunk__book__slug=slug)}


def test_indexing_embeds_every_unit_once_and_shares_equal_passages(vectors_on, book_dir, django_db_blocker):
    write_pages(book_dir)
    with django_db_blocker.unblock():
        report = ingest(book_dir.root, "nav-book")
    chunks = list(Chunk.objects.filter(book__slug="nav-book"))
    vectors = stored("nav-book")
    embedder = get_embedder()
    assert set(vectors) == {c.id for c in chunks}
    made = report["after"]["sentence_vectors"]
    assert made["passages"] == len(chunks) and made["units_embedded"] == sum(v.count for v in vectors.values())
    for chunk in chunks:
        row, units = vectors[chunk.id], unit_texts(chunk.text)
        assert row.count == len(units) and row.key == sentence_key(embedder.name, units)
        matrix = np.frombuffer(bytes(row.vectors), dtype=np.float16).reshape(row.count, -1)
        assert matrix.shape[1] == embedder.dimension
        assert np.allclose(np.linalg.norm(matrix.astype(np.float32), axis=1), 1.0, atol=0.01)

    book = Book.objects.get(slug="nav-book")
    assert fill_book(book)["passages"] == 0  # nothing stale: nothing embedded again

    with django_db_blocker.unblock():
        ingest(book_dir.root, "nav-book-copy")
    copy = Book.objects.get(slug="nav-book-copy")
    SentenceVectors.objects.filter(chunk__book=copy).delete()
    again = fill_book(copy)
    assert again["passages"] == len(chunks) and again["reused"] == len(chunks) and again["units_embedded"] == 0

    book_dir.write("themes.md", "# Themes\n\nA theme gives the site its colours. Its layout comes from swizzled "
                                "components.\n")
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(book_dir.root), "--book", "nav-book"))
    assert code == 0 and "Sentence vectors: 1 passages made (0 shared with equal passages), 2 sentences" in out, out
    after = stored("nav-book")
    changed = {cid for cid in after if cid not in vectors}
    assert changed and all(Chunk.objects.get(id=cid).document.path == "themes.md" for cid in changed)
    assert all(after[cid].key == vectors[cid].key for cid in after if cid in vectors)


def _candidates(slug: str, scores: dict[str, float]) -> list[RetrievedChunk]:
    out = []
    for path, score in scores.items():
        chunk = Chunk.objects.select_related("document").get(book__slug=slug, document__path=path)
        out.append(RetrievedChunk(id=chunk.id, document_id=chunk.document_id, heading_path=chunk.heading_path,
                                  anchor=chunk.anchor, url=chunk.url, text=chunk.text,
                                  document_title=chunk.document.title, document_path=path, category="",
                                  dense=0.8, score=score))
    return out


def test_resort_puts_the_passage_whose_sentence_says_it_first(vectors_on, book_dir, django_db_blocker):
    write_pages(book_dir)
    with django_db_blocker.unblock():
        ingest(book_dir.root, "nav-resort")
    book = Book.objects.get(slug="nav-resort")
    # The question's vector stands exactly on one sentence of front-matter.md.
    sentence = next(u for u in unit_texts(PAGES["front-matter.md"].split("\n\n", 1)[1]) if "hidden" in u)
    query = get_embedder().embed_documents([sentence])[0]
    candidates = _candidates("nav-resort", {"navigation.md": 0.9, "front-matter.md": 0.6, "themes.md": 0.5})

    ordered = resort(candidates, query, embedder_name=book.embedder_name)

    assert [c.document_path for c in ordered] == ["front-matter.md", "navigation.md", "themes.md"]
    first = ordered[0]
    assert max(first.sentence_similarities) == pytest.approx(1.0, abs=0.01)
    z = BIAS + WEIGHTS[0] * math.log(0.6 / 0.4) + WEIGHTS[1] * 0.0  # it holds the best sentence: no gap
    assert first.score == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-6)
    assert ordered[0].score > ordered[1].score > ordered[2].score  # the order is the scores' order


def test_missing_or_stale_vectors_leave_the_order_alone(vectors_on, book_dir, django_db_blocker):
    write_pages(book_dir)
    with django_db_blocker.unblock():
        ingest(book_dir.root, "nav-stale")
    book = Book.objects.get(slug="nav-stale")
    query = get_embedder().embed_query("How do I hide the link to the next page of one doc?")
    scores = {"navigation.md": 0.9, "front-matter.md": 0.6, "themes.md": 0.5}

    stale = Chunk.objects.get(book=book, document__path="front-matter.md")
    SentenceVectors.objects.filter(chunk=stale).update(key="0" * 40)
    candidates = _candidates("nav-stale", scores)
    attach(candidates, query, embedder_name=book.embedder_name)
    assert candidates[1].sentence_similarities is None and candidates[0].sentence_similarities is not None

    candidates = _candidates("nav-stale", scores)
    assert resort(candidates, query, embedder_name=book.embedder_name) == candidates
    assert [c.score for c in candidates] == list(scores.values())  # untouched

    SentenceVectors.objects.filter(chunk=stale).delete()
    candidates = _candidates("nav-stale", scores)
    assert [c.document_path for c in resort(candidates, query, embedder_name=book.embedder_name)] == list(scores)
    fill_book(book)  # the next indexing run makes the missing ones
    assert SentenceVectors.objects.filter(chunk=stale).exists()


def test_off_makes_none_and_retrieval_reads_none(settings, book_dir, django_db_blocker):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SENTENCE_VECTORS": "off"}
    write_pages(book_dir)
    with django_db_blocker.unblock():
        ingest(book_dir.root, "nav-off")
    assert not stored("nav-off")
    retrieval = retrieve(book=Book.objects.get(slug="nav-off"), question="How do I hide the next page link?")
    assert all(c.sentence_similarities is None for c in retrieval.chunks)


class _BrokenEmbedder:
    """The book's own embedder for its name and size, whose server goes away after the first batch."""

    def __init__(self, real):
        self.name, self.dimension, self._real, self.calls = real.name, real.dimension, real, 0

    def embed_documents(self, texts, **kwargs):
        self.calls += 1
        if self.calls > 1:
            raise BookchatError("the embeddings server is not answering")
        return self._real.embed_documents(texts, **kwargs)


def test_a_failed_embedding_keeps_what_was_made_and_the_book_answering(vectors_on, book_dir, django_db_blocker,
                                                                         caplog, monkeypatch):
    write_pages(book_dir, {f"page-{n}.md": f"# Page {n}\n\nPage {n} talks about topic number {n} at length.\n"
                           for n in range(6)})
    with django_db_blocker.unblock():
        ingest(book_dir.root, "broken-vectors")
    book = Book.objects.get(slug="broken-vectors")
    SentenceVectors.objects.filter(chunk__book=book).delete()
    monkeypatch.setattr("chat.pipeline.sentences.WRITE_BATCH", 2)
    logger = logging.getLogger("chat.pipeline.sentences")  # on the logger itself: bookchat's don't reach the root's
    logger.addHandler(caplog.handler)
    try:
        report = fill_book(book, embedder=_BrokenEmbedder(get_embedder()))
    finally:
        logger.removeHandler(caplog.handler)
    assert report["passages"] == 2  # the first batch was written before the server went away
    assert "stopped after 2 passages" in caplog.text and "not answering" in caplog.text
    response = answer_question(AskRequest(question="What does page 4 talk about?", book="broken-vectors"))
    assert not response.refused and "topic number 4" in response.answer


def test_the_composer_leads_with_the_unit_closest_in_meaning():
    text = ("The cache folder is named in the settings of the site. "
            "The cache folder keeps the compiled pages of the last build.")
    question = "What does the cache folder hold?"
    plain = SimpleNamespace(text=text, heading_path="Docs > Building", score=0.8)
    assert compose_extractive(question, [plain]).startswith("The cache folder is named")  # the same words: a tie
    meant = SimpleNamespace(text=text, heading_path="Docs > Building", score=0.8, similarities=[0.80, 0.86])
    answer = compose_extractive(question, [meant])
    assert answer.startswith("The cache folder keeps") and "is named" not in answer
