"""Which book a question is asked of, and which edition of it: a request names a book (or the default, configured or
stored, or the only one there is), and for a Docusaurus site a version and a locale (``ingestion.reading.site``).

A book being indexed for the first time (``make run``'s manual, a first publish) has no version readers can see
yet, or one whose first run is still finishing (its calibration): a question to it is ``BookIndexing``, a 503 to ask
again shortly, with how far its indexing has got.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Coalesce

from bookchat.base.conf import setting
from bookchat.base.errors import NotFound, RequestError
from ingestion.models import Book, DefaultBook, IngestionJob

# What a client asking a book being indexed for the first time is told to wait, in seconds.
INDEXING_RETRY_SECONDS = 15


class BookIndexing(RequestError):
    """The book is being indexed for the first time: nothing of it can answer yet."""

    code = "book_indexing"
    status = 503
    retry_after = INDEXING_RETRY_SECONDS

    def __init__(self, job: IngestionJob):
        super().__init__(f"the book {job.book_title or job.book_slug!r} is being indexed ({job.progress_note}); "
                         f"ask again in a minute", field="book")
        self.job = job


def first_build(slug: str | None = None) -> IngestionJob | None:
    """The first indexing under way of book ``slug`` (any book's, without one), or None."""
    builds = IngestionJob.objects.first_builds()
    return (builds.filter(book_slug=slug) if slug else builds).first()


def resolve_book(slug: str | None, *, version: str | None = None, locale: str | None = None) -> Book:
    """The book a request names, the default (``BOOKCHAT_DEFAULT_BOOK``, else the stored one: ``DefaultBook``), or
    the only one there is; for a site, its edition in ``version`` (default: the latest) and ``locale`` (default, or
    without a translation: the default locale)."""
    named = slug or setting("DEFAULT_BOOK") or None
    slug = named or DefaultBook.stored()
    if slug:
        # One round trip: the book and, when it is a root, its editions (a search runs this on every keystroke).
        found = list(_with_build_state(Book.objects.filter(Q(slug=slug) | Q(edition_of__slug=slug)))
                     .select_related("edition_of").order_by("pk"))
        book = next((b for b in found if b.slug == slug), None)
        if book is None:
            if (build := first_build(slug)) is not None:
                raise BookIndexing(build)
            if named:
                raise NotFound(f"there is no book {slug!r}; GET /api/v1/books lists them", code="unknown_book",
                               field="book")
            # A stored default naming nothing now (its first indexing failed, or it was deleted): as if unset.
        else:
            if book.first_build_running and (build := first_build(book.root.slug)) is not None:
                raise BookIndexing(build)  # stored, and its first run still finishing
            if book.edition_of_id:
                if not (version or locale):
                    return book  # an edition named by its own slug
                return pick_edition(book.root, version=version, locale=locale)
            return pick_edition(book, version=version, locale=locale,
                                editions=[b for b in found if b.edition_of_id == book.pk])
    books = list(_with_build_state(Book.objects.roots()).order_by("slug")[:2])
    if not books:
        if (build := first_build()) is not None:
            raise BookIndexing(build)
        raise NotFound("no book has been indexed yet: run `manage.py ingest PATH` first", code="no_books")
    if len(books) > 1:
        raise RequestError("several books are indexed: say which one with `book`", code="book_required",
                           field="book")
    if books[0].first_build_running and (build := first_build(books[0].slug)) is not None:
        raise BookIndexing(build)
    return pick_edition(books[0], version=version, locale=locale)


def _with_build_state(books):
    """``books`` with ``first_build_running``: whether its site's first run is still finishing (in the same query:
    a search resolves its book on every keystroke)."""
    root_slug = Coalesce(OuterRef("edition_of__slug"), OuterRef("slug"))
    return books.annotate(first_build_running=Exists(IngestionJob.objects.first_builds().filter(book_slug=root_slug)))


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
