"""django-q2 tasks of the chat app (scheduled by a migration): purge what has expired."""

from __future__ import annotations

import logging

from django.contrib.sessions.models import Session
from django.utils import timezone

from chat.channels.throttling import purge_old_counters
from chat.pipeline.conversations import purge_expired_conversations

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
