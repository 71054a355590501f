"""The estimators behind calibration, against figures worked by hand."""

from __future__ import annotations

import math
import random

import pytest

from framework.calibrate.estimates import filled_within, lognormal, mean, per_trial, wilson


def test_wilson_interval_of_a_known_case() -> None:
    # 30 of 100: Wilson 95 % is 0.2189-0.3958 (standard tables).
    e = wilson(30, 100)
    assert e is not None and e.value == 0.3 and e.n == 100
    assert e.low == pytest.approx(0.2189, abs=1e-4) and e.high == pytest.approx(0.3958, abs=1e-4)
    assert wilson(0, 0) is None
    edge = wilson(5, 5)
    assert edge is not None and edge.high == 1.0 and 0.5 < edge.low < 1.0


def test_mean_and_lognormal() -> None:
    m = mean([1.0, 2.0, 3.0])
    assert m is not None and m.value == 2.0 and m.low < 2.0 < m.high
    fit = lognormal([math.e, math.e**3, -1.0, 0.0])  # non-positive values are not fitted
    assert fit is not None and fit.n == 2
    assert fit.mu.value == pytest.approx(2.0) and fit.median.value == pytest.approx(math.e**2)
    assert fit.sigma == pytest.approx(math.sqrt(2))


def test_kaplan_meier_counts_a_censored_order_only_while_watched() -> None:
    # Four orders: filled at 1 s and 3 s, canceled unfilled at 2 s and 4 s.
    watched = [(1.0, True), (2.0, False), (3.0, True), (4.0, False)]
    within_1, within_3, within_10 = filled_within(watched, [1.0, 3.0, 10.0])
    # S(1) = 3/4; S(3) = 3/4 * (1 - 1/2) = 3/8 (two at risk at 3 s: the canceled one left).
    assert within_1 is not None and within_1.value == pytest.approx(0.25)
    assert within_3 is not None and within_3.value == pytest.approx(1 - 3 / 8)
    assert within_10 is None  # past every order's watch: no information
    # The naive share would call the order canceled at 2 s a miss within 3 s: 2/4 = 0.5.
    assert within_3.value != 0.5


def test_per_trial_is_the_proportion_for_single_trials_and_sees_through_groups() -> None:
    single = per_trial([(1, i < 30) for i in range(100)])
    assert single is not None and single.value == pytest.approx(0.3, abs=1e-6)
    assert 0.21 < single.low < 0.3 < single.high < 0.40 and single.n == 100
    # Groups of 3 trials at one instant, each trial filling with chance 0.4: a group fills
    # with chance 1 - 0.6^3 = 0.784; counting a group as one trial would read 0.78.
    rng = random.Random(7)
    groups = [(3, any(rng.random() < 0.4 for _ in range(3))) for _ in range(4000)]
    fitted = per_trial(groups)
    assert fitted is not None and fitted.n == 12000
    assert fitted.low < 0.4 < fitted.high and abs(fitted.value - 0.4) < 0.02
    assert per_trial([]) is None
    always = per_trial([(2, True), (1, True)])
    assert always is not None and always.value == 1.0 and always.high == 1.0
