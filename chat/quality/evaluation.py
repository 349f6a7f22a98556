"""Measuring answer quality on a question set (the format of ``shared/data/README.md``), through the same
pipeline the API uses.

Each question is validated and prepared exactly as an API request; retrieval is asked for
10 passages so that MRR@10 can be measured, and the answer is then generated from the first
``top_k`` of them, which are the passages a plain request gets. A *hit* is a retrieved
passage that contains one of the question's evidence strings (both sides normalised: NFKC,
case-folded, ``*``/``_``/backtick markers dropped, whitespace collapsed). The summary gives the
figures over all questions and, under ``by_kind``, each kind's own (the ones that apply to it).

A ``code`` question is an answerable one whose answer is a code block: besides the usual
fields it lists ``code``, strings that must all appear inside one code block of the rendered
answer (``answer_html``'s ``<pre>``) for it to count as *code answered as code*.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError, RequestError
from chat.channels.serializers import has_lone_surrogate, validate_ask
from chat.pipeline.answerability import check_retrieved
from chat.pipeline.answering import answer_prepared, prepare
from chat.pipeline.calibration import book_calibration, is_current, scope_threshold
from chat.pipeline.editions import resolve_book
from chat.pipeline.rendering import pre_texts
from chat.pipeline.terms import normalise, split_sentences, strip_citations

KINDS = ("answerable", "unanswerable", "out_of_scope", "selected_text", "follow_up", "code")
SHOULD_REFUSE = ("unanswerable", "out_of_scope")
ANSWER_KIND_METRICS = ("hit_at_1", "hit_at_5", "mrr_at_10", "answer_contains_rate", "citation_precision",
                       "false_refusal_rate", "withheld_rate")
RANKED = 10
CHANCE_RUNS = 500  # draws of a perfectly calibrated model behind ``ece_by_chance``
LEVELS = ("high", "medium", "unsure", "low")  # an answer's levels, and a refusal's
EVIDENCE_PREFIX = 80  # characters of an evidence string an answer must hold to be right, when a question has no answers


class QuestionFileError(BookchatError):
    code = "bad_question_file"


@dataclass
class Question:
    id: str
    question: str
    kind: str
    evidence: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    selected_text: str = ""
    previous: str = ""
    code: list[str] = field(default_factory=list)  # a code question's: all inside one code block of the answer


def load_questions(path: Path | str, *, limit: int | None = None) -> list[Question]:
    """Read a questions.jsonl file; a bad line is an error naming its line."""
    path = Path(path)
    try:
        # JSON lines end at "\n" only: splitlines() would also cut a string holding U+2028 or U+0085.
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionFileError(f"cannot read {path}: {exc}") from None
    questions = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionFileError(f"not JSON: {exc.msg}", file=str(path), line=number) from None
        except RecursionError:
            raise QuestionFileError("not JSON: nested too deeply", file=str(path), line=number) from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise QuestionFileError(f"not JSON: {str(exc)[:100]}", file=str(path), line=number) from None
        if has_lone_surrogate(item):
            raise QuestionFileError("an unpaired UTF-16 surrogate escape (\\ud800-\\udfff) is not text",
                                    file=str(path), line=number)
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            raise QuestionFileError("each line must be an object with a string 'question'", file=str(path),
                                    line=number)
        kind = item.get("kind", "answerable")
        if kind not in KINDS:
            raise QuestionFileError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})", file=str(path), line=number)
        lists = {key: item.get(key) or [] for key in ("evidence", "answers", "code")}
        if not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in lists.values()):
            raise QuestionFileError("evidence, answers and code must be lists of strings", file=str(path),
                                    line=number)
        if kind == "code" and not any(c.strip() for c in lists["code"]):
            raise QuestionFileError("a code question lists the strings its code block holds under 'code'",
                                    file=str(path), line=number)
        questions.append(Question(id=str(item.get("id", number)), question=item["question"], kind=kind,
                                  evidence=lists["evidence"], answers=lists["answers"],
                                  selected_text=item.get("selected_text") or "", previous=item.get("previous") or "",
                                  code=[c for c in lists["code"] if c.strip()]))
        if limit and len(questions) >= limit:
            break
    if not questions:
        raise QuestionFileError(f"{path} holds no questions")
    return questions


def _hit_rank(chunk_texts: list[str], evidence: list[str]) -> int | None:
    wanted = [normalise(e) for e in evidence if e.strip()]
    for rank, text in enumerate(chunk_texts, 1):
        body = normalise(text)
        if any(w in body for w in wanted):
            return rank
    return None


def answer_right(q: Question, answer: str, *, refused: bool) -> bool | None:
    """Whether an answer is right, for the confidence figures: it contains one of the question's short answers
    (or, without them, the start or a sentence of one of its evidence strings); an answer to a question that
    should be refused is wrong. ``None`` when nothing says (a refusal, or an answerable question with neither)."""
    if refused:
        return None
    if q.kind in SHOULD_REFUSE:
        return False
    said = normalise(strip_citations(answer))
    if q.answers:
        return any(normalise(a) in said for a in q.answers if a.strip())
    # Without short answers: the start of an evidence string, or one of its sentences, quoted.
    pieces = [p for e in q.evidence for p in (normalise(e)[:EVIDENCE_PREFIX], *map(normalise, split_sentences(e)))
              if len(p) >= 20]
    return any(p in said for p in pieces) if pieces else None


def evaluate_question(q: Question, *, book: str, top_k: int, answer_all: bool = False) -> dict:
    """Ask one question through the pipeline; the per-question record of ``--details``. ``answer_all``: answer
    even a question the scope check would refuse (``in_scope`` says what it decided; ``answerable``, what the
    answerability check would), for fitting confidence."""
    started = time.monotonic()
    record = {"id": q.id, "kind": q.kind, "question": q.question}
    try:
        session = None
        if q.kind == "follow_up" and q.previous:
            first = prepare(validate_ask({"question": q.previous, "book": book}, channel="evaluate"))
            session = answer_prepared(first).response.session_id
        data = {"question": q.question, "book": book, "max_results": max(RANKED, top_k)}
        if q.selected_text:
            data["selected_text"] = q.selected_text
        if session:
            data["session_id"] = session
        started = time.monotonic()
        prepared = prepare(validate_ask(data, channel="evaluate"))
        ranked = prepared.retrieval.chunks
        prepared.retrieval.chunks = ranked[:top_k]
        in_scope = prepared.in_scope
        if answer_all:
            prepared.in_scope = True
        answered = answer_prepared(prepared)
        response, verdict = answered.response, answered.verdict
    except RequestError as exc:
        record.update(error=exc.code, message=exc.message, latency_ms=int((time.monotonic() - started) * 1000))
        return record
    latency = int((time.monotonic() - started) * 1000)
    texts = {c.id: c.text for c in ranked}
    cited = [s.chunk_id for s in response.sources if s.cited]
    record.update(
        retrieved=[{"chunk_id": c.id, "heading_path": c.heading_path, "score": round(c.score, 4)} for c in ranked],
        hit_rank=_hit_rank([c.text for c in ranked], q.evidence) if q.evidence else None,
        answer=response.answer, refused=response.refused, refusal_reason=response.refusal_reason,
        withheld=response.flagged_for_review,
        confidence=response.confidence, confidence_level=response.confidence_level,
        right=answer_right(q, response.answer, refused=response.refused or response.flagged_for_review),
        draft_right=answer_right(q, verdict.draft_answer, refused=False) if verdict.draft_answer else None,
        in_scope=in_scope, features=verdict.features,
        scope_score=response.retrieval.scope_score, generator=response.generator,
        cited=cited,
        cited_hits=sum(_hit_rank([texts[c]], q.evidence) is not None for c in cited) if q.evidence else None,
        answer_contains=(any(normalise(a) in normalise(response.answer) for a in q.answers)
                         if q.answers else None),
        latency_ms=latency,
    )
    if q.kind == "code":
        record["code_as_code"] = not response.refused and code_in_one_block(response.answer_html, q.code)
    if answer_all:  # what the answerability check says of these passages, even where it is off (fitting reads it)
        record["answerable"] = check_retrieved(prepared.resolved_question, prepared.retrieval.chunks,
                                               selected_text=q.selected_text).answerable
    return record


def code_in_one_block(answer_html: str, code: list[str]) -> bool:
    """Whether every string of ``code`` is inside one and the same code block (``<pre>``) of the answer."""
    return any(all(c in block for c in code) for block in pre_texts(answer_html))


def _rate(items: list[dict], predicate) -> float | None:
    return round(sum(1 for r in items if predicate(r)) / len(items), 4) if items else None


def _answer_quality(ok: list[dict]) -> dict:
    """Retrieval and answer figures over records that were evaluated without error (any mix of kinds)."""
    graded = [r for r in ok if r.get("_has_evidence")]  # should be answered, and has evidence to find

    def hit_at(k):
        return _rate(graded, lambda r: r["hit_rank"] is not None and r["hit_rank"] <= k)

    answered = [r for r in graded if not r["refused"] and not r["withheld"] and r["cited"]]
    cited_total = sum(len(r["cited"]) for r in answered)
    contains = [r for r in ok if r.get("answer_contains") is not None and r["kind"] not in SHOULD_REFUSE]
    return {
        "hit_at_1": hit_at(1),
        "hit_at_3": hit_at(3),
        "hit_at_5": hit_at(5),
        "mrr_at_10": round(sum(1 / r["hit_rank"] for r in graded if r["hit_rank"]) / len(graded), 4) if graded
        else None,
        "answer_contains_rate": _rate(contains, lambda r: r["answer_contains"]),
        "citation_precision": round(sum(r["cited_hits"] for r in answered) / cited_total, 4) if cited_total else None,
        "false_refusal_rate": _rate([r for r in ok if r["kind"] not in SHOULD_REFUSE], lambda r: r["refused"]),
        "withheld_rate": _rate(ok, lambda r: r["withheld"]),
    }


def by_kind(records: list[dict]) -> dict:
    """Per kind present: ``n`` and the figures that apply to it (``ANSWER_KIND_METRICS`` or ``refused_rate``)."""
    figures = {}
    for kind in KINDS:
        of_kind = [r for r in records if r["kind"] == kind]
        if not of_kind:
            continue
        ok = [r for r in of_kind if "error" not in r]
        if kind in SHOULD_REFUSE:
            figures[kind] = {"n": len(of_kind), "refused_rate": _rate(ok, lambda r: r["refused"])}
        else:
            quality = _answer_quality(ok)
            figures[kind] = {"n": len(of_kind), **{m: quality[m] for m in ANSWER_KIND_METRICS}}
            if kind == "code":
                figures[kind]["code_answered_as_code"] = _rate(ok, lambda r: r["code_as_code"])
    return figures


def levels_by_kind(records: list[dict]) -> dict:
    """Per kind present: how many answers at each level and, for a kind that should be answered, the share right
    at each level (of the answers ``answer_right`` can judge) with its 95 % interval; for a kind that should be
    refused, every answer is wrong, so its counts say it all."""
    out = {}
    for kind in KINDS:
        if not any(r["kind"] == kind for r in records):
            continue
        answered = [r for r in records if r["kind"] == kind and "error" not in r and not r["refused"]
                    and not r["withheld"]]
        figures = {"answers": {lvl: sum(1 for r in answered if r["confidence_level"] == lvl) for lvl in LEVELS[:3]}}
        if kind not in SHOULD_REFUSE:
            judged = [r for r in answered if r.get("right") is not None]
            figures["precision"] = {lvl: _rate([r for r in judged if r["confidence_level"] == lvl],
                                               lambda r: r["right"]) for lvl in LEVELS[:3]}
            figures["precision_interval"] = {lvl: wilson_interval([bool(r["right"]) for r in judged
                                                                    if r["confidence_level"] == lvl])
                                             for lvl in LEVELS[:3]}
        out[kind] = figures
    return out


def confidence_report(records: list[dict], *, by_chance: bool = True) -> dict:
    """How far the confidence can be relied on. Over the answers to questions that should be answered and can
    be judged (``answer_right``): the share right at each level (``precision``) and its 95 % interval, the
    expected calibration error over ten bins (``ece``; the bins are ``reliability``) beside the one a perfectly
    calibrated model would show on the same answers by chance (``ece_by_chance``; ``by_chance=False`` skips its
    draws), how well confidence tells right from wrong at all (``discrimination``), and the risk–coverage curve
    (answers taken from the most confident down: the share of those questions answered, and the share of those
    answers wrong). Besides: the share of all questions answered (``coverage``), of those that should be answered
    answered at all and answered high, the questions that should have been refused but were answered, per
    level, and the refusals per reason."""
    ok = [r for r in records if "error" not in r]
    answered = [r for r in ok if not r["refused"] and not r["withheld"]]
    should_answer = [r for r in ok if r["kind"] not in SHOULD_REFUSE]
    judged = [r for r in answered if r["kind"] not in SHOULD_REFUSE and r.get("right") is not None]
    levels = LEVELS
    confidences = [r["confidence"] for r in judged]
    bins = _tenths(confidences)
    reliability = []
    for tenth in sorted(set(bins.tolist())):
        in_bin = [r for r, b in zip(judged, bins, strict=True) if b == tenth]
        reliability.append({"from": tenth / 10, "to": (tenth + 1) / 10, "n": len(in_bin),
                            "confidence": round(float(np.mean([r["confidence"] for r in in_bin])), 4),
                            "right": round(float(np.mean([bool(r["right"]) for r in in_bin])), 4)})
    ece = calibration_error(confidences, [bool(r["right"]) for r in judged]) if judged else None
    ranked = sorted(judged, key=lambda r: -r["confidence"])
    total = sum(1 for r in should_answer if r.get("right") is not None or r.get("draft_right") is not None
                or r["refused"] or r["withheld"])
    curve, wrong = [], 0
    steps = {max(1, round(len(ranked) * f / 10)) for f in range(1, 11)} if ranked else set()
    for n, r in enumerate(ranked, 1):
        wrong += not r["right"]
        if n in steps:
            curve.append({"confidence": r["confidence"], "coverage": round(n / total, 4), "risk": round(wrong / n, 4)})
    return {
        "judged": len(judged),
        "levels": {level: sum(1 for r in judged if r["confidence_level"] == level) for level in levels},
        "precision": {level: _rate([r for r in judged if r["confidence_level"] == level], lambda r: r["right"])
                      for level in levels},
        "precision_interval": {level: wilson_interval([bool(r["right"]) for r in judged
                                                        if r["confidence_level"] == level]) for level in levels},
        "ece": round(float(ece), 4) if judged else None,
        "ece_by_chance": round(chance_calibration_error(confidences), 4) if judged and by_chance else None,
        "discrimination": discrimination([r["confidence"] for r in judged if r["right"]],
                                         [r["confidence"] for r in judged if not r["right"]]),
        "reliability": reliability,
        "risk_coverage": curve,
        "coverage": _rate(ok, lambda r: not r["refused"] and not r["withheld"]),
        "answerable_answered": _rate(should_answer, lambda r: not r["refused"] and not r["withheld"]),
        "answerable_high": _rate(should_answer, lambda r: not r["refused"] and r["confidence_level"] == "high"),
        "should_refuse_answered": {level: sum(1 for r in answered if r["kind"] in SHOULD_REFUSE
                                              and r["confidence_level"] == level) for level in levels},
        "refusals": {reason: sum(1 for r in ok if r.get("refusal_reason") == reason)
                     for reason in ("not_covered", "unanswerable", "unsure")},
    }


def _tenths(confidences) -> np.ndarray:
    """Each confidence's bin: its tenth, 0–9 (1.0 in the last)."""
    return np.minimum((np.asarray(confidences, dtype=float) * 10).astype(int), 9)


def calibration_error(confidences: list[float], right: list[bool]) -> float:
    """Expected calibration error over the ten bins of ``reliability``: how far each bin's mean confidence is from
    its share right, weighted by the bin's answers."""
    bins = _tenths(confidences)
    values, hits = np.asarray(confidences, dtype=float), np.asarray(right, dtype=float)
    return float(sum(abs(values[bins == b].mean() - hits[bins == b].mean()) * (bins == b).sum()
                     for b in np.unique(bins)) / len(values))


def chance_calibration_error(confidences: list[float], runs: int = CHANCE_RUNS) -> float:
    """The calibration error a perfectly calibrated model would show on these answers by chance alone: the mean
    ECE when each answer is right with exactly its confidence (``runs`` draws, a fixed seed). A measured ECE near it
    says nothing either way; on 30–60 answers it is 0.1–0.16, so a target of 0.08 needs hundreds of answers."""
    rng = np.random.default_rng(0)
    values = np.asarray(confidences, dtype=float)
    return float(np.mean([calibration_error(values, rng.random(len(values)) < values) for _ in range(runs)]))


def wilson_interval(outcomes: list[bool], z: float = 1.96) -> list[float] | None:
    """The 95 % (Wilson) interval of the share of ``outcomes`` that are true: what a level's precision on a few
    answers can say ("9 of 10 right" is 0.60–0.98)."""
    n = len(outcomes)
    if not n:
        return None
    share = sum(outcomes) / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(float(max(0.0, centre - half)), 4), round(float(min(1.0, centre + half)), 4)]


def discrimination(right: list[float], wrong: list[float]) -> float | None:
    """The chance that a right answer has a higher confidence than a wrong one (ties count half; the area under
    the ROC curve): how well confidence can tell them apart at all, whatever the cuts. ``None`` without both."""
    if not right or not wrong:
        return None
    a, b = np.asarray(right, dtype=float)[:, None], np.asarray(wrong, dtype=float)[None, :]
    return round(float(((a > b) + 0.5 * (a == b)).mean()), 4)


def summarise(records: list[dict], *, book, top_k: int) -> dict:
    """The summary object ``evaluate --json`` prints."""
    ok = [r for r in records if "error" not in r]
    quality = _answer_quality(ok)
    refuse = [r for r in ok if r["kind"] in SHOULD_REFUSE]
    latencies = [r["latency_ms"] for r in records]
    kinds = {k: sum(1 for r in records if r["kind"] == k) for k in KINDS if any(r["kind"] == k for r in records)}
    levels = {lvl: sum(1 for r in ok if r["confidence_level"] == lvl) for lvl in LEVELS}
    calibration = book_calibration(book)
    kinds_figures = by_kind(records)
    return {
        "book": book.slug,
        "questions": len(records),
        "kinds": kinds,
        "errors": len(records) - len(ok),
        **{k: quality[k] for k in ("hit_at_1", "hit_at_3", "hit_at_5", "mrr_at_10", "answer_contains_rate",
                                   "citation_precision")},
        "refusal_rate": _rate(refuse, lambda r: r["refused"]),
        "refusal_rate_out_of_scope": _rate([r for r in refuse if r["kind"] == "out_of_scope"], lambda r: r["refused"]),
        "refusal_rate_unanswerable": _rate([r for r in refuse if r["kind"] == "unanswerable"], lambda r: r["refused"]),
        "false_refusal_rate": quality["false_refusal_rate"],
        "withheld_rate": quality["withheld_rate"],
        "code_answered_as_code": kinds_figures.get("code", {}).get("code_answered_as_code"),
        "by_kind": kinds_figures,
        "confidence_levels": levels,
        "confidence": confidence_report(records),
        "confidence_by_kind": levels_by_kind(records),
        "latency_ms_p50": int(np.percentile(latencies, 50)) if latencies else None,
        "latency_ms_p95": int(np.percentile(latencies, 95)) if latencies else None,
        "scope_threshold": round(scope_threshold(book, calibration), 4),
        "scope_threshold_source": "BOOKCHAT_SCOPE_THRESHOLD" if setting("SCOPE_THRESHOLD") else "calibrated",
        "calibration": {**{k: calibration.get(k) for k in ("method", "fusion", "off_topic_refused",
                                                             "probes_refused", "in_scope_median")},
                        "current": is_current(calibration)} if calibration else None,
        "top_k": top_k,
        "fusion": setting("FUSION"),
        "generator": next((r["generator"] for r in ok), None),
    }


def run_evaluation(questions: list[Question], *, book_slug: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> tuple[dict, list[dict]]:
    """Evaluate every question; return the summary and the per-question records."""
    book = resolve_book(book_slug)
    top_k = setting("TOP_K")
    records = []
    for done, q in enumerate(questions, 1):
        record = evaluate_question(q, book=book.slug, top_k=top_k)
        record["_has_evidence"] = bool(q.evidence) and q.kind not in SHOULD_REFUSE and "error" not in record
        records.append(record)
        if progress:
            progress(done, len(questions))
    summary = summarise(records, book=book, top_k=top_k)
    for record in records:
        record.pop("_has_evidence", None)
    return summary, records
