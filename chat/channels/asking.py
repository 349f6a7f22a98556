"""One way to ask, for every client: the API's ask and stream, the chat page's form and an assistant's MCP tools.

``ClientRequests`` takes the request's ``Client`` (``chat.channels.access``) and a decoded body, validates it
with the contract's serializer, limits it to the client's book, fills in who asked and which
conversation it continues, and answers: as one ``chat.pipeline.answers.Answer`` (``answer``, which each channel
shows its way: the API and MCP as its JSON, ``chat.channels.responses.answer_data``), as a stream of events whose
``final`` one is that JSON (``stream``), or, for a search, as the passages retrieval found (``search``, an
assistant's) or the sections a reader is looking for as they type (``find``).
Whatever the client remembers of its conversations (the page keeps them in its session) is
updated here, so no view needs to know what kind of client it serves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from bookchat.base.security import client_ip
from chat.channels.access import Client
from chat.channels.error_responses import error_reply
from chat.channels.responses import answer_data, search_data
from chat.channels.serializers import validate_ask, validate_search, validate_section_search
from chat.pipeline.answering import answer_events, answer_question, prepare
from chat.pipeline.answers import Answer
from chat.pipeline.assistant_search import search_passages
from chat.pipeline.questions import AskRequest
from chat.pipeline.typeahead import find_sections

logger = logging.getLogger(__name__)


class ClientRequests:
    def __init__(self, client: Client, request=None):
        self.client, self.request = client, request

    def validate(self, data: object, *, streaming: bool = False) -> AskRequest:
        """The question, checked, on the client's channel (a keyless API stream is ``stream``)."""
        channel = self.client.channel if self.client.channel != "api" else ("stream" if streaming else "api")
        return self._owned(validate_ask(data, channel=channel))

    def validate_search(self, data: object) -> AskRequest:
        """A search (``query``, ``book``, ``version``, ``locale``, ``limit``) as a question on the client's channel."""
        return self._owned(validate_search(data, channel=self.client.channel))

    def validate_section_search(self, params: dict) -> AskRequest:
        """A reader's search as typed (``q``, ``book``, ``version``, ``locale``, ``chapter``, ``limit``)."""
        return self._owned(validate_section_search(params, channel=self.client.channel))

    def _owned(self, ask: AskRequest) -> AskRequest:
        ask.book = self.client.check_book(ask.book)
        ask.client_ip = client_ip(self.request) if self.request is not None else ""  # no request: stdio
        if self.client.key is not None:
            ask.api_key_id, ask.api_key_name = self.client.key.pk, self.client.key.name
        ask.learner = self.client.learner
        if ask.session_id is None and ask.book:
            ask.session_id = self.client.conversation(ask.book)
        return ask

    def search(self, ask: AskRequest) -> dict:
        return search_passages(ask)

    def find(self, ask: AskRequest) -> dict:
        return search_data(find_sections(ask))

    def answer(self, ask: AskRequest) -> Answer:
        answer = answer_question(ask)
        self.client.remember(answer.book, answer.session_id)
        return answer

    def stream(self, ask: AskRequest) -> Iterator[tuple[str, dict]]:
        """Prepare now (so that a bad book or chapter is still an HTTP error), then the events: ``token`` s, then
        ``final`` or ``error``."""
        prepared = prepare(ask)
        self.client.remember(prepared.book.slug, str(prepared.conversation.id))
        return self._events(prepared)

    def _events(self, prepared) -> Iterator[tuple[str, dict]]:
        try:
            for kind, payload in answer_events(prepared):
                yield kind, (answer_data(payload) if kind == "final" else payload)
        except Exception as exc:  # the status line has gone: the failure becomes the stream's last event
            yield "error", error_reply(exc, self.request).body
