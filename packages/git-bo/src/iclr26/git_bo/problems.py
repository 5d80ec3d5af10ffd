"""Embedded high-dimensional test problems and a loader for user objectives.

``Embedded(fn, dim, d_eff)`` is ``f(x) = g(k · A (x − x*) + z*)`` on ``[0, 1]^D``: ``g`` is a
BoTorch synthetic function in ``d_eff`` dimensions with minimiser ``z*``, ``A`` has ``d_eff``
random orthonormal rows (a rotation), ``k`` is ``g``'s usual domain half-width and ``x*`` is drawn
uniformly, rejected while its embedded distance from the box centre is under half its typical
value (so the centre is not a free lunch). Lower is better; the minimum is ``g(z*)`` at ``x*``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from iclr26.shared import check_choice, check_int, check_range

__all__ = [
    "FUNCTIONS",
    "LASSO_BENCHES",
    "Embedded",
    "LassoSynthetic",
    "MujocoPolicy",
    "Rover",
    "SVMDigits",
    "UnitCube",
    "load_objective",
]

#: name -> (BoTorch class name, half-width k of the usual domain, minimiser coordinate z*)
FUNCTIONS: dict[str, tuple[str, float, float]] = {
    "ackley": ("Ackley", 32.768, 0.0),
    "rosenbrock": ("Rosenbrock", 7.5, 1.0),
    "levy": ("Levy", 10.0, 1.0),
    "styblinski-tang": ("StyblinskiTang", 5.0, -2.903534),
}


class Embedded:
    """A ``d_eff``-dimensional function hidden in ``[0, 1]^dim`` (to be minimised).

    Args:
        fn: one of :data:`FUNCTIONS`.
        dim: ambient dimension ``D``.
        d_eff: effective dimension (``<= dim``).
        noise: standard deviation of Gaussian observation noise (0: noise-free).
        seed: draws ``A``, ``x*`` and the noise.

    Attributes:
        A: ``(d_eff, D)`` orthonormal rows; ``true_basis`` is its transpose.
        x_opt: ``(D,)`` minimiser; ``optimal_value``: the minimum.
    """

    def __init__(self, fn: str = "ackley", dim: int = 100, d_eff: int = 10, noise: float = 0.0,
                 seed: int = 0) -> None:  # fmt: skip
        from botorch.test_functions import synthetic

        check_choice(fn, "fn", tuple(FUNCTIONS))
        check_int(dim, "dim", low=1)
        check_int(d_eff, "d_eff", low=1, high=dim)
        check_range(noise, "noise", low=0.0)
        check_int(seed, "seed", low=0)
        cls, self.half_width, z_opt = FUNCTIONS[fn]
        kwargs = {"dim": d_eff} if fn != "levy" or d_eff > 1 else {"dim": 1}
        self._g = getattr(synthetic, cls)(**kwargs).to(torch.float64)
        self.fn, self.dim, self.d_eff, self.noise = fn, dim, d_eff, float(noise)
        g = torch.Generator().manual_seed(seed)
        Q, R = torch.linalg.qr(torch.randn(dim, d_eff, generator=g, dtype=torch.float64))
        self.A = (Q * torch.sign(torch.diagonal(R))).T.contiguous()
        typical = d_eff / 12.0  # E‖A(x − c)‖² for x uniform
        for _ in range(1000):
            x_opt = torch.rand(dim, generator=g, dtype=torch.float64)
            if float((self.A @ (x_opt - 0.5)).pow(2).sum()) >= 0.5 * typical:
                break
        self.x_opt = x_opt
        self.z_opt = torch.full((d_eff,), z_opt, dtype=torch.float64)
        self.optimal_value = float(self._g._evaluate_true(self.z_opt.unsqueeze(0)))
        self._noise_gen = np.random.default_rng(seed + 1)
        self.bounds = np.stack([np.zeros(dim), np.ones(dim)])
        self.name = f"{fn}-D{dim}-d{d_eff}"

    @property
    def true_basis(self) -> torch.Tensor:
        """``(D, d_eff)`` orthonormal columns spanning the directions ``f`` depends on."""
        return self.A.T

    def evaluate(self, X: torch.Tensor) -> torch.Tensor:
        """Noise-free ``f`` on a ``(n, D)`` tensor, differentiable (autograd through BoTorch)."""
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must have shape (n, {self.dim}), got {tuple(X.shape)}")
        A = self.A.to(X)
        Z = self.half_width * (X - self.x_opt.to(X)) @ A.T + self.z_opt.to(X)
        # the closed form, also where the embedding leaves the usual domain (no clipping)
        return self._g._evaluate_true(Z)

    def __call__(self, x: Any) -> float | np.ndarray:
        """``f(x)`` for one point ``(D,)`` (a float) or a batch ``(n, D)`` (an array), plus noise."""
        X = torch.as_tensor(np.asarray(x, dtype=np.float64))
        single = X.ndim == 1
        X = X.unsqueeze(0) if single else X
        with torch.no_grad():
            y = self.evaluate(X).numpy()
        if self.noise > 0:
            y = y + self.noise * self._noise_gen.standard_normal(y.shape)
        return float(y[0]) if single else y

    def regret(self, value: float) -> float:
        """``value − optimal_value``."""
        return float(value) - self.optimal_value


class Rover:
    """Rover trajectory planning (Wang et al., AISTATS 2018, "Batched large-scale Bayesian
    optimization in high-dimensional spaces"), one of the paper's real problems, to be minimised.

    ``x ∈ [0, 1]^(2 n_points)`` are ``n_points`` 2-D control points (mapped to ``[-0.1, 1.1]²``)
    of a cubic B-spline (``scipy.interpolate.splprep`` with its default smoothing), evaluated at
    ``n_samples`` points from its start to its end. The cost of the path is its line integral of
    ``0.05 + 20 · [point in an obstacle]`` (trapezoid rule), where the obstacles are ``n_trees``
    squares of side 0.05 and everything outside the unit square, plus ``10 ‖p_0 − s‖₁ +
    10 ‖p_end − g‖₁`` for missing the start ``s = (0.05, 0.05)`` and the goal ``g = (0.95, 0.95)``.
    The paper maximises the reward ``5 − cost``; this returns ``cost − 5`` (lower is better, the
    convention of :class:`Embedded`), so a collision-free straight path scores about ``−4.94``.

    The official benchmark fixes a layout of about a hundred trees; here the tree centres are
    drawn uniformly from ``[0, 1]²`` by ``seed`` (the start and goal corners are kept free), so
    values are comparable across runs of this package, not with the paper's Rover numbers.

    Args:
        n_points: control points (``D = 2 n_points``; the paper's Rover is 60-D, 30 points).
        n_trees: number of square obstacles.
        n_samples: points along the path.
        seed: draws the tree layout.
    """

    def __init__(self, n_points: int = 30, n_trees: int = 100, n_samples: int = 1000,
                 seed: int = 0) -> None:  # fmt: skip
        check_int(n_points, "n_points", low=4)
        check_int(n_trees, "n_trees", low=0)
        check_int(n_samples, "n_samples", low=2)
        check_int(seed, "seed", low=0)
        self.n_points, self.n_samples = n_points, n_samples
        self.dim = 2 * n_points
        self.start, self.goal = np.array([0.05, 0.05]), np.array([0.95, 0.95])
        rng = np.random.default_rng(seed)
        centres = []
        while len(centres) < n_trees:
            c = rng.random(2)
            # the start and goal stay reachable: no tree within 0.1 of them
            if min(np.abs(c - self.start).max(), np.abs(c - self.goal).max()) > 0.1:
                centres.append(c)
        self.tree_low = np.array(centres).reshape(-1, 2) - 0.025
        self.tree_high = self.tree_low + 0.05
        self.bounds = np.stack([np.zeros(self.dim), np.ones(self.dim)])
        self.optimal_value = None  # unknown
        self.name = f"rover-D{self.dim}"

    def path(self, x: Any) -> np.ndarray:
        """The ``(n_samples, 2)`` points of the B-spline through the control points of ``x``."""
        from scipy.interpolate import splev, splprep

        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.shape[0] != self.dim:
            raise ValueError(f"x must have {self.dim} entries, got {xa.shape[0]}")
        if not np.isfinite(xa).all():
            raise ValueError("x must be finite")
        pts = (-0.1 + 1.2 * xa).reshape(-1, 2).T
        tck, _ = splprep(pts, k=3)
        return np.vstack(splev(np.linspace(0.0, 1.0, self.n_samples), tck)).T

    def cost_rate(self, points: np.ndarray) -> np.ndarray:
        """``0.05 + 20 · [in an obstacle]`` at ``(m, 2)`` points."""
        outside = ((points < 0) | (points > 1)).any(1)
        inside_tree = (
            (points[:, None, :] >= self.tree_low[None]) & (points[:, None, :] <= self.tree_high[None])
        ).all(-1).any(1)  # fmt: skip
        return 0.05 + 20.0 * (outside | inside_tree)

    def __call__(self, x: Any) -> float:
        """``cost − 5`` of the trajectory encoded by ``x`` (``(D,)`` in ``[0, 1]``)."""
        p = self.path(x)
        rate = self.cost_rate(p)
        seg = np.linalg.norm(np.diff(p, axis=0), axis=1)
        cost = float(np.sum(seg * 0.5 * (rate[1:] + rate[:-1])))
        cost += 10.0 * float(np.abs(p[0] - self.start).sum() + np.abs(p[-1] - self.goal).sum())
        return cost - 5.0


#: LassoBench's synthetic benchmarks: name -> (features = search dimension, samples, support size)
LASSO_BENCHES: dict[str, tuple[int, int, int]] = {
    "synt_simple": (60, 30, 3),
    "synt_medium": (100, 50, 5),
    "synt_high": (300, 150, 15),
    "synt_hard": (1000, 500, 50),
}


class LassoSynthetic:
    """LassoBench's synthetic weighted-Lasso hyperparameter problems (Šehić et al., AutoML 2022),
    one of the paper's real problems, implemented from their definition; to be minimised.

    Data: ``n`` samples of ``d`` AR(1)-correlated Gaussian features (``corr = 0.6``, celer's
    ``make_correlated_data``), true coefficients ``w*`` with ``k`` non-zeros ``±1`` (alternating,
    every ``d // k``-th feature), ``y = X w* + ε`` with ``‖ε‖ = ‖X w*‖ / snr`` (``snr = 10``, or 3
    with ``noise=True``); 15 % held out as a test set, the rest split into 5 shuffled folds.

    Search space ``x ∈ [-1, 1]^d``: one regularisation weight per feature,
    ``log α_j = x_j (log α_max − log α_min) / 2 + (log α_max + log α_min) / 2`` with
    ``α_max = ‖X_trᵀ y_tr‖_∞ / n_tr`` and ``α_min = α_max / 100``. Objective: the 5-fold
    cross-validation MSE of the weighted Lasso ``min_w 1/(2m) ‖y − X w‖² + Σ_j α_j |w_j|``
    (no intercept), divided by the oracle loss ``MSE(X_tr w*, y_tr)``; LassoBench's target is a
    value near or below 1. The weighted Lasso is solved by scikit-learn's coordinate descent on
    features rescaled by ``1 / α_j`` (the same minimiser), where LassoBench calls celer, so
    values agree with LassoBench's up to solver tolerance, not bit for bit.

    Args:
        bench: one of :data:`LASSO_BENCHES` (``synt_simple``: d = 60, ..., ``synt_hard``:
            d = 1000; LassoBench's ``synt_simple3``, ``synt_medium5``, ``synt_high15``,
            ``synt_hard50``, which LassoBench's later releases call ``synt_simple`` ... ``synt_hard``).
        noise: the noisy variant (snr 3 instead of 10).
        tol: coordinate-descent tolerance (LassoBench: 1e-4).
        seed: draws the data, the test split and the folds (LassoBench uses 42).
    """

    def __init__(self, bench: str = "synt_simple", *, noise: bool = False, tol: float = 1e-4,
                 seed: int = 42) -> None:  # fmt: skip
        from sklearn.model_selection import KFold, train_test_split

        check_choice(bench, "bench", tuple(LASSO_BENCHES))
        if not isinstance(noise, bool):
            raise TypeError(f"noise must be a bool, got {type(noise).__name__}")
        check_range(tol, "tol", low=0.0, low_inclusive=False)
        check_int(seed, "seed", low=0, high=2**32 - 1)
        d, n, k = LASSO_BENCHES[bench]
        self.dim, self.tol = d, float(tol)
        w = np.zeros(d)
        w[:: d // k] = (-1.0) ** np.arange(k)
        rng = np.random.RandomState(seed)
        X = np.empty((n, d))
        u = rng.randn(n)
        X[:, 0] = u
        for j in range(1, d):  # AR(1) columns: corr(X_i, X_j) = 0.6^|i - j|
            u = 0.6 * u + math.sqrt(1 - 0.6**2) * rng.randn(n)
            X[:, j] = u
        y = X @ w
        eps = rng.randn(n)
        y = y + eps / np.linalg.norm(eps) * np.linalg.norm(y) / (3.0 if noise else 10.0)
        self.w_true = w
        self.X_train, self.X_test, self.y_train, self.y_test = train_test_split(
            X, y, test_size=0.15, random_state=seed
        )
        self.folds = list(KFold(n_splits=5, shuffle=True, random_state=seed).split(self.X_train))
        self.alpha_max = float(np.max(np.abs(self.X_train.T @ self.y_train)) / len(self.y_train))
        self.log_alpha_min = math.log(self.alpha_max / 100.0)
        self.log_alpha_max = math.log(self.alpha_max)
        self.loss_oracle = float(np.mean((self.X_train @ w - self.y_train) ** 2))
        self.bounds = np.stack([-np.ones(d), np.ones(d)])
        self.optimal_value = None  # unknown; near 1 is good
        self.name = f"lasso-{bench}" + ("-noisy" if noise else "")

    def alphas(self, x: Any) -> np.ndarray:
        """The per-feature regularisation ``α (d,)`` encoded by ``x ∈ [-1, 1]^d``."""
        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.shape[0] != self.dim:
            raise ValueError(f"x must have {self.dim} entries, got {xa.shape[0]}")
        if not np.isfinite(xa).all():
            raise ValueError("x must be finite")
        half = 0.5 * (self.log_alpha_max - self.log_alpha_min)
        return np.exp(xa * half + 0.5 * (self.log_alpha_max + self.log_alpha_min))

    def fit(self, X: np.ndarray, y: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Weighted-Lasso coefficients ``argmin_w 1/(2m) ‖y − X w‖² + Σ_j α_j |w_j|``."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import Lasso

        # substitute v_j = α_j w_j: a plain Lasso (α = 1) on the columns X_j / α_j
        model = Lasso(alpha=1.0, fit_intercept=False, tol=self.tol, max_iter=10_000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X / alpha, y)
        return model.coef_ / alpha

    def __call__(self, x: Any) -> float:
        """Cross-validation MSE of the weighted Lasso at ``x``, divided by the oracle loss."""
        alpha = self.alphas(x)
        losses = []
        for tr, va in self.folds:
            w = self.fit(self.X_train[tr], self.y_train[tr], alpha)
            losses.append(np.mean((self.X_train[va] @ w - self.y_train[va]) ** 2))
        return float(np.mean(losses)) / self.loss_oracle

    def test_mspe(self, x: Any) -> float:
        """Test-set MSE of the weighted Lasso fitted on all training data, divided by the oracle's
        test MSE (LassoBench's post-processing metric)."""
        w = self.fit(self.X_train, self.y_train, self.alphas(x))
        oracle = np.mean((self.X_test @ self.w_true - self.y_test) ** 2)
        return float(np.mean((self.X_test @ w - self.y_test) ** 2) / oracle)


class SVMDigits:
    """Hyperparameter tuning of a scikit-learn RBF support-vector classifier on the digits data
    shipped with scikit-learn (1,797 8x8 images, 64 features), to be minimised.

    In the spirit of the SVM problem of the high-dimensional BO literature (an SVM with a
    relevance weight per feature plus its regularisation and kernel width; the paper's SVM uses
    a dataset that cannot be downloaded here): ``x ∈ [0, 1]^66``, ``x[:64]`` scale the 64 pixel
    features (``x_j = 0`` removes feature ``j``), ``log10 C = -2 + 5 x[64]`` (``C`` in
    ``[0.01, 1000]``) and ``log10 γ = -4 + 4 x[65]`` on pixels scaled to ``[0, 1]``. The value is
    the validation error rate of ``SVC(C, gamma)`` trained on a fixed stratified split (1,000
    training images, the other 797 for validation).

    Args:
        seed: draws the train/validation split.
    """

    def __init__(self, seed: int = 0) -> None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        check_int(seed, "seed", low=0, high=2**32 - 1)
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        self.X_train, self.X_val, self.y_train, self.y_val = train_test_split(
            X, y, train_size=1000, stratify=y, random_state=seed
        )
        self.dim = X.shape[1] + 2
        self.bounds = np.stack([np.zeros(self.dim), np.ones(self.dim)])
        self.optimal_value = None  # unknown; 0 would be a perfect validation score
        self.name = f"svm-digits-D{self.dim}"

    def hyperparameters(self, x: Any) -> tuple[np.ndarray, float, float]:
        """``(feature weights (64,), C, gamma)`` encoded by ``x``."""
        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.shape[0] != self.dim:
            raise ValueError(f"x must have {self.dim} entries, got {xa.shape[0]}")
        if not np.isfinite(xa).all():
            raise ValueError("x must be finite")
        xa = np.clip(xa, 0.0, 1.0)
        return xa[:-2], 10.0 ** (-2.0 + 5.0 * xa[-2]), 10.0 ** (-4.0 + 4.0 * xa[-1])

    def __call__(self, x: Any) -> float:
        """Validation error rate of the SVC with the hyperparameters ``x``."""
        from sklearn.svm import SVC

        w, C, gamma = self.hyperparameters(x)
        model = SVC(C=C, gamma=gamma).fit(self.X_train * w, self.y_train)
        return float(np.mean(model.predict(self.X_val * w) != self.y_val))


class MujocoPolicy:
    """Linear-policy search on a gymnasium MuJoCo task, the policy-search problems of the
    high-dimensional BO literature (TuRBO, LA-MCTS and later papers: Swimmer, Hopper, Ant); to be
    minimised.

    ``x ∈ [-1, 1]^(a · o)`` is the row-major ``(a, o)`` matrix ``W`` of a deterministic linear
    policy ``u_t = clip(W s_t, low, high)`` (``o`` observation and ``a`` action dimensions; the
    raw observation, no running normalisation). The value is minus the undiscounted return of an
    episode of at most ``horizon`` steps, averaged over ``episodes`` episodes whose resets are
    seeded ``seed, seed + 1, ...``, so the same ``x`` always gives the same value (MuJoCo's
    simulation is deterministic). Swimmer-v5 gives ``D = 2 · 8 = 16``, Hopper-v5 ``3 · 11 = 33``,
    Walker2d-v5 and HalfCheetah-v5 ``6 · 17 = 102``, Ant-v5 ``8 · 105 = 840``.

    Needs the ``[mujoco]`` extra (``gymnasium[mujoco]``).

    Args:
        env: a gymnasium MuJoCo environment id with a continuous (box) action space.
        horizon: the most steps per episode (gymnasium's limit for these tasks is 1,000).
        episodes: episodes averaged per evaluation.
        seed: the first episode's reset seed.
    """

    def __init__(self, env: str = "Swimmer-v5", *, horizon: int = 1000, episodes: int = 1,
                 seed: int = 0) -> None:  # fmt: skip
        from iclr26.shared import MissingDependencyError

        if not isinstance(env, str) or not env:
            raise TypeError(f"env must be a gymnasium environment id, got {env!r}")
        check_int(horizon, "horizon", low=1)
        check_int(episodes, "episodes", low=1)
        check_int(seed, "seed", low=0, high=2**31 - 1)
        try:
            import gymnasium as gym
        except ImportError as err:  # pragma: no cover - the extra is installed in the tests
            raise MissingDependencyError(
                f"MujocoPolicy needs gymnasium with MuJoCo ({err}): "
                "pip install 'iclr26-git-bo[mujoco]'"
            ) from err
        try:
            self._env = gym.make(env)
        except gym.error.Error as err:
            raise ValueError(f"env {env!r} cannot be made by gymnasium ({err})") from err
        obs_space, act_space = self._env.observation_space, self._env.action_space
        if not isinstance(act_space, gym.spaces.Box) or len(act_space.shape) != 1:
            raise ValueError(f"env {env!r} needs a 1-D continuous action space, got {act_space}")
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            raise ValueError(f"env {env!r} needs a 1-D box observation, got {obs_space}")
        self.env_id, self.horizon, self.episodes, self.seed = env, horizon, episodes, seed
        self.obs_dim, self.act_dim = int(obs_space.shape[0]), int(act_space.shape[0])
        self.low = np.asarray(act_space.low, dtype=np.float64)
        self.high = np.asarray(act_space.high, dtype=np.float64)
        self.dim = self.obs_dim * self.act_dim
        self.bounds = np.stack([-np.ones(self.dim), np.ones(self.dim)])
        self.optimal_value = None  # unknown
        self.name = f"mujoco-{env}-D{self.dim}"

    def policy(self, x: Any) -> np.ndarray:
        """The ``(act_dim, obs_dim)`` policy matrix ``W`` encoded by ``x``."""
        xa = np.asarray(x, dtype=np.float64).reshape(-1)
        if xa.shape[0] != self.dim:
            raise ValueError(f"x must have {self.dim} entries, got {xa.shape[0]}")
        if not np.isfinite(xa).all():
            raise ValueError("x must be finite")
        return xa.reshape(self.act_dim, self.obs_dim)

    def rollout(self, x: Any, seed: int) -> float:
        """The undiscounted return of one episode of the policy ``x`` from the reset ``seed``."""
        W = self.policy(x)
        obs, _ = self._env.reset(seed=int(seed))
        total = 0.0
        for _ in range(self.horizon):
            action = np.clip(W @ np.asarray(obs, dtype=np.float64), self.low, self.high)
            obs, reward, terminated, truncated, _ = self._env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return total

    def __call__(self, x: Any) -> float:
        """Minus the mean return of the policy ``x`` over ``episodes`` seeded episodes."""
        self.policy(x)  # validates before any episode
        returns = [self.rollout(x, self.seed + i) for i in range(self.episodes)]
        return -float(np.mean(returns))

    def close(self) -> None:
        """Close the gymnasium environment."""
        self._env.close()


class UnitCube:
    """A problem on a box ``bounds (2, D)`` seen on ``[0, 1]^D`` (the peers' common domain).

    ``UnitCube(p)(u) = p(lower + u (upper − lower))``; ``dim``, ``name`` and ``optimal_value`` are
    ``p``'s; ``bounds`` is the unit cube; ``to_box(u)`` maps a point back.
    """

    def __init__(self, problem: Any) -> None:
        if not callable(problem):
            raise TypeError(f"problem must be callable, got {type(problem).__name__}")
        b = np.asarray(getattr(problem, "bounds", None), dtype=np.float64)
        if b.ndim != 2 or b.shape[0] != 2 or not np.isfinite(b).all() or not (b[0] < b[1]).all():
            raise ValueError("problem must have finite bounds (2, D) with lower < upper")
        self.problem, self.lower, self.width = problem, b[0], b[1] - b[0]
        self.dim = int(b.shape[1])
        self.bounds = np.stack([np.zeros(self.dim), np.ones(self.dim)])
        self.name = getattr(problem, "name", type(problem).__name__)
        self.optimal_value = getattr(problem, "optimal_value", None)

    def to_box(self, u: Any) -> np.ndarray:
        """``lower + u (upper − lower)``."""
        ua = np.asarray(u, dtype=np.float64)
        if ua.shape[-1] != self.dim:
            raise ValueError(f"u must have {self.dim} entries, got {ua.shape[-1]}")
        return self.lower + ua * self.width

    def __call__(self, u: Any) -> float:
        return self.problem(self.to_box(u))


def load_objective(spec: str) -> Callable[[np.ndarray], float]:
    """Import ``"package.module:function"`` (a callable taking a ``(D,)`` array, returning a float).

    Raises:
        ValueError: ``spec`` is not ``module:function``, or the module/attribute is missing or not
            callable (the message names which).
    """
    if not isinstance(spec, str):
        raise TypeError(f"objective must be a 'module:function' string, got {type(spec).__name__}")
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"objective must look like 'package.module:function', got {spec!r}")
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"objective module {module!r} cannot be imported ({err})") from err
    obj: Any = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"objective {spec!r}: {module!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"objective {spec!r} is not callable")
    return obj
