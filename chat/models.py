"""Conversations and their turns, scope calibrations, API keys for the widget and servers, feedback, the
sentence vectors of each passage (``chat.pipeline.sentences``), and the course staff's answers
(``StaffAnswer``).

A ``Turn`` keeps the whole response it gave (sources, confidence…), so the chat page can
show a conversation again and feedback can be checked against the session that got the
answer. Turns live as long as their conversation (purged after ``SESSION_IDLE_MINUTES``
idle); the long-lived record of answers is the audit trail.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from ingestion.models import Book, book_slug_validator


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    book = models.ForeignKey(Book, null=True, on_delete=models.SET_NULL, related_name="conversations")
    created_at = models.DateTimeField(auto_now_add=True)
    last_active_at = models.DateTimeField(db_index=True)
    learner = models.CharField(max_length=64, blank=True, db_index=True,
                               help_text="The learner's pseudonym, where an LMS launched the page (chat.lti).")

    def __str__(self) -> str:
        return str(self.id)


class Turn(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    question = models.TextField()
    resolved_question = models.TextField(help_text="The question as searched, with a follow-up's context.")
    answer = models.TextField()
    answer_id = models.UUIDField(unique=True)
    refused = models.BooleanField(default=False)
    response = models.JSONField(default=dict, blank=True, help_text="The response as the client got it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "created_at", "id"]

    def __str__(self) -> str:
        return self.question[:80]


class ScopeCalibration(models.Model):
    """A book's "not covered" threshold, measured when its passages change (see ``chat.pipeline.calibration``)."""

    book = models.OneToOneField(Book, on_delete=models.CASCADE, related_name="scope_calibration")
    threshold = models.FloatField(help_text="Scope score below which a question is not covered.")
    details = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.book.slug}: {self.threshold:.4f}"


def normalise_origin(value: str) -> str:
    """``scheme://host[:port]`` in lower case, or ValueError: an origin is never a path or a wildcard."""
    value = value.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment \
            or parts.username or parts.password or "*" in value:
        raise ValueError(f"{value!r} is not an origin like https://docs.example.org (scheme, host and port only)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{value!r} has an invalid port") from None
    default = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def hash_key(raw: str) -> str:
    """Keys are 256-bit random tokens, so one SHA-256 is enough to store them safely (no salt or stretching
    is needed against guessing, unlike passwords)."""
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiKey(models.Model):
    """A key for the REST API. Only its hash is stored; the key itself is shown once, when it is created.

    *Publishable* keys (``pk_…``) go in web pages and are accepted only from their allowed
    origins; *secret* keys (``sk_…``) are for servers and are refused from any browser origin.
    """

    PUBLISHABLE, SECRET = "publishable", "secret"
    KINDS = [(PUBLISHABLE, "publishable (pk_…, for the widget in web pages)"),
             (SECRET, "secret (sk_…, for servers)")]

    name = models.CharField(max_length=100, help_text="What the key is for, e.g. the docs site it serves.")
    kind = models.CharField(max_length=12, choices=KINDS, default=PUBLISHABLE)
    prefix = models.CharField(max_length=16, editable=False, help_text="The key's first characters, to recognise "
                              "it; the rest is not stored.")
    hashed = models.CharField(max_length=64, unique=True, editable=False)
    allowed_origins = models.TextField(blank=True, help_text="Publishable keys: one origin per line, like "
                                       "https://docs.example.org or http://localhost:3000. A publishable key with "
                                       "no origin is refused everywhere.")
    book = models.ForeignKey("ingestion.Book", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="api_keys", help_text="Limit the key to one book; empty: every book.")
    publish_book = models.CharField(
        max_length=64, blank=True, validators=[book_slug_validator], verbose_name="publishes",
        help_text="Secret keys only: the slug of the one book this key publishes (POST /api/v1/books/SLUG/sources, "
                  "from the book's CI). Such a key publishes and can't ask; the book need not exist yet.")
    active = models.BooleanField(default=True, help_text="Untick to revoke the key.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from this time on: the old key of a "
                                      "rotation (`apikey rotate`) stays valid until then. Empty: until revoked.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def clean(self) -> None:
        try:
            self.allowed_origins = "\n".join(self.origins())
        except ValueError as exc:
            raise ValidationError({"allowed_origins": str(exc)}) from None
        if self.kind == self.SECRET and self.allowed_origins:
            raise ValidationError({"allowed_origins": "secret keys are for servers: they take no origins"})
        if self.kind == self.PUBLISHABLE and not self.allowed_origins:
            raise ValidationError({"allowed_origins": "a publishable key needs at least one allowed origin: the "
                                                      "sites whose pages may use it"})
        if self.publish_book and self.kind != self.SECRET:
            raise ValidationError({"publish_book": "only a secret key can publish (it is sent by the book's CI, "
                                                   "never from a web page)"})
        if self.publish_book and self.book_id is not None and self.book.slug != self.publish_book:
            raise ValidationError({"book": f"a key that publishes {self.publish_book!r} is for that book only"})

    def origins(self) -> list[str]:
        return [normalise_origin(line) for line in self.allowed_origins.splitlines() if line.strip()]

    def allows_origin(self, origin: str) -> bool:
        try:
            return normalise_origin(origin) in self.origins()
        except ValueError:
            return False

    def issue(self) -> str:
        """Give the key a new random value; store its hash and prefix and return it (shown once)."""
        raw = ("pk_" if self.kind == self.PUBLISHABLE else "sk_") + secrets.token_urlsafe(32)
        self.prefix, self.hashed = raw[:10], hash_key(raw)
        return raw

    @classmethod
    def find(cls, raw: str) -> ApiKey | None:
        return cls.objects.filter(hashed=hash_key(raw)).select_related("book").first()

    @property
    def usable(self) -> bool:
        """Active, and not past its expiry (a rotated key's overlap)."""
        return self.active and (self.expires_at is None or self.expires_at > timezone.now())

    def touch(self) -> None:
        """Record use, at most once a minute (a write per request would cost more than the check)."""
        now = timezone.now()
        if self.last_used_at is None or (now - self.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=self.pk).update(last_used_at=now)


class Feedback(models.Model):
    """A reader's thumbs up or down on one answer, with an optional comment; one per answer (a new vote
    replaces the old one)."""

    UP, DOWN = "up", "down"

    answer_id = models.UUIDField(unique=True)
    conversation_id = models.UUIDField(help_text="The session that got the answer.")
    rating = models.CharField(max_length=4, choices=[(UP, "thumbs up"), (DOWN, "thumbs down")])
    comment = models.TextField(blank=True)
    channel = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"{self.rating} on {self.answer_id}"


class RateCounter(models.Model):
    """Questions counted in the current fixed window of one rate-limit bucket (see ``chat.channels.throttling``)."""

    bucket = models.CharField(max_length=200, primary_key=True)
    window_ends = models.FloatField(help_text="When the window that the first counted request opened ends, in Unix "
                                          "seconds.")
    count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.bucket}: {self.count}"


class SentenceVectors(models.Model):
    """The vectors of one passage's answer units (sentences, list items, table rows), made when the book is
    indexed (see ``chat.pipeline.sentences``). ``key`` names the embedder and the unit texts they were made from: a
    passage whose units no longer match it is embedded again, and passages with equal keys share vectors."""

    chunk = models.OneToOneField("ingestion.Chunk", on_delete=models.CASCADE, primary_key=True,
                                 related_name="sentence_vectors")
    key = models.CharField(max_length=64, db_index=True)
    count = models.PositiveIntegerField(help_text="Units, in the passage's order.")
    vectors = models.BinaryField(help_text="count × dimensions float16 values, row by row.")

    class Meta:
        verbose_name_plural = "sentence vectors"

    def __str__(self) -> str:
        return f"{self.count} sentence vectors of {self.chunk_id}"


class StaffAnswer(models.Model):
    """An answer the course staff wrote for a question the book falls short on (a hand-off's reply kept, or
    ``manage.py staffanswers add``), served to a later question that asks the same thing
    (``chat.pipeline.staff_answers``) unless the book's own answer is high.

    It cites sections of the book (``citations``: each as a source card shows it, with the section's text as it was
    when cited); when indexing removes a cited section or changes its text beyond a small edit, the answer waits
    for review (``NEEDS_REVIEW``) and is not served until staff confirm or edit it."""

    class Status(models.TextChoices):
        ACTIVE = "active", "served"
        NEEDS_REVIEW = "needs_review", "needs review (not served)"
        RETIRED = "retired", "retired (not served)"

    book = models.ForeignKey(Book, on_delete=models.CASCADE, related_name="staff_answers",
                             help_text="The book (its root, for a book with versions or locales).")
    question = models.TextField(help_text="The question as a student asked it; later questions are matched to it.")
    answer = models.TextField(help_text="Markdown; `[n]` cites the n-th citation.")
    citations = models.JSONField(default=list, blank=True,
                                 help_text="The sections cited, each as a source card shows it, with its text then.")
    question_vector = VectorField(null=True, blank=True, help_text="The question's embedding, for matching.")
    embedder = models.CharField(max_length=200, blank=True, help_text="Who made the vector (a new one re-embeds).")
    answer_vector = VectorField(null=True, blank=True, help_text="The answer's embedding as a passage, for matching "
                                "(made when first compared, and again after an edit).")
    answer_key = models.CharField(max_length=32, blank=True, help_text="What the answer's vector was made of: "
                                  "the MD5 of the embedder's name and the answer.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    review_reason = models.TextField(blank=True, help_text="Why it waits for review (a cited section changed…).")
    answered_at = models.DateTimeField(default=timezone.now, help_text="The date a student is shown.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    updated_at = models.DateTimeField(auto_now=True)
    served = models.PositiveIntegerField(default=0, help_text="How many questions it answered.")
    thumbs_up = models.PositiveIntegerField(default=0)
    thumbs_down = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["book", "-answered_at"]
        indexes = [models.Index(fields=["book", "status"], name="staffanswer_book_status")]

    def __str__(self) -> str:
        return self.question[:80]
