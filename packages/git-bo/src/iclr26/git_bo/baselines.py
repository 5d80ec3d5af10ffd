"""The peers GIT-BO is compared with, all minimising ``f`` over ``[0, 1]^D`` with one budget.

- :func:`random_search`: scrambled Sobol points over the box.
- :func:`center_box`: uniform points in ``[0.3, 0.7]^D`` (the control that exposes a benchmark
  whose optimum sits near the centre).
- :func:`vanilla_bo`: BoTorch ``SingleTaskGP`` (dimension-scaled priors, Hvarfner et al. 2024)
  + ``LogExpectedImprovement`` maximised by ``optimize_acqf`` (the paper's "Vanilla BO").
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr26.shared import check_int

__all__ = ["BaselineResult", "center_box", "random_search", "vanilla_bo", "vanilla_bo_step"]


@dataclass
class BaselineResult:
    """``y (n,)`` values in evaluation order and seconds spent choosing each point."""

    X: np.ndarray
    y: np.ndarray
    seconds: list[float] = field(default_factory=list)

    def best_so_far(self) -> np.ndarray:
        """Running minimum."""
        return np.minimum.accumulate(self.y)


def _check(dim: int, budget: int, seed: int) -> None:
    check_int(dim, "dim", low=1)
    check_int(budget, "budget", low=1)
    check_int(seed, "seed", low=0)


def random_search(
    f: Callable[[np.ndarray], float], dim: int, budget: int, seed: int = 0
) -> BaselineResult:
    """``budget`` scrambled Sobol points in ``[0, 1]^dim``."""
    _check(dim, budget, seed)
    X = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed).draw(
        budget, dtype=torch.float64
    )
    X = X.numpy()
    return BaselineResult(X, np.array([f(x) for x in X]), [0.0] * budget)


def center_box(f: Callable[[np.ndarray], float], dim: int, budget: int, seed: int = 0,
               low: float = 0.3, high: float = 0.7) -> BaselineResult:  # fmt: skip
    """``budget`` uniform points in ``[low, high]^dim``."""
    _check(dim, budget, seed)
    X = low + (high - low) * np.random.default_rng(seed).random((budget, dim))
    return BaselineResult(X, np.array([f(x) for x in X]), [0.0] * budget)


def vanilla_bo_step(
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    num_restarts: int = 4,
    raw_samples: int = 256,
    maxiter: int | None = 50,
    seed: int = 0,
) -> torch.Tensor:
    """One vanilla-BO proposal for minimisation: fit ``SingleTaskGP`` on ``(X, y)`` and return the
    ``(1, D)`` maximiser of LogEI found by ``optimize_acqf`` over the unit cube."""
    from botorch.acquisition import LogExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    D = X.shape[1]
    torch.manual_seed(seed)
    model = SingleTaskGP(X, -y.unsqueeze(-1), outcome_transform=Standardize(m=1))
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {} if maxiter is None else {"optimizer_kwargs": {"options": {"maxiter": maxiter}}}
        fit_gpytorch_mll(mll, **kw)
        acq = LogExpectedImprovement(model, best_f=float((-y).max()))
        bounds = torch.stack([torch.zeros(D), torch.ones(D)]).to(X)
        cand, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=num_restarts,
                                raw_samples=raw_samples)  # fmt: skip
    return cand.detach()


def vanilla_bo(
    f: Callable[[np.ndarray], float],
    dim: int,
    budget: int,
    *,
    n_init: int = 20,
    seed: int = 0,
    num_restarts: int = 4,
    raw_samples: int = 256,
) -> BaselineResult:
    """Vanilla BO (SingleTaskGP + LogEI, ``optimize_acqf``) after ``n_init`` Sobol points."""
    _check(dim, budget, seed)
    check_int(n_init, "n_init", low=2, high=budget)
    X = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed).draw(
        n_init, dtype=torch.float64
    )
    y = torch.tensor([f(x) for x in X.numpy()], dtype=torch.float64)
    seconds = [0.0] * n_init
    while X.shape[0] < budget:
        t0 = time.perf_counter()
        x = vanilla_bo_step(X, y, num_restarts=num_restarts, raw_samples=raw_samples,
                            seed=seed + X.shape[0])  # fmt: skip
        seconds.append(time.perf_counter() - t0)
        X = torch.cat([X, x])
        y = torch.cat([y, torch.tensor([f(x[0].numpy())], dtype=torch.float64)])
    return BaselineResult(X.numpy(), y.numpy(), seconds)
