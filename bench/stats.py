"""Percentiles and the "median (min–max over runs)" figures of the report."""

from __future__ import annotations

import numpy as np


def pct(values, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


def summary(values) -> dict:
    """p50/p95/p99 and count of one run's samples (ms or any unit)."""
    return {"p50": pct(values, 50), "p95": pct(values, 95), "p99": pct(values, 99), "n": len(values)}


def over_runs(runs: list[float | None]) -> dict:
    """A figure measured once per run: its median and spread."""
    values = [v for v in runs if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "runs": 0}
    return {"median": float(np.median(values)), "min": min(values), "max": max(values), "runs": len(values)}


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def fmt_runs(figure: dict, digits: int = 1) -> str:
    """``12.3 (11.9–12.8, 3 runs)``, or the single value when measured once."""
    if figure["median"] is None:
        return "—"
    if figure["runs"] < 2:
        return fmt(figure["median"], digits)
    return f"{fmt(figure['median'], digits)} ({fmt(figure['min'], digits)}–{fmt(figure['max'], digits)})"
