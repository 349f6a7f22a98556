"""The operator's record in the admin (``bookchat.admin``): Django's admin log and the command-line log are read-only
for everyone (no add, change or delete, superusers included), and an admin-log row says in words what was done and
what changed."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.test import RequestFactory

from bookchat.admin import AdminLogAdmin, StaffCommandAdmin
from bookchat.base.models import StaffCommand


@pytest.mark.parametrize(("admin_class", "model"), [(AdminLogAdmin, LogEntry), (StaffCommandAdmin, StaffCommand)])
def test_the_records_are_read_only_even_for_a_superuser(admin_class, model):
    request = RequestFactory().get("/")
    request.user = User(username="root", is_superuser=True, is_staff=True, is_active=True)
    model_admin = admin_class(model, admin.site)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request) and not model_admin.has_delete_permission(request)
    assert model_admin.has_view_permission(request)


def test_an_admin_log_row_says_what_was_done_and_what_changed():
    log = AdminLogAdmin(LogEntry, admin.site)
    assert [log.action(LogEntry(action_flag=flag)) for flag in (ADDITION, CHANGE, DELETION, 9)] == [
        "added", "changed", "deleted", "?"]
    assert log.change(LogEntry(action_flag=CHANGE, change_message='[{"changed": {"fields": ["Title"]}}]')) == \
        "Changed Title."
    assert log.change(LogEntry(action_flag=CHANGE, change_message="")) == "—"
