"""Rate limits: each student's own (a conversation, a page session), the key's and the address's as ceilings, per
client IP without a key; only requests that do work count; 429 with Retry-After and the usual JSON error."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from bookchat.base.errors import ConfigurationError
from chat.channels.throttling import Rate, RateLimited, count_request, parse_rate
from chat.models import ApiKey, RateCounter
from ingestion.models import IngestionJob

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SITE = "https://docs.example.org"
BODY = json.dumps({"question": "How do I ingest a folder?", "book": BOOK})


@pytest.fixture(autouse=True)
def limits(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0, "RATE_ANONYMOUS": "2/minute",
                         "RATE_CONVERSATION": "2/minute", "RATE_KEY": "8/minute", "RATE_KEY_IP": "5/minute",
                         "RATE_PAGE": "2/minute", "RATE_ADDRESS": "3/minute", "RATE_SEARCH": "2/minute",
                         "RATE_SEARCH_ADDRESS": "5/minute"}


def ask(client, path="/api/v1/ask", body=BODY, **extra):
    return client.post(path, data=body, content_type="application/json", **extra)


def in_conversation(session_id: str | None, question: str = "How do I ingest a folder?") -> str:
    return json.dumps({"question": question, "book": BOOK, **({"session_id": session_id} if session_id else {})})


def assert_limited(response) -> None:
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["error"] == "rate_limited" and "try again in" in body["message"]
    assert 1 <= int(response["Retry-After"]) <= 60


def widget_key() -> str:
    key = ApiKey(name="widget", kind=ApiKey.PUBLISHABLE, allowed_origins=SITE)
    raw = key.issue()
    key.save()
    return raw


def test_anonymous_requests_are_limited_per_client_ip(client):
    assert ask(client, REMOTE_ADDR="198.51.100.1").status_code == 200
    assert ask(client, "/api/v1/ask/stream", REMOTE_ADDR="198.51.100.1").status_code == 200
    limited = ask(client, REMOTE_ADDR="198.51.100.1")
    assert_limited(limited)
    assert "2 per minute" in limited.json()["message"]
    assert ask(client, REMOTE_ADDR="198.51.100.2").status_code == 200, "another visitor has their own allowance"
    assert client.get("/api/v1/books", REMOTE_ADDR="198.51.100.1").status_code == 200, "only questions count"


def test_secret_key_is_limited_per_key_whatever_the_ip(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "RATE_KEY": "3/minute"}
    key = ApiKey(name="server", kind=ApiKey.SECRET)
    raw = key.issue()
    key.save()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    for ip in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        assert ask(client, REMOTE_ADDR=ip, **auth).status_code == 200
    assert_limited(ask(client, REMOTE_ADDR="192.0.2.4", **auth))


def test_a_class_behind_one_address_on_one_key_is_limited_per_conversation_not_as_one_client(client, settings):
    """Three students (a conversation each) behind one address: each asks within their own limit and none is
    throttled for the others; the one who asks past their conversation's limit is throttled alone, with CORS
    headers the widget can read, and their refused questions use up none of the ceilings the class shares."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    raw = widget_key()

    def widget(body, ip="203.0.113.1"):
        return ask(client, f"/api/v1/ask?key={raw}", body, REMOTE_ADDR=ip, HTTP_ORIGIN=SITE)

    first = widget(in_conversation(None))  # a first question: only the ceilings count it
    assert first.status_code == 200
    eager = first.json()["session_id"]
    assert widget(in_conversation(eager)).status_code == 200
    assert widget(in_conversation(eager)).status_code == 200
    limited = widget(in_conversation(eager))
    assert_limited(limited)
    assert "2 per minute" in limited.json()["message"]
    assert limited["Access-Control-Allow-Origin"] == SITE, "the widget can read the 429"
    assert "Retry-After" in limited["Access-Control-Expose-Headers"]
    for _ in range(3):  # asking on while limited: refused, and counted nowhere
        assert widget(in_conversation(eager)).status_code == 429
    # The address's ceiling (5/minute) has counted three questions; two classmates ask within it.
    for classmate in (str(uuid.uuid4()), str(uuid.uuid4())):
        assert widget(in_conversation(classmate)).status_code == 200
    ceiling = widget(in_conversation(str(uuid.uuid4())))
    assert_limited(ceiling)
    assert "5 per minute" in ceiling.json()["message"], "a sixth question from the address meets its ceiling"
    assert widget(in_conversation(str(uuid.uuid4())), ip="203.0.113.2").status_code == 200, "another address"


def test_a_client_opening_a_new_conversation_per_question_is_bounded_by_the_key_ceiling(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "RATE_KEY_IP": "100/minute"}
    raw = widget_key()
    statuses = [ask(client, f"/api/v1/ask?key={raw}", in_conversation(str(uuid.uuid4())), REMOTE_ADDR="203.0.113.7",
                    HTTP_ORIGIN=SITE).status_code for _ in range(10)]
    assert statuses == [200] * 8 + [429] * 2, "the key's ceiling (8/minute) bounds it"


def test_the_page_has_a_per_session_limit_on_its_form_and_its_api_calls():
    browser = Client()
    browser.get(f"/?book={BOOK}")
    assert browser.post("/", {"question": "How do I ingest a folder?", "book": BOOK}).status_code == 302
    assert ask(browser).status_code == 200
    page = browser.post("/", {"question": "What does --prune do?", "book": BOOK})
    assert page.status_code == 429 and 1 <= int(page["Retry-After"]) <= 60
    assert "too many questions" in page.content.decode()
    assert_limited(ask(browser))
    other = Client()
    other.get(f"/?book={BOOK}")
    assert other.post("/", {"question": "How do I ingest a folder?", "book": BOOK}).status_code == 302
    third = Client()
    third.get(f"/?book={BOOK}")
    ceiling = third.post("/", {"question": "How do I ingest a folder?", "book": BOOK})
    assert ceiling.status_code == 429 and "3 per minute" in ceiling.content.decode(), "the address's ceiling"


def test_refusals_that_did_no_work_count_nowhere(client):
    """A bad body, an unknown book, a book still being indexed (503), a question over the limit: none of them uses up
    the client's allowance (2/minute), so the next two real questions are answered."""
    slug = f"built-{uuid.uuid4().hex[:8]}"
    IngestionJob.objects.create(book_slug=slug, book_title="Harbour guide", source=IngestionJob.Source.LOCAL,
                                local_path="/srv/harbour-guide", status=IngestionJob.Status.RUNNING,
                                stage="embedding passages (12/40)")
    ip = {"REMOTE_ADDR": "198.51.100.40"}
    for _ in range(4):
        assert ask(client, body=json.dumps({"question": "When?", "book": slug}), **ip).status_code == 503
        assert ask(client, "/api/v1/ask/stream", json.dumps({"question": "When?", "book": slug}),
                   **ip).status_code == 503
        assert ask(client, body=json.dumps({"question": "", "book": BOOK}), **ip).status_code == 400
        assert ask(client, body=json.dumps({"question": "When?", "book": "no-such-book"}), **ip).status_code == 404
        assert ask(client, body="{not json", **ip).status_code == 400
        assert client.get("/api/v1/search", {"q": "x" * 5000, "book": BOOK}, **ip).status_code == 400
    assert ask(client, **ip).status_code == 200
    assert ask(client, "/api/v1/ask/stream", **ip).status_code == 200
    assert_limited(ask(client, **ip))


def test_a_widgets_searches_count_per_conversation_under_the_addresss_ceiling(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    raw = widget_key()

    def search(session_id=None):
        params = {"key": raw, "q": "ingest a fol", "book": BOOK, **({"session_id": session_id} if session_id else {})}
        return client.get("/api/v1/search", params, REMOTE_ADDR="203.0.113.30", HTTP_ORIGIN=SITE)

    reader = str(uuid.uuid4())
    assert [search(reader).status_code for _ in range(3)] == [200, 200, 429], "the reader's own (2/minute)"
    assert search(str(uuid.uuid4())).status_code == 200, "another reader behind the same address searches on"
    assert search().status_code == 200, "a search before any conversation counts in the ceiling only"
    assert search(str(uuid.uuid4())).status_code == 200, "the fifth search of the address (the refused one gave back)"
    limited = search(str(uuid.uuid4()))
    assert_limited(limited)
    assert "too many searches" in limited.json()["message"] and "5 per minute" in limited.json()["message"]
    assert ask(client, f"/api/v1/ask?key={raw}", REMOTE_ADDR="203.0.113.30", HTTP_ORIGIN=SITE).status_code == 200, \
        "searches never use up questions"
    bad = client.get("/api/v1/search", {"key": raw, "q": "ingest", "book": BOOK, "session_id": "me"},
                     REMOTE_ADDR="203.0.113.30", HTTP_ORIGIN=SITE)
    assert bad.status_code == 400 and bad.json()["field"] == "session_id"


def test_feedback_is_not_limited(client):
    body = ask(client, REMOTE_ADDR="198.51.100.9").json()
    ask(client, REMOTE_ADDR="198.51.100.9")
    for rating in ("up", "down", "up"):
        vote = client.post(f"/api/v1/answers/{body['answer_id']}/feedback", content_type="application/json",
                           data=json.dumps({"rating": rating, "session_id": body["session_id"]}),
                           REMOTE_ADDR="198.51.100.9")
        assert vote.status_code in (200, 201)


@pytest.mark.parametrize("opened", [1_000_020.0, 1_000_075.0], ids=["on-the-minute", "55-s-into-a-minute"])
def test_a_window_lasts_its_period_from_the_request_that_opened_it(opened):
    """1,000,020 is a whole minute of the clock. Opened on it or 55 s into a minute, the window counts the next
    request 10 s later (after the minute turns, in the second case), so no caller gets its allowance twice by
    sending across a minute; Retry-After is the time left; the first request past its end opens a new one."""
    buckets = [(f"test:window-{opened}", Rate(1, 60))]
    count_request(buckets, now=opened)
    with pytest.raises(RateLimited) as limited:
        count_request(buckets, now=opened + 10)
    assert limited.value.retry_after == 50, "the window ends 60 s after the request that opened it"
    count_request(buckets, now=opened + 61)


def test_a_request_over_one_limit_counts_in_none_and_a_give_back_spares_a_later_window():
    tag = uuid.uuid4().hex[:8]
    own, shared = (f"test:own-{tag}", Rate(1, 60)), (f"test:shared-{tag}", Rate(10, 60))
    count_request([own, shared], now=1000.0)
    for _ in range(3):
        with pytest.raises(RateLimited):
            count_request([own, shared], now=1001.0)
    counts = dict(RateCounter.objects.filter(bucket__in=[own[0], shared[0]]).values_list("bucket", "count"))
    assert counts == {own[0]: 1, shared[0]: 1}
    counted = count_request([shared], now=1002.0)
    count_request([shared], now=1070.0)  # the window ended: a new one opened at 1070
    counted.give_back()
    assert RateCounter.objects.get(bucket=shared[0]).count == 1, "the new window keeps its count"


@pytest.mark.parametrize("value, rate", [("10/minute", Rate(10, 60)), ("100/hour", Rate(100, 3600)),
                                         ("5/10s", Rate(5, 10)), ("1/day", Rate(1, 86400)), (" 3 / min ", Rate(3, 60)),
                                         ("", None)])
def test_rates_parse(settings, value, rate):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_KEY": value}
    assert parse_rate("RATE_KEY") == rate


@pytest.mark.parametrize("value", ["ten a minute", "0/minute", "5/fortnight", "-1/s"])
def test_bad_rates_are_a_clear_configuration_error(settings, value):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_KEY": value}
    with pytest.raises(ConfigurationError, match="BOOKCHAT_RATE_KEY"):
        parse_rate("RATE_KEY")
