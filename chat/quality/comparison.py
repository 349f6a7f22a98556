"""Judging a method change in one run (``evaluate --compare A B``): the same questions under two settings.

A *spec* is ``default`` or ``NAME=VALUE[,NAME=VALUE...]`` over bookchat's settings. Names and types
come from ``bookchat.base.conf.SETTINGS`` at call time (settings are added often, so none is named here).
Each side runs under ``override_settings(BOOKCHAT=current | overrides)`` with the settings cache
reset on the way in and out, so nothing leaks into the other side or into the process afterwards.
Before each side's timed run its first question is asked once, untimed: one-time loads (the
embedder's weights, a model only one side uses) would otherwise land in one side's latency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.test.utils import override_settings

from bookchat.base import conf
from bookchat.base.errors import BookchatError, ConfigurationError
from chat.pipeline.editions import resolve_book
from chat.quality.evaluation import Question, evaluate_question, run_evaluation

SECRET_SUFFIXES = ("API_KEY", "PASSWORD", "SECRET_KEY")  # shown as "***" in reports


class CompareSpecError(BookchatError):
    code = "bad_compare_spec"


def parse_settings_spec(spec: str) -> dict[str, Any]:
    """``default`` → {}; ``FUSION=rrf,top_k=3`` → {"FUSION": "rrf", "TOP_K": 3}, each value of its setting's type."""
    if spec.strip().lower() == "default":
        return {}
    known = {s.name: s for s in conf.SETTINGS}
    overrides: dict[str, Any] = {}
    for part in spec.split(","):
        name, equals, raw = part.partition("=")
        name = name.strip().upper().removeprefix("BOOKCHAT_")
        if not equals or not name:
            raise CompareSpecError(f"--compare {spec!r}: {part.strip()!r} is not NAME=VALUE (or give 'default')")
        if name not in known:
            raise CompareSpecError(f"--compare {spec!r}: unknown setting {name!r}", code="unknown_setting")
        if name in overrides:
            raise CompareSpecError(f"--compare {spec!r}: {name} is given twice")
        try:
            overrides[name] = conf.parse_value(known[name], raw)
        except ConfigurationError as exc:
            raise CompareSpecError(f"--compare {spec!r}: {exc}", code="bad_setting") from None
    return overrides


def describe(overrides: dict[str, Any]) -> str:
    """A spec as the report shows it (secrets masked)."""
    return ", ".join(f"{k}={v}" for k, v in shown(overrides).items()) or "default"


def shown(values: dict[str, Any]) -> dict[str, Any]:
    return {k: "***" if k.endswith(SECRET_SUFFIXES) and v else v for k, v in values.items()}


@contextmanager
def settings_applied(overrides: dict[str, Any]) -> Iterator[None]:
    """Run the block with ``overrides`` over the current BOOKCHAT settings, then restore them."""
    conf._cache = None
    try:
        with override_settings(BOOKCHAT={**getattr(settings, "BOOKCHAT", {}), **overrides}):
            conf._cache = None
            yield
    finally:
        conf._cache = None


def run_comparison(questions: list[Question], a: dict[str, Any], b: dict[str, Any], *, book_slug: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> tuple[dict, list[dict]]:
    """Evaluate ``questions`` under ``a`` then ``b``: ``{"a": {"settings", "summary"}, "b": ...}`` and the records,
    each with ``"run": "a"|"b"``. ``settings`` holds the value each side used of every setting either side set."""
    compared = list(dict.fromkeys([*a, *b]))
    total = 2 * len(questions)
    result, records = {}, []
    for offset, (run, overrides) in enumerate((("a", a), ("b", b))):
        def step(done: int, _: int, offset: int = offset) -> None:
            if progress:
                progress(offset * len(questions) + done, total)

        with settings_applied(overrides):
            evaluate_question(questions[0], book=resolve_book(book_slug).slug, top_k=conf.setting("TOP_K"))
            summary, run_records = run_evaluation(questions, book_slug=book_slug, progress=step)
            used = {name: conf.setting(name) for name in compared}
        result[run] = {"settings": shown(used), "summary": summary}
        records.extend({"run": run, **record} for record in run_records)
    return result, records


def stale_calibration(summary: dict) -> bool:
    """Whether this run's refusals used a threshold calibrated under other settings than the run's."""
    calibration = summary.get("calibration")
    return bool(calibration) and not calibration["current"] and summary["scope_threshold_source"] == "calibrated"
