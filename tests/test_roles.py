"""``ingestion.roles``: which books a user may see — all for superusers and unrestricted staff, their books and
those books' editions for a restricted user, none for a restriction without books — and querysets narrowed to
them by a book or a slug lookup. tests/test_book_roles.py checks the admin pages that use it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from ingestion.models import BookAccess, Document
from ingestion.roles import allowed_books, allowed_slugs, within_books
from tests.test_book_roles import book as _book

pytestmark = pytest.mark.django_db


@pytest.fixture
def books():
    alpha, beta = _book("roles-alpha"), _book("roles-beta")
    _book("roles-alpha-fr", edition_of=alpha, locale="fr")
    return alpha, beta


def _user(name: str, books=None, **flags) -> User:
    user = User.objects.create_user(name, is_staff=True, **flags)
    if books is not None:
        BookAccess.objects.create(user=user).books.set(books)
    return User.objects.get(pk=user.pk)  # a fresh object: nothing cached on it


def test_superusers_and_unrestricted_staff_see_every_book(books):
    superuser = _user("roles-super", books=[books[1]], is_superuser=True)  # a restriction does not bind them
    assert allowed_books(superuser) is None and allowed_slugs(superuser) is None
    assert allowed_books(_user("roles-staff")) is None


def test_a_restricted_user_sees_their_books_and_their_editions(books):
    user = _user("roles-rita", books=[books[0]])
    assert sorted(allowed_slugs(user)) == ["roles-alpha", "roles-alpha-fr"]
    assert allowed_slugs(_user("roles-nobody", books=[])) == []


def test_querysets_are_narrowed_by_a_book_or_a_slug_lookup(books):
    alpha, beta = books
    for book in books:
        Document.objects.create(book=book, path=f"{book.slug}.md", title=book.slug)
    user = _user("roles-rita", books=[alpha])
    documents = within_books(Document.objects.filter(book__slug__startswith="roles-"), user, "book")
    assert [document.book_id for document in documents] == [alpha.pk]
    by_slug = within_books(Document.objects.filter(book__slug__startswith="roles-"), user, "book__slug")
    assert list(by_slug) == list(documents)
    everything = Document.objects.filter(book__slug__startswith="roles-")
    assert within_books(everything, _user("roles-staff"), "book") is everything


def test_the_answer_is_kept_on_the_user_for_the_request(books):
    user = _user("roles-rita", books=[books[0]])
    assert sorted(allowed_slugs(user)) == ["roles-alpha", "roles-alpha-fr"]
    user.book_access.books.add(books[1])
    assert "roles-beta" not in allowed_slugs(user)  # asked once per request
    assert "roles-beta" in allowed_slugs(User.objects.get(pk=user.pk))
