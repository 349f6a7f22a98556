"""Publishing a book from its CI: one ``.tar.gz`` of the site's root becomes a *sync*, the job that makes the book
exactly those sources (``ingestion.uploads.jobs``: indexed confined to them, pages they lack removed, switched over
in one transaction). The REST API (``ingestion.api.views``) only translates HTTP into these calls.

Decisions:
- The slug a publish names is checked once, first (``slug_refusal``): the API refuses a bad one, and keeps a
  refusal on record only under a real slug; the services below take the slug it passed.
- The archive is checked and unpacked in the request (``tarball``), so a bad one is refused at once, with nothing
  stored and nothing queued; indexing runs on a worker, as uploads do.
- Two syncs of one book never interleave: a publish while another is queued or running is refused (409,
  ``SyncBusy``), enforced by a unique constraint, so two requests racing can't both get through. A sync whose
  worker died (its lock is free) no longer counts: publishing again completes the book.
- A dry run (a pull request's preview) is a sync that stores nothing: any number may run beside a publish.
- Every refusal by a known key is kept as a job with status ``refused``: who tried to publish what, when, and why.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError

from bookchat.base.errors import RequestError
from ingestion.models import ERROR_CODE_LENGTH, IngestionJob, book_slug_validator
from ingestion.uploads.jobs import delete_job_files, fail_dead_jobs, job_folder, start_job, sweep_stale_jobs
from ingestion.uploads.tarball import receive_tarball

logger = logging.getLogger(__name__)

# What a client told to wait is told to wait, in seconds, when a sync of the book is under way.
BUSY_RETRY_SECONDS = 30
MAX_REVISION = IngestionJob._meta.get_field("revision").max_length
MAX_SOURCE_DIR = IngestionJob._meta.get_field("source_dir").max_length


class SyncBusy(RequestError):
    """Another sync of the book is queued or running."""

    code = "sync_in_progress"
    status = 409
    retry_after = BUSY_RETRY_SECONDS

    def __init__(self, active: IngestionJob | None, book_slug: str):
        where = f" (sync {active.pk}, {active.status})" if active is not None else ""
        super().__init__(f"book {book_slug!r} is being synced{where}; publish again once it has ended: two syncs "
                         "of one book never run together")
        self.active = active


def slug_refusal(book_slug: str) -> RequestError | None:
    """Why nothing can be published to ``book_slug`` (400 ``invalid_book``: it is no book's slug), or None."""
    if book_slug_validator.regex.fullmatch(book_slug):
        return None
    return RequestError(f"{book_slug[:100]!r} is not a book slug: 1–64 lowercase letters, digits and inner hyphens",
                        code="invalid_book", field="slug")


def sync_publish(*, book_slug: str, stream, content_length: int | None, dry_run: bool = False, revision: str = "",
                 source_dir: str = "", published_by: str = "", language: str = "") -> IngestionJob:
    """Check the ``.tar.gz`` read from ``stream`` and queue the sync that makes book ``book_slug`` (a slug
    ``slug_refusal`` passed) exactly those sources (with ``dry_run``: that only says what would change), in
    ``language`` when given (a base tag, checked by the contract; "": as its config says). Raises
    ``ArchiveError`` or ``SyncBusy`` (storing nothing, queueing nothing)."""
    if not dry_run:
        _check_free(book_slug)
    intake = receive_tarball(stream, content_length=content_length)
    # Sent as ``tar czf - website`` (one top folder), the files are named in the repository from that folder.
    source_dir = source_dir.strip("/") or intake.top_folder
    job = IngestionJob(book_slug=book_slug, source=IngestionJob.Source.PUBLISH, prune=True, dry_run=dry_run,
                       revision=revision[:MAX_REVISION], source_dir=source_dir[:MAX_SOURCE_DIR],
                       published_by=published_by[:200], language=language)
    try:
        start_job(job=job, intake=intake)
    except IntegrityError:  # another publish of the book got in first
        intake.discard()
        raise SyncBusy(_active(book_slug), book_slug) from None
    except BaseException:
        intake.discard()
        raise
    if not dry_run:
        _drop_superseded_files(job)
    return job


def _check_free(book_slug: str) -> None:
    """SyncBusy when a publish of the book is queued or running (a sync whose worker died is failed first)."""
    if _active(book_slug) is None:
        return
    fail_dead_jobs(book_slug)
    sweep_stale_jobs()  # and queued syncs whose task was lost
    active = _active(book_slug)
    if active is not None:
        raise SyncBusy(active, book_slug)


def _active(book_slug: str) -> IngestionJob | None:
    return IngestionJob.objects.filter(book_slug=book_slug, source=IngestionJob.Source.PUBLISH, dry_run=False,
                                       status__in=IngestionJob.ACTIVE).first()


def _drop_superseded_files(job: IngestionJob) -> None:
    """The files of the book's earlier failed publishes: these sources replace them (their jobs stay on record)."""
    earlier = IngestionJob.objects.filter(book_slug=job.book_slug, source=IngestionJob.Source.PUBLISH,
                                          status=IngestionJob.Status.FAILED, pk__lt=job.pk)
    for old in earlier:
        if job_folder(old.pk).is_dir():
            delete_job_files(old)


def sync_refused(*, book_slug: str, code: str, message: str, dry_run: bool = False, revision: str = "",
                 published_by: str = "") -> None:
    """Keep a publish to ``book_slug`` (a slug ``slug_refusal`` passed) that the API refused with error ``code``
    and ``message`` on record (nothing else is stored). Never raises: the refusal itself is the answer."""
    try:
        IngestionJob.objects.create(
            book_slug=book_slug, source=IngestionJob.Source.PUBLISH, status=IngestionJob.Status.REFUSED,
            dry_run=dry_run, revision=revision[:MAX_REVISION], published_by=published_by[:200],
            error=message[:2000], error_code=code[:ERROR_CODE_LENGTH], stage="")
    except Exception:
        logger.exception("recording a refused publish of %r failed", book_slug)


def sync_summary(job: IngestionJob) -> dict:
    """What the status of a sync says, as the API's contract states it (``ingestion.api.contract.SyncSerializer``):
    its state, progress, and once it has ended its report (files named from the root of the published sources)."""
    status = job.status if job.status != IngestionJob.Status.REFUSED else IngestionJob.Status.FAILED
    report = job.report or {}
    summary = {
        "sync": job.pk, "book": job.book_slug, "status": status, "dry_run": job.dry_run,
        "revision": job.revision or None, "published_by": job.published_by or None,
        "stage": job.stage or None,
        "progress": {"files_done": job.files_done, "files_total": job.files_total},
        "created_at": job.created_at, "started_at": job.started_at, "finished_at": job.finished_at,
        "error": ({"code": job.error_code or "sync_failed", "message": job.error} if job.error else None),
        "report": _report(report) if report else None,
        "ignored": job.ignored or [],
    }
    return summary


def _report(report: dict) -> dict:
    """The part of the stored report a publisher reads: pages and passages, and every error and warning with its
    file and line, as stored (``ingestion.uploads.sources`` names their files as the publisher's repository
    does)."""
    pages = report.get("pages", {})
    return {
        "pages": {"added": report.get("files_added", 0),
                  "changed": report.get("files_indexed", 0) - report.get("files_added", 0),
                  "unchanged": report.get("files_unchanged", 0), "removed": report.get("documents_removed", 0),
                  "failed": report.get("files_failed", 0), "skipped": report.get("files_skipped", 0)},
        "passages": {"embedded": report.get("chunks_embedded", 0), "added": report.get("chunks_added", 0),
                     "kept": report.get("chunks_kept", 0), "removed": report.get("chunks_removed", 0)},
        "added": pages.get("added", []), "changed": pages.get("changed", []), "removed": pages.get("removed", []),
        "errors": report.get("errors", []), "warnings": report.get("warnings", []),
        "books": [book["slug"] for book in report.get("books", [])] or [report.get("book")],
        "seconds": report.get("total_seconds"),
    }


def sync_of(book_slug: str, sync_id: int) -> IngestionJob | None:
    """The book's sync ``sync_id`` (a publish, not a refused one), or None."""
    return IngestionJob.objects.filter(pk=sync_id, book_slug=book_slug, source=IngestionJob.Source.PUBLISH).exclude(
        status=IngestionJob.Status.REFUSED).first()
