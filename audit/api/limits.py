"""Hand-offs limited per conversation (``BOOKCHAT_RATE_HANDOFF``, "5/hour" by default): the one way the API and the
page's form hand an answer off.

Decisions:
- The limit counts hand-offs of one conversation (the answer's, as the record of the answer names it), wherever
  they come from, in the same counters as the question limits (``chat.channels.throttling``: a window per bucket,
  shared by every worker and machine) and refused the same way (``RateLimited``: 429 with ``Retry-After``).
- The conversation is known once the answer is found, so the hand-off is made and counted in one transaction: a
  hand-off past the limit is rolled back with its count, and nothing is stored. The count then stays at the
  limit, so every further hand-off is refused until the window ends.
- Handing the same answer off again returns the first hand-off and counts nothing: nothing new is sent.
"""

from __future__ import annotations

import uuid

from django.db import transaction

from audit.handoffs import hand_off
from audit.models import Handoff
from bookchat.base.conf import parse_rate
from chat.channels.access import Client
from chat.channels.throttling import count_request


def bucket_of(handoff: Handoff) -> str:
    """The counter a hand-off counts in: its conversation's (an answer kept without one is its own, and is handed
    off once anyway)."""
    return f"handoff:{handoff.session_id or f'answer:{handoff.answer_id}'}"


def hand_off_within_limit(answer_id: uuid.UUID, *, client: Client, note: str = "",
                          contact_email: str = "") -> tuple[Handoff, bool]:
    """Hand ``answer_id`` to the course staff for ``client`` (its channel; a key bound to a book hands off only
    that book's answers), within its conversation's limit: (hand-off, created), or ``RateLimited`` with nothing
    stored."""
    rate = parse_rate("RATE_HANDOFF")
    with transaction.atomic():
        handoff, created = hand_off(answer_id, note=note, channel=client.channel, book_slug=client.key_book(),
                                    contact_email=contact_email, learner=client.learner)
        if created and rate is not None:
            count_request([(bucket_of(handoff), rate)], what="hand-offs")
    return handoff, created
