"""django-q2 tasks of the chat app (scheduled by a migration)."""

from __future__ import annotations

import logging

from chat.conversations import purge_expired_conversations

logger = logging.getLogger(__name__)


def purge_expired_sessions() -> int:
    deleted = purge_expired_conversations()
    if deleted:
        logger.info("purged %d expired conversations", deleted)
    return deleted
