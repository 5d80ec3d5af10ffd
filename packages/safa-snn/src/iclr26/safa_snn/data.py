"""Bundled data for the FSCIL experiments (no downloads): scikit-learn's digits."""

from __future__ import annotations

import numpy as np
import torch

from iclr26.safa_snn.fscil import FSCILData

__all__ = ["load_digits_fscil"]


def load_digits_fscil(test_fraction: float = 0.5, seed: int = 0) -> FSCILData:
    """scikit-learn's 1,797 8×8 digits (10 classes, ~180 each), scaled to [0, 1], flattened to
    64 features, split per class into train and test with ``test_fraction`` (seeded)."""
    from sklearn.datasets import load_digits

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        k = round(len(idx) * test_fraction)
        test.append(idx[:k])
        train.append(idx[k:])
    tr, te = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    return FSCILData(
        torch.from_numpy(X[tr]), torch.from_numpy(y[tr]).long(),
        torch.from_numpy(X[te]), torch.from_numpy(y[te]).long(),
        classes=tuple(range(10)),
    )  # fmt: skip
