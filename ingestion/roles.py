"""Per-book roles: a staff member or reviewer can be given some books only (``BookAccess``, set on the user's page
in the admin). What they may do stays Django's permissions (the "Reviewers" group, upload rights); which rows
they do it on is narrowed here.

Enforced where the rows are read, not in menus: ``BookScopedAdmin.get_queryset`` narrows every list, filter,
action, export and object page of the admins that use it, and an object outside the user's books is a 404 (the
same answer as a row that does not exist, so its existence is not told). The dashboard, coverage gaps, the
upload form and the API-key form ask ``allowed_slugs``/``allowed_books`` themselves. Superusers and staff
without a restriction keep seeing everything; a restriction with no book shows nothing.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from ingestion.models import Book, BookAccess

_CACHE = "_bookchat_allowed_books"


def allowed_books(user) -> QuerySet[Book] | None:
    """The books ``user`` may see (their editions included), or None for every book."""
    if not hasattr(user, _CACHE):
        books = None
        if not user.is_superuser:
            access = BookAccess.objects.filter(user_id=user.pk).first()
            if access is not None:
                given = list(access.books.values_list("pk", flat=True))
                books = Book.objects.filter(Q(pk__in=given) | Q(edition_of__in=given))
        setattr(user, _CACHE, books)  # one request's user: asked once per request
    return getattr(user, _CACHE)


def allowed_slugs(user) -> list[str] | None:
    books = allowed_books(user)
    return None if books is None else list(books.values_list("slug", flat=True))


def within_books(queryset: QuerySet, user, lookup: str) -> QuerySet:
    """``queryset`` narrowed to ``user``'s books; ``lookup`` leads to a Book (``book``, ``pk`` for books
    themselves) or, for rows that copy it, to a book's slug (a name ending in ``slug``)."""
    books = allowed_books(user)
    if books is None:
        return queryset
    if lookup.endswith("slug"):
        return queryset.filter(**{f"{lookup}__in": books.values("slug")})
    return queryset.filter(**{f"{lookup}__in": books})


class BookScopedAdmin:
    """A ModelAdmin mixin: ``book_lookup`` names the way from a row to its book (see ``within_books``)."""

    book_lookup = "book"

    def get_queryset(self, request):
        return within_books(super().get_queryset(request), request.user, self.book_lookup)

    def get_object(self, request, object_id, from_field=None):
        found = super().get_object(request, object_id, from_field)
        if found is None and allowed_books(request.user) is not None:
            raise Http404("Not found among your books.")
        return found
