"""Indexing a book: discover → map page URLs → read → parse → chunk → embed what is new → store, one page at a time.

Incremental by content: a page whose bytes (its imported partials' included), URL, chunking settings
and link targets are unchanged is not even parsed; a changed page keeps every chunk whose id (a hash
of book, page and embedded text) it already had and embeds only the rest, reusing any vector a book
already holds for the same embedded text (by the same embedder). Nothing is written until every page is read
and embedded (``read``); then the whole new version (pages, removals, folders, lexical statistics) is written in one
transaction (``switch``: a site's editions all in one, ``ingesting.index_site``), so readers see the book as it was
until it commits and the new version at once after, and a run that stops before (an error, a killed worker, a
database restart) leaves the book untouched. A failure in one file is reported with its file and line and never
stops the others. Runs on one book are serialised by an advisory lock.
Book-relative links in the stored text (not the embedded one) become the book's URLs (``ingestion.reading.links``).
Writing a page and copying it to the Qdrant mirror is ``storing``'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from ingestion.indexing.chunking import ChunkDraft, Chunker, ChunkingOptions, unbold_labels
from ingestion.indexing.embedders import Embedder, check_compatible
from ingestion.indexing.lexicon import refresh_lexicon
from ingestion.indexing.reports import IndexingError, IndexReport, ProgressCallback, RunCallback
from ingestion.indexing.storing import PageStore, PreparedPage
from ingestion.indexing.vector_index import sync_book_index
from ingestion.languages import language_or_default, search_config_for
from ingestion.models import Book, Chunk, Document, IndexRun, SearchStats, book_slug_validator
from ingestion.reading.conventions import Conventions, config_language
from ingestion.reading.discovery import Discovery, SourceFile, read_source
from ingestion.reading.documents import Issue
from ingestion.reading.docusaurus import category_entry
from ingestion.reading.links import BookLinks, book_links
from ingestion.reading.parsing import parse_document
from ingestion.reading.site import Edition

logger = logging.getLogger(__name__)

# Pages waiting for vectors are stored once this many passages are pending, so that
# small pages are embedded together in full batches.
FLUSH_PASSAGES = 64


def validate_book_slug(slug: str) -> str:
    from django.core.exceptions import ValidationError

    try:
        book_slug_validator(slug)
    except ValidationError:
        raise IndexingError(
            f"{slug!r} is not a valid book slug: use 1–64 lowercase letters, digits and inner hyphens "
            "(for example 'my-book')", code="bad_slug",
        ) from None
    return slug


class BookIndexer:
    """One indexing run over one book. Use ``index_book()``."""

    def __init__(self, *, book_slug: str, discovery: Discovery, embedder: Embedder, base_url: str | None,
                 title: str | None, prune: bool, dry_run: bool, reindex: bool, trigger: str,
                 progress: ProgressCallback | None, edition: Edition | None = None, root_book: Book | None = None,
                 site_root: Path | None = None, conventions: Conventions | None = None,
                 on_run: RunCallback | None = None, site_vectors: dict | None = None, language: str | None = None):
        """``edition``: a site's version or locale (``ingestion.reading.site``); ``root_book`` the book it is an edition
        of (None for the root itself); ``conventions``: the generator's (``ingestion.reading.conventions``),
        Docusaurus's by default; ``on_run``: told the id of the run's IndexRun once it is committed;
        ``site_vectors``: the vectors the site's editions read before this one embedded, by embedding key, which
        are not stored yet (``index_site`` switches them together): this run reuses them as a stored passage's, and
        adds its own once it is read. ``language``: the book's, as given (``--language``, a base tag): it wins over
        the generator's config and the edition's locale."""
        self.slug = book_slug
        self.language = language
        self.conventions = conventions or Conventions()
        self.edition = edition
        self.root_book = root_book
        self.discovery = discovery
        self.embedder = embedder
        self.base_url = base_url
        self.title = title
        self.prune = prune
        self.dry_run = dry_run
        self.reindex = reindex
        self.trigger = trigger
        self.progress = progress or (lambda stage, done, total: None)
        self.on_run = on_run or (lambda slug, run_id: None)
        self.site_vectors = site_vectors
        self._embedded: dict = {}  # the vectors this run made, by embedding key
        self.options = ChunkingOptions(
            target_tokens=setting("CHUNK_TARGET_TOKENS"),
            min_tokens=setting("CHUNK_MIN_TOKENS"),
            overlap_tokens=setting("CHUNK_OVERLAP_TOKENS"),
            max_tokens=embedder.max_input_tokens,
        )
        self.fingerprint = self.options.fingerprint(embedder.name)
        self.chunker = Chunker(embedder.count_tokens, self.options)
        self.report = IndexReport(book=book_slug, dry_run=dry_run, pages_folder=str(discovery.root))
        self.book: Book | None = None
        self._categories: dict[str, tuple[str, float | None]] = {}
        self.links = BookLinks({})
        self._pending: list[PreparedPage] = []  # chunked, waiting for a full batch to embed
        self._ready: list[PreparedPage] = []  # embedded, waiting for the switch
        self._emptied: list[Document] = []  # stored pages that have no passage any more
        self.partials = self.conventions.resolver(discovery.root, max_bytes=setting("MAX_FILE_BYTES"),
                                                  site_root=site_root,
                                                  pages={f.rel_path: f.path for f in discovery.files})
        self.store = PageStore(slug=book_slug, embedder=embedder, report=self.report, dry_run=dry_run)
        self.record: IndexRun | None = None  # the run's record from before its switch (a book that exists)
        self.switched: IndexRun | None = None  # the run's record once its switch is stored

    # -- the run -------------------------------------------------------------------------
    def run(self) -> IndexReport:
        """Read every page and embed what is new, writing nothing (``read``); switch the book to the new version in
        one transaction (``switch``); then what follows the switch (``after_switch``). Until the switch commits,
        readers see the book as it was; if the run stops before it commits (an error, a killed worker, a database
        restart), they go on seeing it. ``index_site`` takes the same steps for a site's editions, switching them
        all in one transaction."""
        try:
            self.read()
            if not self.dry_run:
                self.progress("store", 0, self.pages_to_store)
            self.switch()
        except BaseException as exc:
            self.failed(exc)
            raise
        return self.after_switch()

    def read(self) -> None:
        """Read every page and embed what is new, writing nothing but the run's record (of a book that exists)."""
        with self._timed():
            for issue in self.discovery.warnings:
                self.report.warn(issue)
            if not self.discovery.files:
                raise IndexingError(f"no Markdown files (.md, .mdx) found under {self.discovery.root}", code="empty")
            self.book = self.store.book = self._book()
            self.record = self._open_run()
            if self.record is not None:
                self.on_run(self.slug, self.record.pk)
            self._index_files()
            if self.site_vectors is not None:
                self.site_vectors.update(self._embedded)

    @property
    def pages_to_store(self) -> int:
        return len(self._ready)

    def switch(self) -> None:
        """Store what ``read`` prepared (a dry run: count what it would store), in one transaction: its own, or
        within the one its caller holds (``index_site``: a site's editions together)."""
        with self._timed():
            if self.dry_run:
                self._store_ready()
                if self.prune:
                    self._prune()
            else:
                self.switched = self._switch(self.record)

    def failed(self, exc: BaseException) -> None:
        """The run stopped before its switch committed, or its caller's transaction undid the switch: the book is as
        it was. Recorded on the run's record, when the book had one before."""
        self.switched = None
        if self.record is not None:
            self._record_failure(self.record, exc)

    def after_switch(self) -> IndexReport:
        """Once the switch has committed: a new book's run made known, the mirror and the book's own search index
        brought up to date (``_after_switch``), and the run recorded as finished."""
        run = self.switched
        with self._timed():
            if run is not None:
                if self.record is None:  # a new book: its run is recorded with its first version
                    self.on_run(self.slug, run.pk)
                self._after_switch()
        if run is not None:
            self._finish(run)
        return self.report

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        """The run's time (``total_seconds``): its steps', whatever ran between them (a site's other editions)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.report.total_seconds += time.monotonic() - started

    def _open_run(self) -> IndexRun | None:
        """The run's record, when the book already exists (a new book's is made with it, in ``_switch``); a run
        of this book that another process left running is marked interrupted."""
        if self.dry_run or not self.book.pk:
            return None
        IndexRun.objects.filter(book=self.book, status=IndexRun.Status.RUNNING).update(
            status=IndexRun.Status.FAILED, finished_at=timezone.now(),
            report={"errors": [{"file": None, "line": None, "message": "interrupted before it finished"}]},
        )
        return IndexRun.objects.create(book=self.book, source=str(self.discovery.root), trigger=self.trigger,
                                       options={"prune": self.prune, "reindex": self.reindex})

    def _switch(self, run: IndexRun | None) -> IndexRun:
        """Write the new version of the book in one transaction: its record, every changed page, the pages
        removed, the folders and the lexical statistics. Each page is written in a savepoint of its own, so that
        one page that can't be stored fails alone."""
        book = self.book
        with transaction.atomic():
            fresh = not book.pk or self.reindex
            if book.pk and self.reindex:
                self.report.documents_removed += book.documents.count()
                self.report.chunks_removed += Chunk.objects.filter(book=book).count()
                book.documents.all().delete()
            search_config = Book.objects.filter(pk=book.pk).values_list("search_config", flat=True).first() \
                if book.pk else book.search_config
            book.save()
            if book.search_config != search_config:  # a new language: every passage's search vector is recomputed
                Chunk.objects.filter(book=book).update(search_config=book.search_config)
                SearchStats.objects.filter(book=book).delete()
            if fresh:  # a new or re-indexed book starts from an empty mirror (points left by a deleted namesake go)
                self.store.mirror_write(lambda mirror: mirror.delete_where(book=self.slug))
            if run is None:
                run = IndexRun.objects.create(book=book, source=str(self.discovery.root), trigger=self.trigger,
                                              options={"prune": self.prune, "reindex": self.reindex})
            self._store_ready()
            if self.prune:
                self._prune()
            self._store_folders()
            self._refresh_lexicon()
        return run

    def _store_ready(self) -> None:
        """Store the embedded pages and remove the emptied ones (a dry run only counts them)."""
        emptied, self._emptied = self._emptied, []
        self.store.remove_documents(emptied)
        ready, self._ready = self._ready, []
        for page in ready:
            try:
                self.store.store(page)
            except Exception as exc:  # one page that can't be stored must not lose the others
                logger.exception("storing %s failed", page.rel_path)
                self.report.files_failed += 1
                self.report.error(Issue(page.rel_path, None, f"cannot be stored: {type(exc).__name__}: {exc}"))

    def _changed(self) -> bool:
        report = self.report
        return bool(report.chunks_added or report.chunks_removed or report.files_indexed or report.documents_removed)

    def _refresh_lexicon(self) -> None:
        """Recount the book's lexical statistics, in the switch's transaction, when a page changed (or it has none
        yet). A failure leaves the old figures (or the live count) in use."""
        try:
            with transaction.atomic():
                if self._changed() or not SearchStats.objects.filter(book=self.book).exists():
                    refresh_lexicon(self.book)
        except Exception:  # never hides the run's own outcome
            logger.exception("refreshing the search statistics of book %s failed", self.slug)

    def _after_switch(self) -> None:
        """Once the new version is committed: copy it to the mirror, and build or drop the book's own HNSW index as
        its size asks (concurrently, outside the transaction). A failure here leaves the shared index in use."""
        self.store.flush_mirror()
        try:
            stats = SearchStats.objects.filter(book=self.book).first()
            sync_book_index(self.book, stats.chunks if stats is not None else self.book.chunks.count())
        except Exception:
            logger.exception("building the search index of book %s failed", self.slug)

    def _record_failure(self, run: IndexRun, exc: BaseException) -> None:
        """The run stopped before its switch committed: the book is as it was. Recorded without failing again."""
        if isinstance(exc, Exception):
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        else:  # a signal, a KeyboardInterrupt
            message = "interrupted before it finished"
        try:
            IndexRun.objects.filter(pk=run.pk).update(
                status=IndexRun.Status.FAILED, finished_at=timezone.now(),
                report={**self.report.as_dict(), "errors": [*self.report.errors,
                                                           {"file": None, "line": None, "message": message}]})
        except Exception:
            logger.exception("recording the failed run of book %s failed", self.slug)

    def _book(self) -> Book:
        """The book with this run's fields (title, URLs, embedder, edition), not saved: ``_switch`` saves it."""
        book = Book.objects.filter(slug=self.slug).first()
        if book is not None and not self.reindex:
            check_compatible(book, self.embedder)
        if book is None:
            book = Book(slug=self.slug)
        # A title that was only a generic folder's name ("Docs", before folder_title) is chosen again.
        root = self.discovery.root
        if (self.title or not book.title
                or (root.name.casefold() in GENERIC_FOLDERS and book.title == _humanised(root.name))):
            book.title = self.title or default_title(self.discovery)
        book.base_url = self._base_url(book)
        if not self.discovery.single_file:
            book.source_path = str(self.discovery.root)
        book.embedder_name = self.embedder.name
        book.embedder_dimension = self.embedder.dimension
        book.generator = self.conventions.generator
        if self.edition is not None:
            for name, value in self.edition.fields.items():
                setattr(book, name, value)
            book.edition_of = self.root_book
        self._set_language(book)
        return book

    def _set_language(self, book: Book) -> None:
        """The book's language: as given, else as its generator's config names it (an edition's locale already set
        it), else as stored; its text search follows."""
        configured = config_language(self.conventions)
        if self.language and (self.edition is None or self.edition.default_locale):
            book.language = self.language
        elif configured is not None and self.edition is None:
            book.language = language_or_default(configured)
        book.search_config = search_config_for(book.language)

    def _base_url(self, book: Book | None) -> str:
        if self.base_url is not None:
            return self.base_url
        return book.base_url if book is not None and book.pk else setting("BOOK_BASE_URL")

    def _index_files(self) -> None:
        # Chunk counts come with the pages: an unchanged book must not cost a query per page.
        existing = {}
        if self.book.pk and not self.reindex:  # a re-index stores every page anew
            stored = Document.objects.filter(book=self.book).annotate(chunk_count=Count("chunks"))
            existing = {d.path: d for d in stored}
        files = self.discovery.files
        self.links = book_links(files, base_url=self.book.base_url,
                                stored_slugs={path: d.slug for path, d in existing.items()},
                                whole_book=not self.discovery.single_file, max_bytes=setting("MAX_FILE_BYTES"),
                                trailing_slash=self.book.trailing_slash, conventions=self.conventions)
        self.progress("files", 0, len(files))
        for done, file in enumerate(files, 1):
            self.report.files_seen += 1
            try:
                self._index_file(file, existing.get(file.rel_path))
            except BookchatError as exc:  # bad source, parse error, embeddings server down, …
                self._fail(file, exc)
            except Exception as exc:  # a bug must not lose the other files
                logger.exception("indexing %s failed", file.rel_path)
                self._fail(file, IndexingError(f"internal error: {type(exc).__name__}: {exc}"))
            self.progress("files", done, len(files))
        self._flush()

    def _fail(self, file: SourceFile, exc: BookchatError) -> None:
        self.report.files_failed += 1
        self.report.error(Issue(exc.file or file.rel_path, exc.line, exc.message))

    def _index_file(self, file: SourceFile, stored: Document | None) -> None:
        source = read_source(file, max_bytes=setting("MAX_FILE_BYTES"))
        content_hash = self.partials.page_hash(source.text, source.content_hash, rel_path=file.rel_path)
        if stored is not None and self._unchanged(stored, content_hash):
            self.report.files_unchanged += 1
            self.report.chunks_kept += stored.chunk_count
            return
        if not source.text.strip():
            self._skip(file, "empty file; skipped", stored)
            return
        parsed = parse_document(source.text, rel_path=file.rel_path, category=self._category(file.rel_path),
                                partials=self.partials, conventions=self.conventions)
        for issue in parsed.warnings:
            self.report.warn(issue)
        drafts = self.chunker.chunk(parsed)
        if not drafts:
            self._skip(file, "no text besides front matter, imports or components; skipped", stored)
            return
        url = self.conventions.page_url(self.book.base_url, parsed.slug, self.book.trailing_slash)
        _check_fits(file.rel_path, path=file.rel_path, slug=parsed.slug, url=url)
        links = self.links.page(rel_path=file.rel_path, url=url, definitions=parsed.link_definitions)
        texts = [links.rewrite(draft.text) for draft in drafts]
        for issue in links.issues(source.text):
            self.report.warn(issue)
        fields = {"title": parsed.title[:500], "slug": parsed.slug, "url": url, "category": parsed.category[:300],
                  "front_matter": parsed.front_matter, "content_hash": content_hash,
                  "chunker_version": self.fingerprint, "links_to": links.links_to}
        self._pending.append(self._prepare(file.rel_path, fields, drafts, texts, stored))
        if sum(len(p.drafts) for p in self._pending) >= FLUSH_PASSAGES:
            self._flush()

    def _unchanged(self, stored: Document, content_hash: str) -> bool:
        # The URL the page gets now (its slug is read again: a newer bookchat may place it elsewhere).
        url = self.links.urls.get(stored.path) or \
            self.conventions.page_url(self.book.base_url, stored.slug, self.book.trailing_slash)
        return (stored.content_hash == content_hash and stored.chunker_version == self.fingerprint
                and stored.url == url and self.links.still_resolve(stored.links_to))

    def _skip(self, file: SourceFile, message: str, stored: Document | None) -> None:
        self.report.files_skipped += 1
        self.report.warn(Issue(file.rel_path, None, message))
        if stored is not None:  # the page is now empty: its old passages no longer exist in the book
            self._emptied.append(stored)

    def _store_folders(self) -> None:
        """Record every folder's sidebar label and position (``ingestion.reading.outline`` orders the pages by them),
        and where the generator has a navigation (SUMMARY.md, ``nav``) each page's place and label in it and each
        folder's at its first page; a single page's run leaves them as they were."""
        if self.dry_run or self.discovery.single_file or not self.book.pk:
            return
        navigation = self.conventions.navigation()
        if navigation is not None:
            self._store_navigation(navigation)
            return
        folders = {}
        for file in self.discovery.files:
            parts = file.rel_path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    label, position = self._folder(folder)
                    folders[folder] = {"label": label, "position": position}
        if folders != self.book.folders:
            self.book.folders = folders
            Book.objects.filter(pk=self.book.pk).update(folders=folders)

    def _store_navigation(self, navigation: list[tuple[str, str]]) -> None:
        places: dict[str, dict] = {}
        for position, (path, label) in enumerate(navigation):
            places[path] = {"label": label, "position": position, "page": True}
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                places.setdefault("/".join(parts[:depth]), {"label": parts[depth - 1], "position": position})
        if places != self.book.folders:
            self.book.folders = places
            Book.objects.filter(pk=self.book.pk).update(folders=places)

    def _category(self, rel_path: str) -> str:
        return self._folder(rel_path.rpartition("/")[0])[0]

    def _folder(self, folder: str) -> tuple[str, float | None]:
        """(sidebar label, position) of a folder, its ``_category_`` file read once per run (a bad one warns once)."""
        if folder not in self._categories:
            label, position, issue = category_entry(self.discovery.root, folder)
            if issue is not None:
                self.report.warn(issue)
            self._categories[folder] = (label, position)
        return self._categories[folder]

    # -- diff and embed ------------------------------------------------------------------------
    def _prepare(self, rel_path: str, fields: dict, drafts: list[ChunkDraft], texts: list[str],
                 stored: Document | None) -> PreparedPage:
        ids, keys, seen = [], [], {}
        for draft in drafts:
            text = draft.embed_text
            occurrence = seen.get(text, 0)
            seen[text] = occurrence + 1
            # A passage whose text differs from what is embedded (bold labels) names its text too, so that an index
            # from before labels were bold gets the new text (its vector is reused by ``embedding_key``).
            shown = [draft.text] if unbold_labels(draft.text) != draft.text else []
            ids.append(_hash(self.slug, rel_path, text, str(occurrence), *shown)[:40])
            keys.append(embedding_key(self.embedder.name, text))
        old_ids = set(stored.chunks.values_list("id", flat=True)) if stored is not None else set()
        kept = old_ids & set(ids)
        new_keys = {k for i, k in zip(ids, keys, strict=True) if i not in kept}
        vectors = {}
        if new_keys and not self.reindex:
            # Any book's vector of the same text by the same embedder is this passage's (the key names both): a book
            # published again under another name, another edition, a page moved to another book embed nothing.
            for key, vector in (Chunk.objects.filter(embedding_key__in=new_keys).order_by("embedding_key")
                                .distinct("embedding_key").values_list("embedding_key", "embedding")):
                vectors[key] = vector
            if self.site_vectors:  # a site's other editions' new vectors, not stored yet
                vectors.update({key: self.site_vectors[key] for key in new_keys - set(vectors)
                                if key in self.site_vectors})
        return PreparedPage(rel_path, fields, drafts, texts, ids, keys, kept, len(old_ids - set(ids)), vectors,
                            is_new=stored is None)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        needed: dict[str, ChunkDraft] = {}
        for page in pending:
            for draft, _, key in page.new_chunks():
                if key not in page.vectors:
                    needed.setdefault(key, draft)
        if needed and not self.dry_run:
            try:
                vectors = self._embed([draft.embed_text for draft in needed.values()])
            except BookchatError as exc:
                for page in pending:
                    self.report.files_failed += 1
                    self.report.error(Issue(page.rel_path, None, exc.message))
                return
            for key, vector in zip(needed, vectors, strict=True):
                self._embedded[key] = vector
                for page in pending:
                    page.vectors.setdefault(key, vector)
        # With --dry-run these say what a real run would embed.
        self.report.chunks_embedded += len(needed)
        self.report.tokens += sum(draft.token_count for draft in needed.values())
        self._ready.extend(pending)

    def _embed(self, texts: list[str]):
        batch = setting("EMBED_BATCH_SIZE")
        started = time.monotonic()
        out = []
        for start in range(0, len(texts), batch):
            out.extend(self.embedder.embed_documents(texts[start:start + batch], batch_size=batch))
            self.progress("embed", min(start + batch, len(texts)), len(texts))
        self.report.embed_seconds += time.monotonic() - started
        return out

    def _prune(self) -> None:
        if self.discovery.single_file:
            self.report.warn(Issue(None, None, "--prune needs a folder; nothing was pruned"))
            return
        if not self.book.pk:
            return
        present = {f.rel_path for f in self.discovery.files}
        gone = [d for d in Document.objects.filter(book=self.book) if d.path not in present]
        self.store.remove_documents(gone)

    def _finish(self, run: IndexRun) -> None:
        report = self.report
        if report.files_failed == 0:
            run.status = IndexRun.Status.DONE
        elif report.files_indexed + report.files_unchanged:
            run.status = IndexRun.Status.PARTIAL
        else:
            run.status = IndexRun.Status.FAILED
        run.report = report.as_dict()
        run.files_failed = report.files_failed
        run.chunks_embedded = report.chunks_embedded
        run.embed_seconds = report.embed_seconds
        run.total_seconds = report.total_seconds
        run.finished_at = timezone.now()
        run.save()


def _check_fits(rel_path: str, **values: str) -> None:
    """An IndexingError for this page when one of its Document ``values`` is longer than its column (a front
    matter slug of 2,000 characters, a path nested past 1,000): found here, it fails this page alone."""
    for name, value in values.items():
        limit = Document._meta.get_field(name).max_length
        if len(value) > limit:
            raise IndexingError(f"the page's {name} is {len(value):,} characters long, over the limit of {limit:,}"
                                + (" (set by its front matter slug or id, or its file name)" if name != "path" else ""),
                                file=rel_path)


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def embedding_key(embedder_name: str, text: str) -> str:
    """A passage's embedding key: equal keys (the same text by the same embedder) share a vector."""
    return _hash(embedder_name, text)


# The pages that stand for a whole folder of Markdown, whichever generator made it.
INDEX_PAGES = ("index.md", "index.mdx", "README.md", "readme.md", "README.mdx")


# Folder names that say where a book's pages are kept, not what the book is: its title comes from the folder above.
GENERIC_FOLDERS = frozenset({"docs", "doc", "documentation", "src", "source", "content", "contents", "pages", "site",
                             "website", "markdown"})


def _humanised(name: str) -> str:
    return name.replace("-", " ").replace("_", " ").title()


def folder_title(root: Path) -> str:
    """The title a folder's name gives: "physical-ai-book" → "Physical Ai Book"; for a folder named only for what
    it holds ("docs", "src"), the name of the folder above it ("docusaurus-docs/docs" → "Docusaurus Docs")."""
    name = root.name
    if name.casefold() in GENERIC_FOLDERS and root.parent.name:
        name = root.parent.name
    return _humanised(name)


def default_title(discovery: Discovery) -> str:
    """A new book's title when none is given: its root index page's or README's title (front matter or H1),
    else the folder's name (``folder_title``)."""
    folder_name = folder_title(discovery.root)
    if discovery.single_file:
        return folder_name
    pages = {file.rel_path: file for file in discovery.files}
    for name in INDEX_PAGES:
        if name not in pages:
            continue
        try:
            text = read_source(pages[name], max_bytes=setting("MAX_FILE_BYTES")).text
            document = parse_document(text, rel_path=name)
        except BookchatError:  # the page's own error is reported when it is indexed
            continue
        if document.front_matter.get("title") or any(heading.level == 1 for heading in document.headings):
            return document.title
    return folder_name
