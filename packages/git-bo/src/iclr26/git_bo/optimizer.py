"""The GIT-BO loop: ask/tell, ``run(f, budget)``, ``minimize(f, bounds, budget)``, resumable
history files.

One iteration (paper, Sec. 3; official ``run_GITBO.py``):

1. condition the surrogate on the observations (for an in-context surrogate: pass them as context);
2. build ``H`` from the predictive-mean gradients at the previous iteration's candidates and keep
   its top-r eigenvectors ``U_r`` (first iteration: no gradients, candidates are Sobol points over
   the whole box);
3. draw ``M`` candidates ``x₀ + U_r α``, ``α ~ U[-s, s]^r``, clipped to the box;
4. one forward/backward pass scores every candidate (UCB by default) and gives the gradients of
   the next subspace; the argmax is evaluated.

Everything runs in the unit cube; the user's box is an affine map of it.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr26.git_bo.acquisition import ACQUISITIONS, acquisition_values
from iclr26.git_bo.subspace import (
    active_subspace,
    captured_fraction,
    gradient_outer_product,
    random_subspace,
    sample_subspace,
)
from iclr26.git_bo.surrogates import Surrogate, make_surrogate
from iclr26.shared import JsonlAppender, check_choice, check_int, check_range, progress

__all__ = ["GITBO", "HISTORY_FORMAT", "Result", "minimize", "read_history"]

log = logging.getLogger(__name__)

HISTORY_FORMAT = "iclr26-git-bo/history-v1"
PHASES = ("surrogate", "subspace", "posterior", "acquisition")


def _as_bounds(bounds: Any) -> np.ndarray:
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"bounds must be a (2, D) array of numbers ({err})") from err
    if b.ndim != 2 or b.shape[0] != 2 or b.shape[1] == 0:
        raise ValueError(f"bounds must have shape (2, D) with D >= 1, got {b.shape}")
    if not np.isfinite(b).all():
        raise ValueError("bounds must be finite")
    if not (b[0] < b[1]).all():
        bad = int(np.argmax(~(b[0] < b[1])))
        raise ValueError(
            f"bounds: lower must be below upper in every coordinate (coordinate {bad}: "
            f"{b[0, bad]} >= {b[1, bad]})"
        )
    return b


@dataclass
class Result:
    """What a run produced.

    Attributes:
        X: ``(n, D)`` evaluated points (user units), in evaluation order.
        y: ``(n,)`` values (``nan`` where the objective returned a non-finite value and it was
            skipped).
        best_x, best_y: the incumbent (max if ``maximize`` else min).
        maximize: the direction.
        surrogate: name of the surrogate that chose the points.
        times: seconds per BO iteration and phase (``surrogate``, ``subspace``, ``posterior``,
            ``acquisition``).
        diagnostics: per BO iteration: rank, eigengap, top eigenvalues, captured fraction (when the
            true subspace was given).
    """

    X: np.ndarray
    y: np.ndarray
    best_x: np.ndarray
    best_y: float
    maximize: bool
    surrogate: str
    times: dict[str, list[float]] = field(default_factory=dict)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n_evals(self) -> int:
        """Number of objective evaluations (including the initial design)."""
        return int(self.X.shape[0])

    def best_so_far(self) -> np.ndarray:
        """``(n,)`` running incumbent value (skipped evaluations carry the previous one)."""
        sign = 1.0 if self.maximize else -1.0
        v = np.where(np.isfinite(self.y), sign * self.y, -np.inf)
        return sign * np.maximum.accumulate(v)


class GITBO:
    """Gradient-informed subspace Bayesian optimisation (ask/tell).

    Args:
        bounds: ``(2, D)`` lower and upper bounds.
        surrogate: ``"gp"``, ``"rff"``, ``"pfn"`` (the shipped in-context PFN), ``"tabpfn"``
            or any :class:`~iclr26.git_bo.surrogates.Surrogate`.
        rank: subspace rank ``r`` (paper default 15; capped at ``D``).
        energy: choose ``r`` as the smallest rank reaching this share of ``trace(H)`` instead.
        n_candidates: ``M`` candidates per iteration (official script default 1,000).
        scale: half-width ``s`` of α in unit-cube coordinates (paper default 0.2).
        origin: ``"mean"`` of the evaluated inputs (official code) or ``"best"`` (the incumbent).
        acquisition: ``"ucb"`` (ICLR version), ``"ei"`` or ``"ts"``.
        beta: UCB β (``a = μ + √β σ``) or a callable ``beta(t, M)``; default 4 (√β = 2).
        subspace: ``"gradient"`` (GIT-BO), ``"random"`` (random orthonormal U each iteration, the
            control) or ``"full"`` (no subspace: Sobol candidates over the whole box).
        n_init: initial design size (``None``: ``min(50, 2 D)``; the official code uses 50).
        init: ``"uniform"`` (official code) or ``"sobol"``.
        maximize: maximise (paper) or minimise ``f``.
        nonfinite: what :meth:`tell` does with NaN/inf values: ``"error"`` (ValueError) or
            ``"skip"`` (kept in the history as ``nan``, left out of the surrogate's data).
        true_basis: optional ``(D, d_e)`` true subspace; records the captured fraction of ``U_r``.
        seed: seeds the initial design, candidates and TS draws.
        surrogate_kwargs: passed to the surrogate when it is given by name.

    After each BO step, ``basis_`` (``U_r``, ``(D, r)``), ``origin_`` (``x₀`` in unit-cube
    coordinates; ``None`` for full-box candidates) and ``candidates_`` (the ``(M, D)`` unit-cube
    candidates scored, whose mean gradients build the next step's ``H``) describe it.
    """

    def __init__(
        self,
        bounds: Any,
        surrogate: str | Surrogate = "gp",
        *,
        rank: int = 15,
        energy: float | None = None,
        n_candidates: int = 1000,
        scale: float = 0.2,
        origin: str = "mean",
        acquisition: str = "ucb",
        beta: float | Callable[[int, int], float] = 4.0,
        subspace: str = "gradient",
        n_init: int | None = None,
        init: str = "uniform",
        maximize: bool = True,
        nonfinite: str = "error",
        true_basis: Any = None,
        seed: int = 0,
        surrogate_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.bounds = _as_bounds(bounds)
        D = self.dim = self.bounds.shape[1]
        check_int(rank, "rank", low=1)
        if energy is not None:
            check_range(energy, "energy", low=0.0, high=1.0, low_inclusive=False)
        check_int(n_candidates, "n_candidates", low=1)
        check_range(scale, "scale", low=0.0, low_inclusive=False)
        check_choice(origin, "origin", ("mean", "best"))
        check_choice(acquisition, "acquisition", ACQUISITIONS)
        if not callable(beta):
            check_range(beta, "beta", low=0.0)
        check_choice(subspace, "subspace", ("gradient", "random", "full"))
        n_init = min(50, 2 * D) if n_init is None else n_init
        check_int(n_init, "n_init", low=1)
        check_choice(init, "init", ("uniform", "sobol"))
        if not isinstance(maximize, bool):
            raise TypeError(f"maximize must be a bool, got {type(maximize).__name__}")
        check_choice(nonfinite, "nonfinite", ("error", "skip"))
        check_int(seed, "seed", low=0, high=2**32 - 1)
        self.surrogate = make_surrogate(surrogate, **(surrogate_kwargs or {}))
        self.rank, self.energy, self.n_candidates, self.scale = (
            min(rank, D),
            energy,
            n_candidates,
            scale,
        )
        self.origin, self.acquisition, self.beta, self.subspace = (
            origin,
            acquisition,
            beta,
            subspace,
        )
        self.n_init, self.init, self.maximize, self.nonfinite = n_init, init, maximize, nonfinite
        self.seed = seed
        self.true_basis = None
        if true_basis is not None:
            tb = torch.as_tensor(np.asarray(true_basis, dtype=np.float64))
            if tb.ndim != 2 or tb.shape[0] != D:
                raise ValueError(f"true_basis must have shape ({D}, d_e), got {tuple(tb.shape)}")
            self.true_basis = tb
        self._sign = 1.0 if maximize else -1.0
        if init == "sobol":
            eng = torch.quasirandom.SobolEngine(D, scramble=True, seed=seed)
            self._init = eng.draw(n_init, dtype=torch.float64)
        else:
            g = torch.Generator().manual_seed(seed)
            self._init = torch.rand(n_init, D, generator=g, dtype=torch.float64)
        self._X: list[np.ndarray] = []  # unit cube
        self._y: list[float] = []
        self._grads: torch.Tensor | None = None
        self.times: dict[str, list[float]] = {p: [] for p in PHASES}
        self.diagnostics: list[dict[str, Any]] = []
        self.basis_: torch.Tensor | None = None
        self.candidates_: torch.Tensor | None = None
        self.origin_: torch.Tensor | None = None
        self._t = 0

    # --- coordinates
    def _to_unit(self, X: np.ndarray) -> np.ndarray:
        lo, hi = self.bounds
        return (X - lo) / (hi - lo)

    def _from_unit(self, U: np.ndarray) -> np.ndarray:
        lo, hi = self.bounds
        return lo + U * (hi - lo)

    @property
    def n_told(self) -> int:
        """Observations told so far (skipped non-finite ones included)."""
        return len(self._y)

    def _valid(self) -> tuple[torch.Tensor, torch.Tensor]:
        y = np.asarray(self._y, dtype=np.float64)
        ok = np.isfinite(y)
        X = torch.as_tensor(np.asarray(self._X, dtype=np.float64)[ok])
        return X, torch.as_tensor(self._sign * y[ok])

    def ask(self, q: int = 1) -> np.ndarray:
        """The next ``q`` points to evaluate, ``(q, D)`` in user units (initial design first)."""
        check_int(q, "q", low=1)
        n = self.n_told
        parts = []
        if n < self.n_init:
            parts.append(self._init[n : min(n + q, self.n_init)].numpy())
        k = q - sum(len(p) for p in parts)
        if k > 0:
            parts.append(self._bo_step(k))
        return self._from_unit(np.concatenate(parts, axis=0))

    def _bo_step(self, q: int) -> np.ndarray:
        X, y = self._valid()
        if X.shape[0] < 2:
            raise ValueError(
                f"need at least 2 finite observations before a BO step, have {X.shape[0]}"
            )
        self._t += 1
        t, D, M = self._t, self.dim, self.n_candidates
        gen = torch.Generator().manual_seed((self.seed * 1_000_003 + self.n_told) % 2**63)
        t0 = time.perf_counter()
        self.surrogate.condition(X, y)
        t1 = time.perf_counter()
        diag: dict[str, Any] = {"t": t, "n": int(X.shape[0])}
        if self.subspace == "full" or self._grads is None:
            eng = torch.quasirandom.SobolEngine(D, scramble=True, seed=int(self.seed + self.n_told))
            cand = eng.draw(M, dtype=torch.float64)
            diag["candidates"] = "sobol-full-box"
        else:
            if self.subspace == "gradient":
                H = gradient_outer_product(self._grads)
                sub = active_subspace(H, rank=self.rank, energy=self.energy)
                U = sub.basis
                k = min(D, 2 * sub.rank)
                diag.update(rank=sub.rank, eigengap=sub.eigengap,
                            eigenvalues=sub.eigenvalues[:k].tolist())  # fmt: skip
            else:
                U = random_subspace(D, self.rank, seed=int(gen.initial_seed() % 2**31))
                diag.update(rank=self.rank)
            self.basis_ = U
            if self.true_basis is not None:
                diag["captured_fraction"] = captured_fraction(self.true_basis, U)
            x0 = X.mean(0) if self.origin == "mean" else X[int(torch.argmax(y))]
            cand = sample_subspace(x0, U, M, scale=self.scale, generator=gen)
            diag["candidates"] = "subspace"
        t2 = time.perf_counter()
        # queries in the surrogate's working precision (float32 for the PFN: its gradients, H
        # and the eigendecomposition then run in float32 too); the chosen points stay float64
        query = cand.detach().to(getattr(self.surrogate, "dtype", torch.float64))
        query.requires_grad_(True)
        with torch.enable_grad():
            mean, var = self.surrogate.posterior(query)
            if not mean.requires_grad:
                raise RuntimeError(
                    f"surrogate {self.surrogate.name!r} returned a mean that is not "
                    "differentiable in X; GIT-BO needs its input gradients"
                )
            # one backward pass gives every candidate's gradient: μ(x_j) depends on x_j only
            (grads,) = torch.autograd.grad(mean.sum(), query)
        mean, var = mean.detach().double(), var.detach().double()
        if not bool(torch.isfinite(grads).all()):
            warnings.warn("non-finite surrogate gradients replaced by 0", stacklevel=2)
            grads = torch.nan_to_num(grads, nan=0.0, posinf=0.0, neginf=0.0)
        self._grads = grads.detach()
        self.candidates_ = cand.detach()
        self.origin_ = None if diag["candidates"] != "subspace" else x0.detach()
        t3 = time.perf_counter()
        scores = acquisition_values(self.acquisition, mean, var, best=float(y.max()),
                                    beta=self.beta, t=t, generator=gen)  # fmt: skip
        idx = torch.topk(scores, min(q, M)).indices
        chosen = cand.detach()[idx]
        if chosen.shape[0] < q:  # more points asked than candidates: repeat the best
            chosen = torch.cat([chosen, chosen[:1].expand(q - chosen.shape[0], -1)])
        t4 = time.perf_counter()
        for phase, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            self.times[phase].append(dt)
        self.diagnostics.append(diag)
        return chosen.numpy()

    def tell(self, X: Any, y: Any) -> None:
        """Record evaluated points ``X (q, D)`` (user units) and their values ``y (q,)``.

        Non-finite ``y`` raise ``ValueError`` (``nonfinite="error"``) or are kept as ``nan`` and
        left out of the surrogate's data (``nonfinite="skip"``).
        """
        Xa = np.asarray(X, dtype=np.float64)
        ya = np.asarray(y, dtype=np.float64)
        if Xa.ndim == 1:
            Xa = Xa[None]
        ya = ya.reshape(-1) if ya.ndim <= 1 else ya
        if Xa.ndim != 2 or Xa.shape[1] != self.dim:
            raise ValueError(f"X must have shape (q, {self.dim}), got {Xa.shape}")
        if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
            raise ValueError(f"y must have shape ({Xa.shape[0]},), got {np.asarray(y).shape}")
        if not np.isfinite(Xa).all():
            raise ValueError("X must be finite")
        tol = 1e-9 * (self.bounds[1] - self.bounds[0])
        if (Xa < self.bounds[0] - tol).any() or (Xa > self.bounds[1] + tol).any():
            raise ValueError("X has points outside bounds")
        bad = ~np.isfinite(ya)
        if bad.any() and self.nonfinite == "error":
            raise ValueError(
                f"y holds {int(bad.sum())} non-finite value(s); pass nonfinite='skip' to record "
                "and skip them"
            )
        if bad.any():
            log.warning("skipping %d non-finite objective value(s)", int(bad.sum()))
        U = np.clip(self._to_unit(Xa), 0.0, 1.0)
        for u, v in zip(U, ya, strict=True):
            self._X.append(u)
            self._y.append(float(v) if np.isfinite(v) else math.nan)

    def result(self) -> Result:
        """The run so far as a :class:`Result`."""
        if not self._y:
            raise ValueError("no observations yet")
        X = self._from_unit(np.asarray(self._X))
        y = np.asarray(self._y)
        if not np.isfinite(y).any():
            best_i, best_y = 0, math.nan
        else:
            v = np.where(np.isfinite(y), self._sign * y, -np.inf)
            best_i = int(np.argmax(v))
            best_y = float(y[best_i])
        return Result(X=X, y=y, best_x=X[best_i], best_y=best_y, maximize=self.maximize,
                      surrogate=self.surrogate.name, times={k: list(v) for k, v in self.times.items()},
                      diagnostics=list(self.diagnostics))  # fmt: skip

    def _header(self) -> dict[str, Any]:
        return {"type": "header", "format": HISTORY_FORMAT, "dim": self.dim,
                "bounds": self.bounds.tolist(), "maximize": self.maximize, "seed": self.seed,
                "surrogate": self.surrogate.name, "n_init": self.n_init}  # fmt: skip

    def run(
        self,
        f: Callable[[np.ndarray], float],
        budget: int,
        *,
        history: str | os.PathLike[str] | None = None,
        callback: Callable[[int, np.ndarray, float], None] | None = None,
        progress_bar: bool = False,
    ) -> Result:
        """Evaluate ``f`` until ``budget`` evaluations in total (initial design included).

        Args:
            f: objective taking a ``(D,)`` array, returning a real number.
            budget: total evaluations, ``>= n_init``; exactly ``budget - n_told`` calls of ``f``.
            history: JSONL file; if it exists its evaluations are replayed (not re-evaluated) and
                the run continues from there, each new evaluation is appended and flushed.
            callback: ``callback(i, x, y)`` after each evaluation.
            progress_bar: show a progress bar.
        """
        if not callable(f):
            raise TypeError(f"f must be callable, got {type(f).__name__}")
        check_int(budget, "budget", low=1)
        if budget < self.n_init:
            raise ValueError(f"budget ({budget}) is smaller than the initial design (n_init="
                             f"{self.n_init})")  # fmt: skip
        fdim = getattr(f, "dim", None)
        if isinstance(fdim, int) and fdim != self.dim:
            raise ValueError(f"the objective has dim={fdim} but bounds have D={self.dim}")
        appender = None
        if history is not None:
            path = Path(history)
            if path.exists() and path.stat().st_size > 0:
                header, records = read_history(path)
                self._check_header(header, path)
                _drop_incomplete_tail(path)
                for r in records:
                    if self.n_told >= budget:
                        break
                    yv = math.nan if r["y"] is None else r["y"]
                    self.tell(np.asarray(r["x"])[None], [yv])
                log.info("resumed %d evaluations from %s", self.n_told, path)
                appender = JsonlAppender(path)
            else:
                appender = JsonlAppender(path)
                appender.append(self._header())
        try:
            bar = progress(
                total=budget, enabled=progress_bar, desc=f"GIT-BO ({self.surrogate.name})"
            )
            bar.update(self.n_told)
            while self.n_told < budget:
                phase = "init" if self.n_told < self.n_init else "bo"
                x = self.ask(1)[0]
                t0 = time.perf_counter()
                value = f(x)
                seconds = time.perf_counter() - t0
                if isinstance(value, np.ndarray | np.generic | torch.Tensor) and (
                    np.size(value) == 1
                    if not isinstance(value, torch.Tensor)
                    else value.numel() == 1
                ):
                    value = value.item()
                if isinstance(value, bool) or not isinstance(value, numbers.Real):
                    raise TypeError(f"the objective must return a real number, got "
                                    f"{type(value).__name__}")  # fmt: skip
                value = float(value)
                self.tell(x[None], [value])
                if appender is not None:
                    appender.append({"type": "eval", "i": self.n_told - 1, "x": x.tolist(),
                                     "y": value, "phase": phase, "seconds": seconds})  # fmt: skip
                if callback is not None:
                    callback(self.n_told - 1, x, value)
                bar.update(1)
                res = self.result()
                bar.set_postfix(best=f"{res.best_y:.4g}")
            bar.close()
        finally:
            if appender is not None:
                appender.close()
        return self.result()

    def _check_header(self, header: dict[str, Any], path: Path) -> None:
        if header.get("dim") != self.dim:
            raise ValueError(f"history {path} is for D={header.get('dim')}, not D={self.dim}")
        if not np.allclose(np.asarray(header.get("bounds")), self.bounds):
            raise ValueError(f"history {path} was written for other bounds")
        if header.get("maximize") != self.maximize:
            raise ValueError(f"history {path} was written with maximize={header.get('maximize')}")


def _drop_incomplete_tail(path: Path) -> None:
    # a record cut short by a crash is removed before new ones are appended after it
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with path.open("r+b") as f:
            f.truncate(keep)


def read_history(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a history file: ``(header, eval records)``.

    A last line cut short by a crash (no newline, not valid JSON) is dropped with a warning; any
    other malformed line is a ``ValueError`` naming ``file:line``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"history {path} does not exist")
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rows: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            if n == len(lines) and not text.endswith("\n"):
                warnings.warn(f"{path}:{n}: dropping an incomplete last record", stacklevel=2)
                continue
            raise ValueError(f"{path}:{n}: not valid JSON ({err.msg})") from err
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: expected a JSON object")
        rows.append(row)
    if not rows or rows[0].get("type") != "header" or rows[0].get("format") != HISTORY_FORMAT:
        raise ValueError(f"{path} is not a GIT-BO history file (header missing)")
    evals = [r for r in rows[1:] if r.get("type") == "eval"]
    for r in evals:
        if "x" not in r or "y" not in r:
            raise ValueError(f"{path}: an eval record lacks 'x' or 'y'")
    return rows[0], evals


def minimize(
    f: Callable[[np.ndarray], float],
    bounds: Any,
    budget: int,
    *,
    surrogate: str | Surrogate = "gp",
    history: str | os.PathLike[str] | None = None,
    progress_bar: bool = False,
    **kwargs: Any,
) -> Result:
    """Minimise ``f`` over the box ``bounds (2, D)`` with ``budget`` evaluations of GIT-BO.

    ``kwargs`` go to :class:`GITBO` (``rank``, ``origin``, ``n_init``, ``seed`` ...).
    """
    opt = GITBO(bounds, surrogate, maximize=False, **kwargs)
    return opt.run(f, budget, history=history, progress_bar=progress_bar)
