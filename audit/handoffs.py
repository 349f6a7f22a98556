"""Hand-offs: a student hands an answer to the course staff, and the staff reply, decline, or note that the book
should cover it (``audit.models.Handoff``).

Decisions:
- An answer is handed off by its id, as the answer's own reader has it; the id is unguessable, so knowing it is
  what lets one hand it off (as a search id lets one record an open). A key bound to a book hands off only that
  book's answers: another book's answer is "not on record" (404), like one never given or purged by retention.
- The record is the audit trail's row of the answer (kept for ``AUDIT_RETENTION_DAYS``); where its write failed,
  the conversation's turn while it lives. The hand-off copies the conversation up to that answer (the turns of
  its session, at most ``CONVERSATION_TURNS``, oldest first), since conversations expire after 30 idle minutes.
- One hand-off per answer: handing the same answer off again returns the first (``created`` False).
- A reply may be kept as a staff answer of the book (``BOOKCHAT_STAFF_ANSWERS``, on by default), served to later
  students who ask the same thing (``chat.pipeline.staff_answers``); its citations are sections of the book.
- The student reads the outcome through the hand-off's token (``status``): the reply with its citations, or the
  reason it was declined; "the book should cover this" reads as a note that the book's authors were told.
"""

from __future__ import annotations

import re
import uuid

from django.db import IntegrityError, transaction
from django.db.models import Count, Min, Q
from django.utils import timezone

from audit.models import AuditLog, Handoff
from bookchat.base.conf import setting
from bookchat.base.errors import NotFound, RequestError
from chat.models import Turn
from chat.pipeline import staff_answers
from chat.pipeline.announcements import audited_source
from chat.pipeline.rendering import render_answer
from ingestion.models import Book

CONVERSATION_TURNS = 10
MAX_REASON_CHARS = 2000
_CITED = re.compile(r"\[(\d+)\]")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")  # what ``handoff_token`` makes
_SAID = {Handoff.Status.ANSWERED: "answered", Handoff.Status.DECLINED: "declined",
         Handoff.Status.COVERAGE: "marked “the book should cover this”"}  # "this hand-off is … already"


def _not_on_record() -> NotFound:
    return NotFound("there is no answer with this id on record (never given, of another book, or removed by the "
                    "audit trail's retention)", code="unknown_answer")


def _of_book(slug: str, book_slug: str | None) -> bool:
    return book_slug is None or slug == book_slug or slug.startswith(f"{book_slug}--")


def hand_off(answer_id: uuid.UUID, *, note: str = "", channel: str, book_slug: str | None = None,
             contact_email: str = "", learner: str = "") -> tuple[Handoff, bool]:
    """Hand answer ``answer_id`` to the course staff with the student's ``note``; (hand-off, created). A key
    bound to a book passes its slug as ``book_slug``: another book's answer is not on record for it."""
    note = (note or "").strip()
    if len(note) > Handoff.NOTE_MAX:
        raise RequestError(f"the note is {len(note):,} characters; at most {Handoff.NOTE_MAX:,}", code="note_too_long",
                           field="note")
    existing = Handoff.objects.filter(answer_id=answer_id).first()
    if existing is not None:
        if not _of_book(existing.book_slug, book_slug):
            raise _not_on_record()
        return existing, False
    book, session_id, conversation = _conversation(answer_id)
    if not _of_book(book, book_slug):
        raise _not_on_record()
    try:
        with transaction.atomic():
            handoff = Handoff.objects.create(answer_id=answer_id, book_slug=book.split("--", 1)[0],
                                             session_id=session_id, channel=channel[:16], note=note,
                                             contact_email=contact_email[:254], learner=learner[:64],
                                             conversation=conversation)
    except IntegrityError:  # the same answer handed off at the same moment: the first one stands
        return Handoff.objects.get(answer_id=answer_id), False
    return handoff, True


def _conversation(answer_id: uuid.UUID) -> tuple[str, uuid.UUID | None, list[dict]]:
    """The answer's book slug, its conversation and the turns up to it, from the audit trail, else from the
    conversation while it lives."""
    rows = AuditLog.objects.exclude(status=AuditLog.Status.SEARCHED)
    row = rows.filter(answer_id=answer_id).first()
    if row is not None:
        earlier = rows.none() if row.session_id is None else rows.filter(session_id=row.session_id,
                                                                           created_at__lt=row.created_at)
        turns = [*reversed(earlier.order_by("-created_at")[:CONVERSATION_TURNS - 1]), row]
        return row.book_slug, row.session_id, [_audited_turn(t) for t in turns]
    turn = Turn.objects.select_related("conversation__book").filter(answer_id=answer_id).first()
    if turn is None or turn.conversation.book is None:
        raise _not_on_record()
    turns = [*reversed(turn.conversation.turns.filter(created_at__lt=turn.created_at)
                       .order_by("-created_at")[:CONVERSATION_TURNS - 1]), turn]
    return turn.conversation.book.slug, turn.conversation_id, [_kept_turn(t) for t in turns]


def _audited_turn(row: AuditLog) -> dict:
    return {"answer_id": str(row.answer_id), "asked_at": row.created_at.isoformat(), "question": row.question,
            "selected_text": row.selected_text, "answer": row.answer, "sources": row.sources or [],
            "confidence_level": row.confidence_level, "status": row.status}


def _kept_turn(turn: Turn) -> dict:
    response = turn.response or {}
    return {"answer_id": str(turn.answer_id), "asked_at": turn.created_at.isoformat(), "question": turn.question,
            "selected_text": "", "answer": turn.answer,
            "sources": [audited_source(s) for s in response.get("sources", [])],
            "confidence_level": response.get("confidence_level", ""),
            "status": response.get("refusal_reason") or ("answered" if not turn.refused else "not_covered")}


def by_token(token: str) -> Handoff:
    """The hand-off whose status URL holds ``token``; NotFound for any other token (one that can't be a token at
    all, a NUL byte in it say, is not even looked up)."""
    token = str(token or "")
    handoff = Handoff.objects.filter(token=token).first() if _TOKEN.fullmatch(token) else None
    if handoff is None:
        raise NotFound("there is no hand-off with this token", code="unknown_handoff")
    return handoff


def book_of(handoff: Handoff) -> Book:
    book = Book.objects.filter(slug=handoff.book_slug).first()
    if book is None:
        raise RequestError(f"the book {handoff.book_slug!r} is gone; this hand-off can only be declined",
                           code="unknown_book", field="book")
    return book


def cited_answer(book: Book, answer: str, refs: list[str]) -> tuple[str, list[dict]]:
    """A staff answer's text and its citations (``staff_answers.cite``), or the refusal that says what is wrong:
    an empty or over-long answer, a reference that is not a section of ``book``, a ``[n]`` beyond them."""
    cited = staff_answers.cite(book, refs)
    text = staff_answers.check_answer(answer, cited)
    beyond = sorted({int(n) for n in _CITED.findall(text) if not 1 <= int(n) <= len(cited)})
    if beyond:
        raise RequestError(f"the answer cites [{beyond[0]}], but {len(cited)} section(s) are cited",
                           code="invalid_citation", field="answer")
    return text, cited


def _current_status(handoff: Handoff) -> str:
    """The hand-off's status as the database has it now, its row locked until the transaction ends: two reviewers
    acting on one hand-off at once act one after the other, and the second sees what the first did."""
    handoff.status, handoff.staff_answer_id = Handoff.objects.select_for_update().values_list(
        "status", "staff_answer_id").get(pk=handoff.pk)
    return handoff.status


@transaction.atomic
def reply(handoff: Handoff, *, answer: str, citations: list[str], user=None, keep: bool | None = None) -> Handoff:
    """Answer an open (or answered: the reply is edited) hand-off in Markdown citing sections of its book (each a
    passage id or a section URL, ``staff_answers.cite``); with ``keep`` (default: ``BOOKCHAT_STAFF_ANSWERS``) the
    reply becomes a staff answer of the book. The reply must cite only the sections it names."""
    if _current_status(handoff) not in (Handoff.Status.OPEN, Handoff.Status.ANSWERED):
        raise RequestError(f"this hand-off is {_SAID[handoff.status]} already: only an open hand-off, or an "
                           "answered one, takes a reply", code="handoff_closed")
    book = book_of(handoff)
    text, cited = cited_answer(book, answer, citations)
    keep = setting("STAFF_ANSWERS") if keep is None else keep
    if keep and handoff.staff_answer is None:
        handoff.staff_answer = staff_answers.keep(book=book, question=handoff.question, answer=text,
                                                  citations=cited, user=user)
    elif handoff.staff_answer is not None:
        kept = handoff.staff_answer
        kept.answer, kept.citations = text, cited
        kept.save(update_fields=["answer", "citations", "updated_at"])
    handoff.reply, handoff.citations, handoff.status = text, cited, Handoff.Status.ANSWERED
    handoff.replied_at, handoff.replied_by = timezone.now(), user if user is not None and user.is_authenticated \
        else None
    handoff.save()
    return handoff


def decline(handoff: Handoff, *, reason: str, user=None) -> Handoff:
    """Decline a hand-off with a reason the student reads."""
    reason = (reason or "").strip()
    if not reason:
        raise RequestError("say why, for the student", code="empty_reason", field="reason")
    if len(reason) > MAX_REASON_CHARS:
        raise RequestError(f"the reason is {len(reason):,} characters; at most {MAX_REASON_CHARS:,}",
                           code="reason_too_long", field="reason")
    return _close(handoff, Handoff.Status.DECLINED, user, declined_reason=reason)


def note_coverage(handoff: Handoff, *, user=None) -> Handoff:
    """The book should cover this: the hand-off joins the coverage gaps of its book (``audit.gaps``)."""
    return _close(handoff, Handoff.Status.COVERAGE, user)


@transaction.atomic
def _close(handoff: Handoff, status: str, user, **fields) -> Handoff:
    if _current_status(handoff) != Handoff.Status.OPEN:
        raise RequestError(f"this hand-off is {_SAID[handoff.status]} already", code="handoff_closed")
    for name, value in fields.items():
        setattr(handoff, name, value)
    handoff.status, handoff.replied_at = status, timezone.now()
    handoff.replied_by = user if user is not None and user.is_authenticated else None
    handoff.save()
    return handoff


def status(handoff: Handoff) -> dict:
    """What the student reads of their hand-off (its status URL)."""
    answered = handoff.status == Handoff.Status.ANSWERED
    cards = staff_answers.cards(handoff.citations) if answered else []
    return {
        "handoff": handoff.pk, "book": handoff.book_slug, "status": handoff.status,
        "question": handoff.question, "note": handoff.note, "asked_at": handoff.created_at,
        "answer_id": str(handoff.answer_id),
        "reply": {"answer": handoff.reply, "answer_html": render_answer(handoff.reply, cards),
                  "citations": cards, "answered_at": handoff.replied_at} if answered else None,
        "declined_reason": handoff.declined_reason or None,
        "closed_at": handoff.replied_at,
    }


def open_handoffs(book_slugs: list[str] | None = None):
    """Open hand-offs, oldest first (of ``book_slugs`` when given)."""
    rows = Handoff.objects.filter(status=Handoff.Status.OPEN)
    if book_slugs is not None:
        rows = rows.filter(Q(book_slug__in=book_slugs))
    return rows.order_by("created_at")


def open_by_book(book_slugs: list[str] | None = None) -> dict[str, dict]:
    """Each book's open hand-offs: ``{slug: {"open": count, "oldest": when the oldest was handed off}}``, books
    without one left out (of ``book_slugs`` when given: a reviewer's books)."""
    rows = open_handoffs(book_slugs).order_by().values("book_slug").annotate(open=Count("pk"),
                                                                            oldest=Min("created_at"))
    return {row["book_slug"]: {"open": row["open"], "oldest": row["oldest"]} for row in rows}


def summary(handoff: Handoff) -> dict:
    """A hand-off as staff read it in a script (``manage.py handoffs --json``): its question and note, what came
    of it, and the conversation it copied."""
    return {
        "id": handoff.pk, "book": handoff.book_slug, "status": handoff.status, "asked_at": handoff.created_at,
        "channel": handoff.channel, "question": handoff.question, "note": handoff.note,
        "contact_email": handoff.contact_email or None, "learner": handoff.learner or None,
        "conversation": handoff.conversation,
        "reply": handoff.reply or None, "citations": [c.get("url") or c.get("chunk_id") for c in handoff.citations],
        "declined_reason": handoff.declined_reason or None, "closed_at": handoff.replied_at,
        "replied_by": handoff.replied_by.get_username() if handoff.replied_by else None,
        "staff_answer": handoff.staff_answer_id, "notified_at": handoff.notified_at,
    }
