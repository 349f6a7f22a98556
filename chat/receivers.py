"""Chat's reactions to ingestion: embed the sentences of passages that lack current sentence vectors, and
recalibrate the book's scope threshold when its passages changed (the sentence vectors re-order the best
five passages but never change which five they are, so they don't move the threshold). What each did goes in
the indexing report's ``after`` ("sentence_vectors", "calibration"), which ``ingest`` prints."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from chat.models import ScopeCalibration
from chat.pipeline.calibration import calibrate_book, is_current
from chat.pipeline.sentences import enabled, fill_book
from ingestion.signals import book_indexed

logger = logging.getLogger(__name__)


@receiver(book_indexed)
def embed_sentences_after_indexing(sender, *, book, report, **kwargs) -> None:
    if not enabled():
        return
    try:
        report.after["sentence_vectors"] = fill_book(book)
    except Exception:  # missing sentence vectors only leave answers as they were without them
        logger.exception("sentence vectors of book %s failed", book.slug)


@receiver(book_indexed)
def calibrate_after_indexing(sender, *, book, report, changed: bool, **kwargs) -> None:
    current = ScopeCalibration.objects.filter(book=book).first()
    if current is not None and not changed and is_current(current.details):
        return
    try:
        details = calibrate_book(book)  # logs the new threshold
        # The one thing confidence sets per book: the fitted model (chat/pipeline/confidence.py) is the same for
        # every book.
        report.after["calibration"] = {key: details[key] for key in (
            "threshold", "off_topic_refused", "probes_refused", "answerability", "seconds")}
    except Exception:  # a failed calibration must not fail the indexing run; the old threshold stays
        logger.exception("calibrating book %s failed", book.slug)
