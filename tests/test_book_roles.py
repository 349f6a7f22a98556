"""Per-book roles (``ingestion.roles``): a reviewer or staff member given some books sees and acts on those books
alone, by list, URL, action, export, dashboard, gaps, upload form and key form; superusers and staff without a
restriction see everything. And what staff do is on record (the admin log, the command-line log)."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import AuditLog
from bookchat.base.models import StaffCommand
from chat.models import ApiKey, Conversation, Feedback
from ingestion.models import Book, BookAccess, Document, IndexRun, IngestionJob
from tests.conftest import run_command

pytestmark = pytest.mark.django_db


def book(slug: str, **fields) -> Book:
    return Book.objects.create(slug=slug, title=slug.title(), embedder_name="test", embedder_dimension=3, **fields)


@pytest.fixture
def books():
    alpha, beta = book("alpha"), book("beta")
    alpha_fr = book("alpha-fr", edition_of=alpha, locale="fr")
    for b in (alpha, beta, alpha_fr):
        Document.objects.create(book=b, path=f"{b.slug}.md", title=f"{b.slug} page")
        IndexRun.objects.create(book=b, status="done")
        IngestionJob.objects.create(book=b, book_slug=b.slug, status="failed", error=f"{b.slug} broke")
        AuditLog.objects.create(answer_id=uuid.uuid4(), channel="page", book_slug=b.slug, question=f"{b.slug} question",
                                answer="…", status="unsure", confidence=0.1, confidence_level="low")
        conversation = Conversation.objects.create(book=b, last_active_at="2026-01-01T00:00Z")
        Feedback.objects.create(answer_id=uuid.uuid4(), conversation_id=conversation.id, rating="down",
                                comment=f"{b.slug} vote", channel="page")
    for b in (alpha, beta, None):
        key = ApiKey(name=f"key for {b.slug if b else 'every book'}", kind=ApiKey.SECRET, book=b)
        key.issue()
        key.save()
    return alpha, beta


def staff(name: str, *, books=None, groups=(), perms=()) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.groups.set(Group.objects.filter(name__in=groups))
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    if books is not None:
        BookAccess.objects.create(user=user).books.set(books)
    return user


@pytest.fixture
def rita(books, client):
    """A reviewer restricted to alpha (and so to its French edition)."""
    client.force_login(staff("rita", books=[books[0]], groups=["Reviewers"]))
    return client


def row(slug: str) -> AuditLog:
    return AuditLog.objects.get(book_slug=slug)


def test_a_restricted_reviewer_lists_only_their_books_rows(rita):
    for name in ("auditlog", "reviewqueueitem"):
        page = rita.get(reverse(f"admin:audit_{name}_changelist"))
        assert page.status_code == 200
        shown = {r.book_slug for r in page.context["cl"].result_list}
        assert shown == {"alpha", "alpha-fr"}, name
        assert b"beta" not in page.content, "not even the book filter names another book"


def test_another_books_row_is_not_found_by_url(rita):
    other = row("beta").pk
    for name in ("auditlog", "reviewqueueitem"):
        assert rita.get(reverse(f"admin:audit_{name}_change", args=[other])).status_code == 404
        assert rita.get(reverse(f"admin:audit_{name}_history", args=[other])).status_code == 404
        assert rita.post(reverse(f"admin:audit_{name}_change", args=[other]),
                         {"review_status": "wrong", "reviewer_note": "x"}).status_code == 404
    assert row("beta").review_status == "new"
    assert rita.get(reverse("admin:audit_auditlog_change", args=[row("alpha").pk])).status_code == 200


def test_actions_and_export_touch_only_their_books_rows(rita):
    url = reverse("admin:audit_auditlog_changelist")
    both = [row("alpha").pk, row("beta").pk]
    rita.post(url, {"action": "mark_wrong", "_selected_action": both})
    assert (row("alpha").review_status, row("beta").review_status) == ("wrong", "new")
    exported = rita.post(url, {"action": "export_csv", "_selected_action": both})
    lines = list(csv.reader(io.StringIO(exported.content.decode("utf-8-sig"))))
    assert [line[4] for line in lines[1:]] == ["alpha question"]
    entry = LogEntry.objects.get(object_id=str(row("alpha").pk))
    assert (entry.user.username, entry.get_change_message()) == ("rita", "Marked wrong.")


def test_dashboard_and_gaps_count_only_their_books(rita):
    data = rita.get(reverse("admin:audit_dashboard")).context["data"]
    assert data["queue"] == 2 and data["mix"]["unsure"] == 2
    assert rita.get(reverse("admin:audit_dashboard"), {"book": "beta"}).context["data"]["mix"]["unsure"] == 0
    gaps = rita.get(reverse("admin:audit_gaps"))
    assert gaps.context["questions"] == 2 and b"alpha question" in gaps.content
    assert b"beta" not in gaps.content and sorted(gaps.context["books"]) == ["alpha", "alpha-fr"]
    assert rita.get(reverse("admin:audit_gaps"), {"book": "beta"}).context["questions"] == 0


@pytest.mark.parametrize("model", ["book", "document", "indexrun"])
def test_book_pages_show_only_their_books(books, client, model):
    client.force_login(staff("vic", books=[books[0]], perms=[f"ingestion.view_{model}"]))
    page = client.get(reverse(f"admin:ingestion_{model}_changelist"))
    assert page.context["cl"].result_count == 2, "the book and its French edition"
    from django.apps import apps

    other = apps.get_model("ingestion", model).objects.get(**({"slug": "beta"} if model == "book" else
                                                             {"book__slug": "beta"}))
    assert client.get(reverse(f"admin:ingestion_{model}_change", args=[other.pk])).status_code == 404


def test_a_restricted_uploader_uploads_only_into_their_books(books, client):
    alpha, beta = books
    client.force_login(staff("sam", books=[alpha], perms=["ingestion.add_ingestionjob",
                                                           "ingestion.view_ingestionjob"]))
    add = reverse("admin:ingestion_ingestionjob_add")
    form = client.get(add).context["adminform"].form
    assert list(form.fields["book"].queryset) == [alpha]

    def upload(**fields):
        page = SimpleUploadedFile("intro.md", b"# Intro\n\nText.\n", content_type="text/markdown")
        return client.post(add, {"upload": page, "folder": "", **fields})

    refused = upload(book=beta.pk)
    assert refused.status_code == 200 and "book" in refused.context["adminform"].form.errors
    refused = upload(new_book_slug="gamma")
    assert "You may upload only into your books" in str(refused.context["adminform"].form.errors)
    jobs = client.get(reverse("admin:ingestion_ingestionjob_changelist")).context["cl"].result_list
    assert {job.book_slug for job in jobs} == {"alpha", "alpha-fr"}
    other = IngestionJob.objects.get(book_slug="beta")
    assert client.get(reverse("admin:ingestion_ingestionjob_change", args=[other.pk])).status_code == 404
    client.post(reverse("admin:ingestion_ingestionjob_changelist"),
                {"action": "retry_jobs", "_selected_action": [other.pk]})
    assert IngestionJob.objects.get(pk=other.pk).status == "failed", "another book's job is not retried"


def test_keys_and_feedback_of_other_books_are_not_shown(books, client):
    alpha, _ = books
    client.force_login(staff("kim", books=[alpha], perms=["chat.view_apikey", "chat.add_apikey",
                                                          "chat.change_apikey", "chat.view_feedback"]))
    keys = client.get(reverse("admin:chat_apikey_changelist")).context["cl"].result_list
    assert [k.name for k in keys] == ["key for alpha"], "not another book's key, nor one for every book"
    every = ApiKey.objects.get(book=None)
    assert client.get(reverse("admin:chat_apikey_change", args=[every.pk])).status_code == 404
    client.post(reverse("admin:chat_apikey_changelist"), {"action": "revoke", "_selected_action": [every.pk]})
    assert ApiKey.objects.get(pk=every.pk).active
    form = client.get(reverse("admin:chat_apikey_add")).context["adminform"].form
    assert form.fields["book"].required and list(form.fields["book"].queryset) == [alpha]
    votes = client.get(reverse("admin:chat_feedback_changelist")).context["cl"].result_list
    assert {v.comment for v in votes} == {"alpha vote", "alpha-fr vote"}


def test_superusers_and_unrestricted_staff_see_every_book(books, client, admin_user):
    client.force_login(admin_user)
    BookAccess.objects.create(user=admin_user).books.set([books[0]])  # a superuser's restriction does not apply
    assert client.get(reverse("admin:audit_auditlog_changelist")).context["cl"].result_count == 3
    client.force_login(staff("ursula", groups=["Reviewers"]))
    assert client.get(reverse("admin:audit_auditlog_changelist")).context["cl"].result_count == 3
    assert client.get(reverse("admin:audit_auditlog_change", args=[row("beta").pk])).status_code == 200


def test_a_restriction_without_books_shows_nothing(books, client):
    client.force_login(staff("nell", books=[], groups=["Reviewers"]))
    assert client.get(reverse("admin:audit_auditlog_changelist")).context["cl"].result_count == 0
    assert client.get(reverse("admin:audit_dashboard")).context["data"]["queue"] == 0


def test_giving_books_on_the_users_page_is_on_record(books, admin_client):
    alpha, _ = books
    user = staff("rob", groups=["Reviewers"])
    url = reverse("admin:auth_user_change", args=[user.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
    data.update({"username": "rob", "is_staff": "on", "is_active": "on", "groups": [g.pk for g in user.groups.all()],
                 "last_login_0": "", "last_login_1": "", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
                 "book_access-TOTAL_FORMS": "1", "book_access-INITIAL_FORMS": "0", "book_access-MIN_NUM_FORMS": "0",
                 "book_access-MAX_NUM_FORMS": "1", "book_access-0-books": [alpha.pk], "book_access-0-user": user.pk})
    data.pop("user_permissions", None)
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    assert list(BookAccess.objects.get(user=user).books.all()) == [alpha]
    entry = LogEntry.objects.filter(object_id=str(user.pk)).latest("action_time")
    assert entry.user.username == "admin" and "Added book restriction “rob: alpha”" in entry.get_change_message()
    listed = admin_client.get(reverse("admin:admin_logentry_changelist"))
    assert "Added book restriction “rob: alpha”" in listed.content.decode()


def test_command_line_acts_are_on_record(books):
    code, out, _ = run_command("apikey", "create", "--kind", "secret", "--name", "ci", "--json")
    assert code == 0
    run_command("lockouts", "--lift", "somebody")
    actions = list(StaffCommand.objects.order_by("at").values_list("action", "command"))
    assert actions == [("created API key", "manage.py apikey create --kind secret"),
                       ("lifted lockout", "manage.py lockouts --lift somebody")]
    assert all(StaffCommand.objects.values_list("machine_user", flat=True))
