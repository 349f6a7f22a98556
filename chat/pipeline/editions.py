"""Which book a question is asked of, and which edition of it: a request names a book (or the configured default,
or the only one there is), and for a Docusaurus site a version and a locale (``ingestion.reading.site``)."""

from __future__ import annotations

from django.db.models import Q

from bookchat.conf import setting
from bookchat.errors import NotFound, RequestError
from ingestion.models import Book


def resolve_book(slug: str | None, *, version: str | None = None, locale: str | None = None) -> Book:
    """The book a request names, the configured default, or the only one there is; for a site, its edition in
    ``version`` (default: the latest) and ``locale`` (default, or without a translation: the default locale)."""
    slug = slug or setting("DEFAULT_BOOK") or None
    if slug:
        # One round trip: the book and, when it is a root, its editions (a search runs this on every keystroke).
        found = list(Book.objects.filter(Q(slug=slug) | Q(edition_of__slug=slug)).select_related("edition_of")
                     .order_by("pk"))
        book = next((b for b in found if b.slug == slug), None)
        if book is None:
            raise NotFound(f"there is no book {slug!r}; GET /api/v1/books lists them", code="unknown_book",
                           field="book")
        if book.edition_of_id:
            if not (version or locale):
                return book  # an edition named by its own slug
            return pick_edition(book.root, version=version, locale=locale)
        return pick_edition(book, version=version, locale=locale,
                            editions=[b for b in found if b.edition_of_id == book.pk])
    books = list(Book.objects.roots().order_by("slug")[:2])
    if not books:
        raise NotFound("no book has been indexed yet: run `manage.py ingest PATH` first", code="no_books")
    if len(books) > 1:
        raise RequestError("several books are indexed: say which one with `book`", code="book_required",
                           field="book")
    return pick_edition(books[0], version=version, locale=locale)


def pick_edition(root: Book, *, version: str | None, locale: str | None, editions: list[Book] | None = None) -> Book:
    """The edition of ``root`` in ``version`` (its name, label or URL path; default: the latest) and ``locale``
    (or its language, else the default locale); a version not translated answers in the default locale.
    ``editions``: ``root`` 's editions, when the caller has read them."""
    editions = [root, *(root.editions.order_by("pk") if editions is None else editions)]
    if len(editions) == 1 and not version:
        return root
    default = root.locale.lower()
    wanted = (locale or default).lower()
    present = {e.locale.lower() for e in editions}
    chosen = next((x for x in (wanted, wanted.split("-")[0]) if x in present), default)
    named = (version or "").strip().strip("/").lower()

    def matches(edition: Book) -> bool:
        if not named or named == "latest":
            return edition.latest
        return named in {edition.version.lower(), edition.version_label.lower(), edition.version_path.lower()} - {""}

    for language in dict.fromkeys((chosen, default)):
        found = next((e for e in editions if e.locale.lower() == language and matches(e)), None)
        if found is not None:
            return found
    if not named:
        return root
    known = ", ".join(sorted({e.version for e in editions if e.version})) or "none"
    raise NotFound(f"book {root.slug!r} has no version {version!r} (versions: {known})", code="unknown_version",
                   field="version")
