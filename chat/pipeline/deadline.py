"""One time budget per request, with a share for each stage (retrieval, generation)."""

from __future__ import annotations

import time

from bookchat.base.conf import setting
from bookchat.base.errors import DeadlineExceeded


class Deadline:
    """``Deadline(5.0)`` expires five seconds from now; ``stage_budget`` caps a stage's own share by what is left."""

    def __init__(self, seconds: float | None = None):
        self.seconds = setting("DEADLINE_SECONDS") if seconds is None else seconds
        self.started = time.monotonic()
        self.expires = self.started + self.seconds

    def remaining(self) -> float:
        return self.expires - time.monotonic()

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def check(self, stage: str) -> None:
        if self.remaining() <= 0:
            raise DeadlineExceeded(
                f"bookchat could not answer within {self.seconds:g} s (ran out of time during {stage}); "
                "try again, or ask a shorter question"
            )

    def stage_budget(self, stage_seconds: float) -> float:
        return max(0.0, min(stage_seconds, self.remaining()))
