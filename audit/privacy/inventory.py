"""The data inventory: every field that can hold personal data or a learner's words, declared once, with what it is,
why it is kept, for how long and which retention setting governs it; and every other text-like field of the project's
models declared as not personal. The manual's "Privacy and data" page (``docs/operating/privacy.md``, written by
``make docs``) and the served ``/privacy/`` page are made from it, and ``tests/test_privacy.py`` fails when a model of
the project's apps gains a text, JSON, UUID or binary field that neither list names.

Decisions where the issue is silent:
- Other apps' tables that hold personal data (django-lti's LTI user, Django's sessions and admin log, django-axes'
  login attempts, staff accounts) are declared too, for the page; the coverage test holds the project's own apps.
- ``erased`` says what ``manage.py privacy erase`` does to the field: ``deleted`` (the row goes), ``cleared`` (the
  row stays, the field is emptied or replaced by something unlinkable), ``kept`` (not a learner's: staff data),
  ``left to expire`` (an LMS launch in flight: gone within minutes anyway).
- How long is said in words; ``setting`` names the one setting of ``bookchat.base.conf.SETTINGS`` that governs it,
  whose default the pages show. Feedback and hand-offs have no purge yet: the page says so rather than promise one.
"""

from __future__ import annotations

from dataclasses import dataclass

LEARNER, STAFF = "learner", "staff"
DELETED, CLEARED, KEPT, EXPIRES = "deleted", "cleared", "kept", "left to expire"
# The project's own apps: each of their models' text-like fields is declared below (the coverage test).
PROJECT_APPS = ("bookchat", "ingestion", "chat", "bookchat_lti", "audit")
# Field types that can hold words, identifiers or data: what the coverage test asks to be declared.
TEXT_LIKE = ("CharField", "TextField", "JSONField", "EmailField", "URLField", "UUIDField", "BinaryField",
             "GenericIPAddressField", "SlugField", "RegConfigField")


@dataclass(frozen=True)
class Held:
    """Fields of one model that hold personal data: whose, what, why, how long (``setting`` governs it), and what
    an erasure does to them."""

    model: str
    fields: tuple[str, ...]
    whose: str
    what: str
    why: str
    kept: str
    erased: str
    setting: str = ""


@dataclass(frozen=True)
class NotPersonal:
    """Fields of one model that hold nothing personal, and why."""

    model: str
    fields: tuple[str, ...]
    why: str


HELD: list[Held] = [
    Held("chat.Conversation", ("id", "learner"), LEARNER,
         "A conversation: its id (the `session_id` the browser keeps) and, when an LMS launched the page, the "
         "learner's pseudonym (a keyed hash of the LMS's user id, never a name).",
         "To read a follow-up question with the ones before it.",
         "Until it has been idle this long, then deleted.", DELETED, "SESSION_IDLE_MINUTES"),
    Held("chat.Turn", ("question", "resolved_question", "answer", "answer_id", "response"), LEARNER,
         "Each question of a conversation as asked and as searched, and the answer it got.",
         "To show the conversation again and to answer follow-ups.",
         "Deleted with its conversation.", DELETED, "SESSION_IDLE_MINUTES"),
    Held("chat.Feedback", ("answer_id", "conversation_id", "comment"), LEARNER,
         "A thumbs up or down on an answer, with the reader's optional comment.",
         "To find the answers that need a look (the review queue).",
         "Until erased: nothing purges it yet (the audit row keeps a copy, purged with it).", DELETED),
    Held("audit.AuditLog", ("question", "selected_text", "resolved_question", "answer", "draft_answer",
                            "feedback_comment", "generation_failure_message", "error_message", "grounding",
                            "retrieval"), LEARNER,
         "The audit trail's row of each answer: the question, the passage the reader selected, the answer (and one "
         "held back), the feedback comment, what the checks found.",
         "To review answers, find where the book falls short and show the staff what students ask.",
         "Archived to the data folder's `archive/` and deleted after this many days; the archives stay until "
         "the operator deletes them.", CLEARED, "AUDIT_RETENTION_DAYS"),
    Held("audit.AuditLog", ("answer_id", "session_id", "learner", "client_ip_hash"), LEARNER,
         "What links an audit row to a reader: the answer's and the conversation's ids, the pseudonym, and a keyed "
         "hash of the client's IP address (never the address).",
         "To count questions per conversation (rate limits, where students struggle) and to tell readers apart.",
         "As the row.", CLEARED, "AUDIT_RETENTION_DAYS"),
    Held("audit.AuditLog", ("reviewer_note",), STAFF,
         "A reviewer's note on an answer (it may quote the question).", "For the review of answers.",
         "As the row.", CLEARED, "AUDIT_RETENTION_DAYS"),
    Held("audit.Handoff", ("answer_id", "token", "session_id", "learner", "contact_email", "note", "conversation",
                           "reply", "declined_reason"), LEARNER,
         "A question handed to the course staff: a copy of the conversation up to it, the student's note, an e-mail "
         "address only where the deployment asks for one, the token of the student's status link, and the staff's "
         "reply or reason to decline.",
         "So that the staff can answer and the student can read the answer.",
         "Until erased: nothing purges hand-offs yet.", DELETED),
    Held("chat.StaffAnswer", ("question",), LEARNER,
         "The student's question a staff answer was written from (the answer is the staff's words).",
         "To serve the staff's answer to later students who ask the same thing.",
         "While the staff answer is kept.", CLEARED),
    Held("audit.TopicRun", ("topics",), LEARNER,
         "Where students struggle: each topic's example questions (only where enough conversations asked) and "
         "its distinctive words.", "To show the course staff which topics students struggle with.",
         "Runs over periods older than the audit retention are deleted.", CLEARED, "AUDIT_RETENTION_DAYS"),
    Held("chat.RateCounter", ("bucket",), LEARNER,
         "Rate-limit counters, named by conversation, page session, key or a hash of the client address.",
         "To limit how many questions one reader or address asks.",
         "A few minutes (the rate's window), then deleted.", DELETED),
    Held("bookchat_lti.LaunchRecord", ("key", "value"), LEARNER,
         "An LMS launch in flight: its OIDC state and nonce, and a deep link's request.",
         "To check a launch (a replayed launch finds nothing).", "Ten minutes at most, then deleted.", EXPIRES),
    Held("lti_tool.LtiUser", ("sub", "given_name", "family_name", "name", "email", "picture_url"), LEARNER,
         "The LMS's user: its subject id, and a name, e-mail and picture only where the platform keeps identity "
         "(`BOOKCHAT_LTI_KEEP_IDENTITY`, off by default).",
         "A staff launch's account; a learner's only where identity is kept.", "Until erased.", DELETED),
    Held("sessions.Session", ("session_data",), LEARNER,
         "The chat page's session (a cookie): its conversations' ids and, after an LMS launch, the pseudonym.",
         "To continue the page's conversations.", "Until the session expires (two weeks of no visit).", DELETED),
    Held("admin.LogEntry", ("object_repr",), STAFF,
         "What staff did in the admin; a row about an answer names its question's first words.",
         "Accountability for staff actions.", "Until deleted by a superuser.", CLEARED),
    Held("bookchat.StaffCommand", ("machine_user", "command", "target"), STAFF,
         "What staff did from the command line: the machine's account and the command (never a learner's "
         "identifier: an erasure is named by its tombstone).", "Accountability for staff actions.",
         "Until deleted by a superuser.", KEPT),
    Held("auth.User", ("username", "first_name", "last_name", "email"), STAFF,
         "Staff accounts (an LMS staff launch makes one named by a pseudonym).", "To log in to the admin.",
         "Until the account is deleted.", KEPT),
    Held("axes.AccessAttempt", ("username", "ip_address", "user_agent"), STAFF,
         "Failed admin logins: the user name tried, the address and the browser.", "To lock out password guessing.",
         "Until the lockout ends or is lifted.", KEPT, "LOGIN_LOCKOUT_MINUTES"),
]

NOT_PERSONAL: list[NotPersonal] = [
    NotPersonal("ingestion.Book", ("slug", "title", "base_url", "source_path", "embedder_name", "generator", "version",
                                   "version_label", "version_path", "locale", "search_config", "folders", "language"),
                "A book's configuration, from its sources."),
    NotPersonal("ingestion.DefaultBook", ("slug", "set_by"), "Which book answers by default."),
    NotPersonal("ingestion.Document", ("path", "title", "slug", "url", "category", "front_matter", "content_hash",
                                       "chunker_version", "links_to"), "A page of a book."),
    NotPersonal("ingestion.Chunk", ("id", "heading_path", "anchor", "url", "text", "embedding_key", "search_config"),
                "A passage of a book."),
    NotPersonal("ingestion.IndexRun", ("status", "source", "trigger", "options", "report"), "An indexing run."),
    NotPersonal("ingestion.IngestionJob", ("book_slug", "book_title", "files", "folder", "status", "stage", "report",
                                           "ignored", "error", "task_id", "source", "published_by", "revision",
                                           "source_dir", "error_code", "local_path", "language"),
                "An upload or publish of a book's sources."),
    NotPersonal("ingestion.LexemeCount", ("lexeme",), "A book's word statistics."),
    NotPersonal("chat.ScopeCalibration", ("details",), "A book's scope threshold."),
    NotPersonal("chat.ApiKey", ("name", "kind", "prefix", "hashed", "allowed_origins", "publish_book"),
                "An API key of a site or server (its hash)."),
    NotPersonal("chat.Feedback", ("rating", "channel"), "The vote and the channel, as the audit row counts them."),
    NotPersonal("chat.SentenceVectors", ("key", "vectors"), "The vectors of a book's sentences."),
    NotPersonal("chat.StaffAnswer", ("answer", "citations", "embedder", "answer_key", "status", "review_reason"),
                "The staff's answer and the sections it cites."),
    NotPersonal("audit.AuditLog", ("channel", "book_slug", "api_key_name", "generator", "generation_failure", "sources",
                                   "suggestions", "confidence_level", "status", "error_code", "timings_ms",
                                   "llm_usage", "feedback_rating", "review_status", "section_url"),
                "Counts, timings, levels and the book's sections: what an erased row keeps, so that the metrics and "
                "the map of where students struggle stay true."),
    NotPersonal("audit.TopicRun", ("book_slug", "status", "requested_by", "error"), "A run of the topics."),
    NotPersonal("audit.Handoff", ("book_slug", "channel", "status", "citations"),
                "Which book, the state, and the sections the reply cites."),
    NotPersonal("bookchat.StaffCommand", ("action",), "The kind of action."),
    NotPersonal("bookchat.TaskWorker", ("node", "queue"), "A task worker's host and queue."),
    NotPersonal("bookchat_lti.LtiPlatform", ("frame_origins",), "An LMS platform's settings."),
    NotPersonal("bookchat_lti.LearnerKey", ("key",), "The key of the learners' pseudonyms (a secret, not a person's)."),
]


def declared() -> dict[str, set[str]]:
    """Model label → every field the declaration names, personal or not."""
    names: dict[str, set[str]] = {}
    for entry in [*HELD, *NOT_PERSONAL]:
        names.setdefault(entry.model, set()).update(entry.fields)
    return names


def undeclared() -> list[str]:
    """``app.Model.field`` of every text-like field of the project's models that the declaration doesn't name."""
    from django.apps import apps

    names = declared()
    missing = []
    for model in apps.get_models():
        if model._meta.app_label not in PROJECT_APPS or model._meta.proxy:
            continue
        for field in model._meta.concrete_fields:
            if type(field).__name__ in TEXT_LIKE and field.name not in names.get(model._meta.label, set()):
                missing.append(f"{model._meta.label}.{field.name}")
    return missing


def learner_fields() -> list[Held]:
    return [entry for entry in HELD if entry.whose == LEARNER]
