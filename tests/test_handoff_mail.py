"""E-mail to a book's reviewers about its new hand-offs (``audit.handoff_mail``, run by ``audit.tasks.
email_new_handoffs`` on the schedule a migration made): one e-mail per reviewer of the book listing its new
hand-offs with their links, batched per ``HANDOFF_EMAIL_MINUTES`` (0: none), superusers written to only about a book
nobody has a role on, and a mail server that refuses the connection (a real closed port) logged and retried at the
next run, never lost. And ``BOOKCHAT_SERVER_URL``, checked at start."""

from __future__ import annotations

import socket
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from django_q.models import Schedule

from audit import handoff_mail, tasks
from audit.models import Handoff
from bookchat.checks import check_settings
from ingestion.models import Book, BookAccess

pytestmark = pytest.mark.django_db


@pytest.fixture
def books():
    return [Book.objects.create(slug=slug, title=slug.title(), embedder_name="test", embedder_dimension=3)
            for slug in ("alpha", "beta", "gamma")]


@pytest.fixture(autouse=True)
def mail(settings, mailoutbox):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "HANDOFF_EMAIL_MINUTES": 15, "SERVER_URL": "https://chat.example.org"}
    return mailoutbox


def user(name: str, *, books=None, email: bool = True, reviewer: bool = True, **flags) -> User:
    made = User.objects.create_user(name, email=f"{name}@example.edu" if email else "", is_staff=True, **flags)
    if reviewer:
        made.groups.add(Group.objects.get(name="Reviewers"))
    if books is not None:
        BookAccess.objects.create(user=made).books.set(books)
    return made


def handoff(book: str, question: str = "Can I import pages from Notion?", **fields) -> Handoff:
    return Handoff.objects.create(answer_id=uuid.uuid4(), book_slug=book, channel="widget", note=fields.pop("note", ""),
                                  conversation=[{"question": question, "answer": "…", "sources": []}], **fields)


def test_the_task_runs_every_minute_on_a_schedule_a_migration_made():
    schedule = Schedule.objects.get(func="audit.tasks.email_new_handoffs")
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == ("I", 1, -1)


def test_a_books_reviewers_each_get_one_email_listing_its_new_hand_offs(books, mail):
    alpha, beta, _ = books
    user("rita", books=[alpha])
    user("ron", books=[alpha, beta])
    user("nina", books=[alpha], email=False)  # no address
    user("sam", books=[alpha], reviewer=False)  # staff who can't see hand-offs
    user("root", is_superuser=True)  # the books have reviewers: not written to
    first = handoff("alpha", "Can I import pages from Notion?", note="I tried twice.\nStill stuck.")
    second = handoff("alpha", "How do I export to PDF?")
    other = handoff("beta", "Where is the glossary?")
    done = tasks.email_new_handoffs()
    assert done["sent"] == {"alpha": [first.pk, second.pk], "beta": [other.pk]} and not done["failed"]
    assert sorted((m.to[0], m.subject) for m in mail) == [
        ("rita@example.edu", "[bookchat] 2 new hand-offs to the course staff: alpha"),
        ("ron@example.edu", "[bookchat] 1 new hand-off to the course staff: beta"),
        ("ron@example.edu", "[bookchat] 2 new hand-offs to the course staff: alpha")]
    assert all(len(m.to) == 1 and not m.cc and not m.bcc for m in mail), "no reviewer sees another's address"
    body = next(m.body for m in mail if m.to == ["rita@example.edu"])
    assert "Can I import pages from Notion?" in body and "How do I export to PDF?" in body
    assert "Note: I tried twice. Still stuck." in body and "glossary" not in body
    assert f"https://chat.example.org/admin/audit/handoff/{first.pk}/change/" in body
    assert {h.notified_at is not None for h in Handoff.objects.all()} == {True}
    assert tasks.email_new_handoffs()["sent"] == {} and len(mail) == 3, "told once"


def test_a_busy_books_reviewers_get_at_most_one_email_per_period(books, mail):
    user("rita", books=[books[0]])
    handoff("alpha")
    start = timezone.now()
    handoff_mail.email_new_handoffs(now=start)
    later = handoff("alpha", "A second question")
    assert handoff_mail.email_new_handoffs(now=start + timedelta(minutes=14))["sent"] == {}, "within the period"
    assert len(mail) == 1
    done = handoff_mail.email_new_handoffs(now=start + timedelta(minutes=15))
    assert done["sent"] == {"alpha": [later.pk]} and len(mail) == 2 and "A second question" in mail[1].body


def test_no_email_with_the_setting_at_zero(books, mail, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "HANDOFF_EMAIL_MINUTES": 0}
    user("rita", books=[books[0]])
    h = handoff("alpha")
    assert handoff_mail.email_new_handoffs()["off"] and mail == []
    assert Handoff.objects.get(pk=h.pk).notified_at is None


def test_a_book_nobody_has_a_role_on_goes_to_superusers_and_unrestricted_reviewers(books, mail):
    user("rita", books=[books[0]])  # alpha's, not gamma's
    user("ursula")  # a reviewer of every book
    user("root", is_superuser=True, reviewer=False)
    user("quiet", is_superuser=True, reviewer=False, email=False)
    user("gone", is_superuser=True, is_active=False)
    handoff("gamma")
    assert handoff_mail.reviewers_of("gamma") == ["root@example.edu", "ursula@example.edu"]
    handoff_mail.email_new_handoffs()
    assert sorted(m.to[0] for m in mail) == ["root@example.edu", "ursula@example.edu"]


def test_a_hand_off_nobody_can_be_told_about_waits_for_a_reviewer(books, mail):
    h = handoff("gamma")
    assert handoff_mail.email_new_handoffs()["nobody"] == ["gamma"] and mail == []
    user("rita", books=[books[2]])
    assert handoff_mail.email_new_handoffs()["sent"] == {"gamma": [h.pk]}


def test_a_hand_off_closed_before_its_email_is_not_told(books, mail):
    user("rita", books=[books[0]])
    handoff("alpha", status=Handoff.Status.DECLINED, declined_reason="no")
    assert handoff_mail.email_new_handoffs()["sent"] == {} and mail == []


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_failing_mail_server_is_logged_and_the_email_sent_at_the_next_run(books, mail, settings, caplog):
    user("rita", books=[books[0]])
    h = handoff("alpha")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", closed_port(), False
    settings.EMAIL_TIMEOUT = 5
    done = tasks.email_new_handoffs()
    assert list(done["failed"]) == ["alpha"] and done["sent"] == {}
    assert "sent again at the next run" in caplog.text
    assert Handoff.objects.get(pk=h.pk).notified_at is None, "not marked sent"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert tasks.email_new_handoffs()["sent"] == {"alpha": [h.pk]} and len(mail) == 1


@pytest.mark.parametrize(("configured", "hosts", "expected"), [
    ("https://chat.example.org/", "127.0.0.1", "https://chat.example.org"),
    ("", "chat.example.org,localhost", "http://chat.example.org:8000"),
    ("", "*", "http://localhost:8000"),
])
def test_links_use_the_server_url_else_the_first_allowed_host(settings, monkeypatch, configured, hosts, expected):
    monkeypatch.delenv("PORT", raising=False)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SERVER_URL": configured, "ALLOWED_HOSTS": hosts}
    assert handoff_mail.server_url() == expected


@pytest.mark.parametrize(("value", "fine"), [
    ("", True), ("https://chat.example.org", True), ("http://10.0.0.5:8000", True), ("http://[::1]:8000/", True),
    ("chat.example.org", False), ("https://chat.example.org/chat", False), ("ftp://x.example", False),
    ("https://chat.example.org?x=1", False), ("javascript:alert(1)", False),
])
def test_a_server_url_that_is_no_address_stops_the_start(settings, value, fine):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "SERVER_URL": value}
    errors = [e for e in check_settings() if e.id == "bookchat.E009"]
    assert (not errors) is fine, errors
