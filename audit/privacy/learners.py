"""A learner, as the rows that hold their data are found: by their LMS pseudonym, a conversation id or a hand-off's
token (``find_learner``), or, for a student's own "My data", by exactly the conversation ids and hand-off tokens
their browser holds (``browser_learner``).

Decisions where the issue is silent:
- Staff name one identifier and get the whole learner: a conversation's or a hand-off's pseudonym brings the
  learner's other conversations, and their hand-offs and audit rows. A browser gets only what it names (a
  conversation id or token is the proof it holds; nothing reaches beyond them).
- A 32-character hex identifier is a pseudonym when any row carries it, else a conversation id written without
  dashes.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from audit.models import AuditLog, Handoff
from bookchat.base.errors import NotFound, RequestError
from chat.models import Conversation

PSEUDONYM = re.compile(r"[0-9a-f]{32}")
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,64}")
MAX_BROWSER_IDS = 100  # a browser's conversations and hand-offs: more is not a browser's


@dataclass
class Learner:
    pseudonyms: set[str] = field(default_factory=set)
    sessions: set[uuid.UUID] = field(default_factory=set)
    tokens: set[str] = field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not (self.pseudonyms or self.sessions or self.tokens)

    def conversations(self):
        return Conversation.objects.filter(Q(id__in=self.sessions) | Q(learner__in=self.pseudonyms))

    def audit_rows(self):
        return AuditLog.objects.filter(Q(session_id__in=self.sessions) | Q(learner__in=self.pseudonyms))

    def handoffs(self):
        return Handoff.objects.filter(Q(token__in=self.tokens) | Q(session_id__in=self.sessions)
                                      | Q(learner__in=self.pseudonyms))

    def holds(self, row: dict) -> bool:
        """Whether an archived audit row (as JSON) is this learner's."""
        return (row.get("learner") or "") in self.pseudonyms or str(row.get("session_id")) in {
            str(s) for s in self.sessions}

    def as_dict(self) -> dict:
        return {"pseudonyms": sorted(self.pseudonyms), "conversations": sorted(str(s) for s in self.sessions),
                "handoff_tokens": sorted(self.tokens)}


def as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value).strip())
    except ValueError:
        return None


def find_learner(*, identifier: str) -> Learner:
    """Everything known of the learner ``identifier`` names; ``NotFound`` (``unknown_learner``) when nothing holds
    it, ``RequestError`` (``bad_learner``) when it can be none of the three."""
    identifier = str(identifier or "").strip()
    learner = Learner()
    session = as_uuid(identifier)
    if PSEUDONYM.fullmatch(identifier) and _pseudonym_used(identifier):
        learner.pseudonyms.add(identifier)
    elif session is not None:
        learner.sessions.add(session)
    elif TOKEN.fullmatch(identifier):
        learner.tokens.add(identifier)
    else:
        raise RequestError("a learner is named by their LMS pseudonym (32 hex characters), a conversation id (a "
                           "UUID) or a hand-off's token", code="bad_learner")
    expand(learner)
    if not (learner.conversations().exists() or learner.audit_rows().exists() or learner.handoffs().exists()
            or learner.pseudonyms):
        raise NotFound(f"no data is held under {identifier!r}: no conversation, audit row or hand-off has it",
                       code="unknown_learner")
    return learner


def _pseudonym_used(value: str) -> bool:
    return (Conversation.objects.filter(learner=value).exists() or AuditLog.objects.filter(learner=value).exists()
            or Handoff.objects.filter(learner=value).exists())


def expand(learner: Learner) -> Learner:
    """Add what the learner's rows name: their pseudonyms, conversations and hand-offs' tokens, until nothing new."""
    while True:
        before = (len(learner.pseudonyms), len(learner.sessions), len(learner.tokens))
        for handoff in learner.handoffs().values("token", "session_id", "learner"):
            learner.tokens.add(handoff["token"])
            _add(learner, handoff["session_id"], handoff["learner"])
        for row in learner.audit_rows().values("session_id", "learner").distinct():
            _add(learner, row["session_id"], row["learner"])
        for conversation in learner.conversations().values("id", "learner"):
            _add(learner, conversation["id"], conversation["learner"])
        if before == (len(learner.pseudonyms), len(learner.sessions), len(learner.tokens)):
            return learner


def _add(learner: Learner, session, pseudonym: str) -> None:
    if session:
        learner.sessions.add(session)
    if pseudonym:
        learner.pseudonyms.add(pseudonym)


def browser_learner(*, session_ids: Iterable, tokens: Iterable) -> Learner:
    """Exactly the conversations and hand-offs a browser names (malformed ids refused, ``bad_learner``)."""
    session_ids, tokens = list(session_ids or []), list(tokens or [])
    if len(session_ids) > 2 * MAX_BROWSER_IDS or len(tokens) > MAX_BROWSER_IDS:  # the page's own ids beside the body's
        raise RequestError(f"at most {MAX_BROWSER_IDS} conversation ids and {MAX_BROWSER_IDS} hand-off tokens",
                           code="bad_learner")
    learner = Learner()
    for value in session_ids:
        session = as_uuid(value) if isinstance(value, str) else None
        if session is None:
            raise RequestError("a conversation id is a UUID, as `session_id` gave it", code="bad_learner")
        learner.sessions.add(session)
    for value in tokens:
        if not isinstance(value, str) or not TOKEN.fullmatch(value):
            raise RequestError("a hand-off token is the end of its status link", code="bad_learner")
        learner.tokens.add(value)
    return learner
