"""Ingesting a folder of pages or a Docusaurus site: what ``ingest``, the upload jobs and ``bootstrap`` call.
One run per book at a time (``BookLock``); each book is indexed by ``ingestion.indexing.indexer.BookIndexer`` (a
site's editions all read first, then switched together in one transaction: ``index_site``), and the apps listening
to ``book_indexed`` (chat: sentence vectors, calibration) hear about it once it is stored and the book's lock is
released."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from django.db import connection, transaction

from bookchat.base.errors import BookchatError
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.indexer import BookIndexer, validate_book_slug
from ingestion.indexing.reports import (
    LISTED_PAGES,
    SUMMED,
    IndexingError,
    IndexReport,
    ProgressCallback,
    RunCallback,
    SiteReport,
)
from ingestion.models import Book, book_slug_from
from ingestion.reading.conventions import Conventions, book_facts, config_file, detect, files_read, for_book
from ingestion.reading.discovery import Discovery, discover
from ingestion.reading.documents import Issue
from ingestion.reading.site import Edition, plan_site
from ingestion.reading.site_config import SiteConfig, find_config, read_site_config
from ingestion.signals import book_indexed

logger = logging.getLogger(__name__)


class AdvisoryLock:
    """A Postgres session-level advisory lock named by ``name``: it goes with the connection, so a killed process
    never leaves it held. ``with lock:`` holds it or raises ``IndexingError`` (code "busy") when another session
    does; ``with lock.waited_for():`` waits for it; ``with lock.if_free() as free:`` holds it only if nobody does."""

    def __init__(self, name: str):
        self.name = name
        self.key = int(hashlib.sha256(name.encode()).hexdigest()[:15], 16)

    def busy_message(self) -> str:
        return f"{self.name} is held by another run"

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; whether we got it."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [self.key])
            return bool(cursor.fetchone()[0])

    def release(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [self.key])

    def __enter__(self) -> AdvisoryLock:
        if not self.try_acquire():
            raise IndexingError(self.busy_message(), code="busy")
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    @contextlib.contextmanager
    def waited_for(self) -> Iterator[AdvisoryLock]:
        """Hold the lock for the block, waiting first for whoever holds it."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [self.key])
        try:
            yield self
        finally:
            self.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        """Hold the lock for the block if nobody else does; yields whether we hold it."""
        free = self.try_acquire()
        try:
            yield free
        finally:
            if free:
                self.release()


class BookLock(AdvisoryLock):
    """The lock that keeps two indexing runs off the same book."""

    def __init__(self, slug: str):
        super().__init__(f"bookchat-index:{slug}")
        self.slug = slug

    def busy_message(self) -> str:
        return f"book {self.slug!r} is being indexed by another run; try again when it ends"


def default_slug(path: Path | str) -> str:
    """The slug ``index_path`` gives the book at ``path`` when none is given: a site's from its config, an mdBook's
    or an MkDocs site's from its title, else the folder's name."""
    path = Path(path).expanduser()
    if path.is_dir() and find_config(path) is not None:
        plan = plan_site(read_site_config(path))
        if plan.books:
            return plan.books[0][0].slug
    conventions = detect(path) if path.is_dir() else None
    if conventions is not None:
        return book_slug_from(book_facts(conventions)[1]) or book_slug_from(path.resolve().name) or "book"
    above = detect(path.parent) if path.is_dir() else None  # an mdBook's src/ or MkDocs' docs/
    if above is not None and book_facts(above)[0].resolve() == path.resolve():
        return book_slug_from(book_facts(above)[1]) or book_slug_from(path.parent.resolve().name) or "book"
    return book_slug_from((path if path.is_dir() else path.parent).resolve().name) or "book"


def index_book(*, path: Path | str, book_slug: str | None = None, base_url: str | None = None,
               title: str | None = None, prune: bool = False, dry_run: bool = False, reindex: bool = False,
               trigger: str = "cli", progress: ProgressCallback | None = None, confined: bool = False,
               on_run: RunCallback | None = None, language: str | None = None) -> IndexReport:
    """Index the Markdown/MDX pages at ``path`` (a folder or one file) into a book; return the report. ``language``:
    the book's (a base tag, ``ingestion.languages``), None to keep the stored one (English for a new book). ``confined``
    changes nothing here (a folder's pages are found inside it, never through a link out of it): ``index_path``
    passes it to every kind of book. ``on_run`` is told the run's IndexRun id (``BookIndexer``)."""
    path = Path(path).expanduser()
    if book_slug is None:
        book_slug = book_slug_from((path if path.is_dir() else path.parent).resolve().name) or "book"
    validate_book_slug(book_slug)
    existing = Book.objects.filter(slug=book_slug).first()
    root = None
    if existing is not None and existing.source_path and path.is_file():
        candidate = Path(existing.source_path)
        if path.resolve().is_relative_to(candidate):
            root = candidate  # a single page of a book indexed from its folder keeps its place in it
    discovery = discover(path, root=root)
    embedder = get_embedder()
    # Pages added to an mdBook or MkDocs book (an upload) get its URLs and anchors, not Docusaurus's.
    conventions = for_book(existing.generator, Path(existing.source_path) if existing.source_path else None) \
        if existing is not None else None
    indexer = BookIndexer(book_slug=book_slug, discovery=discovery, embedder=embedder, base_url=base_url,
                          title=title, prune=prune, dry_run=dry_run, reindex=reindex, trigger=trigger,
                          progress=progress, conventions=conventions, on_run=on_run, language=language)
    return run_locked(indexer, book_slug)


def run_locked(indexer: BookIndexer, slug: str) -> IndexReport:
    """Run ``indexer`` under the book's lock; then, the lock released (the new version is searchable, and another
    run of the book may start), tell the listeners what it stored (``announce``)."""
    with BookLock(slug):
        report = indexer.run()
    announce(indexer)
    return report


def announce(indexer: BookIndexer) -> None:
    """Tell the listeners of ``book_indexed`` what ``indexer``'s run stored (nothing for a dry run, or a run that
    stored nothing)."""
    if indexer.dry_run or indexer.switched is None:
        return
    indexer.progress("after", 0, 0)
    report = indexer.report
    changed = report.chunks_added or report.chunks_removed or report.files_indexed or report.documents_removed
    book_indexed.send(sender=Book, book=indexer.book, report=report, changed=bool(changed), trigger=indexer.trigger)


def index_site(config: SiteConfig, *, book_slug: str | None = None, base_url: str | None = None,
               title: str | None = None, prune: bool = False, dry_run: bool = False, reindex: bool = False,
               trigger: str = "cli", progress: ProgressCallback | None = None, confined: bool = False,
               on_run: RunCallback | None = None, language: str | None = None) -> SiteReport:
    """Index a Docusaurus site (``ingestion.reading.site``): every docs instance, version and locale; return
    the reports. ``confined``: every folder the config names must be inside the site's root.

    Every edition is read and embedded first, each under its book's lock; then all of them are switched to their
    new version in one transaction, so that readers see the whole site as it was, then the whole new site at once
    (the cost: every edition's new passages wait in memory for the switch). An edition that can't be read (or
    whose book is busy) is reported with its error and keeps its previous version; the others go on. If the
    switch fails, no edition is switched and the run fails (``switch_failed``). ``language`` is that of the editions
    in the site's default locale (the others have their locale's)."""
    started = time.monotonic()
    if book_slug is not None:
        validate_book_slug(book_slug)
    if confined:  # every folder and file the config names, before anything is read from them
        check_inside(config.root, config.root / config.i18n_path, *(
            config.root / path for docs in config.docs for path in (docs.path, docs.sidebar_path) if path))
    plan = plan_site(config, slug=book_slug, title=title, base_url=base_url)
    roots = [editions[0].slug for editions in plan.books]
    total = IndexReport(book=roots[0] if roots else (book_slug or ""), dry_run=dry_run,
                        pages_folder=str(config.root))
    for issue in plan.warnings:
        total.warn(issue)
    report = SiteReport(total, {"config": config.config_file.name, "read_with": config.how, "title": config.title,
                                "url": config.site_url, "books": roots})
    if not plan.books:
        raise IndexingError(f"no docs to index in the site at {config.root}", code="empty")
    if confined:
        for editions in plan.books:
            for edition in editions:
                check_inside(config.root, edition.folder, edition.translations)
    options = {"embedder": get_embedder(), "prune": prune, "dry_run": dry_run, "reindex": reindex, "trigger": trigger,
               "progress": progress, "site_root": config.root, "on_run": on_run, "site_vectors": {},
               "language": language}
    read: list[BookIndexer] = []
    with contextlib.ExitStack() as locks:
        try:
            groups = [_read_editions(editions, locks=locks, read=read, title=title, options=options)
                      for editions in plan.books]
        except BaseException as exc:  # what stops the run before the switch leaves every edition as it was
            for indexer in read:
                indexer.failed(exc)
            raise
        if progress is not None and not dry_run:
            progress("store", 0, sum(indexer.pages_to_store for indexer in read))
        _switch_editions(read)
        for indexer in read:
            indexer.after_switch()
    for indexer in read:  # the locks released
        announce(indexer)
    for editions, group in zip(plan.books, groups, strict=True):
        for edition, indexer in group:
            _add_edition(report, edition, indexer.report, config.root)
        root = group[0][1].book if group[0][0].is_root else None
        _stale_editions(root if root is not None and root.pk else None, {e.slug for e in editions},
                        prune=prune and not dry_run, report=total)
    total.total_seconds = time.monotonic() - started
    return report


def _read_editions(editions: list[Edition], *, locks: contextlib.ExitStack, read: list[BookIndexer],
                   title: str | None, options: dict) -> list[tuple[Edition, BookIndexer]]:
    """Read and embed each edition of one docs instance (its root first) under its book's lock, held in ``locks``
    until the site is switched; each one read joins ``read``. One that can't be read is reported and left as it is:
    it must not lose the others."""
    group, root_book = [], None
    for edition in editions:
        validate_book_slug(edition.slug)
        indexer = BookIndexer(book_slug=edition.slug, discovery=edition.discover(), base_url=edition.base_url,
                              title=title or edition.title, edition=edition, root_book=root_book, **options)
        try:
            locks.enter_context(BookLock(edition.slug))
            indexer.read()
            read.append(indexer)
        except BookchatError as exc:
            indexer.failed(exc)
            indexer.report.error(exc)
            indexer.report.files_failed = indexer.report.files_failed or 1
        except BaseException as exc:
            indexer.failed(exc)
            raise
        if edition.is_root:  # its editions hang from it: as this run will store it (first), or as it is
            book = indexer.book
            root_book = book if book is not None and (indexer in read or book.pk) else None
        group.append((edition, indexer))
    return group


def _switch_editions(indexers: list[BookIndexer]) -> None:
    """Switch every edition read to its new version in one transaction: all of them or, one failing, none (each
    keeps its previous version, and its run is recorded as failed); then the run fails, naming the edition."""
    current = None
    try:
        with transaction.atomic():
            for current in indexers:
                current.switch()
    except Exception as exc:
        slug = current.slug if current is not None else "?"
        logger.exception("storing edition %s failed; no edition of its site was switched", slug)
        lines = str(getattr(exc, "message", None) or exc).strip().splitlines()  # a database error: its first line
        message = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        failure = IndexingError(f"edition {slug!r} could not be stored ({message}); no edition of the site was "
                                "switched: each keeps its previous version", code="switch_failed")
        for indexer in indexers:
            indexer.failed(exc if indexer is current else failure)
        raise failure from exc
    except BaseException as exc:  # a signal, a KeyboardInterrupt: the same, and it goes up as it is
        for indexer in indexers:
            indexer.failed(exc)
        raise


def _add_edition(report: SiteReport, edition: Edition, edition_report: IndexReport, root: Path) -> None:
    """Add an edition's report to the site's: its figures summed, its issues (naming it) and pages (named from the
    site's root) listed."""
    total = report.total
    report.editions.append((edition, edition_report))
    for name in SUMMED:
        setattr(total, name, getattr(total, name) + getattr(edition_report, name))
    total.errors.extend({**issue, "book": edition.slug} for issue in edition_report.errors)
    total.warnings.extend({**issue, "book": edition.slug} for issue in edition_report.warnings)
    folder = _site_relative(Path(edition_report.pages_folder), root)
    for change, paths in edition_report.pages.items():
        room = LISTED_PAGES - len(total.pages[change])
        total.pages[change].extend(f"{folder}{path}" for path in paths[:room])


def _site_relative(folder: Path, root: Path) -> str:
    """``folder`` from the site's root, with a trailing slash ("" for the root itself)."""
    try:
        relative = folder.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return f"{folder}/"
    return "" if relative == "." else f"{relative}/"


def _stale_editions(root: Book | None, planned: set[str], *, prune: bool, report: IndexReport) -> None:
    """Editions of ``root`` the site no longer has (a version dropped from versions.json): removed with --prune."""
    if root is None:
        return
    for book in Book.objects.filter(edition_of=root).exclude(slug__in=planned):
        if prune:
            report.documents_removed += book.documents.count()
            book.delete()
            report.warn(Issue(None, None, f"edition {book.slug!r} is no longer in the site; removed"))
        else:
            report.warn(Issue(None, None, f"edition {book.slug!r} is no longer in the site; --prune removes it"))


def index_generated(conventions: Conventions, root: Path, *, book_slug: str | None = None, base_url: str | None = None,
                    title: str | None = None, prune: bool = False, dry_run: bool = False, reindex: bool = False,
                    trigger: str = "cli", progress: ProgressCallback | None = None,
                    confined: bool = False, on_run: RunCallback | None = None,
                    language: str | None = None) -> IndexReport:
    """Index an mdBook or an MkDocs site from its root (``ingestion.reading.conventions``): its pages folder, title
    and URL from its config (its language too, unless ``language`` is given), only the files the generator builds
    as pages, their URLs and anchors as it makes them.
    ``confined``: the pages folder must be inside ``root``."""
    folder, config_title, config_url, warnings = book_facts(conventions)
    if confined:  # nothing read from outside is stored or shown: the config's folders and inherited files
        check_inside(root, folder, *files_read(conventions))
    if not folder.is_dir():
        raise IndexingError(f"the pages folder {folder} named by {config_file(conventions)} does not exist",
                            code="empty")
    book_slug = book_slug or book_slug_from(config_title) or book_slug_from(root.resolve().name) or "book"
    validate_book_slug(book_slug)
    found = discover(folder)
    discovery = Discovery(root=found.root, files=[f for f in found.files if conventions.is_page(f.rel_path)],
                          warnings=found.warnings + [Issue(config_file(conventions), None, w) for w in warnings])
    indexer = BookIndexer(book_slug=book_slug, discovery=discovery, embedder=get_embedder(),
                          base_url=base_url if base_url is not None else config_url, title=title or config_title,
                          prune=prune, dry_run=dry_run, reindex=reindex, trigger=trigger, progress=progress,
                          site_root=root, conventions=conventions, on_run=on_run, language=language)
    return run_locked(indexer, book_slug)


def check_inside(root: Path, *folders: Path | None) -> None:
    """An IndexingError when one of ``folders`` (as a config names them) is outside ``root``: sources that came from
    elsewhere (a publish) are read from their own files only."""
    base = Path(root).resolve()
    for folder in folders:
        if folder is not None and not Path(folder).resolve().is_relative_to(base):
            raise IndexingError(f"the config names the folder {folder}, outside the published sources; only "
                                "folders inside the site's root are read", code="outside_sources")


def index_path(path: Path | str, **arguments) -> IndexReport | SiteReport:
    """Index what is at ``path``: a Docusaurus site (a folder with ``docusaurus.config.*``: every version and
    locale), an mdBook (``book.toml``) or an MkDocs site (``mkdocs.yml``), else a folder of pages or one page.
    ``arguments`` are ``index_book``'s and ``index_site``'s; with ``confined=True`` (sources from a publish), a
    Docusaurus config is read without running it, and nothing outside ``path`` is read."""
    path = Path(path).expanduser()
    if path.is_dir() and find_config(path) is not None:
        return index_site(read_site_config(path, execute=not arguments.get("confined")), **arguments)
    conventions = detect(path) if path.is_dir() else None
    if conventions is not None:
        return index_generated(conventions, path, **arguments)
    above = detect(path.parent) if path.is_dir() else None  # pointed at an mdBook's src/ or MkDocs' docs/
    if above is not None and book_facts(above)[0].resolve() == path.resolve():
        return index_generated(above, path.parent, **arguments)
    return index_book(path=path, **arguments)

