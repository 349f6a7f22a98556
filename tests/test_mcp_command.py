"""``manage.py mcp``, run by name in-process: an unknown book stops it before it serves, naming the books there are.
Serving over stdio end to end (a real assistant session in a subprocess): tests/test_mcp.py."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bookchat.base import embedded_db
from ingestion.models import Book

pytestmark = pytest.mark.django_db


def test_an_unknown_book_is_refused_naming_the_books_there_are(monkeypatch):
    # The command stops an embedded PostgreSQL it started; in the suite it is the session's, which must stay.
    monkeypatch.setattr(embedded_db, "started_here", False)
    Book.objects.create(slug="served-book", title="Served", embedder_name="test", embedder_dimension=3)
    with pytest.raises(CommandError) as refused:
        call_command("mcp", "--book", "no-such-book")
    message = str(refused.value)
    assert "no-such-book" in message and "served-book" in message
