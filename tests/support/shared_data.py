"""Where ../shared/data is (``BOOKCHAT_SHARED_DATA`` overrides it). Tests that need it are in the "shared-data"
group of ``NEEDS`` (tests/conftest.py): missing, it stops the session unless ``BOOKCHAT_TEST_SKIP`` names it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("BOOKCHAT_SHARED_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")


def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        from tests.conftest import require  # conftest imports this module

        require("shared-data")
    return SHARED_DATA


def shared_corpus(name: str) -> Path:
    """The ``docs/`` folder of one corpus in ../shared/data."""
    path = shared_data() / name / "docs"
    if not path.is_dir():
        pytest.fail(f"{path} is absent: {SHARED_DATA} is not the whole shared test data")
    return path


def all_present(names) -> bool:
    """Whether every corpus in ``names`` is there (to start work on them before a test asks)."""
    return all((SHARED_DATA / name / "docs").is_dir() for name in names)
