"""chat.channels.error_responses: one failure, one reply (status, the JSON error body, extra headers) for DRF's
exceptions, bookchat's own errors, a database outage and a bug."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError
from django.test import RequestFactory
from rest_framework import exceptions

from bookchat.base.errors import BookchatError, NotFound, RequestError
from chat.channels.access import KEY_REQUIRED
from chat.channels.error_responses import error_reply


def test_throttled_is_429_with_a_whole_second_retry_after_at_least_one():
    assert error_reply(exceptions.Throttled(wait=2.7)).headers == {"Retry-After": "3"}
    reply = error_reply(exceptions.Throttled(wait=0))
    assert (reply.status, reply.code, reply.headers) == (429, "rate_limited", {"Retry-After": "1"})


def test_not_authenticated_says_a_key_is_required_unless_it_says_why_itself():
    reply = error_reply(exceptions.NotAuthenticated())
    assert (reply.status, reply.code, reply.body["message"]) == (401, "key_required", KEY_REQUIRED)
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    assert error_reply(exceptions.NotAuthenticated("publish with your key")).body["message"] == "publish with your key"


def test_authentication_failed_keeps_its_own_code():
    reply = error_reply(exceptions.AuthenticationFailed("unknown key", code="invalid_key"))
    assert (reply.status, reply.code) == (401, "invalid_key")
    assert "WWW-Authenticate" in reply.headers


def test_other_drf_errors_keep_their_status_and_code_and_a_validation_dict_becomes_a_short_message():
    denied = error_reply(exceptions.PermissionDenied("not this book", code="key_book"))
    assert (denied.status, denied.code, denied.body["message"]) == (403, "key_book", "not this book")
    invalid = error_reply(exceptions.ValidationError({"question": ["x" * 1000]}))
    assert invalid.status == 400 and len(invalid.body["message"]) == 500


@pytest.mark.parametrize(("exc", "status", "code"), [
    (RequestError("too long", code="question_too_long", field="question"), 400, "question_too_long"),
    (NotFound("no such book", code="unknown_book"), 404, "unknown_book"),
    (BookchatError("vectors differ", code="embedder_mismatch"), 503, "embedder_mismatch"),
    (OperationalError("connection refused"), 503, "database_unavailable"),
    (ValueError("a bug"), 500, "internal_error"),
])
def test_bookchat_errors_outages_and_bugs_map_to_their_status(exc, status, code):
    reply = error_reply(exc)
    assert (reply.status, reply.code) == (status, code)
    assert reply.headers == {}


def test_a_request_error_keeps_its_field():
    assert error_reply(RequestError("bad", code="x", field="book")).body["field"] == "book"


def test_a_conflict_that_ends_by_itself_says_when_to_retry():
    busy = RequestError("a sync is under way", code="sync_running", status=409)
    busy.retry_after = 30.5
    assert error_reply(busy).headers == {"Retry-After": "30"}


def test_an_unexpected_error_is_logged_with_the_request_only_when_there_is_one(caplog):
    request = RequestFactory().post("/api/v1/ask")
    with caplog.at_level(logging.ERROR, logger="chat.channels.error_responses"):
        error_reply(ValueError("no request"))
        assert not caplog.records
        error_reply(ValueError("boom"), request)
    assert [r.getMessage() for r in caplog.records] == ["unexpected error answering POST /api/v1/ask"]


def test_djangos_404_under_a_drf_view_is_a_404_not_a_bug():
    from django.http import Http404

    reply = error_reply(Http404("no such thing"), RequestFactory().get("/api/v1/anything"))
    assert (reply.status, reply.code) == (404, "not_found")
