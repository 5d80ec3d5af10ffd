"""Relatively smooth test problems with their kernels and constants.

Each generator returns a :class:`Problem`: the objective as a module-level ``f(x, *args)`` (so
compiled solvers are reused across seeds), its data ``args``, the LMO, the kernel it is L-smad
with, the relative constant ``L_rel``, a global Euclidean Lipschitz bound ``L_euc`` of ∇f over P
(``inf`` when ∇f is not Lipschitz), a starting point, and the optimum where it is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from iclr26.bregman_fw import precision  # noqa: F401  (float64 before any array)
from iclr26.bregman_fw.data import regression_data, sparse_simplex_point
from iclr26.bregman_fw.kernels import Burg, Entropy, Euclidean, Kernel, Quartic
from iclr26.bregman_fw.lmo import LMO, KSparse, L2Ball, Simplex, TruncatedSimplex
from iclr26.shared import check_int, check_range

__all__ = [
    "Problem",
    "d_optimal",
    "d_optimal_symmetric",
    "kl_regression",
    "lp_regression",
    "phase_retrieval",
    "poisson_inverse",
    "quadratic_simplex",
]


@dataclass(frozen=True, eq=False)
class Problem:
    """A test problem ``min_{x ∈ P} f(x, *args)``.

    Attributes:
        name: short label.
        f: objective ``f(x, *args)``.
        args: data arrays (JAX float64).
        lmo: the feasible set.
        kernel: the kernel f is L-smad relative to.
        x0: a feasible start inside the kernel's domain.
        L_rel: relative smoothness constant w.r.t. ``kernel`` (``None`` if unknown).
        L_euc: global Lipschitz bound of ∇f over P (``inf`` if ∇f is not Lipschitz there).
        f_star: optimal value where known, else ``None``.
        x_star: a minimiser where known, else ``None``.
        vertices: the polytope's vertices (rows) when few, for an away-step active set holding
            ``x0`` as a convex combination (needed when the kernel forbids starting at a vertex).
    """

    name: str
    f: Any
    args: tuple
    lmo: LMO
    kernel: Kernel
    x0: jax.Array
    L_rel: float | None = None
    L_euc: float = math.inf
    f_star: float | None = None
    x_star: jax.Array | None = None
    vertices: jax.Array | None = field(default=None, repr=False)

    def objective(self, x: jax.Array) -> jax.Array:
        """f(x) with this problem's data."""
        return self.f(x, *self.args)


def _finite_positive(value, name: str) -> float:
    v = check_range(value, name, low=0.0, low_inclusive=False)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _j(a) -> jax.Array:
    return jnp.asarray(np.asarray(a, dtype=np.float64))


# --- KL(Ax, b) on the simplex, entropy kernel ------------------------------------------------


def kl_objective(x, A, b):
    """D_KL(Ax, b) = Σ (Ax) log((Ax)/b) − Ax + b."""
    y = A @ x
    return jnp.sum(xlogy(y, y) - xlogy(y, b) - y + b)


def kl_regression(
    m: int = 60, n: int = 30, *, support: int | None = None, seed: int = 0
) -> Problem:
    """KL regression ``D_KL(Ax, b)`` over the simplex, entropy kernel (Bauschke, Bolte & Teboulle
    2017): L-smad with ``L = max_j Σ_i A_ij`` (= 1 here: columns of A sum to 1).

    ``b = A x_true``, so ``f* = 0`` at ``x_true``; ``support`` < n puts x_true on a face of the
    simplex (a face optimum, where vanilla FW is sublinear and away steps help). A has entries
    in [0.1, 1] before normalisation, so ``L_euc = λ_max(AᵀA)/min A`` bounds ∇f's Lipschitz
    constant over the simplex.
    """
    check_int(m, "m", low=1)
    check_int(n, "n", low=2)
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.1, 1.0, (m, n))
    A /= A.sum(0, keepdims=True)
    x_true = sparse_simplex_point(
        n, n if support is None else check_int(support, "support", low=1, high=n), rng
    )
    b = A @ x_true
    L_euc = float(np.linalg.norm(A, 2) ** 2 / A.min())
    return Problem(
        f"kl-regression(m={m},n={n})",
        kl_objective,
        (_j(A), _j(b)),
        Simplex(),
        Entropy(),
        _j(np.full(n, 1.0 / n)),
        L_rel=float(A.sum(0).max()),
        L_euc=L_euc,
        f_star=0.0,
        x_star=_j(x_true),
        vertices=_j(np.eye(n)),
    )


# --- Poisson inverse problem KL(b, Ax), Burg kernel --------------------------------------------


def poisson_objective(x, A, b):
    """D_KL(b, Ax) = Σ b log(b/(Ax)) + Ax − b."""
    y = A @ x
    return jnp.sum(xlogy(b, b) - xlogy(b, y) + y - b)


def _ts_vertices(n: int, eps: float) -> np.ndarray:
    return eps + (1.0 - n * eps) * np.eye(n)


def poisson_inverse(
    m: int = 60, n: int = 30, *, eps: float = 1e-3, counts: float = 100.0, seed: int = 0
) -> Problem:
    """Poisson linear inverse problem ``D_KL(b, Ax)`` over ``TruncatedSimplex(eps)``, Burg kernel:
    L-smad with ``L = ‖b‖₁`` (Bauschke, Bolte & Teboulle 2017, Lemma 7).

    ``b ~ Poisson(counts · A x_true) / counts`` (noisy, f* unknown). ``L_euc`` is the global
    Euclidean bound ``‖A‖² max_i b_i / min_{x∈P} (Ax)_i²``, typically orders of magnitude larger.
    """
    check_int(m, "m", low=1)
    check_int(n, "n", low=2)
    check_range(eps, "eps", low=0.0, high=1.0 / n, low_inclusive=False, high_inclusive=False)
    _finite_positive(counts, "counts")
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.0, 1.0, (m, n))
    x_true = sparse_simplex_point(n, max(1, n // 3), rng)
    b = rng.poisson(counts * (A @ x_true)) / counts
    lo = eps * A.sum(1) + (1.0 - n * eps) * A.min(1)
    L_euc = float(np.linalg.norm(A, 2) ** 2 * np.max(b / lo**2))
    return Problem(
        f"poisson(m={m},n={n})",
        poisson_objective,
        (_j(A), _j(b)),
        TruncatedSimplex(eps),
        Burg(),
        _j(np.full(n, 1.0 / n)),
        L_rel=float(b.sum()),
        L_euc=L_euc,
        vertices=_j(_ts_vertices(n, eps)),
    )


# --- D-optimal design, Burg kernel -------------------------------------------------------------


def dopt_objective(x, H):
    """−log det(H diag(x) Hᵀ) = −2 Σ log diag(chol(H diag(x) Hᵀ)); +inf where the matrix is not
    positive definite. (A Cholesky factor costs half an LU and its derivative is cheaper.)"""
    L = jnp.linalg.cholesky((H * x) @ H.T)
    val = -2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
    return jnp.where(jnp.isnan(val), jnp.inf, val)


def d_optimal(m: int = 10, n: int = 60, *, eps: float = 1e-3, seed: int = 0) -> Problem:
    """D-optimal design ``−log det(H diag(x) Hᵀ)`` over ``TruncatedSimplex(eps)``, Burg kernel,
    L-smad with ``L = 1`` (Lu, Freund & Nesterov 2018). H (m, n) is Gaussian, n ≥ m.
    ``L_euc = Σ‖h_j‖² / (eps λ_min(HHᵀ))`` bounds ∇f's Lipschitz constant over P."""
    check_int(m, "m", low=1)
    check_int(n, "n", low=m)
    check_range(eps, "eps", low=0.0, high=1.0 / n, low_inclusive=False, high_inclusive=False)
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((m, n))
    L_euc = float((H**2).sum() / (eps * np.linalg.eigvalsh(H @ H.T).min()))
    return Problem(
        f"d-optimal(m={m},n={n})",
        dopt_objective,
        (_j(H),),
        TruncatedSimplex(eps),
        Burg(),
        _j(np.full(n, 1.0 / n)),
        L_rel=1.0,
        L_euc=L_euc,
        vertices=_j(_ts_vertices(n, eps)),
    )


def d_optimal_symmetric(*, eps: float = 1e-3) -> Problem:
    """D-optimal design on the three vertices of an equilateral triangle in R² (unit vectors at
    0°, 120°, 240°): by Kiefer–Wolfowitz the unique optimum is x* = (1/3, 1/3, 1/3) with
    H diag(x*) Hᵀ = I/2 and f* = log 4."""
    check_range(eps, "eps", low=0.0, high=1.0 / 3.0, low_inclusive=False, high_inclusive=False)
    angles = 2.0 * np.pi * np.arange(3) / 3.0
    H = np.stack([np.cos(angles), np.sin(angles)])
    x0 = np.array([0.6, 0.3, 0.1])
    return Problem(
        "d-optimal-symmetric",
        dopt_objective,
        (_j(H),),
        TruncatedSimplex(eps),
        Burg(),
        _j(x0),
        L_rel=1.0,
        f_star=float(np.log(4.0)),
        x_star=_j(np.full(3, 1.0 / 3.0)),
        vertices=_j(_ts_vertices(3, eps)),
    )


# --- phase retrieval over the K-sparse polytope, quartic kernel -------------------------------


def phase_objective(x, A, b):
    """¼ Σ_i (⟨a_i, x⟩² − b_i)²."""
    r = (A @ x) ** 2 - b
    return 0.25 * jnp.sum(r * r)


def phase_retrieval(
    m: int = 200,
    n: int = 100,
    *,
    k: int = 10,
    tau: float = 1.0,
    start: str = "vertex",
    seed: int = 0,
) -> Problem:
    """Phase retrieval ``¼ Σ (⟨a_i, x⟩² − b_i)²`` over the K-sparse polytope (paper §6), kernel
    ``φ = ¼‖x‖⁴ + ½‖x‖²``: L-smad with ``L = Σ_i 3‖a_i‖⁴ + ‖a_i‖²|b_i|`` (Bolte et al. 2018).

    a_i ~ N(0, I/n); x_true has k/2 nonzeros of size in [0.3τ, τ], so it lies inside the polytope
    and f* = 0 (also at −x_true). ``start="vertex"`` starts at a vertex; ``"near"`` at
    ``x_true + 0.05τ·noise`` made feasible (the local-convergence experiment E5). f is weakly
    convex, not convex, so the FW gap is a stationarity measure, not a bound on f − f*.
    """
    check_int(m, "m", low=1)
    check_int(n, "n", low=2)
    check_int(k, "k", low=1, high=n)
    if start not in ("vertex", "near"):
        raise ValueError(f"start must be 'vertex' or 'near', got {start!r}")
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n)) / np.sqrt(n)
    x_true = np.zeros(n)
    s = max(1, k // 2)
    idx = rng.choice(n, s, replace=False)
    x_true[idx] = tau * rng.uniform(0.3, 1.0, s) * rng.choice([-1.0, 1.0], s)
    b = (A @ x_true) ** 2
    lmo = KSparse(k, tau)
    if start == "vertex":
        x0 = np.asarray(lmo(jnp.asarray(rng.standard_normal(n))))
    else:
        x0 = np.clip(x_true + 0.05 * tau * rng.standard_normal(n), -tau, tau)
        x0 *= min(1.0, k * tau / np.abs(x0).sum())
    row = (A**2).sum(1)
    return Problem(
        f"phase-retrieval(m={m},n={n},k={k})",
        phase_objective,
        (_j(A), _j(b)),
        lmo,
        Quartic(1.0, 1.0),
        _j(x0),
        L_rel=float(np.sum(3 * row**2 + row * np.abs(b))),
        f_star=0.0,
        x_star=_j(x_true),
    )


# --- lp regression over an l2 ball -------------------------------------------------------------


def lp_objective(x, A, b, p):
    """(1/m) Σ |⟨a_i, x⟩ − b_i|^p."""
    return jnp.mean(jnp.abs(A @ x - b) ** p)


def lp_regression(
    p: float = 1.1,
    *,
    data: str = "diabetes",
    radius: float = 0.5,
    m: int = 500,
    n: int = 20,
    seed: int = 0,
) -> Problem:
    """ℓp regression ``(1/m) Σ |⟨a_i, x⟩ − b_i|^p`` over an ℓ2 ball (paper §6, p = 1.1).

    For 1 < p < 2 f is C¹ but ∇f is only (p−1)-Hölder, not Lipschitz (``L_euc = inf``): the
    short step has no valid constant, and the adaptive Bregman rule's κ-search targets exactly
    this case. ``radius`` is a fraction of the norm of the unconstrained least-squares solution
    (< 1: the constraint is active). ``data``: ``"diabetes"``, ``"breast_cancer"`` (bundled with
    scikit-learn) or ``"synthetic"`` (heavy-tailed noise; m, n, seed). The kernel is Euclidean.
    """
    check_range(p, "p", low=1.0, high=2.0, low_inclusive=False)
    _finite_positive(radius, "radius")
    if data not in ("diabetes", "breast_cancer", "synthetic"):
        raise ValueError(
            f"data must be one of 'diabetes', 'breast_cancer', 'synthetic'; got {data!r}"
        )
    A, b = regression_data(data, m=m, n=n, seed=seed)
    r = radius * float(np.linalg.norm(np.linalg.lstsq(A, b, rcond=None)[0]))
    return Problem(
        f"lp-regression(p={p},{data})",
        lp_objective,
        (_j(A), _j(b), jnp.asarray(float(p))),
        L2Ball(r),
        Euclidean(),
        _j(np.zeros(A.shape[1])),
        L_rel=None,
        L_euc=math.inf if p < 2 else float(2 * np.linalg.norm(A, 2) ** 2 / A.shape[0]),
    )


# --- strongly convex quadratic on the simplex (known optimum) ---------------------------------


def quad_objective(x, y):
    """½‖x − y‖²."""
    return 0.5 * jnp.sum((x - y) ** 2)


def project_simplex_np(y: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (sort-based, NumPy)."""
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - 1.0
    k = np.arange(1, y.size + 1)
    rho = np.nonzero(u - css / k > 0)[0][-1]
    return np.maximum(y - css[rho] / (rho + 1), 0.0)


def quadratic_simplex(
    n: int = 20, *, support: int = 5, margin: float = 0.1, seed: int = 0
) -> Problem:
    """½‖x − y‖² over the simplex with a known face optimum (strongly convex, L = 1).

    x* is a random point with ``support`` nonzeros, ``y = x*`` on the support and ``−margin``
    elsewhere, so ``proj_Δ(y) = x*`` lies in the relative interior of a face. The start is a
    vertex off that face: vanilla FW zig-zags (sublinear), away steps converge linearly.
    """
    check_int(n, "n", low=2)
    check_int(support, "support", low=1, high=n - 1)
    _finite_positive(margin, "margin")
    rng = np.random.default_rng(seed)
    x_star = sparse_simplex_point(n, support, rng)
    y = np.where(x_star > 0, x_star, -margin)
    x0 = np.eye(n)[int(np.flatnonzero(x_star == 0)[0])]
    return Problem(
        f"quadratic-simplex(n={n})",
        quad_objective,
        (_j(y),),
        Simplex(),
        Euclidean(),
        _j(x0),
        L_rel=1.0,
        L_euc=1.0,
        f_star=float(quad_objective(x_star, y)),
        x_star=_j(x_star),
        vertices=_j(np.eye(n)),
    )
