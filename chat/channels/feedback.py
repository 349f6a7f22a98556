"""Thumbs up or down on an answer, from the session that got it (the chat page, the widget, the API).

One vote per answer: voting again replaces the earlier vote and comment. Feedback is
accepted only from the conversation the answer was given in, and only while that
conversation lives (turns are purged with it); the audit trail keeps it for longer.
"""

from __future__ import annotations

import uuid

from bookchat.errors import NotFound, RequestError
from chat.models import Feedback, Turn
from chat.pipeline.signals import feedback_given


def record_feedback(answer_id: uuid.UUID, *, rating: str, comment: str, session_ids: list[uuid.UUID],
                    channel: str, book_slug: str | None = None) -> tuple[Feedback, bool]:
    """Store the vote on ``answer_id`` if one of ``session_ids`` got that answer; (feedback, created)."""
    turn = Turn.objects.select_related("conversation__book").filter(answer_id=answer_id).first()
    if turn is None:
        raise NotFound("there is no answer with this id, or its conversation has expired", code="unknown_answer")
    if turn.conversation_id not in session_ids:
        raise RequestError("feedback is accepted only from the conversation that got the answer: send its "
                           "session_id", code="not_your_answer", field="session_id", status=403)
    book = turn.conversation.book
    if book_slug is not None and (book is None or book.root.slug != book_slug):
        raise RequestError("this key can't give feedback on another book's answers", code="key_book", status=403)
    feedback, created = Feedback.objects.update_or_create(
        answer_id=answer_id,
        defaults={"rating": rating, "comment": comment, "channel": channel, "conversation_id": turn.conversation_id},
    )
    feedback_given.send_robust(sender=Feedback, answer_id=answer_id, rating=rating, comment=comment)
    return feedback, created
