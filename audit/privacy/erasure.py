"""Export and erase one learner's data (``audit.privacy.learners`` finds it): ``export_learner`` gathers everything
held as one JSON-ready document; ``erase_learner`` deletes their words and links everywhere the inventory says they
are, in one transaction for the database, then rewrites the audit archives that hold their rows and appends the
erasure's tombstone (``audit.privacy.tombstones``).

Decisions where the issue is silent:
- An erased audit row keeps what carries nothing personal (the inventory's not-personal fields: status, levels,
  sections, timings, counts); of its ``retrieval`` and ``grounding`` figures only numbers and truths stay (a
  question's words can hide in their strings). Its conversation id becomes a new random one per erased conversation,
  so "distinct conversations" still counts right on the map of where students struggle.
- A staff answer written from the learner's question stays, without the question: it is emptied, its vector
  dropped, and the answer waits for review (not served) until the staff write the question in their own words.
- A topic's example questions that were the learner's are dropped, and so are its distinctive words that their
  questions hold (the label is made again from the words left).
- The admin log's rows about the learner's audit rows, hand-offs and staff answers lose their text (``object_repr``,
  which holds a question's first words).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, field

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone
from lti_tool.models import LtiUser

from audit.models import AuditLog, Handoff, TopicRun
from audit.privacy import archives, tombstones
from audit.privacy.learners import Learner
from audit.topics import LABEL_TERMS
from chat.channels.access import PAGE_CONVERSATIONS, PAGE_LEARNER
from chat.lti.identity import pseudonym
from chat.models import Feedback, RateCounter, StaffAnswer, Turn

# An erased audit row's fields (the inventory's personal ones): emptied; the links are replaced or emptied apart.
CLEARED_TEXT = ("question", "selected_text", "resolved_question", "answer", "draft_answer", "feedback_comment",
                "generation_failure_message", "error_message", "reviewer_note")
FIGURES = ("retrieval", "grounding")
STAFF_REVIEW = "The student's question was erased at their request: write the question this answers in your own words."
ERASED = "(erased)"
EXCLUDED = {"question_vector"}


@dataclass
class ErasureReport:
    erasure: str
    conversations: int = 0
    turns: int = 0
    feedback: int = 0
    audit_rows: int = 0
    archived_rows: int = 0
    archives: list[str] = field(default_factory=list)
    handoffs: int = 0
    staff_answers: int = 0
    topic_runs: int = 0
    lms_users: int = 0
    page_sessions: int = 0
    rate_counters: int = 0
    admin_log: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def _rows(queryset) -> list[dict]:
    names = [f.attname for f in queryset.model._meta.concrete_fields if f.name not in EXCLUDED]
    return list(queryset.values(*names))


def export_learner(*, learner: Learner) -> dict:
    """Everything held about ``learner`` as one document (JSON-ready with ``default=str``)."""
    conversations = []
    for conversation in _rows(learner.conversations().order_by("created_at")):
        conversation["turns"] = _rows(Turn.objects.filter(conversation_id=conversation["id"]))
        conversations.append(conversation)
    handoffs = learner.handoffs()
    return {
        "exported_at": timezone.now().isoformat(), "learner": learner.as_dict(),
        "conversations": conversations,
        "audit_rows": _rows(learner.audit_rows().order_by("created_at")),
        "archived_audit_rows": archives.learner_rows(learner),
        "feedback": _rows(Feedback.objects.filter(conversation_id__in=learner.sessions)),
        "handoffs": _rows(handoffs.order_by("created_at")),
        "staff_answers_from_their_questions": list(StaffAnswer.objects.filter(
            handoffs__in=handoffs).values("id", "question", "answer", "status")),
        "lms_users": _rows(lms_users(learner)),
    }


def lms_users(learner: Learner):
    """django-lti's users whose pseudonym is one of the learner's."""
    ids = [user.pk for user in LtiUser.objects.select_related("registration")
           if learner.pseudonyms and pseudonym(user.registration.issuer, user.sub) in learner.pseudonyms]
    return LtiUser.objects.filter(pk__in=ids)


def learner_words(learner: Learner) -> set[str]:
    """The learner's questions as asked and as searched (the audit rows', the turns', the hand-offs' copies)."""
    words = set()
    for row in learner.audit_rows().values("question", "resolved_question"):
        words.update(row.values())
    for row in Turn.objects.filter(conversation__in=learner.conversations()).values("question", "resolved_question"):
        words.update(row.values())
    for handoff in learner.handoffs():
        words.update(turn.get("question", "") for turn in handoff.conversation if isinstance(turn, dict))
    for row in archives.learner_rows(learner):
        words.update((row["row"].get("question") or "", row["row"].get("resolved_question") or ""))
    return {text for text in words if text}


def erase_learner(*, learner: Learner, record: bool = True) -> ErasureReport:
    """Delete ``learner``'s words and links everywhere (see the module's docstring); with ``record``, a tombstone
    is appended (a re-applied tombstone doesn't write another)."""
    report = ErasureReport(erasure=uuid.uuid4().hex)
    questions = learner_words(learner)
    with transaction.atomic():
        _erase_database(learner, questions, report)
    report.archived_rows, report.archives = archives.erase(learner, scrub=scrub_row)
    if record:
        tombstones.append(tombstones.tombstone(learner, erasure=report.erasure))
    return report


def _erase_database(learner: Learner, questions: set[str], report: ErasureReport) -> None:
    rows = learner.audit_rows()
    handoffs = learner.handoffs()
    audit_ids = list(rows.values_list("id", flat=True))
    handoff_ids = list(handoffs.values_list("id", flat=True))
    staff_ids = list(StaffAnswer.objects.filter(handoffs__in=handoffs).values_list("id", flat=True))
    report.admin_log = _scrub_admin_log(AuditLog, audit_ids) + _scrub_admin_log(Handoff, handoff_ids) \
        + _scrub_admin_log(StaffAnswer, staff_ids)
    report.staff_answers = StaffAnswer.objects.filter(id__in=staff_ids).update(
        question="", question_vector=None, status=StaffAnswer.Status.NEEDS_REVIEW, review_reason=STAFF_REVIEW)
    report.handoffs = Handoff.objects.filter(id__in=handoff_ids).delete()[1].get(Handoff._meta.label, 0)
    report.feedback = Feedback.objects.filter(conversation_id__in=learner.sessions).delete()[0]
    conversations = learner.conversations()
    report.turns = Turn.objects.filter(conversation__in=conversations).count()
    report.conversations = conversations.delete()[1].get(conversations.model._meta.label, 0)
    report.audit_rows = _erase_audit_rows(audit_ids)
    report.topic_runs = scrub_topics(questions)
    report.lms_users = lms_users(learner).delete()[0]
    report.page_sessions = _delete_page_sessions(learner)
    report.rate_counters = sum(RateCounter.objects.filter(bucket__contains=str(session)).delete()[0]
                               for session in learner.sessions)


def _erase_audit_rows(ids: list[int]) -> int:
    """Clear the rows' words and links; each conversation id becomes a new random one (counts stay true)."""
    new_sessions: dict = {}
    for row in AuditLog.objects.filter(id__in=ids).only("id", "session_id", "retrieval", "grounding"):
        if row.session_id is not None:
            new_sessions.setdefault(row.session_id, uuid.uuid4())
        AuditLog.objects.filter(id=row.id).update(
            session_id=new_sessions.get(row.session_id), retrieval=figures(row.retrieval) or {},
            grounding=figures(row.grounding))
    return AuditLog.objects.filter(id__in=ids).update(learner="", client_ip_hash="", question_vector=None,
                                                      **{name: "" for name in CLEARED_TEXT})


def scrub_row(row: dict, sessions: dict) -> dict:
    """An archived audit row (JSON) erased as ``_erase_audit_rows`` erases a row."""
    if row.get("session_id"):
        row["session_id"] = str(sessions.setdefault(str(row["session_id"]), uuid.uuid4()))
    for name in FIGURES:
        row[name] = figures(row.get(name)) if name == "grounding" else (figures(row.get(name)) or {})
    return row | {"learner": "", "client_ip_hash": ""} | {name: "" for name in CLEARED_TEXT}


def figures(value):
    """Only the numbers, truths and nulls of a JSON value (strings dropped, lists of them emptied)."""
    if isinstance(value, dict):
        kept = {key: figures(item) for key, item in value.items() if not isinstance(item, str)}
        return {key: item for key, item in kept.items() if item is not None or value[key] is None}
    if isinstance(value, list):
        return [figures(item) for item in value if not isinstance(item, str)]
    return None if isinstance(value, str) else value


def scrub_topics(questions: set[str]) -> int:
    """Drop the learner's questions from the topics' examples, and their words from the topics' terms."""
    if not questions:
        return 0
    words = {word for text in questions for word in re.findall(r"\w+", text.lower())}
    changed = 0
    for run in TopicRun.objects.exclude(topics=[]):
        topics = []
        for topic in run.topics:
            examples = [text for text in topic.get("examples", []) if text not in questions]
            terms = [term for term in topic.get("terms", []) if term.lower() not in words]
            topics.append({**topic, "examples": examples, "terms": terms,
                           "label": " · ".join(terms[:LABEL_TERMS])} if terms != topic.get("terms", [])
                          or examples != topic.get("examples", []) else topic)
        if topics != run.topics:
            TopicRun.objects.filter(pk=run.pk).update(topics=topics)
            changed += 1
    return changed


def _scrub_admin_log(model, ids: list) -> int:
    if not ids:
        return 0
    kind = ContentType.objects.get_for_model(model, for_concrete_model=False)
    kinds = [kind, ContentType.objects.get_for_model(model)]
    if model is AuditLog:
        from audit.models import ReviewQueueItem

        kinds.append(ContentType.objects.get_for_model(ReviewQueueItem, for_concrete_model=False))
    return LogEntry.objects.filter(content_type__in=kinds, object_id__in=[str(i) for i in ids]).update(
        object_repr=ERASED)


def _delete_page_sessions(learner: Learner) -> int:
    """The chat page's sessions that hold one of the learner's conversations or their pseudonym."""
    sessions = {str(s) for s in learner.sessions}
    doomed = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        data = session.get_decoded()
        held = set((data.get(PAGE_CONVERSATIONS) or {}).values())
        if held & sessions or data.get(PAGE_LEARNER) in learner.pseudonyms:
            doomed.append(session.pk)
    return Session.objects.filter(pk__in=doomed).delete()[0]
