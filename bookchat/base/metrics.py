"""What bookchat counts for Prometheus (served at ``/metrics`` by ``bookchat.scraping``): answers, refusals, errors,
searches and the time of each pipeline stage, recorded where they happen at the cost of a counter's increment.

Under gunicorn the counters live in prometheus_client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``, made
fresh by ``bookchat.gunicorn_config`` at every start), so a scrape that one worker answers counts every worker.
Recording never fails what it records: an error here is logged and the answer goes out.
"""

from __future__ import annotations

import logging
import os

from prometheus_client import Counter, Gauge, Histogram

logger = logging.getLogger(__name__)

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable

# Label values come from the code, never from a request, so the series stay few; anything else is "other".
CHANNELS = ("page", "widget", "api", "stream", "mcp", "cli", "publish", "bench")
LEVELS = ("high", "medium", "unsure", "low", "staff")
STAGES = ("retrieval", "embed", "dense", "lexical", "fusion", "generation", "grounding")
REFUSAL_REASONS = ("not_covered", "unanswerable", "unsure", "withheld")
# The pipeline's outcomes (``record.outcome``) of an answer that was given (a refusal is an answer too);
# ``searched`` is a search, and a question that failed is counted where its error is rendered.
ANSWER_OUTCOMES = ("answered", "unsure", "held_back", "not_covered", "unanswerable", "withheld", "staff")
# Why a language model gave no answer and the book's own sentences answered (``record.generation_failure``): the
# reasons of ``chat.pipeline.generation.FAILURE_REASONS``, which this layer may not import.
GENERATION_FAILURE_REASONS = ("timeout", "connection", "server_error", "malformed", "empty", "cut_off",
                              "repeated_instructions", "copied_prompt")

ANSWERS = Counter("bookchat_answers", "Answers given, refusals included, by confidence level (`staff`: the course "
                  "staff's answer to the same question) and channel.",
                  ["level", "channel"])
REFUSALS = Counter("bookchat_refusals", "Answers that refused or were withheld, by reason: not_covered (outside "
                   "the book), unanswerable (the book lacks what the question names), unsure (confidence below the "
                   "floor), withheld (failed the grounding check).", ["reason"])
ERRORS = Counter("bookchat_errors", "Failed requests by error code (the API's `error` field) and HTTP status.",
                 ["code", "status"])
GENERATION_FAILURES = Counter("bookchat_generation_failures", "Answers the book's own sentences gave because the "
                              "language model failed, by reason (timeout, connection, server_error, malformed, "
                              "empty, cut_off, repeated_instructions, copied_prompt).", ["reason"])
SEARCHES = Counter("bookchat_searches", "Searches (the search box, the API's and MCP's), by channel.", ["channel"])
ANSWER_SECONDS = Histogram("bookchat_answer_seconds", "Time from the question to the response, by channel.",
                           ["channel"])
STAGE_SECONDS = Histogram("bookchat_stage_seconds", "Time of each step of an answer: retrieval (embed + dense + "
                          "lexical + fusion), generation, grounding.", ["stage"])
# One series per live worker process (the pid label, added in multiprocess mode): whose answers these are.
WORKER_ANSWERS = Gauge("bookchat_worker_answers", "Answers this web worker process gave since it started.",
                       multiprocess_mode="liveall")


def multiprocess_dir() -> str | None:
    """The folder the workers share their counts in, or None (one process: ``runserver``, tests, commands)."""
    return os.environ.get(MULTIPROCESS_DIR) or None


def _known(value, allowed: tuple[str, ...]) -> str:
    return value if value in allowed else "other"


def on_answered(sender, *, record, **kwargs) -> None:
    """Receiver of ``chat.pipeline.announcements.answered``: count the answer or search that ``record`` (an
    ``AuditRecord``, read by its attributes: the base imports no app) describes. Failed questions are counted
    where their error is rendered (``count_error``)."""
    try:
        record_answer(record)
    except Exception:
        logger.exception("recording the metrics of answer %s failed; the answer was served",
                         getattr(record, "answer_id", None))


def record_answer(record) -> None:
    channel = _known(record.channel, CHANNELS)
    if record.outcome == "searched":
        SEARCHES.labels(channel).inc()
        return
    if record.outcome not in ANSWER_OUTCOMES:
        return
    ANSWERS.labels(_known(record.confidence_level, LEVELS), channel).inc()
    WORKER_ANSWERS.inc()
    reason = record.refusal_reason or ("withheld" if record.flagged else None)
    if reason:
        REFUSALS.labels(_known(reason, REFUSAL_REASONS)).inc()
    if record.generation_failure:
        GENERATION_FAILURES.labels(_known(record.generation_failure, GENERATION_FAILURE_REASONS)).inc()
    ANSWER_SECONDS.labels(channel).observe(float(record.latency_ms) / 1000)
    for stage, ms in record.timings_ms.items():
        if stage in STAGES:
            STAGE_SECONDS.labels(stage).observe(float(ms) / 1000)


def count_error(code: str, status: int) -> None:
    """One request answered with error ``code`` and HTTP ``status`` (``chat.channels.error_responses.error_reply``)."""
    try:
        ERRORS.labels(str(code)[:64], str(int(status))).inc()
    except Exception:
        logger.exception("counting error %r failed", code)
