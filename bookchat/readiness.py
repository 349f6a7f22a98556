"""Readiness, for load balancers: ``/api/v1/ready`` answers 200 only when this node can answer questions (the
database reachable, every migration applied, the embedder loaded) and 503 otherwise, so that a balancer takes
the node out before its users see 503s. ``/api/v1/health`` stays the liveness probe (is the process alive
and what does it see), which restarts a node rather than draining it.

Decisions:
- Checked on every probe: the database (one ``SELECT 1``), the cheap part. Once true for this process: the
  migrations (a node's code doesn't change under it; the plan costs ~50 ms) and the embedder (loaded once;
  the probe loads it, so the first question doesn't pay for it).
- The broker is reported, not judged: a node whose Redis is away still answers questions; only uploads wait.
- Books: not ready while no book exists and one is being indexed for the first time (``make run`` serving while it
  indexes the manual), with how far it has got; a node with a book to answer from is ready, and says which books
  are being indexed for the first time.
"""

from __future__ import annotations

import threading

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from bookchat.base.broker import broker_name
from bookchat.base.conf import setting
from bookchat.base.deployment import pending_migrations
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, IngestionJob

_settled: dict[str, dict] = {}  # checks that, once passed, stay passed for this process
_lock = threading.Lock()


def readiness() -> tuple[bool, dict]:
    """(ready, one report per check)."""
    checks = {"database": _database()}
    for name, check in (("migrations", _migrations), ("embedder", _embedder)):
        if name in _settled:
            checks[name] = _settled[name]
            continue
        report = check() if checks["database"]["ok"] or name == "embedder" else {"ok": False, "error": "no database"}
        if report["ok"]:
            with _lock:
                _settled[name] = report
        checks[name] = report
    if checks["database"]["ok"] and checks["migrations"]["ok"]:
        checks["books"] = _books()
    checks["broker"] = {"name": broker_name(setting("Q_BROKER"))}
    return all(report.get("ok", True) for report in checks.values()), checks


def _database() -> dict:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True}
    except Exception as exc:  # the probe reports, it doesn't fail
        return {"ok": False, "error": type(exc).__name__}


def _migrations() -> dict:
    try:
        pending = pending_migrations()
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    if pending:
        return {"ok": False, "pending": len(pending), "error": "run `manage.py bootstrap`"}
    return {"ok": True}


def _books() -> dict:
    try:
        building = list(IngestionJob.objects.first_builds()[:5])
        # A book whose first run is still finishing (its calibration) can't answer yet either.
        answerable = Book.objects.exclude(slug__in=IngestionJob.objects.first_builds().values("book_slug"))
        report = {"ok": not building or answerable.exists()}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}
    if building:
        report["indexing"] = [{"book": job.book_slug, "progress": job.progress_note} for job in building]
    return report


def _embedder() -> dict:
    try:
        embedder = get_embedder()
        return {"ok": True, "name": embedder.name, "dimensions": embedder.dimension}
    except Exception as exc:
        return {"ok": False, "error": str(exc)[:200]}


class ReadyView(APIView):
    """Readiness: public, for load balancers (``bookchat.readiness``)."""

    authentication_classes = []
    permission_classes = [AllowAny]

    @extend_schema(operation_id="ready", responses={200: OpenApiTypes.OBJECT, 503: OpenApiTypes.OBJECT})
    def get(self, request):
        ready, checks = readiness()
        return Response({"status": "ready" if ready else "not_ready", **checks}, status=200 if ready else 503)
