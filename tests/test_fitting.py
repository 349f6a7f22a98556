"""The fitting scripts' own arithmetic (``bench/fit_reranker.py``): the listwise fit and its calibration, on
synthetic candidates where one feature tells the evidence apart and the others are noise."""

from __future__ import annotations

import numpy as np

from bench.fit_reranker import calibrate, fit, fit_listwise, hits


def candidates(questions: int = 200, pool: int = 30, signal: float = 3.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(questions):
        x = rng.normal(size=(pool, 3))
        y = np.zeros(pool)
        y[rng.integers(pool)] = 1.0
        x[y > 0, 0] += signal  # feature 0 marks the evidence; 1 and 2 are noise
        groups.append((x, y))
    return groups


def test_the_listwise_fit_weighs_the_feature_that_marks_the_evidence_and_not_the_noise():
    theta = fit_listwise(candidates())
    assert theta[0] > 1.5
    assert abs(theta[1]) < 0.3 and abs(theta[2]) < 0.3


def test_calibration_keeps_the_order_and_makes_the_score_a_probability():
    groups = candidates()
    theta = fit_listwise(groups)
    weights, bias = calibrate(groups, theta)
    scale = weights / theta
    assert np.allclose(scale, scale[0]) and scale[0] > 0, "one positive scale: the same order as the listwise fit"
    assert hits(groups, weights, bias)[0] > 0.6
    p = np.concatenate([1 / (1 + np.exp(-(x @ weights + bias))) for x, _ in groups])
    assert abs(p.mean() - 1 / 30) < 0.01, "on average, the share of candidates holding the evidence"
    # The same probability scale as a pointwise fit of the same data.
    pointwise, pointwise_bias = fit(groups)
    q = np.concatenate([1 / (1 + np.exp(-(x @ pointwise + pointwise_bias))) for x, _ in groups])
    assert abs(p.mean() - q.mean()) < 0.005


def test_questions_whose_pool_holds_no_evidence_teach_the_listwise_fit_nothing():
    groups = candidates(questions=100)
    empty = [(np.random.default_rng(1).normal(size=(30, 3)) * 5, np.zeros(30)) for _ in range(50)]
    assert np.allclose(fit_listwise(groups), fit_listwise(groups + empty))
