"""A question as the pipeline takes it: validated by a channel (``chat.channels.serializers``), with who asked."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass
class AskRequest:
    """A validated question (see ``chat.channels.serializers``)."""

    question: str
    selected_text: str = ""
    session_id: uuid.UUID | None = None
    book: str | None = None
    version: str | None = None
    locale: str | None = None
    chapter: str | None = None
    max_results: int | None = None
    channel: str = "api"
    report_opens: bool = False  # a search whose caller reports the sections opened from it (no-click gaps)
    # Who asked, for the audit trail (the IP is only ever stored as a keyed hash).
    api_key_id: int | None = None
    api_key_name: str = ""
    client_ip: str = ""
    learner: str = ""  # an LMS-launched learner's pseudonym (chat.lti), kept on the conversation and the audit row
