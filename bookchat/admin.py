"""The operator's record of what staff did: Django's admin log (every upload, retry, deletion, key, review decision,
and change to a user, their groups and their books) and the command-line log (``bookchat.base.models``), both
read-only. Only superusers see them unless given the view permission."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry

from bookchat.base.models import StaffCommand


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LogEntry)
class AdminLogAdmin(ReadOnly):
    list_display = ("action_time", "user", "action", "content_type", "object_repr", "change")
    list_filter = ("action_flag", ("user", admin.RelatedOnlyFieldListFilter), "content_type")
    search_fields = ("object_repr", "change_message", "user__username")
    date_hierarchy = "action_time"
    list_select_related = ("user", "content_type")

    @admin.display(description="action", ordering="action_flag")
    def action(self, entry: LogEntry) -> str:
        return {ADDITION: "added", CHANGE: "changed", DELETION: "deleted"}.get(
            entry.action_flag, "?")

    @admin.display(description="what changed")
    def change(self, entry: LogEntry) -> str:
        return entry.get_change_message() or "—"


@admin.register(StaffCommand)
class StaffCommandAdmin(ReadOnly):
    list_display = ("at", "machine_user", "action", "target", "command")
    list_filter = ("action",)
    search_fields = ("target", "command", "machine_user")
    date_hierarchy = "at"
