"""Conversations: a session's last question/answer pairs, so that follow-ups can be resolved."""

from __future__ import annotations

import uuid

from django.db import models

from ingestion.models import Book


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    book = models.ForeignKey(Book, null=True, on_delete=models.SET_NULL, related_name="conversations")
    created_at = models.DateTimeField(auto_now_add=True)
    last_active_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return str(self.id)


class Turn(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    question = models.TextField()
    resolved_question = models.TextField(help_text="The question as searched, with a follow-up's context.")
    answer = models.TextField()
    answer_id = models.UUIDField(unique=True)
    refused = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "created_at", "id"]

    def __str__(self) -> str:
        return self.question[:80]


class ScopeCalibration(models.Model):
    """A book's "not covered" threshold, measured when its passages change (see ``chat.calibration``)."""

    book = models.OneToOneField(Book, on_delete=models.CASCADE, related_name="scope_calibration")
    threshold = models.FloatField(help_text="Scope score below which a question is not covered.")
    details = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.book.slug}: {self.threshold:.4f}"
