"""The default book is stored (``DefaultBook``), not an environment variable of one process: ``ingest --default``,
``serve --book`` (tests/test_serve.py) and the admin set it, and every process asks it when a request names no
book; ``BOOKCHAT_DEFAULT_BOOK`` still wins where it is set."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.test import RequestFactory
from django.urls import reverse

from bookchat.base.errors import RequestError
from bookchat.base.models import StaffCommand
from chat.channels.openapi import books_a_client_may_name
from chat.pipeline.editions import resolve_book
from ingestion.models import Book, DefaultBook
from tests.conftest import run_command

pytestmark = pytest.mark.django_db
SCHEMA_REQUEST = RequestFactory().get("/api/v1/schema")  # no key: every book may be named


@pytest.fixture
def two_books(book_dir, tmp_path, settings):
    """Two books of our own beside whatever the session indexed: a request must say which, unless a default is set."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": ""}
    book_dir.write("orchard.md", "# Orchard care\n\nPrune the apple trees in late winter, before the buds open.\n")
    other = tmp_path / "kiln"
    other.mkdir()
    (other / "firing.md").write_text("# Firing\n\nA bisque firing reaches about 1000 degrees before the glaze.\n")
    for path, slug in ((book_dir.root, "orchard"), (other, "kiln")):
        assert run_command("ingest", str(path), "--book", slug, "--json")[0] == 0
    return book_dir


def test_ingest_default_stores_the_book_every_request_without_one_then_asks(two_books, client):
    with pytest.raises(RequestError) as refused:
        resolve_book(None)
    assert refused.value.code == "book_required"
    code, out, err = run_command("ingest", str(two_books.root), "--book", "orchard", "--default", "--json")
    assert code == 0, err
    assert json.loads(out)["default_book"] == "orchard"
    assert DefaultBook.stored() == "orchard"
    assert resolve_book(None).slug == "orchard"
    assert StaffCommand.objects.filter(action="default book set", target="orchard").exists()
    response = client.post("/api/v1/ask", {"question": "When should apple trees be pruned?"},
                           content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["book"] == "orchard"
    assert b'data-book="orchard"' in client.get("/").content
    assert books_a_client_may_name(SCHEMA_REQUEST)[1] is False, "the schema no longer says `book` is required"
    code, out, _ = run_command("ingest", str(two_books.root), "--book", "orchard", "--default")
    assert "'orchard' is the default book." in out


def test_the_environment_still_wins_over_the_stored_default(two_books, settings):
    DefaultBook.choose("orchard", by="test")
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": "kiln"}
    assert resolve_book(None).slug == "kiln"
    code, _, err = run_command("ingest", str(two_books.root), "--book", "orchard", "--default")
    assert code == 0 and "BOOKCHAT_DEFAULT_BOOK=kiln is set here and wins" in err


def test_a_stored_default_naming_no_book_is_passed_over_not_a_404(two_books):
    """A `serve --book` whose indexing failed, or a default book since deleted, must not refuse every question."""
    DefaultBook.choose("orchard", by="test")
    assert run_command("ingest", str(two_books.root), "--book", "orchard-copy")[0] == 0  # two books stay
    Book.objects.filter(slug="orchard").delete()
    with pytest.raises(RequestError) as refused:
        resolve_book(None)  # several books, no default in force: as if none were stored
    assert refused.value.code == "book_required"
    assert books_a_client_may_name(SCHEMA_REQUEST)[1] is True


@pytest.mark.parametrize("flags, says", [
    (["--dry-run"], "--dry-run: the default book is left as it was."),
    ([], "no page of 'empty-book' could be indexed; the default book is left as it was."),
])
def test_ingest_default_leaves_the_default_when_nothing_was_indexed(two_books, tmp_path, flags, says):
    DefaultBook.choose("orchard", by="test")
    empty = tmp_path / "empty-book"
    empty.mkdir()
    (empty / "broken.md").write_bytes(b"\x00\xff\xfe binary, not Markdown")
    target = two_books.root if flags else empty
    slug = "orchard-copy" if flags else "empty-book"
    code, out, err = run_command("ingest", str(target), "--book", slug, "--default", *flags, "--json")
    assert says in err
    assert "default_book" not in json.loads(out)
    assert DefaultBook.stored() == "orchard"


def test_the_admin_makes_a_book_the_default_and_logs_it(two_books, admin_client):
    changelist = reverse("admin:ingestion_book_changelist")
    kiln = Book.objects.get(slug="kiln")
    response = admin_client.post(changelist, {"action": "make_default", "_selected_action": [kiln.pk]}, follow=True)
    assert "kiln" in response.content.decode() and "is the default book" in response.content.decode()
    assert DefaultBook.stored() == "kiln"
    assert resolve_book(None).slug == "kiln"
    assert LogEntry.objects.filter(object_id=str(kiln.pk), change_message="Made the default book.").exists()
    listed = admin_client.get(changelist)
    defaults = [book.slug for book in listed.context["cl"].result_list if book.default]
    assert defaults == ["kiln"], "the list marks the default in force"
    orchard = Book.objects.get(slug="orchard")
    response = admin_client.post(changelist, {"action": "make_default", "_selected_action": [kiln.pk, orchard.pk]},
                                 follow=True)
    assert "Select one book" in response.content.decode()
    assert DefaultBook.stored() == "kiln", "two books selected: nothing changes"


def test_staff_without_the_permission_are_not_offered_the_action(two_books, client):
    staff = User.objects.create_user("editor", password="editor-pass", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_book"))
    client.force_login(staff)
    changelist = reverse("admin:ingestion_book_changelist")
    response = client.get(changelist)
    assert response.status_code == 200
    assert b"make_default" not in response.content
    kiln = Book.objects.get(slug="kiln")
    client.post(changelist, {"action": "make_default", "_selected_action": [kiln.pk]})
    assert DefaultBook.stored() is None
