"""Admin for API keys (created here, the key shown once) and, read-only, readers' feedback."""

from __future__ import annotations

from django.contrib import admin, messages

from chat.models import ApiKey, Feedback


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "prefix", "book", "origin_list", "active", "created_at", "last_used_at")
    list_filter = ("kind", "active", "book")
    search_fields = ("name", "prefix", "allowed_origins")
    fields = ("name", "kind", "allowed_origins", "book", "active", "prefix", "created_at", "last_used_at")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ["revoke"]

    def get_readonly_fields(self, request, obj=None):
        # A key's kind is part of its value (pk_/sk_): it can't change after it is issued.
        return (*self.readonly_fields, "kind") if obj is not None else self.readonly_fields

    @admin.display(description="allowed origins")
    def origin_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.allowed_origins.split()) or "—"

    def save_model(self, request, obj: ApiKey, form, change) -> None:
        raw = None if change else obj.issue()
        super().save_model(request, obj, form, change)
        if raw:
            messages.warning(request, f"Copy the new key now; it is shown only this once: {raw}")

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset) -> None:
        count = queryset.update(active=False)
        messages.success(request, f"Revoked {count} key(s).")


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = ("answer_id", "rating", "comment", "channel", "updated_at")
    list_filter = ("rating", "channel")
    search_fields = ("comment", "answer_id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
