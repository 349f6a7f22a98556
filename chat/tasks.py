"""django-q2 tasks of the chat app: purge what has expired (scheduled by a migration), and the work after a book was
indexed (queued by ``chat.receivers`` on the background queue): its sentence vectors, its calibration, its staff
answers following it. Queued, that work is skipped when a newer upload, publish or sync of the book is queued or
running (``superseded``): it would be done on a version about to be replaced, and the newer run queues its own."""

from __future__ import annotations

import logging

from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.channels.throttling import purge_old_counters
from chat.pipeline.calibration import calibrate_book
from chat.pipeline.conversations import purge_expired_conversations
from chat.pipeline.sentences import fill_book
from chat.pipeline.staff_following import follow_book
from ingestion.models import Book
from ingestion.uploads.jobs import replacing_job

logger = logging.getLogger(__name__)

# What an indexing report shows of a calibration (``calibrate_book`` returns more). The threshold is the one thing
# confidence sets per book: the fitted model (chat/pipeline/confidence.py) is the same for every book.
CALIBRATION_SHOWN = ("threshold", "off_topic_refused", "probes_refused", "answerability", "seconds")


def purge_expired_sessions() -> int:
    """Conversations idle past ``SESSION_IDLE_MINUTES``, expired page sessions and stale rate counters."""
    deleted = purge_expired_conversations()
    sessions, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    counters = purge_old_counters()
    if deleted or sessions or counters:
        logger.info("purged %d expired conversations, %d page sessions and %d rate counters", deleted, sessions,
                    counters)
    return deleted


SUPERSEDED = "superseded"  # a skipped task's ``skipped``: a newer run of the book was queued or running


def superseded(book: Book, *, task: str) -> dict | None:
    """What a skipped task returns when a newer upload, publish or sync of ``book`` is queued or running (its job
    named), else None."""
    job = replacing_job(book.slug)
    if job is None:
        return None
    logger.info("%s of book %s skipped: upload #%s (%s) will store a newer version", task, book.slug, job.pk,
                job.status)
    return {"skipped": SUPERSEDED, "job": job.pk}


def embed_sentences(book_id: int, *, unless_superseded: bool = False) -> dict:
    """The sentence vectors a book's passages lack (a book deleted since: nothing). A failure is logged and
    reported, never raised: missing sentence vectors only leave answers as they were without them. With
    ``unless_superseded`` (queued), nothing while a newer run of the book is queued or running."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return {"book": None}
    if unless_superseded and (skipped := superseded(book, task="sentence vectors")):
        return skipped
    try:
        return fill_book(book)
    except Exception:
        logger.exception("sentence vectors of book %s failed", book.slug)
        return {"failed": True}


def calibrate(book_id: int, *, unless_superseded: bool = False) -> dict | None:
    """Calibrate the book's scope threshold (``calibrate_book`` logs it); None for a book deleted since, or a failed
    calibration, which is logged and leaves the previous threshold in use. With ``unless_superseded`` (queued),
    nothing while a newer run of the book is queued or running."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return None
    if unless_superseded and (skipped := superseded(book, task="calibration")):
        return skipped
    try:
        details = calibrate_book(book)
    except Exception:
        logger.exception("calibrating book %s failed", book.slug)
        return None
    return {key: details[key] for key in CALIBRATION_SHOWN}


def follow_staff_answers(book_id: int, *, unless_superseded: bool = False) -> dict:
    """The book's staff answers whose cited sections are gone or changed, sent to review (``follow_book``); a book
    deleted since: nothing. A failure is logged and reported, never raised: the answers stay as they were until
    the next indexing run. With ``unless_superseded`` (queued), nothing while a newer run of the book is queued or
    running."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return {"book": None}
    if unless_superseded and (skipped := superseded(book, task="staff answers following")):
        return skipped
    try:
        return follow_book(book)
    except Exception:
        logger.exception("following the staff answers of book %s failed", book.slug)
        return {"failed": True}
