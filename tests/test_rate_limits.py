"""Rate limits: per client IP without a key, per key and per visitor on a publishable key, per page session;
429 with Retry-After and the usual JSON error."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from bookchat.base.errors import ConfigurationError
from chat.channels.throttling import Rate, RateLimited, count_request, parse_rate
from chat.models import ApiKey

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SITE = "https://docs.example.org"
BODY = json.dumps({"question": "How do I ingest a folder?", "book": BOOK})


@pytest.fixture(autouse=True)
def limits(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": "",
                         "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0, "RATE_ANONYMOUS": "2/minute",
                         "RATE_KEY": "3/minute", "RATE_KEY_IP": "2/minute", "RATE_PAGE": "2/minute"}


def ask(client, path="/api/v1/ask", **extra):
    return client.post(path, data=BODY, content_type="application/json", **extra)


def assert_limited(response) -> None:
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["error"] == "rate_limited" and "try again in" in body["message"]
    assert 1 <= int(response["Retry-After"]) <= 60


def test_anonymous_requests_are_limited_per_client_ip(client):
    assert ask(client, REMOTE_ADDR="198.51.100.1").status_code == 200
    assert ask(client, "/api/v1/ask/stream", REMOTE_ADDR="198.51.100.1").status_code == 200
    limited = ask(client, REMOTE_ADDR="198.51.100.1")
    assert_limited(limited)
    assert "2 per minute" in limited.json()["message"]
    assert ask(client, REMOTE_ADDR="198.51.100.2").status_code == 200, "another visitor has their own allowance"
    assert client.get("/api/v1/books", REMOTE_ADDR="198.51.100.1").status_code == 200, "only questions count"


def test_secret_key_is_limited_per_key_whatever_the_ip(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    key = ApiKey(name="server", kind=ApiKey.SECRET)
    raw = key.issue()
    key.save()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    for ip in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        assert ask(client, REMOTE_ADDR=ip, **auth).status_code == 200
    assert_limited(ask(client, REMOTE_ADDR="192.0.2.4", **auth))


def test_publishable_key_is_limited_per_visitor_and_per_key_with_cors_headers(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}
    key = ApiKey(name="widget", kind=ApiKey.PUBLISHABLE, allowed_origins=SITE)
    raw = key.issue()
    key.save()

    def widget(ip):
        return ask(client, f"/api/v1/ask?key={raw}", REMOTE_ADDR=ip, HTTP_ORIGIN=SITE)

    assert widget("203.0.113.1").status_code == 200
    assert widget("203.0.113.1").status_code == 200
    limited = widget("203.0.113.1")
    assert_limited(limited)
    assert limited["Access-Control-Allow-Origin"] == SITE, "the widget can read the 429"
    assert "Retry-After" in limited["Access-Control-Expose-Headers"]
    assert widget("203.0.113.2").status_code == 429, "the key's own limit (3/minute) is used up too"


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
