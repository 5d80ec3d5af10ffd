"""SVM hyperparameter tuning on scikit-learn's bundled digits."""

import numpy as np
import pytest

from iclr26.git_bo import GITBO, SVMDigits


@pytest.fixture(scope="module")
def svm():
    return SVMDigits(seed=0)


def test_encoding_and_split(svm):
    assert svm.dim == 66
    assert svm.X_train.shape == (1000, 64)
    assert svm.X_val.shape == (797, 64)
    # stratified: every digit is in both parts
    assert set(svm.y_train) == set(svm.y_val) == set(range(10))
    w, C, gamma = svm.hyperparameters(np.r_[np.full(64, 0.5), 0.0, 1.0])
    assert np.all(w == 0.5)
    assert pytest.approx(0.01) == C
    assert gamma == pytest.approx(1.0)
    assert svm.hyperparameters(np.r_[np.ones(64), 1.0, 0.0])[1:] == pytest.approx((1000.0, 1e-4))


def test_good_settings_beat_removing_the_features(svm):
    good = np.r_[np.ones(64), 0.8, 0.6]  # C = 100, gamma = 0.025: a sensible RBF SVC
    none = np.r_[np.zeros(64), 0.8, 0.6]  # every feature removed: one class predicted
    assert svm(good) < 0.05
    assert svm(none) > 0.85
    assert svm(good) == svm(good)  # deterministic


def test_gitbo_runs_on_svm(svm):
    res = GITBO(svm.bounds, "pfn", n_init=4, maximize=False, seed=0, n_candidates=100).run(svm, 6)
    assert res.n_evals == 6
    assert np.all((res.y >= 0) & (res.y <= 1))


@pytest.mark.parametrize("x", [np.zeros(65), np.full(66, np.inf)])
def test_bad_points(svm, x):
    with pytest.raises(ValueError, match="x must"):
        svm(x)


def test_bad_seed():
    with pytest.raises(ValueError, match="seed"):
        SVMDigits(seed=-1)
