"""Matching a question to the course staff's answers (``chat.models.StaffAnswer``): the active staff answer of the
book that answers what the question asks, or none.

What it reads is what the question already has: its vector (retrieval embedded it: ``Retrieval.vector``, never
embedded again) and its words, as the book's lexicon weighs them (``ingestion.indexing.lexicon``: each word's
inverse document frequency in the book, as BM25 reads it in ``chat.pipeline.lexical``). One query per question
finds the staff questions nearest to its vector (``CANDIDATES``) with, for each, the cosine of the question's vector
with the staff question's and with the staff *answer's* (embedded as a passage), each staff question's words and
the book's document frequency of every word on both sides (``_CANDIDATES_SQL``); the rest is arithmetic:

- ``cosine``: the two questions' cosine (multilingual-e5's; the same question reworded is ~0.9, and so is another
  question worded alike: "… to GitHub Pages?" against "… to GitLab Pages?" is 0.98);
- ``answer``: the question's cosine with the staff answer, as retrieval reads a passage: whether the answer answers
  it. A near-miss is worded like the staff question but its answer answers something else, so it is the difference
  between the two that tells a paraphrase from a near-miss (BENCHMARKS.md, "Staff answers");
- ``overlap``: the IDF-weighted share of the two questions' words that both hold (weighted Jaccard);
- ``unshared``: the IDF of the rarest word only one of the two holds, over the book's highest IDF.

The candidate is the staff answer with the highest ``cosine + answer`` (its question near, its answer relevant); it
matches when the logistic of a weighted sum of its features (``WEIGHTS``, ``BIAS``) is at least ``THRESHOLD``, all
three fitted on development sets by ``python -m bench.fit_staff_matching``, the threshold on held-out folds
(BENCHMARKS.md has how and the figures). The weights weigh the question's likeness to the staff question *against* it
(negative ``cosine`` and ``overlap``): in those sets a student's question worded like a staff question and answered
less well by its answer was another question. So a question is also taken to be a staff question, whatever the
weights say, when it is worded exactly as it (case, spacing and punctuation aside) or is a near copy of it: its
cosine with the staff question at least ``COPY_COSINE`` and every word only one of them holds common in the book
(``unshared`` at most ``COPY_UNSHARED``: "what's …" for "what is …", a stop word or a word a good share of the book's
passages hold added or left out). Without it, the fitted weights would refuse a student who asks the staff question
again in almost its words; no near-miss of the development sets is a near copy (the closest swaps a word of
``unshared`` 0.28: "title" for "URL"). And the other way: a question whose cosine with the staff question is below
``QUESTION_FLOOR`` is another question, however well the staff answer's words answer it. The fitted weights favour a
question answered well by the staff answer over one worded like its question, so without the floor a staff answer
that happens to say "ingest … as a folder" would answer "How do I ingest a folder?" (cosine 0.82 with the cookie
recipe question it answered). Decided:

- An answer's vector is made the first time the staff answer is compared with a question, and again once its
  answer is edited (``answer_key``): one passage embedded once, on that student's time (a few milliseconds).
- A staff answer whose question vector another embedder made (the book was re-embedded since) is skipped, never
  embedded on a student's time; following the book (``chat.pipeline.staff_following``) embeds it again after the
  indexing run that changed the embedder.
- A follow-up (searched with the question before it) and a question about selected text are not matched: a staff
  answer answers a question on its own, and these ask about something the staff never saw.
- ``BOOKCHAT_STAFF_ANSWERS`` off: nothing is matched (replies reach only the student who asked).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from bookchat.base.conf import setting
from chat.models import StaffAnswer
from chat.pipeline.announcements import UNAUDITED_CHANNELS
from chat.pipeline.rendering import render_answer
from chat.pipeline.source_cards import Source
from chat.pipeline.staff_answers import cards
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.lexicon import BOOK_SEARCH_CONFIG
from ingestion.models import Book

LEVEL = "staff"  # an answer's ``confidence_level`` when the course staff wrote it
CANDIDATES = 10  # staff questions nearest in vector, compared further
FEATURES = ("cosine", "answer", "overlap", "unshared")
# Fitted by ``python -m bench.fit_staff_matching`` (BENCHMARKS.md, "Staff answers"): paste its output here.
WEIGHTS = {"cosine": -3.358, "answer": 6.082, "overlap": -1.730, "unshared": 0.620}
BIAS = -2.542
THRESHOLD = 0.611726
COPY_COSINE = 0.95  # a near copy of a staff question (the module's docstring): chosen, not fitted
# Below it, another question whatever the weights say (the module's docstring): unrelated questions of one book are
# 0.78-0.83 apart, the development sets' paraphrases 0.83-0.96 (all but one at 0.85 or more).
QUESTION_FLOOR = 0.85
COPY_UNSHARED = 0.2  # a word in about a fifth of the book's passages or more
VOTES = {"up": "thumbs_up", "down": "thumbs_down"}

_CANDIDATES_SQL = f"""
WITH candidate AS (
    SELECT s.id, s.question, 1 - (s.question_vector <=> %(vector)s::vector) AS cosine,
           regexp_replace(lower(s.question), '[^[:alnum:]]+', '', 'g')
               = regexp_replace(lower(%(question)s), '[^[:alnum:]]+', '', 'g') AS same,
           CASE WHEN s.answer_key = md5(s.embedder || '|' || s.answer)
                 AND vector_dims(s.answer_vector) = %(dimensions)s
                THEN 1 - (s.answer_vector <=> %(vector)s::vector) END AS answered
      FROM {StaffAnswer._meta.db_table} s
     WHERE s.book_id = %(root)s AND s.status = %(active)s AND s.embedder = %(embedder)s
       AND s.question_vector IS NOT NULL AND vector_dims(s.question_vector) = %(dimensions)s
     ORDER BY s.question_vector <=> %(vector)s::vector, s.id
     LIMIT %(limit)s),
word AS (
    SELECT c.id, c.cosine, c.answered, c.same, w.lexeme
      FROM candidate c LEFT JOIN LATERAL unnest(bookchat_to_tsvector({BOOK_SEARCH_CONFIG.replace('%s', '%(book)s')},
                                                                     c.question)) w ON true
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, w.lexeme
      FROM unnest(bookchat_to_tsvector({BOOK_SEARCH_CONFIG.replace('%s', '%(book)s')}, %(question)s)) w)
SELECT word.id, word.cosine, word.answered, word.same, word.lexeme, coalesce(n.chunks, 0),
       (SELECT chunks FROM ingestion_searchstats WHERE book_id = %(book)s)
  FROM word LEFT JOIN ingestion_lexemecount n ON n.book_id = %(book)s AND n.lexeme = word.lexeme
"""


@dataclass(frozen=True)
class Candidate:
    """A staff answer whose question was compared with the student's: its features and score."""

    id: int
    features: dict[str, float]
    score: float
    same: bool = False  # worded as the staff question or a near copy of it (``near_copy``): matched, score 1


@dataclass(frozen=True)
class StaffMatch:
    """The staff answer a question matched, and how well (``score``: the probability that both ask the same)."""

    id: int
    score: float
    features: dict[str, float]


@dataclass(frozen=True)
class StaffReply:
    """A matched staff answer as a student is served it."""

    id: int
    answer: str  # Markdown, ``[n]`` citing ``sources``
    answer_html: str
    sources: list[Source]
    answered_at: datetime
    note: str  # "Answered by the course staff on DATE"


def score(features: dict[str, float]) -> float:
    """The probability that two questions ask the same thing, from their ``FEATURES``."""
    z = BIAS + sum(WEIGHTS[name] * features[name] for name in FEATURES)
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass(frozen=True)
class Compared:
    """What the one query finds for a question: its words, the nearest staff questions (each its cosine with the
    question, the question's cosine with its answer, and its words) and every word's IDF in the book (``most``: the
    highest a word can have)."""

    asked: frozenset[str]
    staff: dict[int, tuple[float, float, frozenset[str]]]
    idf: dict[str, float]
    most: float
    same: frozenset[int] = frozenset()  # staff questions worded as this one (case, spacing and punctuation aside)


def compare(*, book: Book, question: str, vector, limit: int = CANDIDATES) -> Compared:
    """The ``limit`` active staff questions of ``book``'s root nearest to ``question`` (``vector``: its embedding by
    the current embedder), with their answers' cosines, their words and the book's IDF of every word on both sides,
    in one query (and, for a staff answer whose answer has no current vector, one embedding: ``_answer_cosines``)."""
    embedder = get_embedder()
    with connection.cursor() as cursor:
        cursor.execute(_CANDIDATES_SQL, {
            "vector": "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]", "root": book.root.pk,
            "active": StaffAnswer.Status.ACTIVE, "embedder": embedder.name, "dimensions": len(vector),
            "limit": limit, "book": book.pk, "question": question})
        rows = cursor.fetchall()
    asked: set[str] = set()
    staff: dict[int, tuple[float, float | None, set[str]]] = {}
    same: set[int] = set()
    df: dict[str, int] = {}
    for staff_id, cosine, answer, worded_alike, lexeme, chunks, _ in rows:
        if lexeme is not None:
            df[lexeme] = chunks
        if staff_id is None:
            asked.add(lexeme)
            continue
        words = staff.setdefault(staff_id, (float(cosine), answer, set()))[2]
        if worded_alike:
            same.add(staff_id)
        if lexeme is not None:
            words.add(lexeme)
    answers = _answer_cosines({k: a for k, (_, a, _) in staff.items()}, vector, embedder)
    passages = rows[0][6] if rows else None
    if passages:
        idf = {word: math.log(1 + (passages - n + 0.5) / (n + 0.5)) for word, n in df.items()}
        most = math.log(1 + (passages + 0.5) / 0.5)
    else:  # a book never indexed to the end has no statistics: every word weighs the same
        idf, most = dict.fromkeys(df, 1.0), 1.0
    return Compared(frozenset(asked), {k: (c, answers[k], frozenset(w)) for k, (c, _, w) in staff.items()}, idf, most,
                    frozenset(same))


def answer_key(embedder_name: str, answer: str) -> str:
    """What a staff answer's vector is made of (``StaffAnswer.answer_key``; the query computes the same MD5)."""
    return hashlib.md5(f"{embedder_name}|{answer}".encode(), usedforsecurity=False).hexdigest()


def _answer_cosines(found: dict[int, float | None], vector, embedder) -> dict[int, float]:
    """The question's cosine with each staff answer; the answers without a current vector are embedded (as
    passages), stored, and compared here."""
    missing = [k for k, cosine in found.items() if cosine is None]
    cosines = {k: float(c) for k, c in found.items() if c is not None}
    if missing:
        texts = dict(StaffAnswer.objects.filter(pk__in=missing).values_list("pk", "answer"))
        ids = [k for k in missing if k in texts]
        made = embedder.embed_documents([texts[k] for k in ids]) if ids else []
        query = [float(x) for x in vector]
        for k, answer_vector in zip(ids, made, strict=True):
            values = [float(x) for x in answer_vector]
            StaffAnswer.objects.filter(pk=k, answer=texts[k]).update(
                answer_vector=values, answer_key=answer_key(embedder.name, texts[k]))
            cosines[k] = sum(a * b for a, b in zip(values, query, strict=True))
    return {k: cosines.get(k, 0.0) for k in found}


def candidates(*, book: Book, question: str, vector, limit: int = CANDIDATES) -> list[Candidate]:
    """The ``limit`` active staff answers of ``book``'s root nearest to ``question``, each with its features and
    score, the one to consider first (highest ``cosine + answer``); none without a vector or words."""
    if vector is None or not question.strip():
        return []
    compared = compare(book=book, question=question, vector=vector, limit=limit)
    found = []
    for staff_id, (cosine, answer, words) in compared.staff.items():
        features = word_features(compared.asked, words, compared.idf, compared.most) | {"cosine": cosine,
                                                                                      "answer": answer}
        # The same question asked again is that question, whatever the weights say.
        same = staff_id in compared.same or near_copy(features)
        probability = score(features) if features["cosine"] >= QUESTION_FLOOR else 0.0
        found.append(Candidate(staff_id, features, 1.0 if same else probability, same))
    return sorted(found, key=lambda c: (not c.same, -(c.features["cosine"] + c.features["answer"]), c.id))


def near_copy(features: dict[str, float]) -> bool:
    """Whether a question is a near copy of a staff question: as near in vector, and only common words differ."""
    return features["cosine"] >= COPY_COSINE and features["unshared"] <= COPY_UNSHARED


def word_features(asked: frozenset[str], staff: frozenset[str], weight: dict[str, float],
                  most: float) -> dict[str, float]:
    """``overlap`` and ``unshared`` of two questions' words (the module's docstring)."""
    either = asked | staff
    total = sum(weight[w] for w in either)
    shared = sum(weight[w] for w in asked & staff)
    unshared = max((weight[w] for w in either - (asked & staff)), default=0.0)
    return {"overlap": shared / total if total else 0.0, "unshared": unshared / most if most else 0.0}


def match(*, book: Book, question: str, vector) -> StaffMatch | None:
    """The best active staff answer of ``book`` (its root) that asks what ``question`` asks, or None."""
    if not setting("STAFF_ANSWERS"):
        return None
    found = candidates(book=book, question=question, vector=vector)
    if not found or found[0].score < THRESHOLD:
        return None
    best = found[0]
    return StaffMatch(best.id, best.score, best.features)


def reply_for(matched: StaffMatch) -> StaffReply | None:
    """The matched staff answer as a student reads it; None when it is no longer active (retired or sent to review
    since it matched)."""
    staff = StaffAnswer.objects.filter(pk=matched.id, status=StaffAnswer.Status.ACTIVE).first()
    if staff is None:
        return None
    sources = served_cards(staff.citations)
    return StaffReply(staff.pk, staff.answer, render_answer(staff.answer, sources), sources, staff.answered_at,
                      answered_note(staff.answered_at))


def served_cards(citations) -> list[Source]:
    """A staff answer's citations as source cards; one that isn't a citation (an edit gone wrong) is left out rather
    than failing the answer."""
    shown = []
    for citation in citations if isinstance(citations, list) else []:
        try:
            shown += cards([citation])
        except (AttributeError, TypeError):
            continue
    return shown


def answered_note(answered_at: datetime) -> str:
    """What a student is told of a staff answer: "Answered by the course staff on 29 November 2026"."""
    day = timezone.localtime(answered_at) if timezone.is_aware(answered_at) else answered_at
    return f"Answered by the course staff on {day.day} {day:%B %Y}"


def count_served(staff_id: int, *, channel: str) -> None:
    """One more question this staff answer answered (not counted for quality evaluation's questions)."""
    if channel not in UNAUDITED_CHANNELS:
        StaffAnswer.objects.filter(pk=staff_id).update(served=F("served") + 1)


def count_vote(staff_id: int, *, before: str | None, after: str) -> None:
    """A reader's vote on an answer a staff answer gave: ``after`` counted, a changed vote (``before``) moved."""
    if before == after or after not in VOTES:
        return
    changes = {VOTES[after]: F(VOTES[after]) + 1}
    if before in VOTES:
        changes[VOTES[before]] = Greatest(F(VOTES[before]) - 1, 0)
    StaffAnswer.objects.filter(pk=staff_id).update(**changes)
