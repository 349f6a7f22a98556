"""django-q2 tasks of the audit app (scheduled by migrations: daily, and the hand-offs' e-mail every minute)."""

from __future__ import annotations

from audit.handoff_mail import email_new_handoffs as email_books_new_handoffs
from audit.models import TopicRun
from audit.retention import purge_old_records
from audit.topics import queue_every_book, run_topics


def purge_old_audit_records() -> dict:
    return purge_old_records().as_dict()


def compute_book_topics(run_id: int) -> dict:
    """Compute a queued run of a book's topics (``audit.topics.queue_topics``)."""
    run = run_topics(TopicRun.objects.get(pk=run_id))
    return {"run": run.pk, "book": run.book_slug, "status": run.status, "topics": len(run.topics),
            "took_seconds": run.took_seconds}


def recompute_all_topics() -> dict:
    """The daily schedule: a run of the last 30 days' topics queued for every book asked a question in them."""
    return {"queued": [run.pk for run in queue_every_book()]}


def email_new_handoffs() -> dict:
    """Every minute: each book's reviewers e-mailed its new hand-offs, at most once per
    ``HANDOFF_EMAIL_MINUTES`` (``audit.handoff_mail``)."""
    return email_books_new_handoffs()
