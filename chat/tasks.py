"""django-q2 tasks of the chat app: purge what has expired (scheduled by a migration), and the work after a book was
indexed on the worker (queued by ``chat.receivers``): its sentence vectors, its calibration."""

from __future__ import annotations

import logging

from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.channels.throttling import purge_old_counters
from chat.pipeline.conversations import purge_expired_conversations
from chat.receivers import calibrate_now, embed_sentences_now
from ingestion.models import Book

logger = logging.getLogger(__name__)


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
    """The sentence vectors a book's passages lack (a book deleted since: nothing)."""
    book = Book.objects.filter(pk=book_id).first()
    return embed_sentences_now(book) if book is not None else {"book": None}


def calibrate(book_id: int) -> dict | None:
    book = Book.objects.filter(pk=book_id).first()
    return calibrate_now(book) if book is not None else None
