"""Sessions: find or start a conversation, remember its last turns, resolve follow-ups, purge idle ones.

A follow-up ("how do I install it?") is resolved without a model: when a question leans on
the previous one (a pronoun or a demonstrative with little else, a leading "and"/"what
about", or too few words of its own), the previous question is searched along with it.
A conversation idle for ``SESSION_IDLE_MINUTES`` is over: its id is no longer honoured
(the response carries a new one) and the scheduled purge deletes it.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from bookchat.base.conf import setting
from chat.models import Conversation, Turn
from chat.pipeline.terms import content_terms, words

_REFERRING = frozenset(["it", "its", "it's", "this", "that", "these", "those", "they", "them", "their", "theirs",
                        "there", "he", "him", "his", "she", "her", "one", "ones", "same", "such", "former", "latter",
                        "above", "previous"])
_CONTINUING = re.compile(r"^\s*(?:and|also|or|but|so|then|what about|how about|why not|what if|same for|"
                         r"and what|and how|and why|ok|okay)\b", re.IGNORECASE)
REFERRING_TERMS = 4  # a question with a referring word and at most this many words of its own leans on the last one


def conversation_for(session_id: uuid.UUID | None, book, learner: str = "") -> Conversation:
    """The live conversation with this id about this book, or a new one (the id of an expired, unknown or
    other-book session is not reused); a new one is ``learner``'s (an LMS-launched learner's pseudonym)."""
    return live_conversation(session_id, book) or Conversation(book=book, last_active_at=timezone.now(),
                                                               learner=learner)


def history(conversation: Conversation) -> list[Turn]:
    """The last ``HISTORY_TURNS`` turns, oldest first."""
    if conversation._state.adding:
        return []
    turns = list(conversation.turns.order_by("-created_at", "-id")[: setting("HISTORY_TURNS")])
    return turns[::-1]


def is_follow_up(question: str) -> bool:
    tokens = words(question)
    if _CONTINUING.match(question):
        return True
    own_terms = [t for t in content_terms(question)]
    if any(t in _REFERRING for t in tokens) and len(own_terms) <= REFERRING_TERMS:
        return True
    return len(own_terms) <= 1


def followed_question(question: str, turns: list[Turn]) -> str:
    """For a follow-up, the question it follows (as that one was searched); else ``""``."""
    if not turns or not is_follow_up(question):
        return ""
    return turns[-1].resolved_question or turns[-1].question


def searched_with(question: str, follows: str) -> str:
    """The question to search: ``question`` itself, or, for a follow-up, with the question it ``follows``."""
    return f"{question} ({follows})" if follows else question


def resolve_follow_up(question: str, turns: list[Turn]) -> str:
    """The question to search, given the conversation's last turns (``searched_with``)."""
    return searched_with(question, followed_question(question, turns))


@transaction.atomic
def record_turn(conversation: Conversation, *, question: str, resolved_question: str, answer: str,
                answer_id: uuid.UUID, refused: bool, response: dict | None = None) -> None:
    """Store a turn. Every turn of a live conversation is kept (the chat page shows them all; follow-ups read
    only the last ``HISTORY_TURNS``) until the conversation expires and is purged."""
    conversation.last_active_at = timezone.now()
    conversation.save()
    Turn.objects.create(conversation=conversation, question=question, resolved_question=resolved_question,
                        answer=answer, answer_id=answer_id, refused=refused, response=response or {})


def live_conversation(session_id, book) -> Conversation | None:
    """The unexpired conversation with this id about this book, if there is one."""
    if session_id is None:
        return None
    idle = timedelta(minutes=setting("SESSION_IDLE_MINUTES"))
    return Conversation.objects.filter(id=session_id, last_active_at__gte=timezone.now() - idle, book=book).first()


def purge_expired_conversations() -> int:
    """Delete conversations idle longer than ``SESSION_IDLE_MINUTES``; return how many."""
    cutoff = timezone.now() - timedelta(minutes=setting("SESSION_IDLE_MINUTES"))
    _, per_model = Conversation.objects.filter(last_active_at__lt=cutoff).delete()
    return per_model.get(Conversation._meta.label, 0)  # the total would also count their cascaded turns
