"""E-mail to a book's reviewers about its new hand-offs: one e-mail per book listing them, with a link to each in
the admin, batched (``BOOKCHAT_HANDOFF_EMAIL_MINUTES``), through Django's mail (SMTP when ``BOOKCHAT_EMAIL_HOST``
is set, else the console backend: the e-mail is written to the log, as in development).

Decisions:
- Who: the book's reviewers, the active users given the book under "Restricted to books" (``BookAccess``, the
  per-book roles) who may see hand-offs (``audit.view_handoff``: the Reviewers group) and have an e-mail address.
  Superusers and reviewers without a restriction see every book, and a deployment of many courses would flood
  them, so they are written to only about a book nobody has a role on: then its hand-offs still reach someone.
- When: the schedule runs every minute (``audit.tasks.email_new_handoffs``); a book's e-mail goes once its last
  one is at least ``HANDOFF_EMAIL_MINUTES`` old. So the first hand-off after a quiet spell is told within a
  minute, and a busy book's reviewers get at most one e-mail per period. 0 sends none.
- What counts as sent: ``Handoff.notified_at``, written once every recipient's e-mail went. A mail server that
  fails is logged, and the hand-offs stay un-notified, to be sent again at the next run: never lost (a recipient
  whose e-mail went before another's failed may get it twice). A hand-off closed before its e-mail went is not
  told about.
- Links: ``BOOKCHAT_SERVER_URL`` (the address staff open bookchat at) and the admin's path (with
  ``BOOKCHAT_URL_PREFIX``); empty: ``http://`` the first of ``ALLOWED_HOSTS`` on ``PORT``, which is right under
  ``make run``.
"""

from __future__ import annotations

import logging
import os
import smtplib
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from audit.models import Handoff
from bookchat.base.conf import setting
from ingestion.models import Book, BookAccess

logger = logging.getLogger(__name__)

QUESTION_CHARS = 200
NOTE_CHARS = 300


def server_url() -> str:
    """Where staff open bookchat, for links in e-mail: ``SERVER_URL``, else this server as ``make run`` serves it."""
    configured = setting("SERVER_URL").strip().rstrip("/")
    if configured:
        return configured
    hosts = [h.strip() for h in setting("ALLOWED_HOSTS").split(",") if h.strip() and "*" not in h]
    host = hosts[0].lstrip(".") if hosts else "localhost"
    return f"http://{host}:{os.environ.get('PORT', '8000')}"


def reviewers_of(book_slug: str) -> list[str]:
    """The e-mail addresses of the book's reviewers (see the module's docstring), or, when it has none, of the
    superusers and unrestricted reviewers."""
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    book = Book.objects.filter(slug=book_slug).first()
    given = set(BookAccess.objects.filter(books=book).values_list("user_id", flat=True)) if book else set()
    chosen = [u for u in users.filter(pk__in=given) if u.has_perm("audit.view_handoff")]
    if not chosen:
        restricted = BookAccess.objects.values_list("user_id", flat=True)
        chosen = [u for u in users.exclude(pk__in=restricted, is_superuser=False)
                  if u.is_superuser or u.has_perm("audit.view_handoff")]
    return sorted({u.email for u in chosen})


def message_text(book_slug: str, handoffs: list[Handoff]) -> tuple[str, str]:
    """The e-mail's subject and body: each hand-off's question, note and link, oldest first."""
    count = len(handoffs)
    subject = f"[bookchat] {count} new hand-off{'s' if count != 1 else ''} to the course staff: {book_slug}"
    base = server_url()
    lines = [f"Students handed {count} question{'s' if count != 1 else ''} of the book {book_slug} to the course "
             "staff. Reply, mark that the book should cover it, or decline, in the admin:", ""]
    for handoff in handoffs:
        question = " ".join(handoff.question.split())
        lines += [f"- {timezone.localtime(handoff.created_at):%Y-%m-%d %H:%M}: {question[:QUESTION_CHARS]}"
                  + ("…" if len(question) > QUESTION_CHARS else "")]
        if handoff.note:
            note = " ".join(handoff.note.split())
            lines.append(f"  Note: {note[:NOTE_CHARS]}{'…' if len(note) > NOTE_CHARS else ''}")
        lines.append(f"  {base}{reverse('admin:audit_handoff_change', args=[handoff.pk])}")
    lines += ["", f"Every open hand-off: {base}{reverse('admin:audit_handoff_changelist')}?status__exact=open",
              "", f"bookchat writes at most one e-mail per book every {setting('HANDOFF_EMAIL_MINUTES')} minutes "
              "(BOOKCHAT_HANDOFF_EMAIL_MINUTES)."]
    return subject, "\n".join(lines) + "\n"


def due_books(now) -> list[str]:
    """The books with open hand-offs not yet told whose last e-mail is at least ``HANDOFF_EMAIL_MINUTES`` old."""
    pending = set(Handoff.objects.filter(status=Handoff.Status.OPEN, notified_at__isnull=True)
                  .values_list("book_slug", flat=True))
    last = dict(Handoff.objects.filter(book_slug__in=pending, notified_at__isnull=False).order_by()
                .values_list("book_slug").annotate(last=Max("notified_at")))
    period = timedelta(minutes=setting("HANDOFF_EMAIL_MINUTES"))
    return sorted(slug for slug in pending if slug not in last or now - last[slug] >= period)


def email_new_handoffs(*, now=None) -> dict:
    """One e-mail to each due book's reviewers listing its new hand-offs (see the module's docstring); what was
    done, per book: ``sent`` (with the hand-offs told), ``failed`` (retried at the next run), ``nobody`` (no
    recipient has an e-mail address)."""
    if not setting("HANDOFF_EMAIL_MINUTES"):
        return {"sent": {}, "failed": {}, "nobody": [], "off": True}
    now = now or timezone.now()
    done: dict = {"sent": {}, "failed": {}, "nobody": [], "off": False}
    for slug in due_books(now):
        with transaction.atomic():  # the rows stay locked while their e-mail goes: two runs never both send it
            handoffs = list(Handoff.objects.select_for_update(skip_locked=True)
                            .filter(book_slug=slug, status=Handoff.Status.OPEN, notified_at__isnull=True)
                            .order_by("created_at"))
            if not handoffs:
                continue
            recipients = reviewers_of(slug)
            if not recipients:
                done["nobody"].append(slug)
                continue
            try:
                _send(slug, handoffs, recipients)
            except (OSError, smtplib.SMTPException) as exc:
                logger.warning("the e-mail about %d new hand-off(s) of %s to %d reviewer(s) failed (%s); it is sent "
                               "again at the next run", len(handoffs), slug, len(recipients), exc)
                done["failed"][slug] = str(exc)
                continue
            Handoff.objects.filter(pk__in=[h.pk for h in handoffs]).update(notified_at=now)
            done["sent"][slug] = [h.pk for h in handoffs]
    return done


def _send(slug: str, handoffs: list[Handoff], recipients: list[str]) -> None:
    """One e-mail to each recipient (no reviewer sees another's address), over one connection."""
    subject, body = message_text(slug, handoffs)
    with get_connection(fail_silently=False) as connection:
        connection.send_messages([EmailMessage(subject, body, to=[address]) for address in recipients])
