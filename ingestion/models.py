"""What an indexed book is made of: Book → Document (a page) → Chunk (an embedded passage), plus IndexRun.

Vectors: ``Chunk.embedding`` has no fixed size, because a book may be indexed with any
embedder. Approximate search uses HNSW expression indexes, one per common size, of the form
``(embedding::vector(N)) vector_cosine_ops WHERE dimensions = N``; a query must use the same
cast and predicate (``Chunk.cosine_distance_sql``) to hit them. Other sizes still work, with
exact search.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import CombinedSearchVector, SearchConfig, SearchVectorField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Count, F, Func, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils.text import slugify
from pgvector.django import VectorField

from bookchat.base.conf import setting
from ingestion.languages import DEFAULT_LANGUAGE, LANGUAGE_LENGTH, SEARCH_CONFIGS

# Vector sizes that get an HNSW index (a migration creates one per size).
INDEXED_DIMENSIONS = (384, 512, 768, 1024, 1536)
# Full-text configuration of a book's search vectors unless its language has another (``search_config_for``).
SEARCH_CONFIG = SEARCH_CONFIGS[DEFAULT_LANGUAGE]


class BookTsvector(Func):
    """``bookchat_to_tsvector(config, text)``: PostgreSQL's ``to_tsvector``, with a Chinese or Japanese book's runs
    of characters cut into pairs first (``ingestion.languages``; the function is made by a migration)."""

    function = "bookchat_to_tsvector"
    output_field = SearchVectorField()


def weighted_tsvector(column: str, weight: str) -> Func:
    return Func(BookTsvector(F("search_config"), Coalesce(F(column), Value(""))), Value(weight), function="setweight",
                output_field=SearchVectorField())


class RegConfigField(models.CharField):
    """A PostgreSQL ``regconfig`` (a text-search configuration's name), so that a generated column may pass it to
    ``to_tsvector`` (a cast from text would not be immutable)."""

    def db_type(self, connection) -> str:
        return "regconfig"

BOOK_SLUG_LENGTH = 64  # ``Book.slug``'s max_length, and the longest slug ``book_slug_from`` makes
ERROR_CODE_LENGTH = 64  # ``IngestionJob.error_code``'s max_length: an error's code is cut to it
book_slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
    "A book slug is 1–64 lowercase letters, digits and inner hyphens.",
)


def book_slug_from(text: str | None) -> str:
    """A book slug made from a title or a folder's name: Django's ``slugify`` (ASCII), hyphens for underscores, cut
    to ``BOOK_SLUG_LENGTH`` with no hyphen at either end ("" when nothing of it is left)."""
    return slugify(text or "").replace("_", "-")[:BOOK_SLUG_LENGTH].strip("-")


class BookQuerySet(models.QuerySet):
    def roots(self) -> BookQuerySet:
        """Books as clients name them: editions (versions, translations) are reached through their root."""
        return self.filter(edition_of__isnull=True)

    def with_counts(self) -> BookQuerySet:
        """Each book's pages and passages, each counted in a subquery of its own (one join of both would count
        every page once per passage)."""
        return self.annotate(document_count=_count_per_book(Document), chunk_count=_count_per_book(Chunk))


def _count_per_book(model) -> Coalesce:
    rows = model.objects.filter(book=OuterRef("pk")).order_by().values("book").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


class Book(models.Model):
    """A book, or one edition of a Docusaurus site's docs: a version, a locale, or both (``ingestion.reading.site``).

    An edition is a book of its own (its pages, passages, search statistics and calibration), so answers never
    mix versions; it points at its root, the site's current docs in the default locale, whose slug is the one
    clients name (``version``/``locale`` pick the edition).
    """

    slug = models.CharField(max_length=BOOK_SLUG_LENGTH, unique=True, validators=[book_slug_validator])
    title = models.CharField(max_length=300)
    base_url = models.CharField(
        max_length=500, blank=True, help_text="Public URL of the book's site; links to sections start with it."
    )
    source_path = models.CharField(max_length=1000, blank=True, help_text="Where the book was last indexed from.")
    embedder_name = models.CharField(max_length=200)
    embedder_dimension = models.PositiveIntegerField()
    generator = models.CharField(max_length=16, default="docusaurus", help_text="Whose conventions its URLs, anchors "
                                 "and pages follow: docusaurus (also a plain folder), mdbook or mkdocs.")
    edition_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="editions",
                                   help_text="The book this is a version or translation of.")
    version = models.CharField(max_length=100, blank=True, help_text="Docusaurus version name: current, 1.0, …")
    version_label = models.CharField(max_length=100, blank=True)
    version_path = models.CharField(max_length=100, blank=True, help_text="The version's URL segment (\"\" for the "
                                    "latest).")
    version_rank = models.PositiveSmallIntegerField(default=0, help_text="0 for the newest version.")
    latest = models.BooleanField(default=True, help_text="Answers when no version is asked for.")
    locale = models.CharField(max_length=35, blank=True)
    language = models.CharField(max_length=LANGUAGE_LENGTH, default=DEFAULT_LANGUAGE, db_default=DEFAULT_LANGUAGE,
                                help_text="What its pages are written in: a BCP 47 base tag (en, es, zh, pt). Set by "
                                "--language, else the site's config (theme.language, book.toml's language, the "
                                "Docusaurus locale); it picks the text search.")
    trailing_slash = models.BooleanField(null=True, blank=True, help_text="The site's trailingSlash.")
    search_config = models.CharField(max_length=64, default=SEARCH_CONFIG, help_text="PostgreSQL text-search "
                                     "configuration of its passages (from its language).")
    folders = models.JSONField(default=dict, blank=True, help_text="Each folder of pages: its sidebar label and "
                               "position ({path: {label, position}}), for the book's outline.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BookQuerySet.as_manager()

    def __str__(self) -> str:
        edition = " · ".join(x for x in (self.version_label if self.version else "", self.locale) if x)
        return f"{self.title or self.slug} ({edition})" if self.edition_of_id and edition else self.title or self.slug

    @property
    def root(self) -> Book:
        return self.edition_of if self.edition_of_id else self



class DefaultBook(models.Model):
    """The book asked when a request names none, stored so that every process reads it: the web workers, the task
    worker, `manage.py ask` from another shell. One row at most (pk 1). It names a slug, not a Book, because
    ``serve --book`` makes a book the default before its first indexing has stored it.

    ``BOOKCHAT_DEFAULT_BOOK``, when set, still wins (a deployment that pins it in its environment); a stored slug
    naming no book and no first indexing under way (a ``--book`` whose indexing failed, a book since deleted) is
    passed over, so that it never turns every question into a 404 (``chat.pipeline.editions``)."""

    slug = models.CharField(max_length=BOOK_SLUG_LENGTH, validators=[book_slug_validator])
    set_by = models.CharField(max_length=200, help_text="What made it the default: `serve --book`, `ingest "
                              "--default`, or the admin user.")
    set_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "default book"

    def __str__(self) -> str:
        return self.slug

    @classmethod
    def stored(cls) -> str | None:
        return cls.objects.filter(pk=1).values_list("slug", flat=True).first()

    @classmethod
    def in_force(cls) -> str | None:
        """``BOOKCHAT_DEFAULT_BOOK``, else the stored slug, else None (it may name a book not indexed yet, or no
        longer there)."""
        return setting("DEFAULT_BOOK") or cls.stored()

    @classmethod
    def choose(cls, slug: str, *, by: str) -> None:
        cls.objects.update_or_create(pk=1, defaults={"slug": slug, "set_by": by[:200]})

class BookAccess(models.Model):
    """The books one staff member may see and act on in the admin (``ingestion.roles``). A user without a row
    sees every book, as do superusers whatever their row says; a row with no book sees none. A book given
    brings its editions (versions, translations) with it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="book_access")
    books = models.ManyToManyField(Book, blank=True, related_name="+", help_text="Only these books (and their "
                                   "editions) in the admin: audit rows, review queue, dashboard, uploads, pages.")

    class Meta:
        verbose_name = "book restriction"

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.books.values_list('slug', flat=True)) or 'no book'}"


class Document(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=1000, help_text="Source file, relative to the book's folder.")
    title = models.CharField(max_length=500)
    slug = models.CharField(max_length=1000, blank=True, help_text="URL path of the page under the book's URL.")
    url = models.CharField(max_length=1500, blank=True)
    category = models.CharField(max_length=300, blank=True, help_text="Label of the page's folder (chapter).")
    front_matter = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, help_text="SHA-256 of the source file's bytes.")
    chunker_version = models.CharField(max_length=64, blank=True)
    links_to = models.JSONField(
        null=True, blank=True,
        help_text="Pages of the book this page links to: source path → the URL its passages link to (\"\" when "
                  "the file is not in the book). Null for a page stored before links were rewritten.",
    )
    indexed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["book", "path"], name="document_unique_path_per_book")]
        ordering = ["book", "path"]

    def __str__(self) -> str:
        return f"{self.book.slug}: {self.path}"


class Chunk(models.Model):
    id = models.CharField(primary_key=True, max_length=64, help_text="Content hash of the chunk.")
    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="chunks")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField(help_text="Position of the chunk in its page.")
    heading_path = models.CharField(max_length=2000, help_text="Chapter > Section > Subsection")
    anchor = models.CharField(max_length=300, blank=True)
    url = models.CharField(max_length=2000, blank=True, help_text="Link to the section in the book's site.")
    text = models.TextField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    line_start = models.PositiveIntegerField()
    line_end = models.PositiveIntegerField()
    token_count = models.PositiveIntegerField(help_text="Embedder tokens of the embedded text.")
    continued = models.BooleanField(default=False, help_text="Part of a code block or table split over chunks.")
    embedding_key = models.CharField(max_length=64, db_index=True,
                                     help_text="Hash of embedder + embedded text: equal keys share a vector.")
    dimensions = models.PositiveSmallIntegerField()
    embedding = VectorField()
    search_config = RegConfigField(max_length=64, default=SEARCH_CONFIG, help_text="The book's, when stored.")
    search_vector = models.GeneratedField(
        expression=CombinedSearchVector(weighted_tsvector("heading_path", "A"), "||", weighted_tsvector("text", "B"),
                                        SearchConfig(F("search_config"))),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["document", "ordinal"]
        indexes = [
            models.Index(fields=["book", "document", "ordinal"], name="chunk_book_doc_ordinal"),
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.heading_path} [{self.ordinal}]"

    @staticmethod
    def cosine_distance_sql(dimensions: int) -> tuple[str, str]:
        """SQL for the cosine distance to a ``%s`` query vector and the predicate the HNSW index needs."""
        if dimensions in INDEXED_DIMENSIONS:
            return (f"(embedding::vector({dimensions}) <=> %s::vector({dimensions}))",
                    f"dimensions = {dimensions}")
        return "(embedding <=> %s::vector)", f"dimensions = {int(dimensions)}"


class IndexRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        PARTIAL = "partial", "done with errors"
        FAILED = "failed", "failed"

    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="index_runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    source = models.CharField(max_length=1000, blank=True, help_text="The folder or file that was indexed.")
    trigger = models.CharField(max_length=32, default="cli", help_text="cli, upload, make run, …")
    options = models.JSONField(default=dict, blank=True)
    report = models.JSONField(default=dict, blank=True)
    files_failed = models.PositiveIntegerField(default=0)
    chunks_embedded = models.PositiveIntegerField(default=0)
    embed_seconds = models.FloatField(default=0.0)
    total_seconds = models.FloatField(default=0.0)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.book.slug} {self.started_at:%Y-%m-%d %H:%M} {self.status}"


class IngestionJobQuerySet(models.QuerySet):
    def first_builds(self) -> IngestionJobQuerySet:
        """Jobs queued or running that make a book for the first time (queued when it did not exist): readers have
        no version of it yet, or one whose first run is still finishing (its calibration)."""
        return self.filter(status__in=IngestionJob.ACTIVE, dry_run=False, book__isnull=True).order_by("created_at")


class IngestionJob(models.Model):
    """One upload from the admin, or one publish of a book's sources through the API (a *sync*, from the book's
    CI): the files sent, and the background index run that follows.

    The files wait in ``DATA_DIR/uploads/<id>/`` (see ``ingestion.uploads.jobs``) until the job is done. A publish
    the API refused is kept too (status ``refused``, nothing stored): the record of who tried to publish what.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        REFUSED = "refused", "refused"

    class Source(models.TextChoices):
        UPLOAD = "upload", "admin upload"
        PUBLISH = "publish", "publish (API)"
        LOCAL = "local", "folder on the server"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    book = models.ForeignKey(Book, null=True, blank=True, on_delete=models.SET_NULL, related_name="ingestion_jobs",
                             help_text="Set once the book exists (a new book is created by its first run).")
    book_slug = models.CharField(max_length=BOOK_SLUG_LENGTH, validators=[book_slug_validator])
    book_title = models.CharField(max_length=300, blank=True, help_text="Title of a new book.")
    files = models.JSONField(default=list, blank=True, help_text="Names of the uploaded files.")
    folder = models.CharField(max_length=500, blank=True, help_text="Folder inside the book the files go to.")
    prune = models.BooleanField(default=False, help_text="Remove the book's pages that are not in this upload.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=200, blank=True)
    files_done = models.PositiveIntegerField(default=0)
    files_total = models.PositiveIntegerField(default=0)
    report = models.JSONField(default=dict, blank=True)
    ignored = models.JSONField(default=list, blank=True, help_text="Files of the upload that are not pages.")
    error = models.TextField(blank=True)
    index_run = models.ForeignKey(IndexRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When the job was last queued (upload or Retry).")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    extract_seconds = models.FloatField(null=True, blank=True, help_text="Checking and unpacking the upload.")
    index_seconds = models.FloatField(null=True, blank=True, help_text="The worker's run: indexing, a new book's "
                                      "first calibration, any wait for a busy book.")
    total_seconds = models.FloatField(null=True, blank=True, help_text="From the upload (or Retry) to the end, "
                                      "queue included.")
    task_id = models.CharField(max_length=64, blank=True, help_text="The django-q2 task that runs the job.")
    attempts = models.PositiveSmallIntegerField(default=0)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.UPLOAD)
    dry_run = models.BooleanField(default=False, help_text="Only check the sources and say what would change.")
    language = models.CharField(max_length=LANGUAGE_LENGTH, blank=True, help_text="The book's language as the upload "
                                "or publish gave it (a BCP 47 base tag); empty: from its config, else as it was.")
    published_by = models.CharField(max_length=200, blank=True, help_text="The API key that published: its "
                                    "prefix and name.")
    revision = models.CharField(max_length=100, blank=True, help_text="What was published, as the publisher named "
                                "it (a commit).")
    source_dir = models.CharField(max_length=300, blank=True, help_text="Where the sources sit in the publisher's "
                                  "repository (the files in reports are named from there).")
    error_code = models.CharField(max_length=ERROR_CODE_LENGTH, blank=True,
                                  help_text="Why a publish was refused or failed.")
    local_path = models.CharField(max_length=1000, blank=True, help_text="A folder on the server indexed in the "
                                  "background (`make run`'s books).")

    objects = IngestionJobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "upload"
        verbose_name_plural = "uploads"
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="ingestionjob_status_heartbeat")]
        constraints = [
            # Two syncs of one book never interleave: a publish while another is queued or running is refused.
            models.UniqueConstraint(fields=["book_slug"], name="ingestionjob_one_active_publish",
                                    condition=models.Q(source="publish", dry_run=False,
                                                       status__in=["queued", "running"])),
        ]

    def __str__(self) -> str:
        kind = {self.Source.PUBLISH: "publish", self.Source.LOCAL: "indexing"}.get(self.source, "upload")
        return f"{kind} #{self.pk} → {self.book_slug}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def progress_note(self) -> str:
        """How far it has got, in words: "embedding passages (120/360)"."""
        if self.status == self.Status.QUEUED:
            return "waiting for the task worker"
        return self.stage or self.status


class SearchStats(models.Model):
    """A book's lexical-search statistics, refreshed after every indexing run that changed it (see
    ``ingestion.indexing.lexicon``): counting them live costs a scan of every passage's tsvector per question."""

    book = models.OneToOneField(Book, primary_key=True, on_delete=models.CASCADE, related_name="search_stats")
    chunks = models.PositiveIntegerField(help_text="Passages in the book.")
    average_length = models.FloatField(help_text="Mean number of lexeme positions in a passage's tsvector.")
    refreshed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "search stats"


class LexemeCount(models.Model):
    """How many of a book's passages contain a lexeme (its document frequency, for BM25's IDF)."""

    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="+")
    lexeme = models.TextField()
    chunks = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["book", "lexeme"], name="lexemecount_book_lexeme")]
