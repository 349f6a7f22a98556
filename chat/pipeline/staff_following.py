"""Staff answers follow the book: after an indexing run changed a book, each active staff answer whose cited section
is gone, or whose text changed beyond a small edit, waits for review (``StaffAnswer.Status.NEEDS_REVIEW``, with a
``review_reason`` naming the section and what happened) and is no longer served; staff confirm or edit it.

**The measure.** A citation keeps the section's text as it was when it was cited (``staff_answers.cite``); the
section's text now is its passages under the same page and heading (``staff_answers.section_text``; a page renamed
or a heading retitled is a section gone). Both are read as words (Markdown markup, punctuation and case dropped:
``terms.plain_text`` then ``terms.words``) and compared with difflib's ratio over the two word sequences
(2 × words in common, in order / words in both), where a word replaced by a near-identical spelling counts as the
same word: a typo fix (letters only, at most one letter added, dropped, changed or two swapped in a word of up to 5
letters, two in a longer one; a number is never a typo: "2015" → "2018" is a change). A section whose similarity is
below ``SMALL_EDIT`` (0.95) has changed: one word of meaning changed in a 10-word section (0.9), a sentence added to
a short section; a typo fixed anywhere, or one word changed in a section of 20 words or more, is a small edit.

**Vectors.** A staff answer whose question vector another embedder made (the book was re-embedded: ``reembed``
sends the same signal) has its question embedded again here, so that matching (which skips it meanwhile) finds it
again.
"""

from __future__ import annotations

import difflib

from chat.models import StaffAnswer
from chat.pipeline.staff_answers import section_text
from chat.pipeline.terms import plain_text, words
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book

SMALL_EDIT = 0.95  # a section's word similarity from which a change is a small edit (the module's docstring)
SHORT_WORD = 5  # letters up to which a typo is one edit; longer words, two


def section_similarity(then: str, now: str) -> float:
    """How alike a section's text then and now is, 0–1, typo fixes forgiven (the module's docstring)."""
    before, after = words(plain_text(then)), words(plain_text(now))
    if not before and not after:
        return 1.0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    same = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            same += i2 - i1
        elif tag == "replace" and i2 - i1 == j2 - j1:
            same += sum(typo(a, b) for a, b in zip(before[i1:i2], after[j1:j2], strict=True))
    return 2 * same / (len(before) + len(after))


def typo(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with a typo fixed (or made): letters only, a small edit distance."""
    if not (a.isalpha() and b.isalpha()):
        return False
    allowed = 1 if max(len(a), len(b)) <= SHORT_WORD else 2
    return abs(len(a) - len(b)) <= allowed and _edits(a, b) <= allowed


def _edits(a: str, b: str) -> int:
    """Edit distance with adjacent swaps (optimal string alignment): "teh" → "the" is one edit."""
    previous, current = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before_previous, previous, current = previous, current, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before_previous[j - 2] + 1)
    return current[len(b)]


def review_reason(book: Book, citations: list[dict], texts: dict | None = None) -> str:
    """Why a staff answer citing ``citations`` of ``book`` needs review now ("" when none does): each cited section
    gone, or changed beyond a small edit. ``texts``: sections' current texts already read, by (page, heading)."""
    texts = {} if texts is None else texts
    reasons = []
    for citation in citations:
        key = (str(citation.get("document", "")), str(citation.get("heading_path", "")))
        if key not in texts:
            texts[key] = section_text(book, *key)
        name = f"“{citation.get('section') or key[1] or key[0]}” ({key[0]})"
        if not texts[key]:
            reasons.append(f"the cited section {name} is no longer in the book")
            continue
        similarity = section_similarity(str(citation.get("text", "")), texts[key])
        if similarity < SMALL_EDIT:
            reasons.append(f"the cited section {name} changed: its words are {similarity:.0%} the same as when it "
                           f"was cited (a small edit keeps {SMALL_EDIT:.0%})")
    return "; ".join(reasons)


def follow_book(book: Book) -> dict:
    """Send to review the active staff answers of ``book`` (a root book: editions have none of their own) whose
    cited sections are gone or changed, and embed again the questions another embedder made. What it did:
    ``{"checked", "needs_review": [ids], "reembedded"}``."""
    texts: dict = {}
    flagged = []
    active = StaffAnswer.objects.filter(book=book, status=StaffAnswer.Status.ACTIVE).order_by("pk")
    checked = 0
    for staff in active.only("pk", "citations"):
        checked += 1
        reason = review_reason(book, staff.citations or [], texts)
        # Only an answer still active is sent (one retired meanwhile stays retired).
        if reason and StaffAnswer.objects.filter(pk=staff.pk, status=StaffAnswer.Status.ACTIVE).update(
                status=StaffAnswer.Status.NEEDS_REVIEW, review_reason=reason[:5000]):
            flagged.append(staff.pk)
    return {"checked": checked, "needs_review": flagged, "reembedded": reembed_questions(book)}


def stale(book: Book):
    """The book's staff answers whose question vector the current embedder did not make."""
    return StaffAnswer.objects.filter(book=book).exclude(embedder=get_embedder().name)


def reembed_questions(book: Book) -> int:
    """Embed again the questions of ``stale`` staff answers; how many."""
    embedder = get_embedder()
    rows = list(stale(book).only("pk", "question"))
    if not rows:
        return 0
    vectors = embedder.embed_queries([row.question for row in rows])
    for row, vector in zip(rows, vectors, strict=True):
        StaffAnswer.objects.filter(pk=row.pk).update(question_vector=list(map(float, vector)), embedder=embedder.name)
    return len(rows)
