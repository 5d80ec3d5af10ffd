"""Prototype classifiers: class means, SAFA's subspace projection, TEEN calibration, cosine head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

__all__ = ["CosineClassifier", "class_means", "subspace_project", "teen_calibrate"]


def _check_matrix(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor")
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D (n, d) tensor, got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or inf")


def class_means(features: Tensor, labels: Tensor, classes: Sequence[int]) -> Tensor:
    """Mean feature of each class in ``classes`` order: ``(len(classes), d)``.

    ``features`` is ``(n, d)`` (time-averaged features) and ``labels`` ``(n,)`` integers; every
    class must have at least one sample.
    """
    _check_matrix(features, "features")
    if not isinstance(labels, Tensor) or labels.is_floating_point() or labels.ndim != 1:
        raise TypeError("labels must be a 1-D integer torch.Tensor")
    if labels.shape[0] != features.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} rows, features {features.shape[0]}")
    out = []
    for c in classes:
        sel = labels == int(c)
        if not bool(sel.any()):
            raise ValueError(f"classes: class {c} has no samples in labels")
        out.append(features[sel].mean(dim=0))
    if not out:
        raise ValueError("classes must not be empty")
    return torch.stack(out)


def subspace_project(new: Tensor, base: Tensor, alpha: float = 0.1) -> Tensor:
    """SAFA's projection of new prototypes toward span(base prototypes) (§2.5).

    ``B̃, C̃`` are the row-normalised base ``(n_b, d)`` and new ``(way, d)`` prototypes,
    ``G = B̃ᵀ (B̃ B̃ᵀ)⁺ B̃`` the orthogonal projector onto span(B̃), and the result is
    ``normalize((1 − α) C̃ + α C̃ G)``. α is the official ``shift_weight`` (0.1 for CIFAR-100).
    """
    _check_matrix(new, "new")
    _check_matrix(base, "base")
    if new.shape[1] != base.shape[1]:
        raise ValueError(f"new has d={new.shape[1]} but base has d={base.shape[1]}")
    if not (isinstance(alpha, int | float) and 0.0 <= alpha <= 1.0):
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    Bn = F.normalize(base, dim=1)
    Cn = F.normalize(new, dim=1)
    G = Bn.T @ torch.linalg.pinv(Bn @ Bn.T, hermitian=True) @ Bn
    return F.normalize((1.0 - alpha) * Cn + alpha * (Cn @ G), dim=1)


def teen_calibrate(new: Tensor, base: Tensor, tau: float = 16.0, weight: float = 0.5) -> Tensor:
    """TEEN (Wang et al., NeurIPS 2023): ``normalize(w C̃ + (1 − w) softmax(τ C̃ B̃ᵀ) B̃)``."""
    _check_matrix(new, "new")
    _check_matrix(base, "base")
    if new.shape[1] != base.shape[1]:
        raise ValueError(f"new has d={new.shape[1]} but base has d={base.shape[1]}")
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    Bn = F.normalize(base, dim=1)
    Cn = F.normalize(new, dim=1)
    w = torch.softmax(tau * Cn @ Bn.T, dim=1)
    return F.normalize(weight * Cn + (1.0 - weight) * w @ Bn, dim=1)


class CosineClassifier(nn.Module):
    """Cosine-similarity head over prototypes: logits = temperature · cos(f, p) (``avg_cos``).

    ``forward`` accepts ``(n, d)`` or per-time-step ``(n, T, d)`` features; with time steps the
    cosine logits are averaged over T as in the official code.
    """

    def __init__(self, feat_dim: int, temperature: float = 16.0) -> None:
        super().__init__()
        if isinstance(feat_dim, bool) or not isinstance(feat_dim, int) or feat_dim < 1:
            raise ValueError(f"feat_dim must be a positive int, got {feat_dim!r}")
        self.feat_dim = feat_dim
        self.temperature = float(temperature)
        self.weight = nn.Parameter(torch.zeros(0, feat_dim))

    @property
    def num_classes(self) -> int:
        return self.weight.shape[0]

    def add_classes(self, protos: Tensor) -> None:
        """Append prototype rows ``(k, d)``; existing rows are kept."""
        _check_matrix(protos, "protos")
        if protos.shape[1] != self.feat_dim:
            raise ValueError(f"protos must have d={self.feat_dim}, got {protos.shape[1]}")
        with torch.no_grad():
            w = torch.cat([self.weight.detach(), protos.detach().to(self.weight)], dim=0)
        self.weight = nn.Parameter(w)

    def forward(self, feats: Tensor) -> Tensor:
        if self.num_classes == 0:
            raise ValueError("the classifier has no classes yet: call add_classes first")
        w = F.normalize(self.weight, dim=-1)
        logits = self.temperature * F.normalize(feats, dim=-1) @ w.T
        return logits.mean(dim=1) if feats.ndim == 3 else logits
