"""Serving first (``make run``): the manual and ``BOOK=`` are indexed as background jobs of the task worker while the
page already answers, and until a book exists the page, ``/api/v1/ready`` and a question say how far its indexing
has got; a question gets a 503 to ask again, never a 500. ``serve`` itself, end to end: tests/test_serve.py."""

from __future__ import annotations

import uuid

import pytest

from ingestion.models import Book, IndexRun, IngestionJob
from ingestion.uploads import jobs

pytestmark = pytest.mark.django_db


def building(slug: str, *, stage: str = "embedding passages (12/40)", title: str = "Harbour guide") -> IngestionJob:
    return IngestionJob.objects.create(book_slug=slug, book_title=title, source=IngestionJob.Source.LOCAL,
                                       local_path="/srv/harbour-guide", status=IngestionJob.Status.RUNNING, stage=stage)


def test_a_question_to_a_book_being_indexed_for_the_first_time_is_a_503_to_ask_again(client):
    slug = f"built-{uuid.uuid4().hex[:8]}"
    building(slug)
    response = client.post("/api/v1/ask", data={"question": "When does the ferry leave?", "book": slug},
                           content_type="application/json")
    assert response.status_code == 503 and response["Retry-After"] == "15"
    body = response.json()
    assert body["error"] == "book_indexing" and "embedding passages (12/40)" in body["message"]
    assert "Harbour guide" in body["message"]
    stream = client.post("/api/v1/ask/stream", data={"question": "When?", "book": slug},
                         content_type="application/json")
    streamed = b"".join(stream.streaming_content) if stream.streaming else stream.content
    assert b"book_indexing" in streamed, "as an error event, or as the error before the stream"
    # Once the job has ended, the book is as unknown as any other.
    IngestionJob.objects.filter(book_slug=slug).update(status=IngestionJob.Status.FAILED)
    gone = client.post("/api/v1/ask", data={"question": "When?", "book": slug}, content_type="application/json")
    assert gone.status_code == 404 and gone.json()["error"] == "unknown_book"


def test_with_no_book_yet_the_page_and_ready_say_how_far_the_first_indexing_has_got(client, manual_book):
    Book.objects.all().delete()  # a fresh database: rolled back with the test
    building("bookchat-manual", stage="reading and chunking pages (3/19)", title="bookchat manual")
    ready = client.get("/api/v1/ready")
    assert ready.status_code == 503 and ready.json()["books"] == {
        "ok": False, "indexing": [{"book": "bookchat-manual", "progress": "reading and chunking pages (3/19)"}]}
    page = client.get("/")
    html = page.content.decode()
    assert page.status_code == 200 and "Indexing bookchat manual: reading and chunking pages (3/19)." in html
    assert '<meta http-equiv="refresh" content="10">' in html and "No book yet" not in html
    asked = client.post("/", data={"question": "How do I ingest a folder?"})
    assert asked.status_code == 503 and asked["Retry-After"] == "15"
    assert "is being indexed (reading and chunking pages (3/19))" in asked.content.decode()
    api = client.post("/api/v1/ask", data={"question": "How do I ingest a folder?"}, content_type="application/json")
    assert api.status_code == 503 and api.json()["error"] == "book_indexing"


def test_with_a_book_to_answer_from_ready_stays_ready_and_names_the_book_being_indexed(client, manual_book):
    slug = f"built-{uuid.uuid4().hex[:8]}"
    building(slug)
    ready = client.get("/api/v1/ready").json()
    assert ready["status"] == "ready" and ready["books"]["ok"] is True
    assert {"book": slug, "progress": "embedding passages (12/40)"} in ready["books"]["indexing"]
    page = client.get("/?book=bookchat-manual").content.decode()
    assert "Indexing Harbour guide: embedding passages (12/40)." in page
    assert 'http-equiv="refresh"' not in page, "a page with a book to ask never reloads under the reader"


def test_a_local_job_indexes_a_folder_of_the_server_in_place(book_dir, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    slug = f"local-{uuid.uuid4().hex[:8]}"
    book_dir.write("tides.md", "# Tides\n\nHigh tide comes about fifty minutes later each day.\n")
    job = jobs.queue_local(path=book_dir.root, book_slug=slug, title="Tide tables")
    assert list(IngestionJob.objects.first_builds().filter(pk=job.pk)) == [job]
    assert job.progress_note == "waiting for the task worker"
    result = jobs.run_job(job.pk)
    job.refresh_from_db()
    assert result["status"] == "done" and job.report["files_indexed"] == 1
    book = Book.objects.get(slug=slug)
    assert book.title == "Tide tables" and book.source_path == str(book_dir.root.resolve())
    assert IndexRun.objects.get(book=book).trigger == "make run"
    assert book_dir.root.joinpath("tides.md").exists(), "a folder of the server is read in place, never removed"
    assert not IngestionJob.objects.first_builds().filter(pk=job.pk).exists()
    missing = jobs.queue_local(path=tmp_path / "nowhere", book_slug=f"{slug}-x")
    assert jobs.run_job(missing.pk)["status"] == "failed"


def test_a_job_left_running_by_a_stopped_make_run_is_failed_when_the_next_one_queues(book_dir, settings, tmp_path):
    """Else it would stand for a first indexing under way, and keep the book from answering until a sweep."""
    from datetime import timedelta

    from django.utils import timezone

    settings.DATA_DIR = tmp_path
    slug = f"local-{uuid.uuid4().hex[:8]}"
    long_ago = timezone.now() - timedelta(minutes=1)
    dead = building(slug)
    IngestionJob.objects.filter(pk=dead.pk).update(started_at=long_ago, heartbeat_at=long_ago)
    book_dir.write("tides.md", "# Tides\n\nHigh tide comes about fifty minutes later each day.\n")
    jobs.queue_local(path=book_dir.root, book_slug=slug)
    dead.refresh_from_db()
    assert dead.status == "failed" and dead.error_code == "worker_lost"
