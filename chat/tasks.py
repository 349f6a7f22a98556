"""django-q2 tasks of the chat app: purge what has expired (scheduled by a migration), and the work after a book was
indexed (queued by ``chat.receivers``): its sentence vectors, its calibration, its staff answers following it."""

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


def embed_sentences(book_id: int) -> dict:
    """The sentence vectors a book's passages lack (a book deleted since: nothing). A failure is logged and
    reported, never raised: missing sentence vectors only leave answers as they were without them."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return {"book": None}
    try:
        return fill_book(book)
    except Exception:
        logger.exception("sentence vectors of book %s failed", book.slug)
        return {"failed": True}


def calibrate(book_id: int) -> dict | None:
    """Calibrate the book's scope threshold (``calibrate_book`` logs it); None for a book deleted since, or a failed
    calibration, which is logged and leaves the previous threshold in use."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return None
    try:
        details = calibrate_book(book)
    except Exception:
        logger.exception("calibrating book %s failed", book.slug)
        return None
    return {key: details[key] for key in CALIBRATION_SHOWN}


def follow_staff_answers(book_id: int) -> dict:
    """The book's staff answers whose cited sections are gone or changed, sent to review (``follow_book``); a book
    deleted since: nothing. A failure is logged and reported, never raised: the answers stay as they were until
    the next indexing run."""
    book = Book.objects.filter(pk=book_id).first()
    if book is None:
        return {"book": None}
    try:
        return follow_book(book)
    except Exception:
        logger.exception("following the staff answers of book %s failed", book.slug)
        return {"failed": True}
