"""``ingestion.admin``: the read-only admin of what indexing stored — nothing added or changed by hand, JSON fields
shown escaped, another book's row a 404 for a restricted user, only root books offered on a user's page, and a
translation never made the default. tests/test_default_book.py and tests/test_book_roles.py use the pages."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.messages.storage.fallback import FallbackStorage
from django.http import Http404
from django.test import RequestFactory

from ingestion.admin import BookAccessInline, BookAdmin, DocumentAdmin, IndexRunAdmin, _pretty_json
from ingestion.models import Book, BookAccess, DefaultBook, Document, IndexRun
from tests.test_book_roles import book as _book

pytestmark = pytest.mark.django_db


def _request(user: User):
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def test_stored_rows_are_read_only_and_their_json_is_shown_escaped(admin_user):
    documents = DocumentAdmin(Document, admin.site)
    request = _request(admin_user)
    assert not documents.has_add_permission(request) and not documents.has_change_permission(request)
    fields = documents.get_readonly_fields(request)
    assert "front_matter" not in fields and {"front_matter_json", "links_to_json", "path"} <= set(fields)
    assert "report_json" in IndexRunAdmin(IndexRun, admin.site).get_readonly_fields(request)
    assert _pretty_json({"title": "<script>"}) == \
        "<pre style='white-space:pre-wrap'>{\n  &quot;title&quot;: &quot;&lt;script&gt;&quot;\n}</pre>"


def test_another_books_row_is_not_found_for_a_restricted_user():
    mine, theirs = _book("admin-mine"), _book("admin-theirs")
    other = Document.objects.create(book=theirs, path="t.md", title="T")
    user = User.objects.create_user("admin-restricted", is_staff=True)
    BookAccess.objects.create(user=user).books.set([mine])
    with pytest.raises(Http404):
        DocumentAdmin(Document, admin.site).get_object(_request(user), str(other.pk))


def test_a_users_page_offers_root_books_only(admin_user):
    root = _book("admin-root")
    _book("admin-root-fr", edition_of=root, locale="fr")
    inline = BookAccessInline(User, admin.site)
    field = inline.formfield_for_manytomany(BookAccess._meta.get_field("books"), _request(admin_user))
    slugs = list(field.queryset.values_list("slug", flat=True))
    assert "admin-root" in slugs and "admin-root-fr" not in slugs


def test_a_translation_is_not_made_the_default(admin_user):
    edition = _book("admin-default-fr", edition_of=_book("admin-default"), locale="fr")
    before = DefaultBook.in_force()
    request = _request(admin_user)
    request.session = {}
    request._messages = FallbackStorage(request)
    BookAdmin(Book, admin.site).make_default(request, Book.objects.filter(pk=edition.pk))
    assert [message.message for message in request._messages] == [
        "Select one book (not a version or translation of one) to make it the default."]
    assert DefaultBook.in_force() == before
