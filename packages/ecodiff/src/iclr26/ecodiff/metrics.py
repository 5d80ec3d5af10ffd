"""Sample-quality measures usable offline: distance to the dense model's samples, accuracy of a
digits classifier on class-conditional samples, and a Fréchet distance in the hidden features of
that classifier (a local stand-in for FID: it is *not* FID, which needs Inception weights)."""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["DigitsJudge", "frechet_distance", "mse", "psnr"]


def mse(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean squared error between two equally shaped sample batches."""
    if a.shape != b.shape:
        raise ValueError(
            f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    return float((a.double() - b.double()).pow(2).mean())


def psnr(a: torch.Tensor, b: torch.Tensor, data_range: float = 2.0) -> float:
    """PSNR in dB for samples in a range of width ``data_range`` (2 for [-1, 1])."""
    err = mse(a, b)
    return math.inf if err == 0 else 10 * math.log10(data_range**2 / err)


def _sqrtm_psd(m: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh((m + m.T) / 2)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.T


def frechet_distance(f1: np.ndarray, f2: np.ndarray) -> float:
    """``|μ1−μ2|² + tr(Σ1 + Σ2 − 2 (Σ1^{1/2} Σ2 Σ1^{1/2})^{1/2})`` between two feature sets."""
    f1, f2 = np.asarray(f1, dtype=np.float64), np.asarray(f2, dtype=np.float64)
    if f1.ndim != 2 or f2.ndim != 2 or f1.shape[1] != f2.shape[1]:
        raise ValueError("f1 and f2 must be 2-D with the same number of features")
    if len(f1) < 2 or len(f2) < 2:
        raise ValueError("f1 and f2 need at least two rows each")
    mu1, mu2 = f1.mean(0), f2.mean(0)
    s1, s2 = np.cov(f1, rowvar=False), np.cov(f2, rowvar=False)
    r1 = _sqrtm_psd(s1)
    cross = _sqrtm_psd(r1 @ s2 @ r1)
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(cross))


class DigitsJudge:
    """A small MLP classifier (scikit-learn) trained on real 8×8 digits, used to score samples.

    Args:
        x, y: training images ``(N, 1, 8, 8)`` in [-1, 1] and labels.
        seed: classifier seed.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, seed: int = 0) -> None:
        from sklearn.neural_network import MLPClassifier

        self.clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=200, random_state=seed)
        self.clf.fit(self._flat(x), np.asarray(y))

    @staticmethod
    def _flat(x: torch.Tensor) -> np.ndarray:
        return x.detach().double().cpu().reshape(len(x), -1).clamp(-1, 1).numpy()

    def accuracy(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Fraction of samples classified as the class they were generated for."""
        return float((self.clf.predict(self._flat(x)) == np.asarray(y)).mean())

    def features(self, x: torch.Tensor) -> np.ndarray:
        """Hidden-layer (ReLU) activations, the feature space of :meth:`frechet`."""
        h = self._flat(x) @ self.clf.coefs_[0] + self.clf.intercepts_[0]
        return np.maximum(h, 0)

    def frechet(self, x: torch.Tensor, reference: torch.Tensor) -> float:
        """Fréchet distance between the features of ``x`` and of ``reference`` images."""
        return frechet_distance(self.features(x), self.features(reference))
