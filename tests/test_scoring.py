"""The scoring arithmetic the ranking stages and the confidence model share (chat.pipeline.scoring): the clamped
logistic and its logit, the cosine gap's scale, the tail kept below a re-scored head; and the book-slug recipe
(ingestion.models.book_slug_from). Pure functions: no database."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from chat.pipeline import scoring
from chat.pipeline.lexical import LexicalResult
from chat.pipeline.reranking import FEATURES, candidate_features
from chat.pipeline.scoring import (
    LOGIT_CLAMP,
    cosine_gap,
    logistic,
    logistic_array,
    logit,
    order_head_over_tail,
    tail_score,
)
from chat.pipeline.sentences import resort_features
from ingestion.models import BOOK_SLUG_LENGTH, Book, book_slug_from


def candidate(cid: str, score: float, dense: float = 0.8, **more) -> SimpleNamespace:
    return SimpleNamespace(id=cid, score=score, dense=dense, **more)


def test_the_constants_are_those_the_fitted_weights_assume():
    # reranking.WEIGHTS, sentences.WEIGHTS and confidence.WEIGHTS were fitted (bench/fit_*.py) with these: a change
    # to one of them needs the weights fitted again.
    assert (scoring.LOGIT_CLAMP, scoring.GAP_SCALE, scoring.PROBABILITY_FLOOR, scoring.TAIL_FACTOR) == (
        30.0, 10.0, 1e-6, 0.999)


def test_logistic_is_clamped_at_the_logit_clamp():
    assert logistic(LOGIT_CLAMP) == logistic(1e6) == logistic(math.inf)
    assert logistic(-LOGIT_CLAMP) == logistic(-1e6) == logistic(-math.inf) > 0.0
    assert logistic(LOGIT_CLAMP - 1) < logistic(LOGIT_CLAMP)
    assert logistic(0.0) == 0.5


def test_logistic_is_monotone_and_the_array_form_agrees():
    z = np.linspace(-40, 40, 161)
    scalar = np.array([logistic(float(x)) for x in z])
    assert np.all(np.diff(scalar) >= 0)
    assert np.all(np.diff(scalar[(z > -LOGIT_CLAMP) & (z < LOGIT_CLAMP)]) > 0)
    assert np.allclose(logistic_array(z), scalar, rtol=1e-12, atol=0)


@pytest.mark.parametrize("z", [-12.0, -3.5, -0.25, 0.0, 0.7, 4.0, 13.0])
def test_logit_undoes_logistic(z):
    assert logit(logistic(z)) == pytest.approx(z, abs=1e-9)


def test_logit_keeps_the_probability_off_0_and_1():
    assert logit(0.0) == logit(1e-9) == pytest.approx(math.log(1e-6 / (1 - 1e-6)))
    assert logit(1.0) == logit(1 - 1e-9) == pytest.approx(-logit(0.0))
    assert logit(0.0, floor=0.0025) == pytest.approx(-5.9890, abs=1e-4)  # the confidence model's ±6


def test_cosine_gap_is_the_difference_scaled():
    assert cosine_gap(0.83, 0.80) == pytest.approx(0.3)
    assert cosine_gap(0.80, 0.83) == pytest.approx(-0.3)


def test_the_ranking_stages_read_the_scaled_gap():
    lexical = LexicalResult()
    rows = candidate_features([candidate("a", 0.5, dense=0.85, lexical=0.0, text="x"),
                               candidate("b", 0.4, dense=0.81, lexical=0.0, text="y")], lexical)
    gap = FEATURES.index("dense_gap")
    assert [row[gap] for row in rows] == pytest.approx([0.0, 0.4])
    head = [candidate("a", 0.5, sentence_similarities=[0.70, 0.90]),
            candidate("b", 0.9, sentence_similarities=[0.85])]
    first, second = resort_features(head)
    assert first == pytest.approx([0.0, 0.0])
    assert second == pytest.approx([logit(0.9), -0.5])


def test_tail_score_stays_strictly_below_the_floor():
    floor = 0.2
    for score in (0.0, 0.05, 0.1998, 0.1999, 0.2, 0.5, 1.0):
        assert tail_score(score, floor) < floor
    assert tail_score(0.05, floor) == 0.05  # a score already below the floor is kept as it is


def test_order_head_over_tail_sorts_the_head_and_floors_the_tail_in_its_order():
    head = [candidate("h1", 0.3), candidate("h2", 0.6, dense=0.7), candidate("h3", 0.6, dense=0.9)]
    tail = [candidate("t1", 0.9), candidate("t2", 0.4), candidate("t3", 0.29), candidate("t4", 0.01)]
    ordered = order_head_over_tail(head, tail)
    assert [c.id for c in ordered] == ["h3", "h2", "h1", "t1", "t2", "t3", "t4"]
    lowest = min(c.score for c in ordered[:3])
    scores = [c.score for c in ordered[3:]]
    assert all(s < lowest for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[-2:] == [0.29, 0.01]


def test_book_slug_length_is_the_models():
    assert Book._meta.get_field("slug").max_length == BOOK_SLUG_LENGTH


@pytest.mark.parametrize(("text", "slug"), [
    ("My Book", "my-book"),
    ("snake_case_name", "snake-case-name"),
    ("Café Übersicht", "cafe-ubersicht"),
    ("日本語", ""),
    ("", ""),
    (None, ""),
    ("__--__", ""),
])
def test_book_slug_from(text, slug):
    assert book_slug_from(text) == slug


def test_book_slug_from_cuts_to_the_length_without_a_trailing_hyphen():
    slug = book_slug_from("a" * (BOOK_SLUG_LENGTH - 1) + " tail")
    assert slug == "a" * (BOOK_SLUG_LENGTH - 1)
    assert len(book_slug_from("word " * 40)) <= BOOK_SLUG_LENGTH
    assert not book_slug_from("word " * 40).endswith("-")
