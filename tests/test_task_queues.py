"""The two task queues (``bookchat.base.queues``): uploads, publishes and syncs go on the indexing queue; the work
after a book was indexed, topics and every schedule on the background queue, each its own django-q2 cluster. A queued
background task on a book that a newer run is about to replace skips its work, and that run queues it again. With
real workers (drills: ``make drills``): a publish queued while a long background task runs is done without waiting
for it; a background task superseded by a queued sync is skipped."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task

import chat.tasks
from audit.topics import queue_topics
from bookchat.base import queues
from bookchat.management.commands.serve import connections_needed
from chat.models import ScopeCalibration
from chat.receivers import queue_calibration, queue_staff_answers, run_task, skipped_last
from ingestion.indexing.reports import IndexReport
from ingestion.models import Book, IndexRun, IngestionJob
from ingestion.uploads import jobs
from ingestion.uploads.intake import receive_upload
from tests.conftest import committed
from tests.support.workers import Cluster

pytestmark = pytest.mark.django_db

INDEXING_KEY, BACKGROUND_KEY = queues.CLUSTER_NAMES[queues.INDEXING], queues.CLUSTER_NAMES[queues.BACKGROUND]


def new_book(slug: str) -> Book:
    return Book.objects.create(slug=slug, title=slug, embedder_name="x", embedder_dimension=3)


def queue_of_task(task_id: str) -> str:
    return next(package.key for package in OrmQ.objects.all() if package.task_id() == task_id)


def job(book_slug: str, status=IngestionJob.Status.QUEUED, *, run_status: str | None = None, **fields):
    run = None
    if run_status is not None:
        run = IndexRun.objects.create(book=Book.objects.get(slug=book_slug), status=run_status)
    return IngestionJob.objects.create(book_slug=book_slug, status=status, index_run=run, **fields)


# -- which queue ---------------------------------------------------------------------------------------------------
def test_a_job_goes_on_the_indexing_queue_and_the_work_after_indexing_and_topics_on_the_background_one(settings):
    book = new_book("queues-which")
    queued = job(book.slug)
    jobs.queue_job(queued)
    assert queue_of_task(queued.task_id) == INDEXING_KEY
    after = run_task("chat.tasks.embed_sentences", book, label="sentences", here=False)
    assert queue_of_task(after["queued"]) == BACKGROUND_KEY
    now = timezone.now()
    before = set(OrmQ.objects.filter(key=BACKGROUND_KEY).values_list("pk", flat=True))
    queue_topics(book.slug, since=now - timedelta(days=7), until=now, requested_by="test")
    assert OrmQ.objects.filter(key=BACKGROUND_KEY).exclude(pk__in=before).count() == 1


def test_every_schedule_runs_on_the_background_cluster():
    schedules = Schedule.objects.all()
    assert {s.func for s in schedules} >= {"ingestion.tasks.sweep_stale_jobs", "chat.tasks.purge_expired_sessions"}
    assert {s.cluster for s in schedules} == {BACKGROUND_KEY}


def test_the_background_cluster_is_a_django_q2_alternative_cluster_of_one_worker(settings):
    assert settings.Q_CLUSTER["name"] == INDEXING_KEY, "tasks queued before the upgrade still run"
    assert settings.Q_CLUSTER["ALT_CLUSTERS"][BACKGROUND_KEY]["workers"] == queues.BACKGROUND_WORKERS == 1
    assert queues.cluster_environment(queues.BACKGROUND) == {"Q_CLUSTER_NAME": BACKGROUND_KEY}
    assert queues.niceness(queues.BACKGROUND) > queues.niceness(queues.INDEXING)


def test_serve_counts_both_clusters_connections_and_runs_one_queue_only_as_a_worker(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "TASK_WORKERS": 2, "WEB_WORKERS": 1, "WEB_THREADS": 4}
    assert connections_needed("worker") == (2 + 3) + (1 + 3) + 1
    assert connections_needed("worker", (queues.BACKGROUND,)) == 1 + 3 + 1
    assert connections_needed("all") == 4 + (2 + 3) + (1 + 3) + 1
    with pytest.raises(CommandError, match="--queue is for --role worker"):
        call_command("serve", "--role", "web", "--queue", "indexing")


# -- superseded ----------------------------------------------------------------------------------------------------
def test_a_newer_run_queued_or_still_storing_replaces_the_book_and_a_stored_or_dry_one_does_not():
    book = new_book("queues-replacing")
    assert jobs.replacing_job(book.slug) is None
    stored = job(book.slug, IngestionJob.Status.RUNNING, run_status=IndexRun.Status.DONE)  # the run that queued it
    job(book.slug, dry_run=True)
    job("queues-other-book")
    assert jobs.replacing_job(book.slug) is None
    waiting = job(book.slug, IngestionJob.Status.RUNNING)  # waiting for the book: no run recorded yet
    assert jobs.replacing_job(book.slug) == waiting
    waiting.index_run = IndexRun.objects.create(book=book, status=IndexRun.Status.RUNNING)  # reading, embedding
    waiting.save()
    assert jobs.replacing_job(book.slug) == waiting
    IngestionJob.objects.filter(pk__in=[waiting.pk, stored.pk]).update(status=IngestionJob.Status.DONE)
    assert jobs.replacing_job(book.slug) is None
    queued = job(book.slug)
    assert jobs.replacing_job(book.slug) == queued


def test_a_superseded_queued_task_skips_its_work_and_one_run_here_does_it(monkeypatch):
    calibrated = []
    monkeypatch.setattr(chat.tasks, "calibrate_book", lambda book: calibrated.append(book.slug) or {
        key: 0.5 for key in chat.tasks.CALIBRATION_SHOWN})
    book = new_book("queues-skip")
    newer = job(book.slug)
    skipped = {"skipped": chat.tasks.SUPERSEDED, "job": newer.pk}
    assert chat.tasks.calibrate(book.pk, unless_superseded=True) == skipped
    assert chat.tasks.embed_sentences(book.pk, unless_superseded=True) == skipped
    assert chat.tasks.follow_staff_answers(book.pk, unless_superseded=True) == skipped
    assert calibrated == []
    assert chat.tasks.calibrate(book.pk)["threshold"] == 0.5, "run here (ingest, a first calibration): always done"
    assert calibrated == [book.slug]


def record(name: str, result) -> None:
    now = timezone.now()
    Task.objects.create(id=uuid.uuid4().hex, name=name, func="chat.tasks.calibrate", started=now, stopped=now,
                        result=result, success=True)


def test_the_run_that_superseded_a_task_queues_its_work_again_even_unchanged(monkeypatch):
    monkeypatch.setattr("chat.receivers.is_current", lambda details: True)
    book = new_book("queues-again")
    ScopeCalibration.objects.create(book=book, threshold=0.25, details={})
    report = IndexReport(book=book.slug)
    queue_calibration(sender=Book, book=book, report=report, changed=False, trigger="upload")
    assert report.after == {}, "unchanged and calibrated: nothing to do"
    record("calibrate-queues-again", {"skipped": chat.tasks.SUPERSEDED, "job": 1})
    record("staff-answers-queues-again", {"skipped": chat.tasks.SUPERSEDED, "job": 1})
    assert skipped_last("calibrate", book)
    queue_calibration(sender=Book, book=book, report=report, changed=False, trigger="upload")
    queue_staff_answers(sender=Book, book=book, report=report, changed=False, trigger="upload")
    assert queue_of_task(report.after["calibration"]["queued"]) == BACKGROUND_KEY
    assert queue_of_task(report.after["staff_answers"]["queued"]) == BACKGROUND_KEY
    record("calibrate-queues-again", {"threshold": 0.3})
    assert not skipped_last("calibrate", book), "the last one to end did the work"


# -- real workers --------------------------------------------------------------------------------------------------
@pytest.fixture
def clusters(settings, tmp_path):
    settings.DATA_DIR = tmp_path  # uploads go there (what the workers are told too)
    started: list[Cluster] = []
    last_before = committed(lambda: OrmQ.objects.order_by("-pk").values_list("pk", flat=True).first()) or 0

    def start(queue: str) -> Cluster:
        started.append(Cluster(tmp_path, queue=queue))
        return started[-1]

    try:
        yield start
    finally:  # whatever the test did: no worker outlives it, and nothing it committed is left for the next test
        for each in started:
            each.stop()
        committed(lambda: OrmQ.objects.filter(pk__gt=last_before).delete())
        committed(lambda: IngestionJob.objects.filter(book_slug__startswith="queues-").delete())
        committed(lambda: Book.objects.filter(slug__startswith="queues-").delete())


def wait_until(check, *, seconds: float, clusters: list[Cluster]):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := committed(check):
            return value
        for cluster in clusters:
            assert cluster.proc.poll() is None, cluster.output()
        time.sleep(0.2)
    raise AssertionError("\n".join(cluster.output() for cluster in clusters))


def task_result(task_id: str):
    task = Task.objects.filter(id=task_id).first()
    return task and {"result": task.result}


@pytest.mark.slow
@pytest.mark.drill  # real clusters, as test_bookchat_task_workers' are: make drills, keeping make test's minutes
def test_a_publish_queued_while_a_long_background_task_runs_is_done_without_waiting_for_it(clusters):
    sleeping = committed(lambda: queues.queue_task(queues.BACKGROUND, "time.sleep", 60, task_name="long-background"))
    background = clusters(queues.BACKGROUND)
    wait_until(lambda: OrmQ.objects.filter(key=BACKGROUND_KEY, lock__gt=timezone.now()).exists(), seconds=60,
               clusters=[background])  # taken: the background worker is busy for a minute
    slug = f"queues-publish-{uuid.uuid4().hex[:8]}"
    page = SimpleUploadedFile("edited.md", b"# Edited\n\nThe tide tables are read at dawn, before the boats go out.\n")
    job_id = committed(lambda: jobs.start_job(job=IngestionJob(book_slug=slug, book_title="Edited"),
                                              intake=receive_upload([page])).pk)
    indexing = clusters(queues.INDEXING)
    done = wait_until(lambda: IngestionJob.objects.filter(pk=job_id, status__in=["done", "failed"]).first(),
                      seconds=50, clusters=[background, indexing])
    assert done.status == "done", done.error
    assert committed(lambda: task_result(sleeping)) is None, "the background task still runs: nothing waited for it"


@pytest.mark.slow
@pytest.mark.drill
def test_a_background_task_superseded_by_a_queued_sync_is_skipped(clusters):
    slug = f"queues-superseded-{uuid.uuid4().hex[:8]}"
    book = committed(lambda: new_book(slug))

    def queue_sync_then_sentences():
        sync = job(slug)
        jobs.queue_job(sync)  # no indexing worker runs: it stays queued
        return sync.pk, run_task("chat.tasks.embed_sentences", book, label="sentences", here=False)["queued"]

    sync_id, task_id = committed(queue_sync_then_sentences)
    background = clusters(queues.BACKGROUND)
    done = wait_until(lambda: task_result(task_id), seconds=60, clusters=[background])
    assert done["result"] == {"skipped": chat.tasks.SUPERSEDED, "job": sync_id}
    assert committed(lambda: IngestionJob.objects.get(pk=sync_id).status) == "queued", "the sync still waits"
    assert committed(lambda: skipped_last("sentences", book))


def test_the_scrape_counts_the_tasks_waiting_in_both_queues():
    from bookchat.scraping import queue_metrics

    def waiting() -> float:
        return next(m for m in queue_metrics() if m.name == "bookchat_queue_tasks").samples[0].value

    before = waiting()
    queues.queue_task(queues.INDEXING, "math.floor", 1.5)
    queues.queue_task(queues.BACKGROUND, "math.floor", 2.5)
    assert waiting() == before + 2
