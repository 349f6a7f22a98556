"""What follows an indexing run: chat's receivers of ``book_indexed`` only queue django-q2 tasks (``chat.tasks``
does the work); a run on the worker leaves them queued, a run without one (or a book never calibrated) runs them
through django-q2 in its own process before it returns, and the report's ``after`` says which."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django_q.models import OrmQ, Task

import chat.tasks
from chat.models import ScopeCalibration
from chat.receivers import queue_calibration, run_task
from ingestion.indexing.reports import IndexReport
from ingestion.models import Book
from ingestion.signals import book_indexed

pytestmark = pytest.mark.django_db


def new_book(slug: str) -> Book:
    return Book.objects.create(slug=slug, title=slug, embedder_name="x", embedder_dimension=3)


def queued_ids() -> set[str]:
    return {package.task_id() for package in OrmQ.objects.all()}


def shown_calibration(book) -> dict:
    """What a real calibration returns, without its ~150 retrievals."""
    return {key: 0.5 for key in chat.tasks.CALIBRATION_SHOWN} | {"probes": ["not shown in a report"]}


def test_a_worker_run_queues_the_calibration_of_a_calibrated_book_and_runs_nothing(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SENTENCE_VECTORS": "on"}
    book = new_book("after-queued")
    ScopeCalibration.objects.create(book=book, threshold=0.25, details={})
    report = IndexReport(book=book.slug)
    book_indexed.send(sender=Book, book=book, report=report, changed=True, trigger="upload")
    assert set(report.after) == {"calibration", "sentence_vectors"}
    assert {report.after["calibration"]["queued"], report.after["sentence_vectors"]["queued"]} <= queued_ids()
    assert ScopeCalibration.objects.get(book=book).threshold == 0.25, "the previous threshold serves meanwhile"
    assert not Task.objects.filter(name__endswith="after-queued").exists(), "nothing ran here"


def test_a_book_never_calibrated_is_calibrated_before_the_worker_run_ends(monkeypatch):
    monkeypatch.setattr(chat.tasks, "calibrate_book", shown_calibration)
    book = new_book("after-first")
    before = queued_ids()
    report = IndexReport(book=book.slug)
    queue_calibration(sender=Book, book=book, report=report, changed=True, trigger="upload")
    assert report.after["calibration"] == {key: 0.5 for key in chat.tasks.CALIBRATION_SHOWN}
    assert queued_ids() == before, "run here, not queued"
    assert Task.objects.get(name="calibrate-after-first").success, "through django-q2, saved among its results"


def test_an_unchanged_book_with_a_current_calibration_is_left_alone(monkeypatch):
    book = new_book("after-unchanged")
    monkeypatch.setattr("chat.receivers.is_current", lambda details: True)
    ScopeCalibration.objects.create(book=book, threshold=0.25, details={})
    report = IndexReport(book=book.slug)
    queue_calibration(sender=Book, book=book, report=report, changed=False, trigger="cli")
    assert report.after == {}


def test_a_task_run_here_returns_its_result_and_one_for_a_deleted_book_does_nothing():
    gone = SimpleNamespace(pk=0, slug="after-gone")
    assert run_task("chat.tasks.embed_sentences", gone, label="sentences", here=True) == {"book": None}
    assert run_task("chat.tasks.calibrate", gone, label="calibrate", here=True) is None
    assert Task.objects.filter(name__in=["sentences-after-gone", "calibrate-after-gone"]).count() == 2


def test_a_failed_calibration_is_logged_and_leaves_the_threshold(monkeypatch, caplog):
    def broken(book):
        raise RuntimeError("no passages")

    monkeypatch.setattr(chat.tasks, "calibrate_book", broken)
    book = new_book("after-broken")
    ScopeCalibration.objects.create(book=book, threshold=0.25, details={})
    assert chat.tasks.calibrate(book.pk) is None
    assert "calibrating book after-broken failed" in caplog.text
    assert ScopeCalibration.objects.get(book=book).threshold == 0.25
