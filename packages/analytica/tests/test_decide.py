"""Spec test 9: decision rule and scores on hand-computed fixtures."""

import math

import numpy as np
import pytest

from iclr26.analytica import accuracy, across_run_std, brier, choose, log_loss, option_scores, score


def test_two_option_threshold_semantics():
    assert choose([0.75, 0.25]) == 0  # first option above 0.7
    assert choose([0.65, 0.35]) == 0  # below the threshold: argmax still picks it
    assert choose([0.3, 0.7]) == 1
    assert choose([0.7, 0.3], threshold=0.8) == 0  # argmax
    assert choose([1.4, 0.6]) == 0  # normalised: 0.7 is not > 0.7, argmax wins anyway
    assert choose([0.2, 0.5, 0.3]) == 1  # three options: argmax


def test_binary_scores_by_hand():
    p = [0.9, 0.2, 0.6, 0.4]
    y = [1, 0, 0, 1]
    assert accuracy(p, y) == 0.5
    assert brier(p, y) == pytest.approx((0.01 + 0.04 + 0.36 + 0.36) / 4)
    expect = -(math.log(0.9) + math.log(0.8) + math.log(0.4) + math.log(0.4)) / 4
    assert log_loss(p, y) == pytest.approx(expect)
    assert log_loss([1.0], [0]) == pytest.approx(-math.log(1e-3))  # clipped, finite


def test_across_run_std_and_score():
    runs = np.array([[0.2, 0.8], [0.4, 0.8]])
    assert across_run_std(runs) == pytest.approx((np.std([0.2, 0.4], ddof=1) + 0) / 2)
    s = score(runs, [0, 1])
    assert s["accuracy"] == 1.0
    assert s["brier"] == pytest.approx(((0.04 + 0.04) / 2 + (0.16 + 0.04) / 2) / 2)


def test_option_scores_fixture():
    weights = [[0.8, 0.2], [0.5, 0.5]]
    values = [[10.0, 0.0], [0.0, 4.0]]
    s = option_scores(weights, values)
    assert s["accuracy"] == 0.5  # task 2: tie → option 0, best is option 1
    assert s["soft_value_norm"] == pytest.approx((0.8 + 0.5) / 2)
    assert s["hard_value_norm"] == pytest.approx(0.5)
    assert s["brier"] == pytest.approx((0.04 + 0.04 + 0.25 + 0.25) / 2)


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (accuracy, ([0.5, 1.2], [0, 1])),
        (brier, ([0.5, float("nan")], [0, 1])),
        (brier, ([0.5], [0, 1])),
        (log_loss, ([0.5, 0.5], [0, 2])),
        (choose, ([-1.0, 2.0],)),
        (choose, ([],)),
        (across_run_std, ([[0.1, 0.2]],)),
    ],
)
def test_bad_inputs(fn, args):
    with pytest.raises(ValueError, match=r"must|need"):
        fn(*args)
