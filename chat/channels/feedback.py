"""What readers tell us back: thumbs up or down on an answer, from the session that got it (the chat page, the
widget, the API), and which section of a search's result they opened (the widget).

One vote per answer: voting again replaces the earlier vote and comment. Feedback is
accepted only from the conversation the answer was given in, and only while that
conversation lives (turns are purged with it); the audit trail keeps it for longer. A vote on an answer the course
staff's answer gave counts on that staff answer too (its thumbs; a changed vote moves from one to the other).

An opened section is kept only on the search's audit row (``search_opened``): a search a reader typed and opened
nothing from is what the coverage gaps count as a "no-click" search. The search id is the row's, unguessable, so
who knows it is who was shown the result; a key bound to a book records opens of that book's searches only.
"""

from __future__ import annotations

import uuid

from django.db import transaction

from bookchat.base.errors import NotFound, RequestError
from chat.models import Feedback, Turn
from chat.pipeline.announcements import feedback_given, search_opened
from chat.pipeline.staff_matching import count_vote


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
    with transaction.atomic():  # the vote before this one, read and replaced under its row's lock
        before = Feedback.objects.select_for_update().filter(answer_id=answer_id).values_list("rating", flat=True)
        before = next(iter(before), None)
        feedback, created = Feedback.objects.update_or_create(
            answer_id=answer_id,
            defaults={"rating": rating, "comment": comment, "channel": channel,
                      "conversation_id": turn.conversation_id},
        )
        staff = (turn.response or {}).get("staff_answer")
        if isinstance(staff, dict) and isinstance(staff.get("id"), int):
            count_vote(staff["id"], before=before, after=rating)
    feedback_given.send_robust(sender=Feedback, answer_id=answer_id, rating=rating, comment=comment)
    return feedback, created


def record_opened(search_id: uuid.UUID, n: int, *, book_slug: str | None = None) -> None:
    """Record that the ``n``-th section of search ``search_id`` was opened, or ``NotFound`` when no search of
    that id (of ``book_slug``, when given) is on record."""
    replies = search_opened.send_robust(sender=None, search_id=search_id, n=n, book_slug=book_slug)
    if not any(reply is True for _, reply in replies):
        raise NotFound("there is no search with this id, or it has no section n", code="unknown_search")
