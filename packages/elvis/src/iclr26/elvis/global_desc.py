"""Global descriptors for the first-stage shortlist (§1.1): VLAD over local descriptors, and GeM.

The paper shortlists with the backbone's CLS token; with hand-crafted local descriptors VLAD is the
classic stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from sklearn.cluster import KMeans

from iclr26.elvis.features import LocalFeatures
from iclr26.shared import check_array, check_int, check_range

__all__ = ["VLAD", "gem"]


class VLAD:
    """VLAD (Jégou et al. 2010) with power- and L2-normalisation.

    Args:
        k: codebook size (32 in our benchmark).
        power: signed power normalisation exponent.
        seed: KMeans seed.
    """

    def __init__(self, k: int = 32, power: float = 0.5, seed: int = 0) -> None:
        check_int(k, "k", low=1)
        check_range(power, "power", low=0.0, high=1.0, low_inclusive=False)
        check_int(seed, "seed", low=0)
        self.k, self.power, self.seed = k, power, seed

    def fit(self, feats: Sequence[LocalFeatures], max_desc: int = 20000) -> VLAD:
        """Learn the codebook with KMeans on (a seeded subsample of) the descriptors."""
        if not len(feats):
            raise ValueError("fit needs at least one LocalFeatures")
        desc = np.concatenate([f.desc for f in feats])
        if len(desc) < self.k:
            raise ValueError(f"need at least k={self.k} descriptors, got {len(desc)}")
        rng = np.random.default_rng(self.seed)
        if len(desc) > max_desc:
            desc = desc[rng.choice(len(desc), max_desc, replace=False)]
        km = KMeans(self.k, n_init=1, random_state=self.seed).fit(desc)
        self.centers_ = km.cluster_centers_.astype(np.float32)
        return self

    def encode(self, feats: Sequence[LocalFeatures]) -> NDArray[np.float32]:
        """(len(feats), k·D) L2-normalised VLAD vectors."""
        if not hasattr(self, "centers_"):
            raise RuntimeError("call fit() before encode()")
        out = []
        for f in feats:
            d2 = ((f.desc[:, None, :] - self.centers_[None]) ** 2).sum(-1)
            assign = d2.argmin(1)
            v = np.zeros_like(self.centers_)
            np.add.at(v, assign, f.desc - self.centers_[assign])
            v = v.ravel()
            v = np.sign(v) * np.abs(v) ** self.power
            out.append(v / max(np.linalg.norm(v), 1e-12))
        return np.stack(out).astype(np.float32)


def gem(desc: NDArray, p: float = 3.0, eps: float = 1e-6) -> NDArray[np.float32]:
    """GeM pooling ``(mean x^p)^(1/p)`` of (N, D) non-negative descriptors, L2-normalised."""
    x = np.asarray(check_array(desc, "desc", ndim=2), dtype=np.float64)
    if not len(x) or not x.shape[1]:
        raise ValueError(f"desc must be a non-empty (N, D) array, got shape {x.shape}")
    check_range(p, "p", low=0.0, low_inclusive=False)
    if not np.isfinite(p):
        raise ValueError(f"p must be finite, got {p!r}")
    x = np.clip(x, eps, None)
    g = (x**p).mean(0) ** (1.0 / p)
    return (g / max(np.linalg.norm(g), 1e-12)).astype(np.float32)
