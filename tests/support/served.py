"""What a real server wrote to the session's test database: the audit row of an answer, waited for (rows are
written after the response), and cleaning up after it (what gunicorn's workers answered was committed, and the
tests that count audit rows or conversations must not see it)."""

from __future__ import annotations

import time
from datetime import datetime


def written_row(answer_id: str):
    """The audit row a server process wrote for ``answer_id``, once it has."""
    from audit.models import AuditLog
    from tests.conftest import committed

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = committed(lambda: AuditLog.objects.filter(answer_id=answer_id).first())
        if row:
            return row
        time.sleep(0.2)
    raise AssertionError(f"no audit row for {answer_id}")


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
