"""A latent-propensity simulator with a known true RI, and a zoo of simulated models.

Each question ``i`` has latent propensities ``(U_i, V_i) ~ N₂(0, [[1, ρ], [ρ, 1]])``. The model
answers wrongly when ``V_i + ξ > b`` and refuses when ``U_i + η > a``, with per-run noise
``ξ ~ N(0, σ_e²)``, ``η ~ N(0, σ_r²)``. The prompt that sets the refusal rate only moves the
threshold ``a``: an increasing transform of the refusal propensity, which leaves RI unchanged
(spec §2.2). The per-question probabilities ``r_i = P(U_i + η > a)`` and
``e_i = P(V_i + ξ > b)`` are increasing in ``U_i`` and ``V_i``, so the true RI is the Spearman
correlation of ``(U, V)``: ``(6/π)·arcsin(ρ/2)``.

One binary draw per question sees ``(U + η, V + ξ)``, whose correlation is attenuated to
``ρ / √((1 + σ_r²)(1 + σ_e²))``: :meth:`LatentPropensityModel.observable_ri` is what the
two-pass estimator converges to (spec §2.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

from iclr26.refusal_index.tetrachoric import pearson_to_spearman
from iclr26.shared import check_int, check_range

__all__ = ["LatentPropensityModel", "TwoPassSample", "make_model_zoo"]


@dataclass(frozen=True)
class TwoPassSample:
    """One simulated evaluation: both passes over the same questions.

    Attributes:
        refused: ``(n,)`` refused in pass B.
        forced_wrong: ``(n,)`` wrong in pass A.
        answered_wrong: ``(n,)`` answered and wrong in pass B (consistent with pass A).
    """

    refused: NDArray[np.bool_]
    forced_wrong: NDArray[np.bool_]

    @property
    def answered_wrong(self) -> NDArray[np.bool_]:
        return ~self.refused & self.forced_wrong

    @property
    def rates(self) -> tuple[float, float, float]:
        """``(q, p_e, w)``: the aggregate rates the two-pass estimator needs."""
        return (
            float(self.refused.mean()),
            float(self.forced_wrong.mean()),
            float(self.answered_wrong.mean()),
        )


class LatentPropensityModel:
    """A simulated model on a question set with known refusal–error dependence.

    Args:
        n_items: number of questions.
        rho: latent correlation between refusal and error propensities, in ``(-1, 1)``.
        error_rate: forced-answer error rate ``p_e`` in ``(0, 1)``.
        noise_refusal: ``σ_r``, per-run noise of refusals (0 = deterministic).
        noise_error: ``σ_e``, per-run noise of errors.
        seed: seed of the questions' latent propensities.
        name: label used in reports.
    """

    def __init__(
        self,
        n_items: int,
        rho: float,
        error_rate: float,
        *,
        noise_refusal: float = 0.0,
        noise_error: float = 0.0,
        seed: int = 0,
        name: str = "model",
    ) -> None:
        self.n_items = check_int(n_items, "n_items", low=4)
        self.rho = check_range(
            rho, "rho", low=-1.0, high=1.0, low_inclusive=False, high_inclusive=False
        )
        self.error_rate = check_range(
            error_rate, "error_rate", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
        )
        self.noise_refusal = check_range(noise_refusal, "noise_refusal", low=0.0)
        self.noise_error = check_range(noise_error, "noise_error", low=0.0)
        self.name = name
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((2, n_items))
        self.u = z[0]
        self.v = self.rho * z[0] + math.sqrt(1.0 - self.rho**2) * z[1]
        self._b = math.sqrt(1.0 + self.noise_error**2) * float(ndtri(1.0 - self.error_rate))

    def _threshold(self, refusal_rate: float) -> float:
        q = check_range(
            refusal_rate,
            "refusal_rate",
            low=0.0,
            high=1.0,
            low_inclusive=False,
            high_inclusive=False,
        )
        return math.sqrt(1.0 + self.noise_refusal**2) * float(ndtri(1.0 - q))

    def true_ri(self) -> float:
        """Population RI of the latent propensities: ``(6/π)·arcsin(ρ/2)``."""
        return float(pearson_to_spearman(self.rho))

    def observable_ri(self) -> float:
        """What one-draw-per-question estimators converge to: the attenuated correlation's RI."""
        att = self.rho / math.sqrt((1 + self.noise_refusal**2) * (1 + self.noise_error**2))
        return float(pearson_to_spearman(att))

    def refusal_probs(self, refusal_rate: float) -> NDArray[np.float64]:
        """Per-question refusal probabilities ``r_i`` at a prompt giving ``refusal_rate``."""
        a = self._threshold(refusal_rate)
        return _exceed(self.u, a, self.noise_refusal)

    def error_probs(self) -> NDArray[np.float64]:
        """Per-question forced-answer error probabilities ``e_i``."""
        return _exceed(self.v, self._b, self.noise_error)

    def sample(self, refusal_rate: float, rng: np.random.Generator) -> TwoPassSample:
        """Run both passes once: pass A forced, pass B with the prompt giving ``refusal_rate``.

        The pass-B answer is the pass-A answer (same error noise), the consistency assumption.
        """
        a = self._threshold(refusal_rate)
        noise = rng.standard_normal((2, self.n_items))
        refused = self.u + self.noise_refusal * noise[0] > a
        wrong = self.v + self.noise_error * noise[1] > self._b
        return TwoPassSample(refused=refused, forced_wrong=wrong)

    def __repr__(self) -> str:
        return (
            f"LatentPropensityModel({self.name!r}, n_items={self.n_items}, rho={self.rho:.3f}, "
            f"error_rate={self.error_rate:.3f})"
        )


def _exceed(latent: NDArray, threshold: float, noise: float) -> NDArray[np.float64]:
    if noise == 0.0:
        return (latent > threshold).astype(float)
    return ndtr((latent - threshold) / noise)


def make_model_zoo(
    n_models: int = 16,
    n_datasets: int = 5,
    *,
    n_items: int = 2000,
    noise: float = 0.0,
    seed: int = 0,
) -> list[list[LatentPropensityModel]]:
    """A zoo of simulated models evaluated on several datasets (``[model][dataset]``).

    Each model has its own refusal quality (latent ρ drawn from U(0.05, 0.85)) and its own
    accuracy (error rate drawn from U(0.15, 0.75)), independently, so a metric that tracks refusal
    quality should not track accuracy. Datasets shift each model's error rate by a dataset
    difficulty and jitter its ρ by N(0, 0.05²).

    Args:
        n_models: number of models (the paper evaluates 16).
        n_datasets: number of datasets (the paper uses 5).
        n_items: questions per dataset.
        noise: per-run noise ``σ`` for refusals and errors.
        seed: seed of the zoo.
    """
    check_int(n_models, "n_models", low=2)
    check_int(n_datasets, "n_datasets", low=1)
    rng = np.random.default_rng(seed)
    rho = rng.uniform(0.05, 0.85, n_models)
    err = rng.uniform(0.15, 0.75, n_models)
    difficulty = rng.uniform(-0.1, 0.1, n_datasets)
    zoo = []
    for m in range(n_models):
        row = []
        for d in range(n_datasets):
            rho_md = float(np.clip(rho[m] + rng.normal(0.0, 0.05), -0.95, 0.95))
            err_md = float(np.clip(err[m] + difficulty[d], 0.05, 0.95))
            row.append(
                LatentPropensityModel(
                    n_items,
                    rho_md,
                    err_md,
                    noise_refusal=noise,
                    noise_error=noise,
                    seed=int(rng.integers(2**31)),
                    name=f"sim-{m:02d}/d{d}",
                )
            )
        zoo.append(row)
    return zoo
