"""Upload jobs (staff uploads, and publishes from a book's CI): queue one from a checked upload, run it on a
django-q2 worker, notice when a worker died, retry.

A job's files wait in ``DATA_DIR/uploads/<job id>/``: removed when the job is done, kept when it
failed (so that Retry can run it again) until the job is deleted. The worker reports progress and
a heartbeat at most once a second, and holds the job's advisory lock while it runs (it goes with the
worker's database connection). A running job whose lock is free lost its worker (killed,
restarted): ``sweep_stale_jobs`` marks it failed once its heartbeat is older than ``JOB_STALE_SECONDS``
(``fail_dead_jobs`` at once, for one book), as it does a queued job whose django-q2 task is gone.
A job on a book that another run is indexing waits for it (up to ``BUSY_WAIT_SECONDS``), then fails.
What differs between an upload, a publish and a local job (``queue_local``: ``make run``'s books) is each one's
strategy (``sources``); the runner here does the rest alike.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from bookchat.base.broker import queue_in_database
from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from bookchat.base.queues import INDEXING, queue_task
from ingestion.indexing.ingesting import AdvisoryLock
from ingestion.indexing.reports import IndexingError, IndexReport, SiteReport
from ingestion.models import ERROR_CODE_LENGTH, Book, IndexRun, IngestionJob
from ingestion.uploads.intake import STAGING_PREFIX, Intake, UploadError, uploads_dir
from ingestion.uploads.sources import source_of

logger = logging.getLogger(__name__)

STALE_MESSAGE = ("the worker stopped before the job finished; the book still serves its last good index; "
                 "upload again or use Retry")
LOST_MESSAGE = ("the task queue lost this job before it started (the queue was purged, the worker could not "
                "read the task: check that it runs with the same SECRET_KEY, or it was queued on another broker: "
                "every node needs the same BOOKCHAT_Q_BROKER); use Retry")
# A job a web node queued in Postgres while the workers read Redis: it would wait for ever.
OTHER_BROKER_MESSAGE = ("this job waits in the database's task queue, which no worker reads: the web node that "
                        "queued it has no BOOKCHAT_Q_BROKER, the workers use Redis. Give every node the same "
                        "BOOKCHAT_Q_BROKER, then use Retry")
# A book busy with another run (an `ingest`, another upload): how long a job waits for it, polling.
BUSY_WAIT_SECONDS = 600
BUSY_POLL_SECONDS = 2.0
# Progress and heartbeat writes, at most one per this many seconds.
WRITE_INTERVAL = 1.0
# Staging folders of uploads that never became a job (a request that failed after the upload was checked).
STAGING_MAX_AGE = timedelta(days=1)
TASK = "ingestion.tasks.run_ingestion_job"
# A running job whose worker has not yet taken the job's lock: how long after it started (or last reported).
LOCK_GRACE = timedelta(seconds=2)


def job_folder(job_id: int) -> Path:
    return uploads_dir() / str(job_id)


def job_lock(job_id: int) -> AdvisoryLock:
    """Held by the worker running the job, for as long as it runs."""
    return AdvisoryLock(f"bookchat-job:{int(job_id)}")


# -- creating and queueing -------------------------------------------------------------------------
@transaction.atomic
def start_job(*, job: IngestionJob, intake: Intake, user=None) -> IngestionJob:
    """Save ``job`` (book, folder and prune set by the caller), move the upload into its folder and queue it."""
    job.files = intake.names
    job.ignored = intake.ignored_listed()
    job.files_total = len(intake.pages)
    job.extract_seconds = intake.seconds
    job.created_by = user if user is not None and user.is_authenticated else None
    job.book = job.book or Book.objects.filter(slug=job.book_slug).first()
    job.save()
    folder = job_folder(job.pk)
    if folder.exists():  # left by a database that was reset; not this job's
        shutil.rmtree(folder)
    intake.root.rename(folder)
    intake.root = folder
    queue_job(job)
    return job


def queue_job(job: IngestionJob) -> None:
    """Hand the job to django-q2. With the Postgres broker, in the caller's transaction (the worker sees both or
    neither); with Redis, once that transaction commits: a worker popping the task at once must find the job. On
    the indexing queue (``bookchat.base.queues``): a job never waits behind background work."""
    job.status = IngestionJob.Status.QUEUED
    job.stage = "queued"
    job.queued_at = timezone.now()
    job.task_id = ""
    job.save(update_fields=["status", "stage", "queued_at", "task_id"])

    def enqueue() -> None:
        job.task_id = queue_task(INDEXING, TASK, job.pk, task_name=f"upload-{job.pk}")
        IngestionJob.objects.filter(pk=job.pk).update(task_id=job.task_id)

    if queue_in_database():
        enqueue()
    else:
        transaction.on_commit(enqueue)


def queue_local(*, path: Path, book_slug: str, title: str | None = None) -> IngestionJob:
    """Queue the indexing of a folder of this server (``index_path``: a site, a book or a folder of pages) into book
    ``book_slug``, for the worker: what ``make run`` does with the manual and ``BOOK=`` while it already serves. A job
    of the book left running by a ``make run`` that was stopped is failed first (its worker is gone), so that it
    doesn't stand for a first indexing under way."""
    fail_dead_jobs(book_slug)
    with transaction.atomic():
        job = IngestionJob.objects.create(book_slug=book_slug, book_title=title or "",
                                          source=IngestionJob.Source.LOCAL, local_path=str(Path(path).resolve()),
                                          book=Book.objects.filter(slug=book_slug).first())
        queue_job(job)
    return job


def retry_job(job: IngestionJob) -> None:
    """Queue a failed job again, on the files it still has; UploadError when it can't be."""
    if job.status != IngestionJob.Status.FAILED:
        raise UploadError(f"{job} is {job.status}; only failed ones can be retried")
    if not job_folder(job.pk).is_dir():
        raise UploadError(f"{job}: its files are gone; upload them again")
    try:
        with transaction.atomic():
            job.error = job.error_code = ""
            job.report = {}
            job.book = Book.objects.filter(slug=job.book_slug).first()  # a book made since is no first build
            job.files_done = 0
            job.index_run = None
            job.started_at = job.finished_at = job.heartbeat_at = None
            job.index_seconds = job.total_seconds = None
            job.save(update_fields=["error", "error_code", "report", "book", "files_done", "index_run", "started_at",
                                    "finished_at", "heartbeat_at", "index_seconds", "total_seconds"])
            queue_job(job)
    except IntegrityError:  # ``ingestionjob_one_active_publish``
        raise UploadError(f"{job}: another publish of book {job.book_slug!r} is queued or running; retry once it "
                          "has ended") from None


def delete_job_files(job: IngestionJob) -> None:
    shutil.rmtree(job_folder(job.pk), ignore_errors=True)


def replacing_job(book_slug: str) -> IngestionJob | None:
    """A job that is about to store a newer version of book ``book_slug``: queued, or running and its run not yet
    stored (waiting for the book, reading, embedding). Background work on the book's current version is wasted
    beside it: that job queues its own once it has stored its version (``chat.receivers``). The job whose run
    queued the background work is running too, but its run is stored; a dry run stores nothing."""
    storing = Q(index_run__isnull=True) | Q(index_run__status=IndexRun.Status.RUNNING)
    return (IngestionJob.objects.filter(book_slug=book_slug, dry_run=False)
            .filter(Q(status=IngestionJob.Status.QUEUED) | (Q(status=IngestionJob.Status.RUNNING) & storing))
            .order_by("pk").first())


# -- running (on the worker) -------------------------------------------------------------------------
def run_job(job_id: int) -> dict:
    """Index a queued job's files into its book. Returns a summary (django-q2 stores it as the task's result)."""
    now = timezone.now()
    claimed = IngestionJob.objects.filter(pk=job_id, status=IngestionJob.Status.QUEUED).update(
        status=IngestionJob.Status.RUNNING, started_at=now, heartbeat_at=now, stage="starting",
        attempts=F("attempts") + 1,
    )
    if not claimed:  # deleted, or already run (a second delivery of the same task)
        logger.warning("upload #%s is not queued; nothing to run", job_id)
        return {"job": job_id, "skipped": True}
    return _JobRunner(IngestionJob.objects.get(pk=job_id)).run()


class _JobRunner:
    """Runs one claimed job on the worker: indexes its files, reports progress and a heartbeat, records the end."""

    def __init__(self, job: IngestionJob):
        self.job = job
        self.source = source_of(job)
        self.folder = job_folder(job.pk)
        self.last_write = 0.0
        self.files = (0, job.files_total)
        self.run_id: int | None = None  # the job's IndexRun, as the indexer tells it (``run_recorded``)

    def run(self) -> dict:
        # Nobody else takes a claimed job's lock but a sweep, for a moment (it finds the job alive, and lets go).
        with job_lock(self.job.pk).waited_for():
            return self._run()

    def _run(self) -> dict:
        job = self.job
        started = time.monotonic()
        status, error, code, report = IngestionJob.Status.FAILED, "", "", None
        book = Book.objects.filter(slug=job.book_slug).first()
        previous_source = book.source_path if book is not None else ""
        try:
            self.source.check(job, self.folder)
            self.source.prepare(job, self.folder, book)
            report = self._index()
            if report.exit_code < 2:
                status = IngestionJob.Status.DONE
            else:
                error, code = "no page could be indexed; the errors below say why", "no_page_indexed"
        except BookchatError as exc:
            error, code = str(exc), exc.code
        except Exception as exc:  # a bug must still end the job, with what happened
            logger.exception("%s failed", job)
            error, code = f"internal error: {type(exc).__name__}: {exc}", "internal_error"
        self.source.settle(job, self.folder, previous_source)  # the job's folder is temporary
        self._finish(status, error, code, report, time.monotonic() - started)
        if status == IngestionJob.Status.DONE:
            delete_job_files(job)
        return {"job": job.pk, "status": status, "error": error,
                "chunks_embedded": report.chunks_embedded if report else 0}

    def _index(self) -> IndexReport | SiteReport:
        deadline = time.monotonic() + BUSY_WAIT_SECONDS
        followed = {"trigger": self.source.trigger, "progress": self.progress, "on_run": self.run_recorded}
        while True:
            try:
                return self.source.index(self.job, self.folder, **followed)
            except IndexingError as exc:
                if exc.code != "busy":
                    raise
                if time.monotonic() >= deadline:
                    raise IndexingError(f"book {self.job.book_slug!r} is being indexed by another run, still after "
                                        f"{BUSY_WAIT_SECONDS} s of waiting; use Retry once that run has finished",
                                        code="busy") from None
                self._write(stage="waiting: another run is indexing this book", force=True)
                time.sleep(BUSY_POLL_SECONDS)

    def run_recorded(self, book_slug: str, run_id: int) -> None:
        """The indexer recorded a run: the job's is its book's (a site's other editions have runs of their own)."""
        if book_slug == self.job.book_slug and self.run_id is None:
            self.run_id = run_id
            IngestionJob.objects.filter(pk=self.job.pk, status=IngestionJob.Status.RUNNING).update(index_run_id=run_id)

    def progress(self, stage: str, done: int, total: int) -> None:
        if stage == "files":
            self.files = (done, total)
            text = f"reading and chunking pages ({done}/{total})"
        elif stage == "store":
            text = f"storing the new version ({total} changed pages); the book answers as before until it is done"
        elif stage == "after":
            text = "stored; calibrating the book's answers"
        else:
            text = f"embedding passages ({done}/{total})"
        force = stage in ("store", "after") or (stage == "files" and done in (0, total))
        self._write(stage=text, force=force)

    def _write(self, *, stage: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_write < WRITE_INTERVAL:
            return
        self.last_write = now
        fields = {"stage": stage[:200], "files_done": self.files[0], "files_total": self.files[1],
                  "heartbeat_at": timezone.now()}
        if self.run_id:
            fields["index_run_id"] = self.run_id
        IngestionJob.objects.filter(pk=self.job.pk, status=IngestionJob.Status.RUNNING).update(**fields)

    def _finish(self, status: str, error: str, code: str, report: IndexReport | SiteReport | None,
                seconds: float) -> None:
        job = self.job
        now = timezone.now()
        book = Book.objects.filter(slug=job.book_slug).first()
        fields = {"status": status, "error": error, "error_code": code[:ERROR_CODE_LENGTH], "stage": "",
                  "finished_at": now, "heartbeat_at": now, "index_seconds": round(seconds, 3), "book": book}
        queued = job.queued_at or job.created_at
        fields["total_seconds"] = round((job.extract_seconds or 0.0) + (now - queued).total_seconds(), 3)
        if report is not None:
            fields["report"] = self.source.stored_report(report, self.folder)
            fields["files_done"] = fields["files_total"] = report.files_seen
        if self.run_id:
            fields["index_run_id"] = self.run_id
        # Written whatever the row says now: a run that got here finished, even if a sweep gave it up for lost.
        IngestionJob.objects.filter(pk=job.pk).update(**fields)


# -- noticing dead workers ----------------------------------------------------------------------------
def sweep_stale_jobs() -> int:
    """Fail the running jobs whose worker stopped reporting (and their book's run), and the queued jobs whose
    task was lost. Returns how many jobs it failed."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=setting("JOB_STALE_SECONDS"))
    stale = IngestionJob.objects.filter(status=IngestionJob.Status.RUNNING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff))
    failed = _fail_dead(stale, now)
    failed += _fail_lost_queued_jobs(now)
    _remove_old_staging(now)
    return failed


def fail_dead_jobs(book_slug: str) -> int:
    """Fail the book's running jobs whose worker is gone (its lock is free), however recent their last report:
    what a new publish of the book checks before it is refused as busy."""
    now = timezone.now()
    running = IngestionJob.objects.filter(book_slug=book_slug, status=IngestionJob.Status.RUNNING).filter(
        Q(heartbeat_at__lt=now - LOCK_GRACE) | Q(heartbeat_at__isnull=True, started_at__lt=now - LOCK_GRACE))
    return _fail_dead(running, now)


def _fail_dead(jobs, now) -> int:
    failed = 0
    for job in jobs:
        # A live worker holds the job's lock, however slow; a dead worker's lock went with its connection.
        with job_lock(job.pk).if_free() as free:
            if not free:
                continue
            if not IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.RUNNING,
                                               heartbeat_at=job.heartbeat_at).update(
                    status=IngestionJob.Status.FAILED, error=STALE_MESSAGE, error_code="worker_lost", stage="",
                    finished_at=now):
                continue  # it reported in the meantime
            IndexRun.objects.filter(book__slug=job.book_slug, status=IndexRun.Status.RUNNING).update(
                status=IndexRun.Status.FAILED, finished_at=now,
                report={"errors": [{"file": None, "line": None, "message": STALE_MESSAGE}]})
        failed += 1
        logger.warning("%s: %s", job, STALE_MESSAGE)
    return failed


def _fail_lost_queued_jobs(now) -> int:
    """Queued jobs whose task is neither waiting in django-q2's queue nor among its results never ran and never
    will (the queue was purged, or the worker could not read the task: another SECRET_KEY)."""
    from django_q.models import OrmQ, Task

    jobs = IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exclude(task_id="")
    if not queue_in_database():
        # Redis: a task a cluster has popped waits in its memory for a free worker, seen by neither the queue
        # nor the results; only a job queued for longer than a task may take (``retry``) is known to be lost.
        jobs = jobs.filter(queued_at__lt=now - timedelta(seconds=settings.Q_CLUSTER["retry"]))
    queued = dict(jobs.values_list("task_id", "pk"))
    if not queued:
        return 0
    # In this order: a task leaves the queue only after its result is saved. A worker on Redis looks in the
    # database's queue too: a task there was queued by a node on the other broker.
    in_database = {package.task_id() for package in OrmQ.objects.all()}
    waiting = in_database if queue_in_database() else set()
    results = dict(Task.objects.filter(id__in=list(queued)).values_list("id", "result"))
    failed = 0
    for task_id, job_id in queued.items():
        if task_id in waiting:
            continue
        error = (f"the task ended before the job started: {str(results[task_id])[:2000]}" if task_id in results
                 else OTHER_BROKER_MESSAGE if task_id in in_database else LOST_MESSAGE)
        failed += IngestionJob.objects.filter(pk=job_id, status=IngestionJob.Status.QUEUED, task_id=task_id).update(
            status=IngestionJob.Status.FAILED, finished_at=now, stage="", error=error)
    return failed


def _remove_old_staging(now) -> None:
    root = uploads_dir()
    if not root.is_dir():
        return
    for path in root.glob(f"{STAGING_PREFIX}*"):
        with contextlib.suppress(OSError):
            if now.timestamp() - path.stat().st_mtime > STAGING_MAX_AGE.total_seconds():
                shutil.rmtree(path, ignore_errors=True)
