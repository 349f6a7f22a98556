"""chat.channels.asking: one ask service for every client. A question is checked on the client's channel (a keyless
API stream is ``stream``), limited to a key's book, stamped with who asked and the conversation the client is in;
a failure while streaming becomes the stream's last event. Answers end to end: tests/test_api.py, test_chat_page.py."""

from __future__ import annotations

import uuid

import pytest
from django.test import RequestFactory

from bookchat.base.errors import RequestError
from chat.channels import asking
from chat.channels.access import PAGE_CONVERSATIONS, AssistantClient, Client, PageClient, WidgetClient
from chat.channels.asking import ClientRequests
from chat.models import ApiKey
from ingestion.models import Book

QUESTION = {"question": "How do I install it?"}


def bound_key() -> ApiKey:
    return ApiKey(pk=7, name="docs site", kind=ApiKey.SECRET, book=Book(pk=3, slug="guide"))


@pytest.mark.parametrize(("client", "streaming", "channel"), [
    (Client("api"), False, "api"),
    (Client("api"), True, "stream"),
    (WidgetClient(key=ApiKey(pk=1)), True, "widget"),
    (AssistantClient(), False, "mcp"),
])
def test_a_question_is_asked_on_the_clients_channel(client, streaming, channel):
    assert ClientRequests(client).validate(QUESTION, streaming=streaming).channel == channel


def test_a_key_bound_to_a_book_answers_from_it_and_refuses_another():
    requests = ClientRequests(Client("api", bound_key()))
    ask = requests.validate(QUESTION)
    assert (ask.book, ask.api_key_id, ask.api_key_name) == ("guide", 7, "docs site")
    with pytest.raises(RequestError) as refused:
        requests.validate({**QUESTION, "book": "other"})
    assert refused.value.code == "key_book"


def test_who_asked_comes_from_the_request_and_is_empty_without_one():
    request = RequestFactory().post("/api/v1/ask", REMOTE_ADDR="198.51.100.4")
    assert ClientRequests(Client("api"), request).validate(QUESTION).client_ip == "198.51.100.4"
    assert ClientRequests(AssistantClient()).validate(QUESTION).client_ip == ""  # stdio


def test_the_page_continues_its_conversation_on_the_book_unless_one_is_named():
    ongoing, named = uuid.uuid4(), uuid.uuid4()
    requests = ClientRequests(PageClient(session={PAGE_CONVERSATIONS: {"guide": str(ongoing)}}))
    assert requests.validate({**QUESTION, "book": "guide"}).session_id == ongoing
    assert requests.validate({**QUESTION, "book": "other"}).session_id is None
    assert requests.validate({**QUESTION, "book": "guide", "session_id": str(named)}).session_id == named


def test_a_search_and_a_typed_search_are_owned_the_same_way():
    requests = ClientRequests(AssistantClient(book="guide"))
    assert requests.validate_search({"query": "install"}).book == "guide"
    assert requests.validate_section_search({"q": "inst"}).book == "guide"
    with pytest.raises(RequestError):
        requests.validate_search({"query": "install", "book": "other"})


def test_a_failure_while_streaming_becomes_the_last_event(monkeypatch):
    def events(prepared):
        yield "token", {"text": "Run"}
        raise ValueError("the model went away")

    monkeypatch.setattr(asking, "answer_events", events)
    streamed = list(ClientRequests(Client("api"))._events(prepared=None))
    assert streamed[0] == ("token", {"text": "Run"})
    assert streamed[1][0] == "error" and streamed[1][1]["error"] == "internal_error"
