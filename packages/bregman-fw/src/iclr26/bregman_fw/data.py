"""Data behind the test problems: seeded synthetic matrices and the regression data sets that ship
inside scikit-learn's wheel (no download). Everything is NumPy float64; same seed, same data."""

from __future__ import annotations

import numpy as np

from iclr26.shared import check_choice, check_int

__all__ = ["REAL_DATASETS", "regression_data", "sparse_simplex_point"]

REAL_DATASETS = ("diabetes", "breast_cancer")


def sparse_simplex_point(n: int, support: int, rng: np.random.Generator) -> np.ndarray:
    """A point of the probability simplex with ``support`` nonzero entries (a face optimum)."""
    x = np.zeros(n)
    idx = rng.choice(n, size=support, replace=False)
    x[idx] = rng.uniform(0.5, 1.5, size=support)
    return x / x.sum()


def regression_data(
    name: str, *, m: int = 500, n: int = 20, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised design ``A`` (m, n) and target ``b`` (m,) for ℓp regression.

    ``"diabetes"`` (442 × 10) and ``"breast_cancer"`` (569 × 30, target = the first feature,
    "mean radius", regressed on the other 29 plus noise-free data) load from scikit-learn's bundled
    files. ``"synthetic"`` draws Gaussian A and b = A x + Student-t noise (3 degrees of freedom,
    heavy-tailed, the setting where ℓ₁.₁ regression is used) from ``seed``.
    """
    check_choice(name, "name", (*REAL_DATASETS, "synthetic"))
    if name == "synthetic":
        check_int(m, "m", low=1)
        check_int(n, "n", low=1)
        rng = np.random.default_rng(seed)
        A = rng.standard_normal((m, n))
        x = rng.standard_normal(n) / np.sqrt(n)
        b = A @ x + rng.standard_t(3, size=m)
        return A, b
    from sklearn import datasets

    if name == "diabetes":
        A, b = datasets.load_diabetes(return_X_y=True)
    else:
        X, _ = datasets.load_breast_cancer(return_X_y=True)
        A, b = X[:, 1:], X[:, 0]
    A = (A - A.mean(0)) / A.std(0)
    b = (b - b.mean()) / b.std()
    return np.asarray(A, float), np.asarray(b, float)
