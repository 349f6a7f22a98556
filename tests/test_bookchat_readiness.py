"""Readiness' own decisions (``bookchat.readiness``): ready when the database answers, every migration is applied and
the embedder loads; the database down makes the migrations unknown ("no database") and the node not ready; a check
that passed once is not run again; pending migrations say what to run; a book being indexed for the first time is
listed with how far it has got while another book answers; the broker is reported, never judged. The probe over
HTTP: tests/test_deployment.py and tests/test_first_start.py."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from bookchat import readiness
from ingestion.models import Book, IngestionJob

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def unsettled(monkeypatch):
    """Each test starts as a fresh process: no check has passed yet."""
    monkeypatch.setattr(readiness, "_settled", {})


def test_a_node_with_its_database_migrations_and_embedder_is_ready():
    ready, checks = readiness.readiness()
    assert ready, checks
    assert {name: checks[name]["ok"] for name in ("database", "migrations", "embedder")} == {
        "database": True, "migrations": True, "embedder": True}
    assert checks["embedder"]["dimensions"] > 0
    assert set(checks["broker"]) == {"name"}  # reported, not judged


def test_without_the_database_the_node_is_not_ready_and_the_migrations_are_unknown(monkeypatch):
    monkeypatch.setattr(readiness, "_database", lambda: {"ok": False, "error": "OperationalError"})
    ready, checks = readiness.readiness()
    assert not ready
    assert checks["migrations"] == {"ok": False, "error": "no database"}
    assert checks["embedder"]["ok"] and "books" not in checks
    assert "migrations" not in readiness._settled and "embedder" in readiness._settled


def test_a_check_that_passed_is_not_run_again(monkeypatch):
    readiness.readiness()

    def must_not_run():
        raise AssertionError("checked again")

    monkeypatch.setattr(readiness, "_migrations", must_not_run)
    monkeypatch.setattr(readiness, "_embedder", must_not_run)
    assert readiness.readiness()[0]


def test_pending_migrations_say_what_to_run(monkeypatch):
    monkeypatch.setattr(readiness, "pending_migrations", lambda: [("chat", "0099_new")])
    assert readiness._migrations() == {"ok": False, "pending": 1, "error": "run `manage.py bootstrap`"}


def test_a_first_build_is_listed_while_another_book_answers():
    Book.objects.create(slug="ready-answers", title="Answers", embedder_name="test", embedder_dimension=3)
    IngestionJob.objects.create(book_slug="ready-new", status=IngestionJob.Status.RUNNING, stage="embedding (3/9)")
    report = readiness._books()
    assert report["ok"]
    assert {"book": "ready-new", "progress": "embedding (3/9)"} in report["indexing"]


def test_the_view_answers_503_when_not_ready(monkeypatch):
    monkeypatch.setattr(readiness, "_database", lambda: {"ok": False, "error": "OperationalError"})
    response = readiness.ReadyView.as_view()(RequestFactory().get("/api/v1/ready"))
    assert response.status_code == 503 and response.data["status"] == "not_ready"
    assert response.data["database"] == {"ok": False, "error": "OperationalError"}
