"""What the course staff do to a book's staff answers (``chat.models.StaffAnswer``) besides keeping a reply
(``audit.handoffs.reply``): add one (``manage.py staffanswers add``), edit one, retire one, and serve one again.

Decisions:
- Every change re-reads the citations from the book as it is now (``staff_answers.cite`` on each citation's URL,
  else its passage id), so the text kept with a citation is the section's text when staff last vouched for it: the
  text a later indexing run compares with. A cited section the book no longer has is refused with the reason
  (``not_a_section``): the answer must be edited to cite another.
- Serving again is one act for an answer that waits for review ("confirm": staff read it against the book as it
  is now) and for a retired one ("bring back"); both re-read the citations, clear the review reason and serve it.
- Editing serves the answer (staff have just read it), keeps its counts (served, thumbs), and dates it anew: the
  date a student is shown is when the answer as they read it was written. A new question is embedded again (the
  vector matching compares with).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit.handoffs import cited_answer
from bookchat.base.conf import setting
from bookchat.base.errors import NotFound, RequestError
from chat.models import StaffAnswer
from chat.pipeline import staff_answers
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book

S = StaffAnswer.Status


def check_question(question: str) -> str:
    """The question stripped, or the refusal that says what is wrong with it."""
    question = " ".join((question or "").split())
    if not question:
        raise RequestError("write the question the answer answers", code="empty_question", field="question")
    limit = setting("MAX_QUESTION_CHARS")
    if len(question) > limit:
        raise RequestError(f"the question is {len(question):,} characters; at most {limit:,}",
                           code="question_too_long", field="question")
    return question


def citation_refs(citations: list[dict]) -> list[str]:
    """How each citation names its section again: its URL (it survives re-indexing), else its passage id."""
    return [str(c.get("url") or c.get("chunk_id") or "") for c in citations]


def of_book(book: Book, staff_answer_id) -> StaffAnswer:
    """The staff answer ``staff_answer_id`` of ``book`` (its root); NotFound for any other id."""
    try:
        found = StaffAnswer.objects.filter(book=book.root, pk=int(staff_answer_id)).first()
    except (TypeError, ValueError, OverflowError):
        found = None
    if found is None:
        raise NotFound(f"the book {book.root.slug!r} has no staff answer {str(staff_answer_id)[:40]!r}",
                       code="unknown_staff_answer")
    return found


def add_staff_answer(*, book: Book, question: str, answer: str, citations: list[str], user=None) -> StaffAnswer:
    """A new staff answer of ``book`` to ``question``, citing the sections ``citations`` name (URLs or passage
    ids), served from now on."""
    question = check_question(question)
    text, cited = cited_answer(book.root, answer, citations)
    return staff_answers.keep(book=book.root, question=question, answer=text, citations=cited, user=user)


@transaction.atomic
def edit_staff_answer(staff_answer: StaffAnswer, *, question: str, answer: str, citations: list[str]) -> StaffAnswer:
    """The staff answer rewritten (question, answer, citations), its citations read from the book as it is now;
    it is served again if it waited for review."""
    question = check_question(question)
    text, cited = cited_answer(staff_answer.book, answer, citations)
    if question != staff_answer.question or not staff_answer.embedder:
        embedder = get_embedder()
        staff_answer.question_vector = list(map(float, embedder.embed_query(question)))
        staff_answer.embedder = embedder.name
    if text != staff_answer.answer or citation_refs(cited) != citation_refs(staff_answer.citations):
        staff_answer.answered_at = timezone.now()
    staff_answer.question, staff_answer.answer, staff_answer.citations = question, text, cited
    if staff_answer.status == S.NEEDS_REVIEW:
        staff_answer.status, staff_answer.review_reason = S.ACTIVE, ""
    staff_answer.save()
    return staff_answer


def retire_staff_answer(staff_answer: StaffAnswer) -> StaffAnswer:
    """Stop serving the staff answer (it stays listed, and can be brought back)."""
    if staff_answer.status == S.RETIRED:
        raise RequestError("this staff answer is retired already", code="already_retired")
    staff_answer.status = S.RETIRED
    staff_answer.save(update_fields=["status", "updated_at"])
    return staff_answer


def serve_again(staff_answer: StaffAnswer) -> StaffAnswer:
    """Confirm a staff answer that waits for review, or bring back a retired one: its citations read from the book
    as it is now (refused when a cited section is gone: edit it instead), and served again."""
    if staff_answer.status == S.ACTIVE:
        raise RequestError("this staff answer is served already", code="already_served")
    refs = citation_refs(staff_answer.citations)
    try:
        cited = staff_answers.cite(staff_answer.book, refs)
    except RequestError as exc:
        raise RequestError(f"{exc.message}. The book no longer has a section this answer cites: edit the answer to "
                           "cite another", code=exc.code, field="citations") from None
    staff_answer.citations, staff_answer.status, staff_answer.review_reason = cited, S.ACTIVE, ""
    staff_answer.save(update_fields=["citations", "status", "review_reason", "updated_at"])
    return staff_answer


def staff_answer_summary(staff_answer: StaffAnswer) -> dict:
    """A staff answer as a script reads it (``manage.py staffanswers --json``)."""
    return {
        "id": staff_answer.pk, "book": staff_answer.book.slug, "status": staff_answer.status,
        "question": staff_answer.question, "answer": staff_answer.answer,
        "citations": [{"n": c.get("n"), "heading_path": c.get("heading_path"), "url": c.get("url"),
                       "chunk_id": c.get("chunk_id")} for c in staff_answer.citations],
        "review_reason": staff_answer.review_reason or None, "answered_at": staff_answer.answered_at,
        "served": staff_answer.served, "thumbs_up": staff_answer.thumbs_up, "thumbs_down": staff_answer.thumbs_down,
        "created_by": staff_answer.created_by.get_username() if staff_answer.created_by else None,
    }
