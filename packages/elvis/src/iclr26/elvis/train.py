"""Training (§1.3): triplet sampling from a global kNN list and the official BCE recipe.

``fit`` trains any pair model exposing ``logits(q, d, q_mask, d_mask)`` (:class:`ELViS`,
:class:`~iclr26.elvis.AMESLite`) with AdamW, a warmup-cosine schedule and the descriptor-count
augmentation (each batch truncated to a random length between ``desc_variable_min`` and the max).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike
from torch import nn

from iclr26.elvis.features import LocalFeatures, pad_batch
from iclr26.shared import check_array, check_int, check_range
from iclr26.shared import progress as progress_bar

__all__ = ["FitHistory", "TripletSampler", "fit", "warmup_cosine"]

Pair = tuple[LocalFeatures, LocalFeatures, int]


class TripletSampler:
    """The official ``TripletSampler``: one positive and one negative per usable anchor.

    An anchor is usable when its ``num_candidates`` global nearest neighbours hold at least
    ``min_pos`` positives and ``min_neg`` negatives with positive global similarity; both are drawn
    with probability ∝ sim^power (paper: 300 candidates, power 3, 5 and 5).

    Args:
        labels: (N,) instance labels (same label = positive).
        global_sims: (N, N) global similarities.
    """

    def __init__(
        self,
        labels: ArrayLike,
        global_sims: ArrayLike,
        *,
        num_candidates: int = 300,
        power: float = 3.0,
        min_pos: int = 5,
        min_neg: int = 5,
    ) -> None:
        self.labels = np.asarray(labels)
        sims = np.asarray(check_array(global_sims, "global_sims", ndim=2), dtype=np.float64)
        n = len(self.labels)
        if sims.shape != (n, n):
            raise ValueError(f"global_sims must be ({n}, {n}), got {sims.shape}")
        check_int(num_candidates, "num_candidates", low=1)
        self.sims, self.power = sims, power
        self.candidates: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for i in range(n):
            cand = [j for j in np.argsort(-sims[i]) if j != i][:num_candidates]
            cand = np.array(cand, dtype=int)
            pos = cand[self.labels[cand] == self.labels[i]]
            neg = cand[(self.labels[cand] != self.labels[i]) & (sims[i, cand] > 0)]
            if len(pos) >= min_pos and len(neg) >= min_neg:
                self.candidates[i] = (pos, neg)
        self.anchors = np.array(sorted(self.candidates), dtype=int)

    def sample(self, seed: int) -> list[tuple[int, int, int]]:
        """One (anchor, positive, negative) index triplet per usable anchor."""
        rng = np.random.default_rng(seed)
        out = []
        for i in self.anchors:
            pos, neg = self.candidates[int(i)]
            picks = []
            for group in (pos, neg):
                w = np.clip(self.sims[i, group], 1e-12, None) ** self.power
                picks.append(int(rng.choice(group, p=w / w.sum())))
            out.append((int(i), picks[0], picks[1]))
        return out


def warmup_cosine(step: int, total: int, warmup: float = 0.1) -> float:
    """Learning-rate factor: linear warmup over ``warmup·total`` steps, then cosine to 0."""
    n_warm = max(1, round(warmup * total))
    if step < n_warm:
        return (step + 1) / n_warm
    progress = (step - n_warm) / max(1, total - n_warm)
    return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


@dataclass
class FitHistory:
    """Per-step loss and per-epoch training accuracy of :func:`fit`."""

    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def fit(
    model: nn.Module,
    pairs: Sequence[Pair],
    *,
    epochs: int = 10,
    batch_size: int = 600,
    lr: float = 5e-4,
    weight_decay: float = 5e-4,
    warmup: float = 0.1,
    desc_variable_min: int = 100,
    seed: int = 0,
    progress: bool = False,
) -> FitHistory:
    """Train with BCE-with-logits on ``model.logits`` (official recipe, §1.3).

    Args:
        model: a module with ``logits(q, d, q_mask, d_mask) -> (B,)``.
        pairs: (query, database, label) triplets, label 1 = same instance, 0 = different.
        epochs, batch_size, lr, weight_decay, warmup: AdamW + warmup-cosine (paper: 10, 600,
            5e-4, 5e-4, 0.1).
        desc_variable_min: each batch keeps a random number of descriptors between this and the
            batch's maximum (paper 100).
        seed: shuffling and truncation seed.

    Returns:
        :class:`FitHistory`. The model is left in eval mode.
    """
    if not len(pairs):
        raise ValueError("pairs must not be empty")
    labels = np.array([p[2] for p in pairs])
    if not set(np.unique(labels)) <= {0, 1}:
        raise ValueError("pair labels must be 0 or 1")
    check_int(epochs, "epochs", low=1)
    check_int(batch_size, "batch_size", low=1)
    check_int(desc_variable_min, "desc_variable_min", low=1)
    check_int(seed, "seed", low=0)
    for value, name in ((lr, "lr"), (weight_decay, "weight_decay")):
        check_range(value, name, low=0.0, low_inclusive=(name == "weight_decay"))
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    check_range(warmup, "warmup", low=0.0, high=1.0)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(pairs) / batch_size)
    total = epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, total, warmup))
    hist = FitHistory()
    model.train()
    for _ in progress_bar(range(epochs), enabled=progress, desc="fit", unit="epoch"):
        perm = rng.permutation(len(pairs))
        correct = 0
        for start in range(0, len(pairs), batch_size):
            idx = perm[start : start + batch_size]
            qb, qm = pad_batch([pairs[i][0] for i in idx])
            db, dm = pad_batch([pairs[i][1] for i in idx])
            lq = int(rng.integers(min(desc_variable_min, qb.shape[1]), qb.shape[1] + 1))
            ld = int(rng.integers(min(desc_variable_min, db.shape[1]), db.shape[1] + 1))
            y = torch.from_numpy(labels[idx].astype(np.float32))
            logit = model.logits(qb[:, :lq], db[:, :ld], qm[:, :lq], dm[:, :ld])
            loss = F.binary_cross_entropy_with_logits(logit, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            hist.loss.append(float(loss.detach()))
            correct += int(((logit > 0).float() == y).sum())
        hist.accuracy.append(correct / len(pairs))
    model.eval()
    return hist
