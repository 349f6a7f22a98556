"""Admin for API keys (created here, the key shown once) and, read-only, readers' feedback.

A staff member restricted to some books (``ingestion.roles``) sees and makes only keys bound to one of their
books (a key for every book is not theirs to see or revoke), and only the feedback on their books' conversations.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry

from chat.models import ApiKey, Conversation, Feedback
from ingestion.roles import BookScopedAdmin, allowed_books, within_books


@admin.register(ApiKey)
class ApiKeyAdmin(BookScopedAdmin, admin.ModelAdmin):
    list_display = ("name", "kind", "prefix", "book", "publish_book", "origin_list", "active", "expires_at",
                    "created_at", "last_used_at")
    list_filter = ("kind", "active", ("book", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "prefix", "allowed_origins", "publish_book")
    fields = ("name", "kind", "allowed_origins", "book", "publish_book", "active", "expires_at", "prefix",
              "created_at", "last_used_at")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ["revoke"]

    def get_readonly_fields(self, request, obj=None):
        # A key's kind is part of its value (pk_/sk_): it can't change after it is issued.
        return (*self.readonly_fields, "kind") if obj is not None else self.readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        books = allowed_books(request.user)
        if books is not None and "book" in form.base_fields:  # a restricted user's keys are for one of their books
            form.base_fields["book"].queryset = books.filter(edition_of__isnull=True)
            form.base_fields["book"].required = True
        return form

    @admin.display(description="allowed origins")
    def origin_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.allowed_origins.split()) or "—"

    def save_model(self, request, obj: ApiKey, form, change) -> None:
        raw = None if change else obj.issue()
        super().save_model(request, obj, form, change)
        if raw:
            messages.warning(request, f"Copy the new key now; it is shown only this once: {raw}")

    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request, queryset) -> None:
        keys = list(queryset.filter(active=True))
        count = queryset.update(active=False)
        LogEntry.objects.log_actions(request.user.pk, keys, CHANGE, "Revoked.")
        messages.success(request, f"Revoked {count} key(s).")


@admin.register(Feedback)
class FeedbackAdmin(BookScopedAdmin, admin.ModelAdmin):
    list_display = ("answer_id", "rating", "comment", "channel", "updated_at")
    list_filter = ("rating", "channel")
    search_fields = ("comment", "answer_id")

    def get_queryset(self, request):  # a vote names its conversation, not its book
        queryset = admin.ModelAdmin.get_queryset(self, request)
        if allowed_books(request.user) is None:
            return queryset
        conversations = within_books(Conversation.objects.all(), request.user, "book")
        return queryset.filter(conversation_id__in=conversations.values("pk"))

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
