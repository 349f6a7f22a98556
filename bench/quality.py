"""Quality in the same report: ``evaluate`` on every question set in the shared data, with how far its confidence
levels hold, and for a book with a code question set of ours (``bench/questions/code-<book>.jsonl``) how many of
those are answered with the code as a block."""

from __future__ import annotations

from pathlib import Path

from chat.quality.evaluation import load_questions, run_evaluation

SHOWN = ("questions", "errors", "hit_at_1", "hit_at_3", "hit_at_5", "mrr_at_10", "answer_contains_rate",
         "citation_precision", "refusal_rate_out_of_scope", "refusal_rate_unanswerable", "false_refusal_rate",
         "withheld_rate", "latency_ms_p50", "latency_ms_p95", "scope_threshold")


CODE_QUESTIONS = Path(__file__).resolve().parent / "questions"


def evaluate(book: str, questions_file: Path, *, limit: int | None = None) -> dict:
    questions = load_questions(questions_file, limit=limit)
    summary, _ = run_evaluation(questions, book_slug=book)
    confidence = summary["confidence"]
    code_file = CODE_QUESTIONS / f"code-{book}.jsonl"
    code = run_evaluation(load_questions(code_file, limit=limit), book_slug=book)[0] if code_file.exists() else {}
    return {**{key: summary.get(key) for key in SHOWN},
            # How far the confidence levels hold (chat.quality.evaluation.confidence_report): share right and count
            # per level, the calibration error beside the one chance alone gives on as many answers, and how well
            # confidence tells right answers from wrong ones.
            "right_when_high": confidence["precision"]["high"], "answered_high": confidence["levels"]["high"],
            "right_when_medium": confidence["precision"]["medium"], "answered_medium": confidence["levels"]["medium"],
            "answerable_answered_high": confidence["answerable_high"], "confidence_ece": confidence["ece"],
            "confidence_ece_by_chance": confidence["ece_by_chance"],
            "confidence_discrimination": confidence["discrimination"],
            "refused_unsure": confidence["refusals"]["unsure"],
            "code_answered_as_code": code.get("code_answered_as_code")}
