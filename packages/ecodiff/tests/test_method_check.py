"""The spec's seeded method check (§5.5): at 20 % sparsity EcoDiff's final-sample MSE to the
dense model is below magnitude and random pruning in >= 4 of 5 seeds and below its local
ablation on average. If the adjoint or the objective were wrong, this would invert."""

import pytest

from iclr26.ecodiff.experiments import METHOD_CHECK_METHODS, method_check


def test_method_check_runs_small_and_counts_wins():
    res = method_check([3], calibration=4, epochs=1, steps=2, n_eval=8, n_random=1)
    assert res["n_seeds"] == 1
    assert res["updates"] == 1
    (row,) = res["rows"]
    assert row["seed"] == 3
    for m in METHOD_CHECK_METHODS:
        assert row[m] >= 0
        assert res["mean"][m] == row[m]
    for m, w in res["wins"].items():
        assert w == int(row["EcoDiff"] < row[m])


@pytest.mark.parametrize(
    ("kwargs", "exc", "text"),
    [
        ({"seeds": []}, ValueError, "seeds"),
        ({"seeds": [0, 0]}, ValueError, "distinct"),
        ({"seeds": [-1]}, ValueError, "seeds"),
        ({"seeds": [0.5]}, TypeError, "seeds"),
        ({"calibration": 0}, ValueError, "calibration"),
        ({"calibration": 2.0}, TypeError, "calibration"),
        ({"epochs": 0}, ValueError, "epochs"),
        ({"steps": True}, TypeError, "steps"),
        ({"n_eval": 0}, ValueError, "n_eval"),
        ({"n_random": 0}, ValueError, "n_random"),
        ({"sparsity": 0.0}, ValueError, "sparsity"),
        ({"sparsity": 1.0}, ValueError, "sparsity"),
        ({"sparsity": float("nan")}, ValueError, "sparsity"),
    ],
)
def test_method_check_bad_inputs(kwargs, exc, text):
    with pytest.raises(exc, match=text):
        method_check(**kwargs)


@pytest.mark.slow
def test_seeded_method_check():
    res = method_check(range(5))  # 32 calibration samples, 24 updates, T = 10, 20 %
    for r in res["rows"]:
        print(
            " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
        )
    print("wins", res["wins"], "mean", res["mean"])
    assert res["wins"]["magnitude"] >= 4
    assert res["wins"]["random"] >= 4
    assert res["mean"]["EcoDiff"] < res["mean"]["EcoDiff-local"]
