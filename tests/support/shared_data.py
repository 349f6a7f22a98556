"""Where ../shared/data is, and the rule for tests that need it: skip with a printed reason when it is
absent (users' clones don't have it), fail instead when BOOKCHAT_REQUIRE_SHARED_DATA=1 (CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("BOOKCHAT_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        reason = f"shared test data not found at {SHARED_DATA} (set BOOKCHAT_SHARED_DATA to its folder)"
        if os.environ.get("BOOKCHAT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"BOOKCHAT_REQUIRE_SHARED_DATA=1 but {reason}")
        print(reason)
        pytest.skip(reason)
    return SHARED_DATA


def shared_corpus(name: str) -> Path:
    """The ``docs/`` folder of one corpus in ../shared/data."""
    path = shared_data() / name / "docs"
    if not path.is_dir():
        if os.environ.get("BOOKCHAT_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"BOOKCHAT_REQUIRE_SHARED_DATA=1 but {path} is absent")
        pytest.skip(f"{path} is absent")
    return path


def all_present(names) -> bool:
    """Whether every corpus in ``names`` is there (to start work on them before a test asks)."""
    return all((SHARED_DATA / name / "docs").is_dir() for name in names)
