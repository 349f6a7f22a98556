"""What the admin dashboard shows: answers per day, the confidence-level mix, refusal rate, thumbs (and the count
of assistants' searches, which are audited but are not answers), and each book's open hand-offs to the course staff
with how long the oldest has waited."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from audit import charts
from audit.handoffs import open_by_book
from audit.models import AuditLog
from bookchat.base.conf import setting
from chat.pipeline.confidence import thresholds

S = AuditLog.Status


def review_queue_filter() -> Q:
    """Answers worth a human look: unsure (held back for a confidence below medium), withheld by the grounding
    check, timed out or failed, thumbs down, answered with a confidence below ``REVIEW_CONFIDENCE_BELOW`` (0: below
    the medium level), or answered by the book's own sentences because the language model failed (the reader got
    an answer the operator didn't choose to give, and a reviewer sees whether it served). Refusals ("not covered")
    go to coverage gaps instead, unless a reader voted them down."""
    below = setting("REVIEW_CONFIDENCE_BELOW") or thresholds()[1]
    return Q(review_status=AuditLog.Review.NEW) & (
        Q(status__in=[S.UNSURE, S.WITHHELD, S.TIMEOUT, S.ERROR]) | Q(feedback_rating="down")
        | Q(status=S.ANSWERED, confidence__lt=below) | ~Q(generation_failure=""))


def mix_label(status: str, level: str) -> str:
    return {S.NOT_COVERED: "not covered", S.UNSURE: "unsure", S.WITHHELD: "withheld", S.TIMEOUT: "failed",
            S.ERROR: "failed"}.get(status, level or "low")


def open_handoffs(*, within: list[str] | None = None, book: str | None = None) -> list[dict]:
    """Each book's open hand-offs and how long the oldest has waited (``waited``, a timedelta), books in order;
    ``book``: that book's (a hand-off names its root book: an edition's slug names none)."""
    now = timezone.now()
    found = open_by_book(within)
    return [{"book": slug, "open": row["open"], "oldest": row["oldest"], "waited": now - row["oldest"]}
            for slug, row in sorted(found.items()) if not book or slug == book]


def dashboard(*, days: int = 30, book: str | None = None, within: list[str] | None = None) -> dict:
    """The figures and charts of the last ``days``, of one ``book`` or of all; ``within``: only these books' rows
    (a reviewer restricted to some books), the review-queue count included."""
    today = timezone.localdate()
    start = today - timedelta(days=days - 1)
    everything = AuditLog.objects.all() if within is None else AuditLog.objects.filter(book_slug__in=within)
    rows = everything.filter(created_at__date__gte=start)
    if book:
        rows = rows.filter(book_slug=book)
    # An assistant's searches (MCP ``search_book``) are audited too, but they are not answers.
    searches = rows.filter(status=S.SEARCHED).count()
    rows = rows.exclude(status=S.SEARCHED)
    per_day = {r["day"]: r for r in rows.annotate(day=TruncDate("created_at")).values("day").annotate(
        total=Count("id"), refused=Count("id", filter=Q(status=S.NOT_COVERED)),
        up=Count("id", filter=Q(feedback_rating="up")), down=Count("id", filter=Q(feedback_rating="down")))}
    dates = [start + timedelta(days=i) for i in range(days)]
    labels = [d.strftime("%d %b") for d in dates]
    empty = {"total": 0, "refused": 0, "up": 0, "down": 0}
    daily = [{"date": d, **{k: per_day.get(d, empty)[k] for k in empty}} for d in dates]
    mix = Counter()
    for status, level, n in rows.values_list("status", "confidence_level").annotate(n=Count("id")):
        mix[mix_label(status, level)] += n
    parts = {name: mix.get(name, 0) for name in ("high", "medium", "low", "unsure", "not covered", "withheld",
                                                    "failed")}
    total = sum(d["total"] for d in daily)
    refused = sum(d["refused"] for d in daily)
    up, down = sum(d["up"] for d in daily), sum(d["down"] for d in daily)
    return {
        "days": days, "book": book or "", "total": total, "daily": daily, "mix": parts,
        "refusal_rate": round(100 * refused / total, 1) if total else 0.0, "up": up, "down": down,
        "searches": searches,
        "queue": everything.filter(review_queue_filter()).count(),
        "handoffs": open_handoffs(within=within, book=book),
        "charts": {
            "answers": charts.stacked_bars(f"Answers per day, last {days} days", labels,
                                           {"answers": [d["total"] for d in daily]}),
            "mix": charts.share_bar("Confidence-level mix", parts),
            "refusals": charts.line("Refusal rate per day (not covered ÷ answers)", labels,
                                    [100 * d["refused"] / d["total"] if d["total"] else None for d in daily]),
            "thumbs": charts.stacked_bars("Thumbs up and down per day", labels,
                                          {"up": [d["up"] for d in daily], "down": [d["down"] for d in daily]}),
        },
    }
