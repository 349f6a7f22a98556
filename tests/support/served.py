"""Cleaning up after a real server: what gunicorn's workers answered was committed to the session's test
database, and the tests that count audit rows or conversations must not see it."""

from __future__ import annotations

from datetime import datetime


def forget_answers_since(since: datetime) -> None:
    """Delete the audit rows, conversations (with their turns) and votes created from ``since`` on."""
    from audit.models import AuditLog
    from chat.models import Conversation, Feedback
    from tests.conftest import committed

    def delete() -> None:
        AuditLog.objects.filter(created_at__gte=since).delete()
        Conversation.objects.filter(created_at__gte=since).delete()
        Feedback.objects.filter(created_at__gte=since).delete()

    committed(delete)
