"""Frank–Wolfe solvers compiled with ``jax.lax.while_loop``: BregFW (Algorithm 1 with the step of
Algorithm 2) and BregAFW (Algorithm 3: away steps, optionally pairwise).

Both take the objective as ``f(x, *args)``: pass data (matrices, targets) in ``args`` instead of
closing over it, and repeated calls with new data of the same shape reuse the compiled loop. The
function, LMO, step rule and kernel are static (hashable) arguments of ``jax.jit``; ``x0``,
``args`` and ``tol`` are traced, so the solvers run under ``jax.vmap`` (e.g. over seeds' data).

History buffers have length ``max_iter + 1`` (index t = iterate t); entries after the last
iteration are NaN (``record=False`` keeps only the final values). The FW gap
``⟨∇f(x_t), x_t − v_t⟩`` bounds the primal gap ``f(x_t) − f*`` for convex f.

Stopping rules (``FWResult.status``): the FW gap reaches ``tol · max(1, |f|)`` (``converged``;
the paper's absolute rule, stop at 1e-7, when |f| <= 1, relative above); f has not changed by more
than ``ftol·|f|`` in ``patience`` iterations (``stalled``: progress is below float64 resolution,
which can happen before the FW gap reaches the tolerance when the gap shrinks like the square root
of the primal gap, e.g. D-optimal design, whose gap levels off near 1e-7·|f| while f − f* is
~1e-14); ``max_iter``; a non-finite f; or a full away-step buffer.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.bregman_fw.kernels import Euclidean, Kernel
from iclr26.bregman_fw.lmo import LMO
from iclr26.bregman_fw.precision import as_float64  # also switches JAX to float64
from iclr26.bregman_fw.steps import AdaptiveBregman, Oracle, StepRule
from iclr26.shared import check_array, check_int, check_range

__all__ = ["STATUS", "FWHistory", "FWResult", "away_frank_wolfe", "frank_wolfe"]

#: step kinds recorded in ``FWHistory.kind``
FW_STEP, AWAY_STEP, PAIRWISE_STEP, DROP_STEP = 0, 1, 2, 3

#: ``FWResult.status`` codes and their meaning
CONVERGED, STALLED, MAX_ITER, NONFINITE, ACTIVE_FULL = 0, 1, 2, 3, 4
STATUS = {
    CONVERGED: "converged: FW gap <= tol * max(1, |f|)",
    STALLED: "stalled: f did not change by more than ftol*|f| in `patience` iterations "
    "(progress below float64 resolution)",
    MAX_ITER: "max_iter reached",
    NONFINITE: "f became non-finite",
    ACTIVE_FULL: "the away-step active-set buffer is full",
}


class FWHistory(NamedTuple):
    """Per-iteration records, arrays of length ``max_iter + 1`` (NaN / -1 past the last iterate).

    ``f[t]``, ``gap[t]``: objective and FW gap at iterate t. ``gamma[t]``, ``M[t]``,
    ``kappa[t]``, ``n_evals[t]``, ``accepted[t]``, ``bound[t]``, ``kind[t]``: the step taken from
    iterate t (its size, the step rule's :class:`~iclr26.bregman_fw.steps.StepInfo`, and the step
    kind 0 = FW, 1 = away, 2 = pairwise, 3 = drop step).
    """

    f: jax.Array
    gap: jax.Array
    gamma: jax.Array
    M: jax.Array
    kappa: jax.Array
    n_evals: jax.Array
    accepted: jax.Array
    bound: jax.Array
    kind: jax.Array
    n_active: jax.Array


class FWResult(NamedTuple):
    """Result of :func:`frank_wolfe` / :func:`away_frank_wolfe`.

    Attributes:
        x: final iterate (shape of ``x0``).
        f: f at ``x``.
        gap: FW gap at ``x``.
        n_iter: iterations run.
        converged: ``gap <= tol * max(1, |f|)``.
        n_f_evals: objective evaluations (step-rule trials + one value-and-grad per iteration).
        n_grad_evals: gradient evaluations (one per iteration, plus the rule's if it uses them).
        history: :class:`FWHistory`.
        active_weights: AFW only: convex weights of the active set, shape ``(max_active,)``.
        active_vertices: AFW only: the atoms, shape ``(max_active, *x0.shape)``.
        active_full: AFW only: ``True`` if the active-set buffer filled up (the run stopped early).
        status: why the run stopped, a key of :data:`STATUS` (0 converged, 1 stalled,
            2 max_iter, 3 non-finite f, 4 active set full); ``message`` says it in words.

    With a vertex-enumerating LMO (simplex, truncated simplex, ℓ1 ball) ``active_weights`` has one
    entry per vertex id and ``active_vertices`` is ``None``; :meth:`active_set` gives the active
    atoms in either case.
    """

    x: jax.Array
    f: jax.Array
    gap: jax.Array
    n_iter: jax.Array
    converged: jax.Array
    n_f_evals: jax.Array
    n_grad_evals: jax.Array
    history: FWHistory
    active_weights: jax.Array | None = None
    active_vertices: jax.Array | None = None
    active_full: jax.Array | None = None
    status: jax.Array | None = None

    @property
    def message(self) -> str:
        """Why the run stopped, in words (one run; under ``vmap`` read ``status`` instead)."""
        return STATUS[int(self.status)]

    def active_set(self, lmo: LMO) -> tuple[np.ndarray, np.ndarray]:
        """AFW only: ``(weights, atoms)`` of the atoms with positive weight (NumPy, outside jit)."""
        if self.active_weights is None:
            raise ValueError("active_set() needs a result of away_frank_wolfe")
        w = np.asarray(self.active_weights)
        keep = np.flatnonzero(w > 0)
        if self.active_vertices is not None:
            return w[keep], np.asarray(self.active_vertices)[keep]
        like = jnp.asarray(self.x)
        atoms = np.stack([np.asarray(lmo.vertex(jnp.asarray(i), like)) for i in keep])
        return w[keep], atoms


def _vdot(a, b):
    return jnp.sum(a * b)


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


@contextlib.contextmanager
def _scalar_f():
    """JAX's error for a non-scalar objective, as a ValueError naming ``f``."""
    try:
        yield
    except TypeError as err:
        if "scalar-output" in str(err) or "scalar output" in str(err):
            raise ValueError(
                "f must return a scalar (f(x, *args) -> shape ()), got a non-scalar output"
            ) from err
        raise


def _check_inputs(f, x0, lmo, step, kernel, max_iter, tol, args, patience, ftol) -> jax.Array:
    if not callable(f):
        raise TypeError(f"f must be callable as f(x, *args), got {type(f).__name__}")
    if not isinstance(lmo, LMO):
        raise TypeError(f"lmo must be an iclr26.bregman_fw LMO, got {type(lmo).__name__}")
    if not isinstance(step, StepRule):
        raise TypeError(
            f"step must be a step rule (e.g. AdaptiveBregman()), got {type(step).__name__}"
        )
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel (e.g. Euclidean()), got {type(kernel).__name__}")
    check_int(max_iter, "max_iter", low=1)
    check_range(tol, "tol", low=0.0)
    if not (isinstance(tol, float | int) and np.isfinite(tol)):
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    if patience is not None:
        check_int(patience, "patience", low=1)
    check_range(ftol, "ftol", low=0.0, high=1.0)
    if not isinstance(args, tuple):
        raise TypeError(
            f"args must be a tuple of arrays passed to f(x, *args), got {type(args).__name__}"
        )
    if kernel.domain == "positive" and not lmo.lower_bound > 0:
        raise ValueError(
            f"kernel {kernel.name!r} is finite only on the open positive orthant, but the feasible set "
            f"of {type(lmo).__name__} reaches coordinates <= {lmo.lower_bound:g}: use TruncatedSimplex(eps) "
            "or Box(lo > 0, hi)"
        )
    if kernel.domain == "nonnegative" and lmo.lower_bound < 0:
        raise ValueError(
            f"kernel {kernel.name!r} needs a feasible set in the nonnegative orthant, but "
            f"{type(lmo).__name__} reaches coordinates down to {lmo.lower_bound:g}"
        )
    if _is_traced(x0):
        return x0
    x0 = as_float64(x0, "x0")
    check_array(x0, "x0")
    if not lmo.contains(np.asarray(x0), atol=1e-8):
        raise ValueError(f"x0 is not in the feasible set of {lmo!r}")
    if kernel.domain != "real" and not np.all(np.asarray(x0) > 0):
        raise ValueError(f"x0 must be strictly positive for the {kernel.name!r} kernel")
    return x0


def _empty_history(n: int, dtype) -> FWHistory:
    nan = jnp.full((n,), jnp.nan, dtype)
    return FWHistory(
        f=nan,
        gap=nan,
        gamma=nan,
        M=nan,
        kappa=nan,
        n_evals=jnp.zeros((n,), jnp.int32),
        accepted=jnp.zeros((n,), bool),
        bound=nan,
        kind=jnp.full((n,), -1, jnp.int32),
        n_active=jnp.zeros((n,), jnp.int32),
    )


def _record(h: FWHistory, t, gamma, info, kind, f_new, gap_new, n_active=0) -> FWHistory:
    if h.f.shape[0] == 1:  # record=False: a one-slot buffer holding the last step
        t = jnp.zeros_like(t) - 1
        return FWHistory(
            f=h.f.at[0].set(f_new),
            gap=h.gap.at[0].set(gap_new),
            gamma=h.gamma.at[0].set(gamma),
            M=h.M.at[0].set(info.M),
            kappa=h.kappa.at[0].set(info.kappa),
            n_evals=h.n_evals.at[0].set(info.n_evals),
            accepted=h.accepted.at[0].set(info.accepted),
            bound=h.bound.at[0].set(info.bound),
            kind=h.kind.at[0].set(kind),
            n_active=h.n_active.at[0].set(n_active),
        )
    return FWHistory(
        f=h.f.at[t + 1].set(f_new),
        gap=h.gap.at[t + 1].set(gap_new),
        gamma=h.gamma.at[t].set(gamma),
        M=h.M.at[t].set(info.M),
        kappa=h.kappa.at[t].set(info.kappa),
        n_evals=h.n_evals.at[t].set(info.n_evals),
        accepted=h.accepted.at[t].set(info.accepted),
        bound=h.bound.at[t].set(info.bound),
        kind=h.kind.at[t].set(kind),
        n_active=h.n_active.at[t + 1].set(n_active),
    )


def _oracle(f, args) -> Oracle:
    fa = lambda x: f(x, *args)  # noqa: E731
    return Oracle(fa, jax.value_and_grad(fa))


def _grad_cost(step) -> int:
    # rules that take gradients in their trials
    return 1 if step.name in ("fwjl-adaptive", "exact") else 0


def _take_step(step, problem, t, x, fx, gx, d, g_d, gmax, kernel, state):
    """The step and the new point's value and gradient (the rule's own evaluation when it made
    one, else one value-and-grad), with the evaluation counts it cost."""
    gamma, state, info, point = step.apply(problem, t, x, fx, gx, d, g_d, gmax, kernel, state)
    x_new = x + gamma * d
    if point is None:
        f_new, g_new = problem.value_and_grad(x_new)
        nf, ng = info.n_evals + 1, 1 + _grad_cost(step) * info.n_evals
    else:
        f_new, g_new = point
        nf, ng = info.n_evals, info.n_evals
    return gamma, state, info, x_new, f_new, g_new, nf, ng


class _Stall(NamedTuple):
    """f at the last real change and its iteration (the ``patience`` rule)."""

    f_ref: jax.Array
    t_ref: jax.Array


def _stall_update(s: _Stall, t_new, f_new, ftol) -> _Stall:
    # any real change counts (up or down: open-loop steps are not monotone); round-off does not
    moved = jnp.abs(f_new - s.f_ref) > ftol * jnp.abs(s.f_ref)
    return _Stall(jnp.where(moved, f_new, s.f_ref), jnp.where(moved, t_new, s.t_ref))


def _gap_ok(gap, fx, tol):
    """The FW-gap test: ``gap <= tol`` for |f| <= 1, relative to |f| above (the gap scales with
    f, and the float64 resolution of f, which limits how far the gap can be driven, is relative)."""
    return (gap <= tol * jnp.maximum(1.0, jnp.abs(fx))) & jnp.isfinite(fx)


def _status(t, gap, fx, tol, stall: _Stall, patience, max_iter, full=None):
    status = jnp.where(
        _gap_ok(gap, fx, tol),
        CONVERGED,
        jnp.where(
            ~jnp.isfinite(fx),
            NONFINITE,
            jnp.where(t - stall.t_ref >= patience, STALLED, MAX_ITER),
        ),
    )
    if full is not None:
        status = jnp.where(full & (status == MAX_ITER), ACTIVE_FULL, status)
    return status.astype(jnp.int32)


@functools.partial(
    jax.jit, static_argnames=("f", "lmo", "step", "kernel", "max_iter", "record", "patience")
)
def _fw_run(f, x0, lmo, step, kernel, max_iter, tol, args, record, patience, ftol):
    problem = _oracle(f, args)
    fx, gx = problem.value_and_grad(x0)
    v = lmo(gx)
    gap = -_vdot(gx, v - x0)
    one = jnp.ones((), x0.dtype)
    state = step.init(problem, x0, fx, gx, v - x0, one, kernel)
    hist = _empty_history(max_iter + 1 if record else 1, x0.dtype)
    hist = hist._replace(f=hist.f.at[0].set(fx), gap=hist.gap.at[0].set(gap))
    zero = jnp.asarray(0, jnp.int32)
    stall = _Stall(fx, zero)
    pat = max_iter + 1 if patience is None else patience
    carry = (zero, x0, fx, gx, v, gap, state, hist, zero + 1, zero + 1, stall)

    def cond(c):
        t, _, fx, _, _, gap, *_, stall = c
        return (t < max_iter) & ~_gap_ok(gap, fx, tol) & jnp.isfinite(fx) & (t - stall.t_ref < pat)

    def body(c):
        t, x, fx, gx, v, gap, state, hist, nf, ng, stall = c
        d = v - x
        gamma, state, info, x_new, f_new, g_new, dnf, dng = _take_step(
            step, problem, t, x, fx, gx, d, gap, one, kernel, state
        )
        v_new = lmo(g_new)
        gap_new = -_vdot(g_new, v_new - x_new)
        hist = _record(hist, t, gamma, info, FW_STEP, f_new, gap_new)
        stall = _stall_update(stall, t + 1, f_new, ftol)
        return (t + 1, x_new, f_new, g_new, v_new, gap_new, state, hist, nf + dnf, ng + dng, stall)

    t, x, fx, _, _, gap, _, hist, nf, ng, stall = jax.lax.while_loop(cond, body, carry)
    status = _status(t, gap, fx, tol, stall, pat, max_iter)
    return FWResult(x, fx, gap, t, _gap_ok(gap, fx, tol), nf, ng, hist, status=status)


def frank_wolfe(
    f: Callable[..., jax.Array],
    x0: Any,
    lmo: LMO,
    *,
    step: StepRule | None = None,
    kernel: Kernel | None = None,
    args: tuple = (),
    max_iter: int = 1000,
    tol: float = 1e-7,
    patience: int | None = 20,
    ftol: float = 1e-14,
    record: bool = True,
) -> FWResult:
    """Vanilla Frank–Wolfe (paper Algorithm 1), default step: adaptive Bregman (Algorithm 2).

    ``x_{t+1} = x_t + γ_t (v_t − x_t)`` with ``v_t = lmo(∇f(x_t))`` until the FW gap
    ``⟨∇f(x_t), x_t − v_t⟩ ≤ tol · max(1, |f(x_t)|)`` (``status`` 0, ``converged``), or f has
    not changed by more than ``ftol·|f|`` in ``patience`` iterations (status 1, stalled at float64
    resolution: the FW gap then stays above the tolerance although f − f* may be ~1e-14), or
    ``max_iter`` iterations.

    Args:
        f: objective ``f(x, *args) -> scalar``, differentiable by JAX; must be hashable (a plain
            function is), since it is a static argument of the compiled loop.
        x0: starting point in P, float64 array of any shape (the LMO's shape).
        lmo: the feasible set's :class:`~iclr26.bregman_fw.lmo.LMO`.
        step: step rule; default :class:`~iclr26.bregman_fw.steps.AdaptiveBregman` (η = 0.9,
            τ = 2, β = 0.9).
        kernel: Bregman kernel for the Bregman rules; default :class:`Euclidean`. A kernel whose
            domain excludes P (Burg on the simplex) raises ``ValueError``.
        args: extra arguments of ``f`` (data arrays; traced, so new data reuses the compilation).
        max_iter: iteration cap (history buffers have ``max_iter + 1`` entries).
        tol: FW-gap tolerance, relative to |f| when |f| > 1 (``gap <= tol * max(1, |f|)``);
            the paper uses 1e-7.
        patience: stop after this many iterations without a change of f larger than
            ``ftol·|f|`` (``None``: never; run to ``tol`` or ``max_iter``).
        ftol: relative change of f that counts as progress for ``patience`` (default 1e-14,
            about 45 float64 ulps).
        record: keep the per-iteration history (``False``: one-slot buffers with the last step,
            a smaller loop state for long runs).

    ``x0`` must be float64; integer arrays are converted exactly (values beyond 2**53 are
    refused), other dtypes raise ``TypeError``.

    Returns:
        :class:`FWResult`.
    """
    step = AdaptiveBregman() if step is None else step
    kernel = Euclidean() if kernel is None else kernel
    x0 = _check_inputs(f, x0, lmo, step, kernel, max_iter, tol, args, patience, ftol)
    with _scalar_f():
        return _fw_run(
            f,
            x0,
            lmo,
            step,
            kernel,
            max_iter,
            jnp.asarray(tol, x0.dtype),
            args,
            bool(record),
            patience,
            jnp.asarray(ftol, x0.dtype),
        )


class _AFWCarry(NamedTuple):
    t: jax.Array
    x: jax.Array
    fx: jax.Array
    gx: jax.Array
    v: jax.Array
    iv: jax.Array  # vertex id of v (indexed active set; 0 otherwise)
    gap: jax.Array
    state: Any
    hist: FWHistory
    nf: jax.Array
    ng: jax.Array
    weights: jax.Array
    atoms: jax.Array  # dense buffer (unused (1, 1) array when the active set is indexed)
    keys: jax.Array
    full: jax.Array
    stall: _Stall


@functools.partial(
    jax.jit,
    static_argnames=(
        "f",
        "lmo",
        "step",
        "kernel",
        "max_iter",
        "max_active",
        "pairwise",
        "indexed",
        "record",
        "patience",
    ),
)
def _afw_run(
    f,
    x0,
    lmo,
    step,
    kernel,
    max_iter,
    tol,
    args,
    max_active,
    pairwise,
    drop_tol,
    weights0,
    atoms0,
    indexed,
    record,
    patience,
    ftol,
):
    """Away-step / pairwise FW. ``indexed``: the active set is one weight per vertex id of the
    LMO (``atoms0`` then holds the initial atoms' ids); else a dense buffer of ``max_active``
    atoms with a random-projection key per atom."""
    problem = _oracle(f, args)
    dtype = x0.dtype
    fx, gx = problem.value_and_grad(x0)
    if indexed:
        iv = lmo.vertex_id(gx)
        v = lmo.vertex(iv, x0)
    else:
        iv = jnp.asarray(0)
        v = lmo(gx)
    gap = -_vdot(gx, v - x0)
    one = jnp.ones((), dtype)
    state = step.init(problem, x0, fx, gx, v - x0, one, kernel)
    hist = _empty_history(max_iter + 1 if record else 1, dtype)
    hist = hist._replace(
        f=hist.f.at[0].set(fx),
        gap=hist.gap.at[0].set(gap),
        n_active=hist.n_active.at[0].set(jnp.sum(weights0 > 0).astype(jnp.int32)),
    )
    k0 = weights0.shape[0]
    if indexed:
        weights = jnp.zeros((max_active,), dtype).at[atoms0].add(weights0)
        atoms = jnp.zeros((1, 1), dtype)
        keys = jnp.zeros((1,), dtype)
        probe = None
    else:
        weights = jnp.zeros((max_active,), dtype).at[:k0].set(weights0)
        atoms = jnp.zeros((max_active, *x0.shape), dtype).at[:k0].set(atoms0)
        # A random projection of each atom: finding the FW vertex among the atoms compares
        # scalars instead of scanning the whole buffer (the candidate is then verified).
        probe = jax.random.normal(jax.random.key(0), x0.shape, dtype)
        keys = (
            jnp.zeros((max_active,), dtype).at[:k0].set(jnp.tensordot(atoms0, probe, axes=x0.ndim))
        )
    zero = jnp.asarray(0, jnp.int32)
    pat = max_iter + 1 if patience is None else patience
    carry = _AFWCarry(
        zero,
        x0,
        fx,
        gx,
        v,
        jnp.asarray(iv, jnp.int32),
        gap,
        state,
        hist,
        zero + 1,
        zero + 1,
        weights,
        atoms,
        keys,
        jnp.asarray(False),
        _Stall(fx, zero),
    )

    def cond(c: _AFWCarry):
        return (
            (c.t < max_iter)
            & ~_gap_ok(c.gap, c.fx, tol)
            & jnp.isfinite(c.fx)
            & (~c.full)
            & (c.t - c.stall.t_ref < pat)
        )

    def body(c: _AFWCarry):
        active = c.weights > 0
        if indexed:
            slot_v = c.iv
            full = jnp.asarray(False)
            # away vertex: the active vertex with the largest ⟨∇f, a⟩, from the LMO's scores
            scores = jnp.where(active, lmo.vertex_scores(c.gx), -jnp.inf)
            ia = jnp.argmax(scores)
            a = lmo.vertex(ia, c.x)
            key_v = None
        else:
            # slot of the FW vertex: an existing atom equal to v, else the first free slot
            key_v = _vdot(c.v, probe)
            cand = active & (jnp.abs(c.keys - key_v) <= 1e-9 * (1.0 + jnp.abs(key_v)))
            i_cand = jnp.argmax(cand)
            exact = jnp.all(jnp.abs(c.atoms[i_cand] - c.v) <= 1e-12 * (1.0 + jnp.abs(c.v)))
            free = ~active
            has_same = jnp.any(cand) & exact  # a hash collision only duplicates an atom
            slot_v = jnp.where(has_same, i_cand, jnp.argmax(free))
            full = (~has_same) & (~jnp.any(free))
            scores = jnp.where(active, jnp.tensordot(c.atoms, c.gx, axes=x0.ndim), -jnp.inf)
            ia = jnp.argmax(scores)
            a = c.atoms[ia]
        wa = c.weights[ia]
        g_fw = c.gap
        g_away = _vdot(c.gx, a - c.x)
        if pairwise:
            use_fw = jnp.asarray(False)
            d = c.v - a
            gmax = wa
            g_d = g_fw + g_away
        else:
            use_fw = (g_fw >= g_away) | (wa >= 1.0)
            d = jnp.where(use_fw, c.v - c.x, c.x - a)
            gmax = jnp.where(use_fw, one, wa / jnp.where(wa < 1.0, 1.0 - wa, 1.0))
            g_d = jnp.where(use_fw, g_fw, g_away)
        if not indexed:  # a full buffer: take no step (the run stops)
            g_d = jnp.where(full, 0.0, g_d)
        gamma, state, info, x_new, f_new, g_new, dnf, dng = _take_step(
            step, problem, c.t, c.x, c.fx, c.gx, d, g_d, gmax, kernel, c.state
        )
        if not indexed:
            gamma = jnp.where(full, 0.0, gamma)
            x_new = jnp.where(full, c.x, x_new)
            f_new = jnp.where(full, c.fx, f_new)
            g_new = jnp.where(full, c.gx, g_new)
        # weight updates (Lacoste-Julien & Jaggi 2015, Algorithm 1 lines 11-14)
        if pairwise:
            w = c.weights.at[ia].add(-gamma).at[slot_v].add(gamma)
        else:
            w_fw = ((1.0 - gamma) * c.weights).at[slot_v].add(gamma)
            w_aw = ((1.0 + gamma) * c.weights).at[ia].add(-gamma)
            w = jnp.where(use_fw, w_fw, w_aw)
        dropped = (~use_fw) & (gamma >= gmax * (1.0 - 1e-12)) & (gmax > 0)
        w = jnp.where(w <= drop_tol, 0.0, w)
        w = jnp.where(dropped, w.at[ia].set(0.0), w)
        w = w / jnp.sum(w)
        if indexed:
            atoms, keys = c.atoms, c.keys
        else:
            insert = gamma > 0
            atoms = c.atoms.at[slot_v].set(jnp.where(insert, c.v, c.atoms[slot_v]))
            keys = c.keys.at[slot_v].set(jnp.where(insert, key_v, c.keys[slot_v]))
        # x_new = x + γd equals w @ atoms up to round-off, without a pass over the active set
        if indexed:
            iv_new = lmo.vertex_id(g_new).astype(jnp.int32)
            v_new = lmo.vertex(iv_new, x_new)
        else:
            iv_new = c.iv
            v_new = lmo(g_new)
        gap_new = -_vdot(g_new, v_new - x_new)
        kind = jnp.where(use_fw, FW_STEP, PAIRWISE_STEP if pairwise else AWAY_STEP)
        kind = jnp.where(dropped, DROP_STEP, kind)
        hist = _record(
            c.hist, c.t, gamma, info, kind, f_new, gap_new, jnp.sum(w > 0).astype(jnp.int32)
        )
        return _AFWCarry(
            c.t + 1,
            x_new,
            f_new,
            g_new,
            v_new,
            iv_new,
            gap_new,
            state,
            hist,
            c.nf + dnf,
            c.ng + dng,
            w,
            atoms,
            keys,
            full,
            _stall_update(c.stall, c.t + 1, f_new, ftol),
        )

    c = jax.lax.while_loop(cond, body, carry)
    status = _status(c.t, c.gap, c.fx, tol, c.stall, pat, max_iter, c.full)
    return FWResult(
        c.x,
        c.fx,
        c.gap,
        c.t,
        _gap_ok(c.gap, c.fx, tol),
        c.nf,
        c.ng,
        c.hist,
        c.weights,
        None if indexed else c.atoms,
        c.full,
        status,
    )


def away_frank_wolfe(
    f: Callable[..., jax.Array],
    x0: Any,
    lmo: LMO,
    *,
    step: StepRule | None = None,
    kernel: Kernel | None = None,
    args: tuple = (),
    max_iter: int = 1000,
    tol: float = 1e-7,
    pairwise: bool = False,
    max_active: int | None = None,
    drop_tol: float = 1e-14,
    atoms: Any = None,
    weights: Any = None,
    patience: int | None = 20,
    ftol: float = 1e-14,
    record: bool = True,
    vertex_index: bool | None = None,
) -> FWResult:
    """Away-step Frank–Wolfe over a polytope (paper Algorithm 3, "BregAFW"), or pairwise FW.

    The active set is a fixed-capacity buffer of atoms with convex weights; ``x0`` is its first
    atom (use a vertex of P). Each iteration compares the FW slope ``⟨∇f, x − v⟩`` with the away
    slope ``⟨∇f, a − x⟩`` of the worst active atom ``a`` and moves along ``v − x`` (γ_max = 1) or
    ``x − a`` (γ_max = λ_a/(1 − λ_a)); a step of size γ_max drops ``a``. With ``pairwise=True``
    the direction is ``v − a`` with γ_max = λ_a. The step size comes from ``step`` (line 8 of
    Algorithm 3 is the only change from Euclidean AFW), applied to the endpoint ``x + γ_max d``.

    Active set: for LMOs that enumerate their vertices (:class:`Simplex`,
    :class:`TruncatedSimplex`, :class:`L1Ball`) one weight per vertex id, O(#vertices) work per
    iteration and no capacity limit; otherwise a dense buffer of ``max_active`` atoms, scanned once
    per iteration.

    Args:
        f, x0, lmo, step, kernel, args, max_iter, tol, patience, ftol, record: as in
            :func:`frank_wolfe`; ``lmo`` must be a polytope LMO (``lmo.is_polytope``).
        pairwise: pairwise FW instead of away steps.
        max_active: capacity of the dense active-set buffer (default ``max_iter`` + the initial
            atoms, which cannot fill up). If it fills, the run stops and ``result.active_full``
            is ``True``. Not used by the vertex-indexed active set.
        vertex_index: use the vertex-indexed active set (default: whenever the LMO enumerates its
            vertices and every initial atom is one of them; ``False`` forces the dense buffer).
        drop_tol: weights at or below this become 0.
        atoms, weights: optional initial active set, shapes ``(k, *x0.shape)`` and ``(k,)`` with
            ``weights @ atoms == x0`` (e.g. all vertices of the simplex with ``x0``'s weights, to
            start inside the domain of the entropy or Burg kernel). Default: ``x0`` alone.

    Returns:
        :class:`FWResult` with ``active_weights``, ``active_vertices`` and ``active_full``.
    """
    step = AdaptiveBregman() if step is None else step
    kernel = Euclidean() if kernel is None else kernel
    x0 = _check_inputs(f, x0, lmo, step, kernel, max_iter, tol, args, patience, ftol)
    if not lmo.is_polytope:
        raise ValueError(f"away_frank_wolfe needs a polytope LMO, got {type(lmo).__name__}")
    check_range(drop_tol, "drop_tol", low=0.0)
    if vertex_index is not None and not isinstance(vertex_index, bool):
        raise TypeError(f"vertex_index must be True, False or None, got {vertex_index!r}")
    if (atoms is None) != (weights is None):
        raise ValueError("give both atoms and weights for an initial active set, or neither")
    if atoms is None:
        weights0, atoms0 = jnp.ones((1,), x0.dtype), x0[None]
    else:
        weights0, atoms0 = as_float64(weights, "weights"), as_float64(atoms, "atoms")
        if not _is_traced(atoms0) and not _is_traced(weights0):
            check_array(weights0, "weights", ndim=1)
            check_array(atoms0, "atoms", shape=(weights0.shape[0], *x0.shape))
            w_np, a_np = np.asarray(weights0), np.asarray(atoms0)
            if np.any(w_np < 0) or abs(float(w_np.sum()) - 1.0) > 1e-9:
                raise ValueError("weights must be nonnegative and sum to 1")
            if not _is_traced(x0) and not np.allclose(
                np.tensordot(w_np, a_np, axes=1), np.asarray(x0), atol=1e-9
            ):
                raise ValueError("weights @ atoms must equal x0")
    k0 = weights0.shape[0]
    n_vertices = lmo.vertex_count(tuple(x0.shape))
    ids = None
    if vertex_index is not False and n_vertices is not None and not _is_traced(atoms0):
        ids = lmo.vertex_ids_of(np.asarray(atoms0))
    if vertex_index and ids is None:
        raise ValueError(
            f"vertex_index=True needs an LMO that enumerates its vertices ({type(lmo).__name__} "
            "does not) and initial atoms that are vertices"
        )
    common = {
        "record": bool(record),
        "patience": patience,
        "ftol": jnp.asarray(ftol, x0.dtype),
        "drop_tol": jnp.asarray(drop_tol, x0.dtype),
    }
    if ids is not None:  # one weight per vertex id: the active set is indexed, not a buffer
        capacity, atoms, indexed = n_vertices, jnp.asarray(ids, jnp.int32), True
    else:
        default_cap = max_iter + k0
        capacity = (
            default_cap if max_active is None else check_int(max_active, "max_active", low=k0 + 1)
        )
        atoms, indexed = atoms0, False
    with _scalar_f():
        return _afw_run(
            f,
            x0,
            lmo,
            step,
            kernel,
            max_iter,
            jnp.asarray(tol, x0.dtype),
            args,
            capacity,
            bool(pairwise),
            weights0=weights0,
            atoms0=atoms,
            indexed=indexed,
            **common,
        )
