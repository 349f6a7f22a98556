"""A database outage as a request sees it (``bookchat.base.outage``): 503 ``database_unavailable`` in the API's error
shape under /api/, a short HTML page elsewhere, and one log line with the cause, no traceback. The outage made for
real: tests/test_faults.py."""

from __future__ import annotations

import json
import logging

from django.db import OperationalError
from django.test import RequestFactory

from bookchat.base.outage import log_outage, outage_response

CAUSE = OperationalError("connection to server failed: Connection refused\n\tIs the server running?")


def test_an_api_request_gets_the_json_error_shape():
    response = outage_response(RequestFactory().post("/api/v1/ask"), CAUSE)
    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"] == "database_unavailable"


def test_a_page_gets_a_short_html_503_without_the_cause():
    response = outage_response(RequestFactory().get("/chat/"), CAUSE)
    assert response.status_code == 503 and response["Content-Type"].startswith("text/html")
    assert b"Connection refused" not in response.content and b"Traceback" not in response.content


def test_the_log_line_names_the_request_and_the_first_line_of_the_cause(caplog):
    with caplog.at_level(logging.WARNING, logger="bookchat.base.outage"):
        log_outage(RequestFactory().get("/api/v1/health"), CAUSE)
    [record] = caplog.records
    assert record.getMessage() == ("database unavailable during GET /api/v1/health: OperationalError: connection to "
                                   "server failed: Connection refused")
    assert record.exc_info is None
