"""Writing the audit trail: one row per answer, after the response has gone out, never failing it.

``chat`` sends ``answered`` with an ``AuditRecord`` (``chat.pipeline.announcements``), whose fields are named as
the row's columns: ``write`` copies each one under its own name, except the few it keeps in other words
(``_NOT_COPIED``), so no list of names here can fall behind the record's. Inside an HTTP request the record waits
until Django's ``request_finished`` (sent when the server has written the whole response,
the last SSE event included), so the write adds nothing to the time a reader waits. Outside
a request (``manage.py ask``, tasks) it is written at once. A write that fails (the table is
locked, gone, the database down) is logged and counted; the answer has already been served.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from audit.models import AuditLog
from chat.models import Feedback
from chat.pipeline.announcements import AuditRecord

logger = logging.getLogger(__name__)

_local = threading.local()
_failures = {"count": 0, "last_error": None, "last_at": None}

# Fields of a record that the row doesn't copy: the outcome becomes its status (``STATUS_OF``), the client's IP a
# keyed hash (``hash_ip``), and why an answer refused is /metrics' (the status says as much to a reviewer).
_NOT_COPIED = frozenset({"outcome", "client_ip", "refusal_reason"})

# A row's status for each of the pipeline's outcomes (``chat.pipeline.announcements.Outcome``): a reviewer sees one
# "unsure" for an unsure answer shown and one held back, one "not covered" for every refusal of a question the book
# doesn't answer. A question the course staff's answer took over has a status of its own ("staff", its level
# "staff" too), so that "answered" still means the book's own answer wherever the rows are counted (the dashboard,
# the review queue, coverage gaps, the map of where students struggle).
STATUS_OF = {
    "answered": AuditLog.Status.ANSWERED,
    "unsure": AuditLog.Status.UNSURE,
    "held_back": AuditLog.Status.UNSURE,
    "not_covered": AuditLog.Status.NOT_COVERED,
    "unanswerable": AuditLog.Status.NOT_COVERED,
    "withheld": AuditLog.Status.WITHHELD,
    "timed_out": AuditLog.Status.TIMEOUT,
    "failed": AuditLog.Status.ERROR,
    "searched": AuditLog.Status.SEARCHED,
    "staff": AuditLog.Status.STAFF,
}


def hash_ip(ip: str) -> str:
    """A keyed hash of a client IP: the key derives from SECRET_KEY and is never stored, so the hash can
    group a visitor's questions but can't be reversed by anyone who reads the table."""
    return salted_hmac("bookchat.audit.client-ip", ip, algorithm="sha256").hexdigest() if ip else ""


def write_failures() -> int:
    """Audit writes that failed in this process since it started."""
    return _failures["count"]


def failure_report() -> dict:
    """What ``/api/v1/health`` shows: this process's failed writes, and the last one's error class and time."""
    return {"write_failures": _failures["count"], "last_error": _failures["last_error"],
            "last_failure_at": _failures["last_at"]}


def on_health_requested(sender, **kwargs) -> dict:
    return {"audit": failure_report()}


def _count_failure(exc: Exception) -> None:
    _failures["count"] += 1
    _failures["last_error"] = type(exc).__name__
    _failures["last_at"] = timezone.now().isoformat()


def on_answered(sender, *, record: AuditRecord, **kwargs) -> None:
    pending = getattr(_local, "pending", None)
    if pending is None:
        write(record)
    else:
        pending.append(record)


def on_request_started(sender, **kwargs) -> None:
    _local.pending = []


def on_request_finished(sender, **kwargs) -> None:
    pending, _local.pending = getattr(_local, "pending", None), None
    for record in pending or ():
        write(record)


def write(record: AuditRecord) -> AuditLog | None:
    """Store one record; on any failure log it, count it and return None."""
    try:
        fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in _NOT_COPIED}
        fields["status"] = STATUS_OF[record.outcome]
        fields["client_ip_hash"] = hash_ip(record.client_ip)
        # A reader may vote in the moment between receiving the answer and this write.
        vote = Feedback.objects.filter(answer_id=record.answer_id).first()
        if vote is not None:
            fields |= {"feedback_rating": vote.rating, "feedback_comment": vote.comment,
                       "feedback_at": vote.updated_at}
        # One INSERT is atomic on its own; inside a caller's transaction a savepoint keeps a failure here from
        # breaking it.
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            return AuditLog.objects.create(**fields)
    except Exception as exc:
        _count_failure(exc)
        logger.exception("writing the audit record of answer %s failed; the answer was served",
                         getattr(record, "answer_id", None))
        return None


def on_search_opened(sender, *, search_id, n: int, book_slug: str | None = None, **kwargs) -> bool | None:
    """Mark section ``n`` of search ``search_id`` opened on the search's row (``retrieval["opened"]``: the numbers
    of the sections opened); True when recorded, False when no such search (of ``book_slug`` or one of its
    editions, when given) has a section ``n``. A failure is logged and counted (None)."""
    try:
        with transaction.atomic():
            rows = AuditLog.objects.select_for_update().filter(answer_id=search_id, status=AuditLog.Status.SEARCHED)
            if book_slug:
                rows = rows.filter(Q(book_slug=book_slug) | Q(book_slug__startswith=f"{book_slug}--"))
            row = rows.first()
            if row is None or not 1 <= n <= len(row.sources or []):
                return False
            row.retrieval = {**(row.retrieval or {}), "opened": sorted({*(row.retrieval or {}).get("opened", ()), n})}
            row.save(update_fields=["retrieval"])
            return True
    except Exception as exc:
        _count_failure(exc)
        logger.exception("recording that a section of search %s was opened failed", search_id)
        return None


def on_feedback(sender, *, answer_id, rating: str, comment: str, **kwargs) -> None:
    try:
        with transaction.atomic():
            AuditLog.objects.filter(answer_id=answer_id).update(
                feedback_rating=rating, feedback_comment=comment, feedback_at=timezone.now())
    except Exception as exc:
        _count_failure(exc)
        logger.exception("copying feedback on answer %s to the audit trail failed", answer_id)
