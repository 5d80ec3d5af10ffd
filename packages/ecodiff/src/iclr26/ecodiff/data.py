"""Data the package carries: scikit-learn's 8×8 handwritten digits (1,797 images, 10 classes),
scaled to [-1, 1], for the toy diffusion/flow models."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["digits", "digits_split"]


def digits() -> tuple[torch.Tensor, torch.Tensor]:
    """All digits as ``(images (1797, 1, 8, 8) float32 in [-1, 1], labels (1797,) int64)``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.as_tensor(d.images.astype(np.float32) / 16.0 * 2.0 - 1.0).unsqueeze(1)
    return x, torch.as_tensor(d.target.astype(np.int64))


def digits_split(seed: int = 0, test_fraction: float = 0.25):
    """A seeded train/test split of :func:`digits`: ``(x_train, y_train, x_test, y_test)``."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    x, y = digits()
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = round(test_fraction * len(y))
    te, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[te], y[te]
