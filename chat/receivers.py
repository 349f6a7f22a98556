"""Chat's reactions to ingestion: embed the sentences of passages that lack current sentence vectors, and
recalibrate the book's scope threshold when its passages changed (the sentence vectors re-order the best
five passages but never change which five they are, so they don't move the threshold). What each did goes in
the indexing report's ``after`` ("sentence_vectors", "calibration"), which ``ingest`` prints.

Both run after the book's lock is released, once the new version is searchable. After a run on the task worker (an
upload, a publish, ``make run``'s books) they are tasks of their own (``chat.tasks``), so that the run is done as
soon as its pages are: the book answers meanwhile without the new passages' re-sort, and with its previous threshold.
A book that was never calibrated is calibrated before its first run ends, so that it never answers without a
threshold of its own.
"""

from __future__ import annotations

import logging

from django.dispatch import receiver
from django_q.tasks import async_task

from chat.models import ScopeCalibration
from chat.pipeline.calibration import calibrate_book, is_current
from chat.pipeline.sentences import enabled, fill_book
from ingestion.signals import book_indexed
from ingestion.uploads.jobs import TRIGGERS

logger = logging.getLogger(__name__)

# The runs made on the task worker (its jobs' triggers): the work after them is queued behind them rather than done
# in them.
QUEUED_AFTER = tuple(TRIGGERS.values())


@receiver(book_indexed)
def embed_sentences_after_indexing(sender, *, book, report, trigger: str = "cli", **kwargs) -> None:
    if not enabled():
        return
    if trigger in QUEUED_AFTER:
        report.after["sentence_vectors"] = {"queued": async_task("chat.tasks.embed_sentences", book.pk,
                                                                 task_name=f"sentences-{book.slug}")}
        return
    report.after["sentence_vectors"] = embed_sentences_now(book)


@receiver(book_indexed)
def calibrate_after_indexing(sender, *, book, report, changed: bool, trigger: str = "cli", **kwargs) -> None:
    current = ScopeCalibration.objects.filter(book=book).first()
    if current is not None and not changed and is_current(current.details):
        return
    if current is not None and trigger in QUEUED_AFTER:  # the previous threshold serves until then
        report.after["calibration"] = {"queued": async_task("chat.tasks.calibrate", book.pk,
                                                            task_name=f"calibrate-{book.slug}")}
        return
    details = calibrate_now(book)
    if details is not None:
        report.after["calibration"] = details


def embed_sentences_now(book) -> dict:
    try:
        return fill_book(book)
    except Exception:  # missing sentence vectors only leave answers as they were without them
        logger.exception("sentence vectors of book %s failed", book.slug)
        return {"failed": True}


def calibrate_now(book) -> dict | None:
    try:
        details = calibrate_book(book)  # logs the new threshold
    except Exception:  # a failed calibration must not fail the indexing run; the old threshold stays
        logger.exception("calibrating book %s failed", book.slug)
        return None
    # The one thing confidence sets per book: the fitted model (chat/pipeline/confidence.py) is the same for every
    # book.
    return {key: details[key] for key in ("threshold", "off_topic_refused", "probes_refused", "answerability",
                                          "seconds")}
