"""One mapping from a failure to what a client gets: HTTP status, the JSON error body, extra headers.

The API (DRF's exception handler), the stream's ``error`` event, the chat page's form and the
audit trail of failed questions all read it, so a failure is the same everywhere:

- ``RequestError``: its own status and code (400 bad input, 403, 404, 504 out of time …);
- Django's ``Http404`` under a DRF view: 404 ``not_found``;
- DRF's own exceptions: their status, with our codes for the ones we raise (``RateLimited``
  429 with ``Retry-After``, 401 ``key_required`` or ``invalid_key`` with ``WWW-Authenticate``, 403 from a key
  check);
- the database down or unreachable: 503 ``database_unavailable`` (an outage, not a bug);
- another ``BookchatError`` (embedder mismatch, a bad setting): 503 with its code;
- anything else: 500 ``internal_error``, logged with its traceback.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.http import Http404
from rest_framework import exceptions

from bookchat.base.errors import DATABASE_ERRORS, error_body, failure
from bookchat.base.metrics import count_error
from bookchat.base.outage import log_outage
from chat.channels.access import KEY_REQUIRED

logger = logging.getLogger(__name__)


@dataclass
class ErrorReply:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)

    @property
    def code(self) -> str:
        return self.body["error"]


def error_reply(exc: BaseException, request=None) -> ErrorReply:
    """What ``exc`` is answered with: DRF's exceptions here, the rest as ``bookchat.base.errors.failure`` says. With
    ``request``, outages and unexpected errors are logged. Each is counted for ``/metrics`` by its code."""
    reply = _reply(exc, request)
    count_error(reply.code, reply.status)
    return reply


def _reply(exc: BaseException, request) -> ErrorReply:
    if isinstance(exc, exceptions.Throttled):
        wait = max(1, int(exc.wait or 1))
        return ErrorReply(429, error_body("rate_limited", _detail(exc)), {"Retry-After": str(wait)})
    if isinstance(exc, exceptions.NotAuthenticated):
        detail = _detail(exc) if str(exc.detail) != str(exceptions.NotAuthenticated.default_detail) else KEY_REQUIRED
        return ErrorReply(401, error_body("key_required", detail), {"WWW-Authenticate": 'Bearer realm="bookchat"'})
    if isinstance(exc, exceptions.AuthenticationFailed):  # a key that is no key (``chat.channels.mcp_http``)
        codes = exc.get_codes()
        return ErrorReply(401, error_body(codes if isinstance(codes, str) else "invalid_key", _detail(exc)),
                          {"WWW-Authenticate": 'Bearer realm="bookchat"'})
    if isinstance(exc, Http404):  # Django's, raised under a DRF view (get_object_or_404, a format it can't render)
        return ErrorReply(404, error_body("not_found", "there is nothing at this address"))
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        return ErrorReply(exc.status_code, error_body(code, _detail(exc)))
    status, body = failure(exc)
    if request is not None and isinstance(exc, DATABASE_ERRORS):
        log_outage(request, exc)
    elif request is not None and status == 500:
        logger.error("unexpected error answering %s %s", request.method, request.path[:200], exc_info=exc)
    retry_after = getattr(exc, "retry_after", None)  # a conflict that ends by itself (a sync under way)
    return ErrorReply(status, body, {"Retry-After": str(int(retry_after))} if retry_after else {})


def _detail(exc: exceptions.APIException) -> str:
    detail = exc.detail
    if isinstance(detail, (list, dict)):  # DRF's own validation errors; ours are RequestErrors
        return str(detail)[:500]
    return str(detail)
