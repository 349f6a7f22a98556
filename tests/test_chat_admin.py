"""chat.admin: API keys in the admin (the value shown once as it is made, a key's kind fixed once issued, revoking
logged, a staff member restricted to some books making keys only for one of them) and readers' feedback, read-only
and limited to the restricted member's books. The admin pages end to end: tests/test_admin.py, test_book_roles.py."""

from __future__ import annotations

import uuid

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory
from django.utils import timezone

from chat.admin import ApiKeyAdmin, FeedbackAdmin
from chat.models import ApiKey, Conversation, Feedback
from ingestion.models import Book, BookAccess
from tests.test_book_roles import book

pytestmark = pytest.mark.django_db


def request_by(user: User):
    request = RequestFactory().post("/admin/")
    request.user, request.session = user, {}
    request._messages = FallbackStorage(request)
    return request


@pytest.fixture
def superuser() -> User:
    return User.objects.create_superuser("chat-admin-keeper", "keeper@example.org", "pw")


@pytest.fixture
def restricted() -> User:
    """A staff member who may see the book ``mine`` only."""
    user = User.objects.create_user("chat-admin-editor", "editor@example.org", "pw", is_staff=True)
    BookAccess.objects.create(user=user).books.add(book("mine"))
    return user


def keys_admin() -> ApiKeyAdmin:
    return ApiKeyAdmin(ApiKey, admin.site)


def test_a_new_key_is_shown_once_as_it_is_saved_and_an_edit_shows_nothing(superuser):
    request = request_by(superuser)
    key = ApiKey(name="docs site", kind=ApiKey.PUBLISHABLE, allowed_origins="https://docs.example")
    keys_admin().save_model(request, key, form=None, change=False)
    [shown] = [str(m) for m in get_messages(request)]
    assert key.pk is not None and key.prefix in shown and ApiKey.find(shown.rsplit(" ", 1)[1]) == key
    request = request_by(superuser)
    keys_admin().save_model(request, key, form=None, change=True)
    assert list(get_messages(request)) == []


def test_a_keys_kind_is_fixed_once_issued():
    assert "kind" not in keys_admin().get_readonly_fields(None)
    assert "kind" in keys_admin().get_readonly_fields(None, obj=ApiKey())


def test_allowed_origins_are_listed_on_one_line():
    assert keys_admin().origin_list(ApiKey(allowed_origins="https://a.example\nhttps://b.example")) == \
        "https://a.example, https://b.example"
    assert keys_admin().origin_list(ApiKey(allowed_origins="")) == "—"


def test_revoking_deactivates_the_keys_and_logs_each(superuser):
    keys = []
    for name in ("one", "two"):
        key = ApiKey(name=name, kind=ApiKey.SECRET)
        key.issue()
        key.save()
        keys.append(key)
    keys_admin().revoke(request_by(superuser), ApiKey.objects.filter(pk__in=[k.pk for k in keys]))
    assert not ApiKey.objects.filter(pk__in=[k.pk for k in keys], active=True).exists()
    assert LogEntry.objects.filter(user=superuser, change_message="Revoked.").count() == 2


def test_a_restricted_member_makes_keys_only_for_one_of_their_books(restricted, superuser):
    book("not-mine")
    field = keys_admin().get_form(request_by(restricted))().fields["book"]
    assert field.required and [b.slug for b in field.queryset] == ["mine"]
    assert not keys_admin().get_form(request_by(superuser))().fields["book"].required


def test_feedback_is_read_only_and_a_restricted_member_sees_their_books_only(restricted, superuser):
    votes = []
    for voted_book in (Book.objects.get(slug="mine"), book("not-mine")):
        conversation = Conversation.objects.create(book=voted_book, last_active_at=timezone.now())
        votes.append(Feedback.objects.create(answer_id=uuid.uuid4(), conversation_id=conversation.id, rating="up",
                                             channel="page"))
    feedback_admin = FeedbackAdmin(Feedback, admin.site)
    assert list(feedback_admin.get_queryset(request_by(restricted))) == [votes[0]]
    assert set(feedback_admin.get_queryset(request_by(superuser))) >= set(votes)
    assert not feedback_admin.has_add_permission(request_by(superuser))
    assert not feedback_admin.has_change_permission(request_by(superuser), votes[0])
