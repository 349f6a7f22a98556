"""A database that is down or unreachable (stopped, restarting, its connections cut) is an outage, not a bug:
the API answers 503 ``database_unavailable`` in its usual error shape, a stream ends with that ``error``
event, and pages get a short HTML 503, never a 500 with a traceback. Recovery needs no restart: with
``CONN_HEALTH_CHECKS`` the first request after the database is back replaces the dead connection.
"""

from __future__ import annotations

import logging

from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from bookchat.base.errors import DATABASE_UNAVAILABLE, failure

logger = logging.getLogger(__name__)


def log_outage(request, exc: Exception) -> None:
    """One line per failed request: the cause without a traceback, which says nothing an operator can use."""
    first_line = (str(exc).strip().splitlines() or [""])[0][:300]
    logger.warning("database unavailable during %s %s: %s: %s", request.method, request.path[:200],
                   type(exc).__name__, first_line)


def outage_response(request, exc: Exception) -> HttpResponse:
    """The 503 for a request the outage stopped: JSON under /api/, a small page elsewhere."""
    log_outage(request, exc)
    status, body = failure(exc)
    if request.path_info.startswith("/api/"):
        return JsonResponse(body, status=status)
    return HttpResponse(render_to_string("bookchat/unavailable.html", {"message": DATABASE_UNAVAILABLE}), status=503)
