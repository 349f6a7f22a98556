"""The audit trail: one denormalised row per answer (and a lighter one per assistant's search), kept for
``AUDIT_RETENTION_DAYS``.

A row copies what it needs (book slug, key name, sources with their headings and URLs)
instead of pointing at it, so it still reads correctly after the book is re-indexed or
deleted, the key revoked, or the conversation purged. Client IPs are stored only as a
keyed hash (see ``audit.recording.hash_ip``). Everything is read-only in the admin except
the review fields.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from audit.landing import landed_section


class AuditLog(models.Model):
    class Status(models.TextChoices):
        ANSWERED = "answered", "answered"
        NOT_COVERED = "not_covered", "not covered (refused)"
        UNSURE = "unsure", "unsure (closest sections instead of a guess)"
        WITHHELD = "withheld", "withheld by the grounding check"
        TIMEOUT = "timeout", "timed out"
        ERROR = "error", "failed"
        SEARCHED = "searched", "searched (passages for an assistant, no answer)"
        STAFF = "staff", "answered by the course staff (a staff answer to the same question)"

    class Review(models.TextChoices):
        NEW = "new", "new"
        OK = "ok", "ok"
        WRONG = "wrong", "wrong"
        NEEDS_DOC_FIX = "needs-doc-fix", "needs doc fix"

    answer_id = models.UUIDField(unique=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    channel = models.CharField(max_length=16, help_text="page, widget, api, stream, cli or mcp")
    book_slug = models.CharField("book", max_length=64, blank=True, db_index=True)
    api_key_id = models.BigIntegerField(null=True, blank=True, help_text="Id of the API key (never the key).")
    api_key_name = models.CharField(max_length=100, blank=True)
    session_id = models.UUIDField(null=True, blank=True, help_text="The conversation.")
    client_ip_hash = models.CharField(max_length=64, blank=True, help_text="Keyed hash of the client IP.")
    learner = models.CharField(max_length=64, blank=True, db_index=True,
                               help_text="The learner's pseudonym, where an LMS launched the page (chat.lti).")
    question = models.TextField()
    selected_text = models.TextField(blank=True)
    resolved_question = models.TextField(blank=True, help_text="The question as searched (follow-ups resolved).")
    answer = models.TextField(blank=True)
    draft_answer = models.TextField(blank=True, help_text="An unsure answer as it was written, before the reader "
                                    "was sent the closest sections instead.")
    generator = models.CharField(max_length=200, blank=True)
    generation_failure = models.CharField(
        "model failure", max_length=32, blank=True,
        help_text="Why the language model gave no answer the reader could see (timeout, connection, copied_prompt, "
                  "…), so that the book's own sentences answered instead; empty when it answered or wasn't asked.")
    generation_failure_message = models.TextField("model failure message", blank=True,
                                                  help_text="The failure as the reader's notice told it.")
    sources = models.JSONField(default=list, blank=True)
    suggestions = models.JSONField(default=list, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    confidence_level = models.CharField(max_length=8, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ANSWERED)
    refused = models.BooleanField(default=False)
    flagged = models.BooleanField(default=False, help_text="Withheld by the grounding check.")
    grounding = models.JSONField(null=True, blank=True)
    retrieval = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    timings_ms = models.JSONField(default=dict, blank=True)
    llm_usage = models.JSONField(null=True, blank=True, help_text="Tokens the language model took (prompt, "
                                 "completion, who counted them); empty when no model was asked.")
    feedback_rating = models.CharField(max_length=4, blank=True, choices=[("up", "thumbs up"),
                                                                           ("down", "thumbs down")])
    feedback_comment = models.TextField(blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    review_status = models.CharField(max_length=16, choices=Review.choices, default=Review.NEW, db_index=True)
    reviewer_note = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    reviewed_at = models.DateTimeField(null=True, blank=True)
    section_url = models.TextField("landed on", blank=True, help_text="The link of the section the question "
                                   "landed on (audit.landing), counted by the map of where students struggle.")
    question_vector = VectorField(null=True, blank=True, help_text="Embedding of the question, filled when "
                                  "coverage gaps are computed.")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "answer (audit)"
        verbose_name_plural = "answers (audit trail)"
        indexes = [models.Index(fields=["status", "created_at"], name="audit_status_created"),
                   models.Index(fields=["book_slug", "created_at"], name="audit_book_created")]
        permissions = [("view_dashboard", "Can view the audit dashboard and coverage gaps"),
                       ("manage_learner_data", "Can export and erase a learner's data")]

    def __str__(self) -> str:
        return self.question[:80]

    def save(self, *args, **kwargs) -> None:
        if not self.section_url:  # where its question landed, from what the answer showed (audit.landing)
            self.section_url = landed_section(self.sources, self.suggestions)
        super().save(*args, **kwargs)


class ReviewQueueItem(AuditLog):
    """The answers worth a human look: unsure or low confidence, withheld or failed, answered by the book's own
    sentences because the language model failed, or thumbs down; not reviewed yet."""

    class Meta:
        proxy = True
        verbose_name = "answer to review"
        verbose_name_plural = "review queue"


class TopicRun(models.Model):
    """One computation of a book's question topics for a period (``audit.topics``): its questions grouped by meaning,
    each topic with its counts, example questions and the sections its answers cite."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    book_slug = models.CharField("book", max_length=64, db_index=True)
    since = models.DateTimeField()
    until = models.DateTimeField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.CharField(max_length=150, blank=True, help_text='"schedule" or the username.')
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    took_seconds = models.FloatField(null=True, blank=True)
    questions = models.PositiveIntegerField(default=0, help_text="Questions clustered.")
    unclustered = models.PositiveIntegerField(default=0, help_text="Of them, those in no topic.")
    topics = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "topics run"

    def __str__(self) -> str:
        return f"{self.book_slug} topics {self.since:%Y-%m-%d}–{self.until:%Y-%m-%d} ({self.status})"

    @classmethod
    def newest_done(cls, book_slug: str) -> TopicRun | None:
        """The newest done run of the book's topics, if any."""
        return cls.objects.filter(book_slug=book_slug, status=cls.Status.DONE).first()


def handoff_token() -> str:
    """The secret of a hand-off's status URL: the student's way back to the reply, without a login."""
    return secrets.token_urlsafe(32)


class Handoff(models.Model):
    """A student's question handed to the course staff from an answer (``audit.handoffs``): a copy of the
    conversation up to that answer (conversations expire; this stays for ``AUDIT_RETENTION_DAYS``), the student's
    note, and the staff's reply, decline or "the book should cover this". No identity beyond the conversation: the
    learner's pseudonym where an LMS launched the page, an e-mail address only where the deployment asks for one
    (``BOOKCHAT_HANDOFF_CONTACT_EMAIL``)."""

    NOTE_MAX = 2000

    class Status(models.TextChoices):
        OPEN = "open", "open"
        ANSWERED = "answered", "answered"
        DECLINED = "declined", "declined"
        COVERAGE = "coverage", "the book should cover this"

    answer_id = models.UUIDField(unique=True, help_text="The answer handed off (its audit row's answer id).")
    token = models.CharField(max_length=64, unique=True, default=handoff_token, editable=False)
    book_slug = models.CharField("book", max_length=64, db_index=True, help_text="The book (its root's slug).")
    session_id = models.UUIDField(null=True, blank=True, help_text="The conversation it came from.")
    channel = models.CharField(max_length=16, help_text="page, widget or api")
    learner = models.CharField(max_length=64, blank=True, db_index=True,
                               help_text="The learner's pseudonym (an LMS launch).")
    contact_email = models.EmailField(blank=True)
    note = models.TextField(blank=True, help_text="What the student added (at most 2,000 characters).")
    conversation = models.JSONField(default=list, blank=True, help_text="The turns up to the answer handed off, "
                                    "oldest first: question, selected text, answer, sources, level.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN, db_index=True)
    reply = models.TextField(blank=True, help_text="The staff's answer, in Markdown (`[n]` cites citation n).")
    citations = models.JSONField(default=list, blank=True, help_text="The sections the reply cites.")
    declined_reason = models.TextField(blank=True, help_text="Why the staff declined, as the student reads it.")
    replied_at = models.DateTimeField(null=True, blank=True)
    replied_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    staff_answer = models.ForeignKey("chat.StaffAnswer", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="handoffs", help_text="The reply, kept to answer the same "
                                     "question again.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    notified_at = models.DateTimeField(null=True, blank=True, help_text="When the book's reviewers were e-mailed.")

    class Meta:
        ordering = ["created_at"]
        verbose_name = "hand-off to the staff"
        verbose_name_plural = "hand-offs to the staff"
        indexes = [models.Index(fields=["book_slug", "status", "created_at"], name="handoff_book_status")]

    def __str__(self) -> str:
        question = self.conversation[-1].get("question", "") if self.conversation else ""
        return f"{self.book_slug}: {question[:60]}"

    @property
    def question(self) -> str:
        """The question whose answer was handed off."""
        return self.conversation[-1].get("question", "") if self.conversation else ""
