"""The peers GIT-BO is compared with, all minimising ``f`` over ``[0, 1]^D`` with one budget.

- :func:`random_search`: scrambled Sobol points over the box.
- :func:`center_box`: uniform points in ``[0.3, 0.7]^D`` (the control that exposes a benchmark
  whose optimum sits near the centre).
- :func:`center_point`: the box centre alone, one evaluation (the bar a method whose samples stay
  near the centre, such as the official mean-of-X origin, has to clear).
- :func:`vanilla_bo`: BoTorch ``SingleTaskGP`` (dimension-scaled priors, Hvarfner et al. 2024)
  + ``LogExpectedImprovement`` maximised by ``optimize_acqf`` (the paper's "Vanilla BO").
- :class:`TuRBO1` / :func:`turbo`: TuRBO-1 (Eriksson et al. 2019) as the BoTorch tutorial
  writes it: one trust region around the incumbent, a Matérn-5/2 ARD GP, Thompson sampling over
  perturbed Sobol candidates, success/failure counters, restart when the region collapses.
- :class:`SAASBO` / :func:`saasbo`: BoTorch ``SaasFullyBayesianSingleTaskGP`` fitted by NUTS
  (Eriksson & Jankowiak 2021, NumPyro NUTS) + qLogEI over the posterior samples, short chains
  for a CPU.
- :class:`TPE` / :func:`tpe`: Optuna's ``TPESampler`` through its ask/tell API (extra
  ``[baselines]``).

The three are ask/tell objects sharing :class:`AskTell` (``ask() -> (1, D)`` in the unit cube,
``tell(x, y)``, ``run(f, budget)``); each starts from the same scrambled-Sobol initial design as
the other methods (``n_init`` points, seed ``seed``) and counts it in the budget.
"""

from __future__ import annotations

import math
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr26.shared import check_int, check_range

__all__ = [
    "SAASBO",
    "TPE",
    "AskTell",
    "BaselineResult",
    "TuRBO1",
    "center_box",
    "center_point",
    "random_search",
    "saasbo",
    "tpe",
    "turbo",
    "vanilla_bo",
    "vanilla_bo_step",
]


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


def center_point(f: Callable[[np.ndarray], float], dim: int, budget: int = 1,
                 seed: int = 0) -> BaselineResult:  # fmt: skip
    """The centre ``(0.5, …, 0.5)`` of the unit cube, evaluated once whatever ``budget`` is (the
    control "evaluate the centre"; ``budget`` and ``seed`` are checked for a uniform signature)."""
    _check(dim, budget, seed)
    X = np.full((1, dim), 0.5)
    return BaselineResult(X, np.array([f(X[0])]), [0.0])


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


class AskTell(ABC):
    """Minimise over ``[0, 1]^dim`` by ask/tell; the first ``n_init`` asks are scrambled Sobol
    points (seed ``seed``), the same design every method in this package starts from.

    Subclasses implement :meth:`_propose` (one point from the data told so far).
    """

    name = "ask-tell"

    def __init__(self, dim: int, *, n_init: int = 20, seed: int = 0) -> None:
        check_int(dim, "dim", low=1)
        check_int(n_init, "n_init", low=2)
        check_int(seed, "seed", low=0, high=2**31 - 1)
        self.dim, self.n_init, self.seed = dim, n_init, seed
        self._init = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed).draw(
            n_init, dtype=torch.float64
        )
        self.X = torch.empty(0, dim, dtype=torch.float64)
        self.y = torch.empty(0, dtype=torch.float64)
        self.seconds: list[float] = []

    @property
    def n_told(self) -> int:
        """Observations told so far."""
        return int(self.y.shape[0])

    def ask(self) -> np.ndarray:
        """The next point, ``(1, dim)`` in ``[0, 1]^dim``."""
        t0 = time.perf_counter()
        if self.n_told < self.n_init:
            x = self._init[self.n_told : self.n_told + 1]
        else:
            x = self._propose().reshape(1, self.dim).clamp(0.0, 1.0)
        self.seconds.append(time.perf_counter() - t0)
        return x.detach().numpy().copy()

    @abstractmethod
    def _propose(self) -> torch.Tensor:
        """One model-based proposal in the unit cube, from the data told so far."""

    def propose(self) -> np.ndarray:
        """One model-based proposal ``(1, dim)`` from the data told so far, not recorded (the
        next :meth:`ask` is unaffected apart from random draws): what one iteration costs."""
        if self.n_told < 2:
            raise ValueError(f"need at least 2 observations to propose, have {self.n_told}")
        return self._propose().reshape(1, self.dim).clamp(0.0, 1.0).detach().numpy().copy()

    def tell(self, x: np.ndarray, y: float) -> None:
        """Record ``f(x) = y`` for one point ``x`` (``(dim,)`` or ``(1, dim)``)."""
        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.shape[0] != self.dim:
            raise ValueError(f"x must have {self.dim} entries, got {xa.shape[0]}")
        if not np.isfinite(xa).all() or (xa < 0).any() or (xa > 1).any():
            raise ValueError("x must be finite and inside [0, 1]^dim")
        yv = float(y)
        if not np.isfinite(yv):
            raise ValueError(f"y must be finite, got {y!r}")
        self.X = torch.cat([self.X, torch.as_tensor(xa)[None]])
        self.y = torch.cat([self.y, torch.tensor([yv], dtype=torch.float64)])
        self._after_tell(yv)

    def _after_tell(self, y: float) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Hook for state updates (TuRBO's trust region)."""

    def run(self, f: Callable[[np.ndarray], float], budget: int) -> BaselineResult:
        """Evaluate ``f`` until ``budget`` evaluations in total (the initial design included):
        exactly ``budget - n_told`` calls."""
        if not callable(f):
            raise TypeError(f"f must be callable, got {type(f).__name__}")
        check_int(budget, "budget", low=1)
        if budget < self.n_init:
            raise ValueError(f"budget ({budget}) is smaller than n_init ({self.n_init})")
        while self.n_told < budget:
            x = self.ask()[0]
            self.tell(x, float(f(x)))
        return BaselineResult(self.X.numpy().copy(), self.y.numpy().copy(), list(self.seconds))


class TuRBO1(AskTell):
    """TuRBO-1 (Eriksson et al., NeurIPS 2019), following the BoTorch tutorial.

    A Matérn-5/2 ARD GP (lengthscales in ``[0.005, 4]``, noise in ``[1e-8, 1e-3]``) is fitted on
    the data of the current trust region's run; the region is a box of side ``length`` around the
    incumbent, stretched per dimension by the lengthscales (normalised to geometric mean 1).
    Candidates perturb the incumbent in a random subset of coordinates (probability
    ``min(20 / D, 1)``) towards Sobol points in the box, and Thompson sampling (one joint
    posterior draw, BoTorch ``MaxPosteriorSampling``) picks the next point. ``success_tolerance``
    consecutive improvements double the side (up to ``length_max``), ``failure_tolerance =
    ceil(max(4, D))`` consecutive failures halve it; below ``length_min`` the run restarts from a
    fresh Sobol design (the TuRBO paper), and the old data are no longer used by the GP.

    Args:
        dim, n_init, seed: see :class:`AskTell` (``n_init`` is also the restart design size).
        n_candidates: Thompson-sampling candidates (tutorial: ``min(5000, max(2000, 200 D))``;
            default 1000 here, the GIT-BO candidate count, because the joint draw costs
            ``O(n_candidates³)`` on a CPU).
        length_init, length_min, length_max: trust-region side (tutorial: 0.8, 0.5⁷, 1.6).
        success_tolerance: improvements before expanding (tutorial 10; the paper uses 3).
        maxiter: L-BFGS iterations of each GP fit (``None``: BoTorch's default).
    """

    name = "turbo-1"

    def __init__(self, dim: int, *, n_init: int = 20, seed: int = 0, n_candidates: int = 1000,
                 length_init: float = 0.8, length_min: float = 0.5**7, length_max: float = 1.6,
                 success_tolerance: int = 10, maxiter: int | None = 50) -> None:  # fmt: skip
        super().__init__(dim, n_init=n_init, seed=seed)
        check_int(n_candidates, "n_candidates", low=1)
        check_range(length_min, "length_min", low=0.0, low_inclusive=False)
        check_range(length_init, "length_init", low=length_min, high=length_max)
        check_int(success_tolerance, "success_tolerance", low=1)
        if maxiter is not None:
            check_int(maxiter, "maxiter", low=1)
        self.n_candidates, self.maxiter = n_candidates, maxiter
        self.length_init, self.length_min, self.length_max = length_init, length_min, length_max
        self.success_tolerance = success_tolerance
        self.failure_tolerance = math.ceil(max(4.0, float(dim)))
        self.restarts = 0
        self._start = 0  # index where the current trust-region run's data begin
        self._restart_left = 0  # Sobol restart points still to evaluate
        self._reset_state()

    def _reset_state(self) -> None:
        self.length = self.length_init
        self.success_counter = self.failure_counter = 0
        self.best_value = math.inf

    def _after_tell(self, y: float) -> None:
        local = self.y[self._start :]
        if self.n_told <= self.n_init or self._restart_left > 0:
            if self._restart_left > 0:
                self._restart_left -= 1
            self.best_value = float(local.min())
            return
        if y < self.best_value - 1e-3 * abs(self.best_value):
            self.success_counter += 1
            self.failure_counter = 0
        else:
            self.success_counter = 0
            self.failure_counter += 1
        if self.success_counter == self.success_tolerance:
            self.length = min(2.0 * self.length, self.length_max)
            self.success_counter = 0
        elif self.failure_counter == self.failure_tolerance:
            self.length /= 2.0
            self.failure_counter = 0
        self.best_value = min(self.best_value, y)
        if self.length < self.length_min:  # restart: a fresh design, a fresh region
            self.restarts += 1
            self._start = self.n_told
            self._restart_left = self.n_init
            self._reset_state()
            self._restart = torch.quasirandom.SobolEngine(
                self.dim, scramble=True, seed=self.seed + 7919 * self.restarts
            ).draw(self.n_init, dtype=torch.float64)

    def _propose(self) -> torch.Tensor:
        if self._restart_left > 0:
            return self._restart[self.n_init - self._restart_left]
        from botorch.fit import fit_gpytorch_mll
        from botorch.generation import MaxPosteriorSampling
        from botorch.models import SingleTaskGP
        from gpytorch.constraints import Interval
        from gpytorch.kernels import MaternKernel, ScaleKernel
        from gpytorch.likelihoods import GaussianLikelihood
        from gpytorch.mlls import ExactMarginalLogLikelihood

        D = self.dim
        X, y = self.X[self._start :], self.y[self._start :]
        Y = -y.unsqueeze(-1)  # BoTorch maximises
        Y = (Y - Y.mean()) / Y.std().clamp_min(1e-9)
        torch.manual_seed(self.seed * 1_000_003 + self.n_told)
        likelihood = GaussianLikelihood(noise_constraint=Interval(1e-8, 1e-3))
        covar = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=D,
                                         lengthscale_constraint=Interval(0.005, 4.0)))  # fmt: skip
        model = SingleTaskGP(X, Y, covar_module=covar, likelihood=likelihood)
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = {} if self.maxiter is None else {
                "optimizer_kwargs": {"options": {"maxiter": self.maxiter}}}  # fmt: skip
            fit_gpytorch_mll(mll, **kw)
        x_center = X[int(torch.argmax(Y))].clone()
        w = model.covar_module.base_kernel.lengthscale.squeeze().detach().reshape(D)
        w = w / w.mean()
        w = w / torch.prod(w.pow(1.0 / D))
        lb = (x_center - w * self.length / 2.0).clamp(0.0, 1.0)
        ub = (x_center + w * self.length / 2.0).clamp(0.0, 1.0)
        sobol = torch.quasirandom.SobolEngine(D, scramble=True, seed=self.seed + self.n_told)
        pert = lb + (ub - lb) * sobol.draw(self.n_candidates, dtype=torch.float64)
        g = torch.Generator().manual_seed(self.seed * 7_000_003 + self.n_told)
        prob = min(20.0 / D, 1.0)
        mask = torch.rand(self.n_candidates, D, generator=g, dtype=torch.float64) <= prob
        empty = mask.sum(1) == 0
        if empty.any():
            idx = torch.randint(0, D, (int(empty.sum()),), generator=g)
            mask[empty.nonzero().squeeze(1), idx] = True
        cand = torch.where(mask, pert, x_center.expand(self.n_candidates, D))
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x_next = MaxPosteriorSampling(model=model, replacement=False)(cand, num_samples=1)
        return x_next.detach()


def turbo(f: Callable[[np.ndarray], float], dim: int, budget: int, *, n_init: int = 20,
          seed: int = 0, **kwargs) -> BaselineResult:  # fmt: skip
    """Minimise ``f`` over ``[0, 1]^dim`` with :class:`TuRBO1` (``kwargs`` go to it)."""
    _check(dim, budget, seed)
    return TuRBO1(dim, n_init=n_init, seed=seed, **kwargs).run(f, budget)


def _parameters(fn: Callable) -> set[str]:
    import inspect

    return set(inspect.signature(fn).parameters)


class SAASBO(AskTell):
    """SAASBO (Eriksson & Jankowiak, UAI 2021) with BoTorch's ``SaasFullyBayesianSingleTaskGP``.

    Each step fits the sparse-axis-aligned-subspace GP by NUTS (``fit_fully_bayesian_model_nuts``)
    and maximises qLogEI averaged over the posterior samples with ``optimize_acqf``. The BoTorch
    tutorial uses 512 warm-up / 256 samples / thinning 16 and 10 restarts / 1,024 raw samples;
    the defaults here are short chains for a CPU (32 / 32 / 8 → 4 samples, 2 restarts / 128 raw
    samples), so the posterior is coarser than the paper's.

    Args:
        dim, n_init, seed: see :class:`AskTell`.
        warmup_steps, num_samples, thinning: NUTS settings.
        num_restarts, raw_samples: ``optimize_acqf`` settings.
    """

    name = "saasbo"

    def __init__(self, dim: int, *, n_init: int = 20, seed: int = 0, warmup_steps: int = 32,
                 num_samples: int = 32, thinning: int = 8, num_restarts: int = 2,
                 raw_samples: int = 128) -> None:  # fmt: skip
        super().__init__(dim, n_init=n_init, seed=seed)
        check_int(warmup_steps, "warmup_steps", low=1)
        check_int(num_samples, "num_samples", low=1)
        check_int(thinning, "thinning", low=1, high=num_samples)
        check_int(num_restarts, "num_restarts", low=1)
        check_int(raw_samples, "raw_samples", low=1)
        self.warmup_steps, self.num_samples, self.thinning = warmup_steps, num_samples, thinning
        self.num_restarts, self.raw_samples = num_restarts, raw_samples

    def _propose(self) -> torch.Tensor:
        from botorch.acquisition import qLogExpectedImprovement
        from botorch.fit import fit_fully_bayesian_model_nuts
        from botorch.models.fully_bayesian import SaasFullyBayesianSingleTaskGP
        from botorch.models.transforms.outcome import Standardize
        from botorch.optim import optimize_acqf

        Y = -self.y.unsqueeze(-1)
        seed = (self.seed * 1_000_003 + self.n_told) % 2**31
        torch.manual_seed(seed)  # pyro's NUTS (botorch < 0.18) and optimize_acqf's raw samples
        try:
            gp = SaasFullyBayesianSingleTaskGP(self.X, Y, outcome_transform=Standardize(m=1))
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("SAASBO needs JAX and NumPyro: pip install "
                              "'iclr26-git-bo[baselines]'") from err  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = {"seed": seed} if "seed" in _parameters(fit_fully_bayesian_model_nuts) else {}
            fit_fully_bayesian_model_nuts(gp, warmup_steps=self.warmup_steps,
                                          num_samples=self.num_samples, thinning=self.thinning,
                                          disable_progbar=True, **kw)  # fmt: skip
            acq = qLogExpectedImprovement(gp, best_f=float(Y.max()))
            bounds = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(self.X)
            cand, _ = optimize_acqf(acq, bounds=bounds, q=1, num_restarts=self.num_restarts,
                                    raw_samples=self.raw_samples)  # fmt: skip
        return cand.detach()


def saasbo(f: Callable[[np.ndarray], float], dim: int, budget: int, *, n_init: int = 20,
           seed: int = 0, **kwargs) -> BaselineResult:  # fmt: skip
    """Minimise ``f`` over ``[0, 1]^dim`` with :class:`SAASBO` (``kwargs`` go to it)."""
    _check(dim, budget, seed)
    return SAASBO(dim, n_init=n_init, seed=seed, **kwargs).run(f, budget)


class TPE(AskTell):
    """Optuna's Tree-structured Parzen Estimator (``TPESampler``, Optuna's defaults otherwise:
    univariate densities, 24 EI candidates) through Optuna's ask/tell API. The shared Sobol
    design is enqueued as its ``n_startup_trials``; one float parameter per coordinate."""

    name = "tpe"

    def __init__(self, dim: int, *, n_init: int = 20, seed: int = 0,
                 multivariate: bool = False) -> None:  # fmt: skip
        super().__init__(dim, n_init=n_init, seed=seed)
        try:
            import optuna
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("TPE needs optuna: pip install 'iclr26-git-bo[baselines]'") from err
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ExperimentalWarning for multivariate
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_init,
                                                 multivariate=multivariate)  # fmt: skip
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._dist = optuna.distributions.FloatDistribution(0.0, 1.0)
        self._trial = None

    def ask(self) -> np.ndarray:
        """The next point, ``(1, dim)`` in ``[0, 1]^dim``."""
        if self._trial is not None:
            raise ValueError("tell the previous point before asking for another (TPE is serial)")
        t0 = time.perf_counter()
        names = [f"x{i}" for i in range(self.dim)]
        if self.n_told < self.n_init:
            self._study.enqueue_trial(dict(zip(names, self._init[self.n_told].tolist(),
                                               strict=True)))  # fmt: skip
        self._trial = self._study.ask(dict.fromkeys(names, self._dist))
        x = np.array([[self._trial.params[n] for n in names]])
        self.seconds.append(time.perf_counter() - t0)
        return x

    def tell(self, x: np.ndarray, y: float) -> None:
        """Record ``f(x) = y`` for the point of the pending :meth:`ask`."""
        if self._trial is None:
            raise ValueError("tell() without a pending ask() (TPE is serial)")
        super().tell(x, y)

    def _propose(self) -> torch.Tensor:
        import optuna

        if self._trial is not None:
            raise ValueError("tell the pending point before proposing (TPE is serial)")
        names = [f"x{i}" for i in range(self.dim)]
        trial = self._study.ask(dict.fromkeys(names, self._dist))
        # a timing probe: closed as failed, which TPE leaves out of its densities
        self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return torch.tensor([trial.params[n] for n in names], dtype=torch.float64)

    def _after_tell(self, y: float) -> None:
        self._study.tell(self._trial, y)
        self._trial = None


def tpe(f: Callable[[np.ndarray], float], dim: int, budget: int, *, n_init: int = 20,
        seed: int = 0, **kwargs) -> BaselineResult:  # fmt: skip
    """Minimise ``f`` over ``[0, 1]^dim`` with Optuna's TPE (``kwargs`` go to :class:`TPE`)."""
    _check(dim, budget, seed)
    return TPE(dim, n_init=n_init, seed=seed, **kwargs).run(f, budget)
