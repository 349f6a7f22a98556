"""chat.channels.api: the REST API's own decisions, apart from the pipeline: a Server-Sent Event's framing, every
failure in the one JSON error shape (a wrong method with its ``Allow``), a CORS preflight without a key's origin
getting no CORS headers, a book slug that can't be one refused before any query, and health reporting a part that
fails instead of failing. Asking end to end: tests/test_api.py, test_streams.py, test_api_contract.py."""

from __future__ import annotations

import json
import logging

import pytest
from rest_framework import exceptions

from chat.channels.api import HealthView, exception_handler, sse
from chat.pipeline.announcements import health_requested

pytestmark = pytest.mark.django_db


def test_an_event_is_its_name_and_one_line_of_json_keeping_unicode():
    assert sse("token", {"text": "Größe\nneu"}) == 'event: token\ndata: {"text": "Größe\\nneu"}\n\n'.encode()


def test_a_wrong_method_is_the_one_error_shape_with_allow():
    response = exception_handler(exceptions.MethodNotAllowed("PUT"), {"view": HealthView(), "request": None})
    assert response.status_code == 405 and response.data["error"] == "method_not_allowed"
    assert set(response["Allow"].split(", ")) >= {"GET", "OPTIONS"}


def test_a_preflight_from_a_page_without_a_key_gets_no_cors_headers(client):
    response = client.options("/api/v1/ask", headers={"Origin": "https://docs.example",
                                                       "Access-Control-Request-Method": "POST"})
    assert response.status_code == 204
    assert "Access-Control-Allow-Origin" not in response and "Access-Control-Allow-Methods" not in response
    assert "Origin" in response["Vary"]


def test_a_book_slug_that_cant_be_one_is_not_found(client):
    response = client.get("/api/v1/books/Not_A_Slug")
    assert response.status_code == 404 and response.json()["error"] == "unknown_book"


def test_health_reports_a_broken_part_as_unavailable_and_a_failing_report_is_only_logged(client, settings, caplog):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "no-such-backend"}

    def broken(sender, **kwargs):
        raise RuntimeError("report failed")

    health_requested.connect(broken, dispatch_uid="test-broken-health")
    try:
        with caplog.at_level(logging.ERROR, logger="chat.channels.api"):
            response = client.get("/api/v1/health")
    finally:
        health_requested.disconnect(dispatch_uid="test-broken-health")
    body = json.loads(response.content)
    assert response.status_code == 503 and body["status"] == "unavailable"
    assert body["database"]["ok"] is True and body["embedder"]["ok"] is False
    assert "no-such-backend" in body["embedder"]["error"]
    assert any("report failed" in r.getMessage() for r in caplog.records)
