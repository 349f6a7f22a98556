"""Chat's answers to ``ingestion.signals.book_indexed``: they queue the work, ``chat.tasks`` does it. The book's
sentence vectors (for the passages that lack current ones), its scope calibration (when its passages changed; the
sentence vectors re-order the best five passages but never change which five they are, so they don't move the
threshold), and its staff answers following it (when its passages changed, or its embedder: a staff answer whose
cited section is gone or changed waits for review, ``chat.pipeline.staff_following``). What each did, or the task it
queued, goes in the indexing report's ``after`` ("sentence_vectors", "calibration", "staff_answers"), which
``ingest`` prints.

The signal comes after the book's lock is released, once the new version is searchable. A run on the task worker (an
upload, a publish, ``make run``'s books) queues the tasks on the background queue (``bookchat.base.queues``), so
that the run is done as soon as its pages are, and the next upload or publish never waits behind them: the book
answers meanwhile without the new passages' re-sort, and with its previous threshold. A queued task that finds a
newer run of the book queued or running skips its work (``chat.tasks.superseded``); that run's own signal queues
the work again, even when it changed nothing (``skipped_last``). A run with no
worker behind it (``ingest``, ``bootstrap``, the test suite's books) runs them through django-q2 in its own process
(``sync``) before it returns; so does a book that was never calibrated, so that it never answers without a threshold
of its own.
"""

from __future__ import annotations

from django.dispatch import receiver
from django_q.models import Task
from django_q.tasks import async_task, result

from bookchat.base.queues import BACKGROUND, queue_task
from chat.models import ScopeCalibration, StaffAnswer
from chat.pipeline.calibration import is_current
from chat.pipeline.sentences import enabled
from chat.pipeline.staff_following import stale
from chat.tasks import SUPERSEDED
from ingestion.signals import book_indexed
from ingestion.uploads.sources import TRIGGERS

# The runs made on the task worker (its jobs' triggers): the work after them is queued behind them.
WORKER_TRIGGERS = tuple(TRIGGERS.values())


@receiver(book_indexed)
def queue_sentence_vectors(sender, *, book, report, trigger: str = "cli", **kwargs) -> None:
    if enabled():
        report.after["sentence_vectors"] = run_task("chat.tasks.embed_sentences", book, label="sentences",
                                                    here=trigger not in WORKER_TRIGGERS)


@receiver(book_indexed)
def queue_calibration(sender, *, book, report, changed: bool, trigger: str = "cli", **kwargs) -> None:
    current = ScopeCalibration.objects.filter(book=book).first()
    if current is not None and not changed and is_current(current.details) and not skipped_last("calibrate", book):
        return
    # Until a queued calibration is done, the previous threshold serves; a book without one waits for its own.
    outcome = run_task("chat.tasks.calibrate", book, label="calibrate",
                       here=current is None or trigger not in WORKER_TRIGGERS)
    if outcome is not None:
        report.after["calibration"] = outcome


@receiver(book_indexed)
def queue_staff_answers(sender, *, book, report, changed: bool, trigger: str = "cli", **kwargs) -> None:
    active = StaffAnswer.objects.filter(book=book, status=StaffAnswer.Status.ACTIVE)
    if (changed and active.exists()) or stale(book).exists() or skipped_last("staff-answers", book):
        report.after["staff_answers"] = run_task("chat.tasks.follow_staff_answers", book, label="staff-answers",
                                                 here=trigger not in WORKER_TRIGGERS)


def run_task(name: str, book, *, label: str, here: bool) -> dict | None:
    """Queue task ``name`` on the book for the background worker: ``{"queued": task id}``; it skips its work if a
    newer run of the book is queued or running when it starts. With ``here``, run it in this process through
    django-q2 (saved among its results like any task) and return its result. An in-process task has no timeout of
    its own (``timeout=-1``: django-q2 would time it with the process's SIGALRM, which a worker's own task, or the
    test runner, already uses)."""
    if not here:
        return {"queued": queue_task(BACKGROUND, name, book.pk, task_name=task_name(label, book),
                                     unless_superseded=True)}
    return result(async_task(name, book.pk, task_name=task_name(label, book), sync=True, timeout=-1))


def task_name(label: str, book) -> str:
    return f"{label}-{book.slug}"


def skipped_last(label: str, book) -> bool:
    """Whether the book's last task of that kind to end was skipped for a newer run (``chat.tasks.superseded``):
    the run that superseded it does its work, whether or not it changed anything."""
    last = Task.objects.filter(name=task_name(label, book)).only("result").order_by("-stopped").first()
    return last is not None and isinstance(last.result, dict) and last.result.get("skipped") == SUPERSEDED
