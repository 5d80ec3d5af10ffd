"""``reproduce`` and ``bench``: selectivity grids over IIT-trained implementations.

``reproduce`` trains implementations of every algorithm of a task (MLP tier with ``--quick``,
Transformer tier by default), gates them on accuracy and IIA, extracts their representations on a
shared probe set and fills the selectivity grids of the official one-directional point test, the
symmetric test and a CKA permutation test, next to the behavioural-agreement and weight-correlation
baselines and the intervention ("co-interpretive") variant.

``bench`` measures the similarity kernels against the straightforward implementations (speed
targets of the issue) and every similarity/decision method's grid, AUROC and type-I error, plus
the sensitivity to probe-set size, ridge alphas, pooling and sites.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from iclr26.interp_equiv.data import MLP_TIER, TRANSFORMER_TIER, Tier, probe_inputs, train_tier
from iclr26.interp_equiv.estimator import post_intervention, selectivity_matrix, similarity_matrix
from iclr26.interp_equiv.iit import Implementation, gate, interchange_accuracy
from iclr26.interp_equiv.models import weight_correlation
from iclr26.interp_equiv.reprs import intervened_representations, representations
from iclr26.interp_equiv.similarity import (
    OFFICIAL_ALPHAS,
    CKAStats,
    RidgeSVD,
    cka,
    cka_permutation_test,
    train_test_rows,
)
from iclr26.interp_equiv.tasks import Task
from iclr26.shared import Report, check_int

__all__ = ["SPEED_KERNELS", "bench", "reproduce", "speed_rows"]

PACKAGE = "iclr26-interp-equiv"
BACKENDS = ("torch", "scikit-learn", "safetensors", "matplotlib")
CLAIM = (
    "Interpretive equivalence separates models that implement the same algorithm from models that "
    "implement different ones even when their behaviour is identical, where behavioural agreement "
    "and weight similarity cannot."
)
MIN_ACCURACY, MIN_IIA = 0.95, 0.9


@dataclass
class _World:
    tier: Tier
    task: Task
    impls: dict[str, list[Implementation]]
    kept: dict[str, list[Implementation]]
    rejected: list[tuple[Implementation, str]]
    probe: torch.Tensor
    corrupted: torch.Tensor
    reps: dict[str, list[np.ndarray]]
    train_s: float


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch and the BLAS behind numpy on one thread each: on a shared CPU the default thread
    pools oversubscribe and small ridge/SVD calls slow down many times over."""
    from threadpoolctl import threadpool_limits

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(previous)


def _build(tier: Tier, per_algorithm: int, n_probe: int, seed: int, progress: bool) -> _World:
    t0 = time.perf_counter()
    task, impls = train_tier(tier, per_algorithm=per_algorithm, seed=seed, progress=progress)
    train_s = time.perf_counter() - t0
    kept: dict[str, list[Implementation]] = {}
    rejected: list[tuple[Implementation, str]] = []
    for name, group in impls.items():
        k, r = gate(group, min_accuracy=MIN_ACCURACY, min_iia=MIN_IIA)
        kept[name] = k
        rejected += r
    probe, corrupted = probe_inputs(task, n_probe, seed + 7)
    reps = {name: [representations(i.model, probe) for i in group] for name, group in kept.items()}
    return _World(tier, task, impls, kept, rejected, probe, corrupted, reps, train_s)


def _impl_rows(w: _World) -> list[dict[str, Any]]:
    rows = []
    for name, group in w.impls.items():
        for i, impl in enumerate(group):
            cfg = impl.model.config
            rows.append({
                "algorithm": name,
                "#": i,
                "model": f"{type(impl.model).__name__} "
                + (f"d={cfg['d_model']} L={cfg['n_layers']}" if "d_model" in cfg else f"w={cfg['widths']}"),
                "aligned at": next(iter(impl.alignment.values())).hook,
                "accuracy": impl.accuracy,
                "min IIA": impl.min_iia,
                "kept": impl.passes(MIN_ACCURACY, MIN_IIA),
            })  # fmt: skip
    return rows


def _grid_rows(labels: Sequence[str], grid: np.ndarray) -> list[dict[str, Any]]:
    return [
        {"group 1 \\ group 2": a, **{b: grid[i, j] for j, b in enumerate(labels)}}
        for i, a in enumerate(labels)
    ]


def _diag_off(grid: np.ndarray) -> tuple[float, float]:
    K = grid.shape[0]
    off = ~np.eye(K, dtype=bool)
    return float(np.nanmax(np.diag(grid))), float(np.nanmin(grid[off])) if K > 1 else float("nan")


def _pair_grid(w: _World, fn) -> np.ndarray:
    """Mean of ``fn(impl_a, impl_b)`` over distinct model pairs of each algorithm pair."""
    labels = list(w.kept)
    G = np.full((len(labels), len(labels)), np.nan)
    for a, b in itertools.product(range(len(labels)), repeat=2):
        vals = [
            fn(x, y)
            for ix, x in enumerate(w.kept[labels[a]])
            for iy, y in enumerate(w.kept[labels[b]])
            if not (a == b and ix == iy)
        ]
        vals = [v for v in vals if v is not None and np.isfinite(v)]
        if vals:
            G[a, b] = float(np.mean(vals))
    return G


@torch.no_grad()
def _agreement(w: _World):
    preds = {id(i): i.model(w.probe).argmax(-1) for g in w.kept.values() for i in g}
    return lambda x, y: float((preds[id(x)] == preds[id(y)]).float().mean())


def _weight_corr(x: Implementation, y: Implementation) -> float | None:
    return weight_correlation(x.model, y.model)


def _iia_baseline(w: _World) -> np.ndarray:
    """Rate at which B's implementations fail A's counterfactuals at B's own aligned sites."""
    labels = list(w.kept)
    G = np.full((len(labels), len(labels)), np.nan)
    for a, b in itertools.product(range(len(labels)), repeat=2):
        algo = w.task.algorithm(labels[a])
        fails = []
        for impl in w.kept[labels[b]]:
            if set(impl.alignment) != set(algo.variables):
                break
            iia = interchange_accuracy(impl.model, w.task, algo, impl.alignment, n=256, seed=3)
            fails.append(min(iia.values()) < MIN_IIA)
        else:
            if fails:
                G[a, b] = float(np.mean(fails))
    return G


def _heatmaps(panels: Sequence[tuple[str, Sequence[str], np.ndarray, str]]) -> Any:
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.5 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax, (title, labels, grid, cmap) in zip(axes.flat, panels, strict=False):
        ax.imshow(grid, vmin=0, vmax=1, cmap=cmap)
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        for i, j in itertools.product(range(len(labels)), repeat=2):
            v = grid[i, j]
            ax.text(j, i, "—" if not np.isfinite(v) else f"{v:.2f}", ha="center", va="center",
                    fontsize=8, color="white" if np.isfinite(v) and v > 0.5 else "black")  # fmt: skip
        ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig


def reproduce(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """Selectivity grids on IIT-trained implementations (MLP tier if ``quick``, else Transformer)."""
    threads = contextlib.ExitStack()
    threads.enter_context(_one_thread())
    try:
        tier = MLP_TIER if quick else TRANSFORMER_TIER
        per_algorithm, n_probe = (4, 600) if quick else (4, 1000)
        n_boot = 40
        report = Report(
            PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS,
            config={"quick": quick, "tier": tier.name, "per_algorithm": per_algorithm,
                    "n_probe": n_probe, "n_boot": n_boot, "n": 20, "steps": tier.steps,
                    "min_accuracy": MIN_ACCURACY, "min_iia": MIN_IIA, "torch_threads": 1},
        )  # fmt: skip
        w = _build(tier, per_algorithm, n_probe, seed, progress)
        report.add_table(f"Implementations ({tier.name} tier, {w.task.name})", _impl_rows(w))
        for impl, why in w.rejected:
            report.note(f"not comparable: {impl.algorithm.name} seed {impl.seed} ({why})")
        labels = [k for k, g in w.kept.items() if len(g) >= 3]
        if len(labels) < 2:
            report.check("at least two algorithms have >= 3 gated implementations", False,
                         f"kept: { {k: len(g) for k, g in w.kept.items()} }")  # fmt: skip
            return report
        groups = {k: w.reps[k] for k in labels}
        w.kept = {k: w.kept[k] for k in labels}
        S = similarity_matrix([r for k in labels for r in groups[k]], "predictivity", seed=seed)
        off = selectivity_matrix(groups, method="point", S=S, n_boot=n_boot, seed=seed)
        sym = selectivity_matrix(groups, method="symmetric", S=S, n_boot=n_boot, seed=seed)
        S_cka = similarity_matrix([r for k in labels for r in groups[k]], "cka")
        perm = selectivity_matrix(groups, method="permutation", S=S_cka, n_boot=n_boot, seed=seed)
        agree = _pair_grid(w, _agreement(w))
        weights = _pair_grid(w, _weight_corr)
        # intervention variant: every implementation is also run on the same (probe, corrupted)
        # pairs with its aligned (circuit) sites patched from the corrupted input; a model's
        # representation stacks its clean rows and its intervened rows, so similarity is measured
        # on the task distribution and on the interventional distribution together.
        post = {
            k: [intervened_representations(i.model, w.probe, w.corrupted, list(i.alignment.values()))
                for i in w.kept[k]]
            for k in labels
        }  # fmt: skip
        inter = {
            k: [np.vstack([c, p]) for c, p in zip(groups[k], post[k], strict=True)] for k in labels
        }
        official_post = np.array([
            [post_intervention(groups[a], post[a], groups[b], seed=seed) for b in labels] for a in labels
        ])  # fmt: skip
        sym_int = selectivity_matrix(inter, method="symmetric", n_boot=n_boot, seed=seed)
        for title, grid in (
            ("Selectivity: official point test, predictivity (row = group 1)", off.rates),
            ("Selectivity: symmetric test, predictivity (default)", sym.rates),
            ("Selectivity: permutation test, debiased CKA", perm.rates),
            (
                "Selectivity: symmetric test on clean + intervened (co-interpretive) rows",
                sym_int.rates,
            ),
            (
                "Official post_intervention: fraction of trials where the clean representation of the "
                "row group predicts the column group better than the intervened one",
                official_post,
            ),
            ("Baseline: behavioural agreement on the probe set", agree),
            ("Baseline: weight correlation (same-architecture pairs)", weights),
        ):
            report.add_table(title, _grid_rows(labels, grid))
        m = len(labels)
        sizes = [len(groups[k]) for k in labels]
        offs = np.r_[0, np.cumsum(sizes)]
        mean_block = np.array([[np.mean([S[i, j] for i in range(offs[a], offs[a + 1])
                                         for j in range(offs[b], offs[b + 1]) if i != j])
                                for b in range(m)] for a in range(m)])  # fmt: skip
        report.add_table(
            "Mean predictivity ρ(row group → column group)", _grid_rows(labels, mean_block)
        )
        d_sym, o_sym = _diag_off(sym.rates)
        d_int, o_int = _diag_off(sym_int.rates)
        report.check(
            "symmetric test: same algorithm never rejected (diagonal <= 0.1)",
            d_sym <= 0.1,
            f"max diagonal {d_sym:.2f}",
        )
        report.check(
            "symmetric test: different algorithms rejected (off-diagonal >= 0.8)",
            o_sym >= 0.8,
            f"min off-diagonal {o_sym:.2f}",
        )
        amin = float(np.nanmin(agree))
        report.check(
            "behaviour cannot separate: agreement >= 0.95 for every pair",
            amin >= 0.95,
            f"min agreement {amin:.3f}",
        )
        wmax = (
            float(np.nanmax(np.abs(np.diag(weights))))
            if np.isfinite(np.diag(weights)).any()
            else float("nan")
        )
        report.check(
            "weights cannot separate: |within-algorithm weight correlation| < 0.2",
            bool(wmax < 0.2),
            f"max |corr| {wmax:.3f}",
        )
        report.check("with intervened rows: diagonal <= 0.1 and off-diagonal >= 0.8",
                     d_int <= 0.1 and o_int >= 0.8, f"diag max {d_int:.2f}, off min {o_int:.2f}")  # fmt: skip
        order = [
            (labels[a], labels[b], off.rates[a, b], off.rates[b, a])
            for a, b in itertools.combinations(range(m), 2)
            if abs(off.rates[a, b] - off.rates[b, a]) > 0.5
        ]
        report.add_table(
            "Order dependence of the official one-directional test (|rate(a,b) - rate(b,a)| > 0.5)",
            [
                {"a": a, "b": b, "rate(a as group 1)": x, "rate(b as group 1)": y}
                for a, b, x, y in order
            ]
            or [{"a": "—", "b": "—", "rate(a as group 1)": None, "rate(b as group 1)": None}],
        )
        report.metric("symmetric_diag_max", d_sym)
        report.metric("symmetric_offdiag_min", o_sym)
        report.metric("official_offdiag_min", _diag_off(off.rates)[1])
        report.metric("behaviour_agreement_min", amin)
        report.metric("train_seconds", w.train_s)
        report.add_figure("selectivity", _heatmaps([
            ("official point test\n(predictivity, row = group 1)", labels, off.rates, "Reds"),
            ("symmetric test\n(predictivity)", labels, sym.rates, "Reds"),
            ("permutation test\n(debiased CKA)", labels, perm.rates, "Reds"),
            ("symmetric test,\nclean + intervened rows", labels, sym_int.rates, "Reds"),
            ("behavioural agreement", labels, agree, "Blues"),
            ("weight correlation", labels, np.abs(weights), "Blues"),
        ]))  # fmt: skip
        report.note(
            "Rates are the fraction of 40 bootstrap repetitions (20 trials each) that rejected "
            "equivalence: ideally 0 on the diagonal and 1 off it. Trial draws are distinct models "
            "for the symmetric test and with replacement (official) for the point test."
        )
        report.note(
            "Implementations are IIT-trained here (no InterpBench weights offline); the theory "
            "behind the estimator is our formalisation, not the paper's theorem."
        )
        return report
    finally:
        threads.close()


# ----------------------------------------------------------------------------------- bench


def _naive_debiased_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Debiased CKA through the n × n Gram matrices (Nguyen et al. 2021's formula)."""
    Xt = torch.from_numpy(X.astype(np.float32))
    Yt = torch.from_numpy(Y.astype(np.float32))
    Xt, Yt = Xt - Xt.mean(0), Yt - Yt.mean(0)
    n = X.shape[0]

    def hsic(K: torch.Tensor, L: torch.Tensor) -> float:
        t = (
            (K * L).sum(dtype=torch.float64)
            + K.sum(dtype=torch.float64) * L.sum(dtype=torch.float64) / ((n - 1) * (n - 2))
            - 2 / (n - 2) * float(K.sum(0, dtype=torch.float64) @ L.sum(1, dtype=torch.float64))
        )
        return float(t / (n * (n - 3)))

    # float32 Grams (400 MB each at n = 10,000), float64 sums
    K, L = (Xt @ Xt.T).fill_diagonal_(0), (Yt @ Yt.T).fill_diagonal_(0)
    return hsic(K, L) / math.sqrt(hsic(K, K) * hsic(L, L))


def _centred_copy_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Debiased CKA from ``d × d`` products the textbook way (the 0.3.0 :func:`cka`): centred
    float64 copies, three full products, the zero-diagonal Gram's row sums from ``X̃ X̃ᵀ1``."""
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    X, Y = X - X.mean(0), Y - Y.mean(0)
    n = X.shape[0]

    def pieces(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        diag = np.einsum("ij,ij->i", A, A)
        row = A @ A.sum(0) - diag
        return diag, row, float(row.sum())

    def hsic(fro2: float, a: tuple, b: tuple) -> float:
        (da, ra, sa), (db, rb, sb) = a, b
        t = fro2 - float(da @ db) + sa * sb / ((n - 1) * (n - 2)) - 2 / (n - 2) * float(ra @ rb)
        return t / (n * (n - 3))

    px, py = pieces(X), pieces(Y)
    hxy = hsic(np.linalg.norm(X.T @ Y) ** 2, px, py)
    hxx = hsic(np.linalg.norm(X.T @ X) ** 2, px, px)
    hyy = hsic(np.linalg.norm(Y.T @ Y) ** 2, py, py)
    return hxy / math.sqrt(hxx * hyy)


def _naive_ridge_grid(X: np.ndarray, Y: np.ndarray, alphas: np.ndarray) -> float:
    """One linear solve per alpha for the leave-one-out error, then the held-out R²."""
    train, test = train_test_rows(X.shape[0], 0.1, 0)
    Xtr, Ytr = X[train], Y[train]
    xm, ym = Xtr.mean(0), Ytr.mean(0)
    Xc, Yc = Xtr - xm, Ytr - ym
    best, best_err = None, np.inf
    for a in alphas:
        A = Xc.T @ Xc + a * np.eye(X.shape[1])
        W = np.linalg.solve(A, Xc.T @ Yc)
        h = 1.0 / Xc.shape[0] + np.einsum("ij,ji->i", Xc, np.linalg.solve(A, Xc.T))
        err = np.mean(((Yc - Xc @ W) / (1 - h)[:, None]) ** 2)
        if err < best_err:
            best, best_err = (W, a), err
    W, _ = best
    pred = (X[test] - xm) @ W + ym
    ss = ((Y[test] - pred) ** 2).sum(0) / ((Y[test] - Y[test].mean(0)) ** 2).sum(0)
    return float(np.mean(1 - ss))


def _svd_ridge_grid(X: np.ndarray, Y: np.ndarray, alphas: np.ndarray) -> float:
    train, test = train_test_rows(X.shape[0], 0.1, 0)
    model = RidgeSVD(X[train])
    alpha = float(alphas[int(np.argmin(model.loo_errors(Y[train], alphas)))])
    W, b = model.coef(Y[train], alpha)
    pred = model.predict(X[test], W, b)
    ss = ((Y[test] - pred) ** 2).sum(0) / ((Y[test] - Y[test].mean(0)) ** 2).sum(0)
    return float(np.mean(1 - ss))


def _paired_rounds(
    fast, slow, rounds: int, *, slow_scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, Any]:
    """Seconds of ``fast`` (wall and CPU) and ``slow`` (wall) in interleaved rounds, and their
    last results.

    Each round times ``fast()`` and then ``slow()`` back to back, so both see the same machine
    load; the per-round ratios give a speed-up median and spread that load swings move less than
    two separate medians. ``slow_scale`` multiplies the slow time (a straightforward loop timed
    on a fraction of the work). No warm-up: both are plain numpy/torch calls, and the first
    round's time is reported like the others (the min–max spread shows it).
    """
    f, s, c = np.empty(rounds), np.empty(rounds), np.empty(rounds)
    a = b = None
    for r in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        a = fast()
        f[r], c[r] = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        b = slow()
        s[r] = (time.perf_counter() - t0) * slow_scale
    return f, c, s, a, b


def _speed_row(kernel: str, f: np.ndarray, c: np.ndarray, s: np.ndarray, peer: str, target: str,
               held: bool | None, agreement: str) -> dict[str, Any]:  # fmt: skip
    ratio = s / f
    return {
        "kernel": kernel,
        "ours median (s)": float(np.median(f)),
        "ours min–max (s)": f"{f.min():.3g}–{f.max():.3g}",
        "ours CPU median (s)": float(np.median(c)),
        "peer": peer,
        "peer median (s)": float(np.median(s)),
        "speed-up median": float(np.median(ratio)),
        "speed-up min–max": f"{ratio.min():.3g}–{ratio.max():.3g}",
        "rounds": len(f),
        "target": target,
        "target held": held,
        "agreement": agreement,
    }


SPEED_KERNELS = ("cka", "ridge", "permutation")


def speed_rows(
    *,
    rounds: int = 5,
    seed: int = 0,
    kernels: Sequence[str] = SPEED_KERNELS,
    gram_peer: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The issue's speed targets at their own shapes (no trained model needed), each against the
    straightforward implementation (and sklearn ``RidgeCV`` for ridge) in the same run: the first
    table of ``bench`` (``rounds`` interleaved rounds; also the ``speed`` command).

    Args:
        rounds: interleaved rounds of ours vs each peer.
        seed: data seed.
        kernels: any of :data:`SPEED_KERNELS` (``"cka"``, ``"ridge"``, ``"permutation"``).
        gram_peer: time CKA against the ``n × n`` Gram matrices too (≈ 200 GFLOP per call at
            n = 10,000, by far the slowest peer); the other CKA peers always run.

    Returns:
        ``(rows, metrics)``: one table row per kernel/peer and the medians (seconds, speed-ups).

    The representations are synthetic: ``Y`` is a noisy linear read-out of ``X``, so CKA and the
    ridge fit are far from 0 and the timed code paths are the ones used on model representations.
    """
    check_int(rounds, "rounds", low=1)
    check_int(seed, "seed", low=0)
    if isinstance(kernels, str) or not kernels or any(k not in SPEED_KERNELS for k in kernels):
        raise ValueError(f"kernels must be a non-empty subset of {SPEED_KERNELS}, got {kernels!r}")
    with _one_thread():  # torch and numpy's BLAS on one thread each, as in bench
        return _speed_rows(rounds, seed, tuple(kernels), bool(gram_peer))


def _speed_rows(
    rounds: int, seed: int, kernels: tuple[str, ...], gram_peer: bool
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    from sklearn.linear_model import RidgeCV

    rows, out = [], {}
    if "cka" in kernels:
        rng = np.random.default_rng([seed, 1])  # one stream per kernel: any subset, same data
        # 1. debiased CKA on two 10,000 × 512 representations: d × d products vs n × n Grams
        n, d = 10_000, 512
        X = rng.standard_normal((n, d)).astype(np.float32)
        Y = (X @ rng.standard_normal((d, d)).astype(np.float32)) * 0.1 + rng.standard_normal(
            (n, d)
        ).astype(np.float32)
        if gram_peer:
            f, c, s, a, b = _paired_rounds(
                lambda: cka(X, Y), lambda: _naive_debiased_cka(X, Y), rounds
            )
            rows.append(_speed_row(f"debiased CKA, two {n:,} × {d} representations", f, c, s,
                                   "n × n Gram matrices (float32, torch)", "< 1 s",
                                   bool(np.median(f) < 1.0), f"|Δ| = {abs(a - b):.1e}"))  # fmt: skip
            out["cka_speedup"] = float(np.median(s / f))
        f2, c2, s2, a, b = _paired_rounds(
            lambda: cka(X, Y), lambda: _centred_copy_cka(X, Y), rounds
        )
        rows.append(_speed_row(f"debiased CKA, two {n:,} × {d} representations", f2, c2, s2,
                               "d × d products on centred float64 copies (0.3.0)", "< 1 s",
                               bool(np.median(f2) < 1.0), f"|Δ| = {abs(a - b):.1e}"))  # fmt: skip
        # the target is read on all rounds of ours (those against every peer)
        f_all = np.concatenate([f, f2]) if gram_peer else f2
        c_all = np.concatenate([c, c2]) if gram_peer else c2
        out |= {"cka_seconds": float(np.median(f_all)), "cka_cpu_seconds": float(np.median(c_all)),
                "cka_vs_copies": float(np.median(s2 / f2))}  # fmt: skip
        # one side fixed (a reference compared with many models): its CKAStats computed once
        sx = CKAStats(X)
        f3, c3, s3, a, b = _paired_rounds(lambda: cka(sx, Y), lambda: cka(X, Y), rounds)
        rows.append(_speed_row(f"debiased CKA, {n:,} × {d}, X's CKAStats reused", f3, c3, s3,
                               "cka(X, Y) from scratch", "—", None,
                               f"|Δ| = {abs(a - b):.1e}"))  # fmt: skip
        out["cka_stats_reuse"] = float(np.median(s3 / f3))
        del X, Y
    if "ridge" in kernels:
        rng = np.random.default_rng([seed, 2])
        # 2. ridge predictivity over 13 alphas: one SVD vs one solve per alpha; sklearn RidgeCV
        n, d, k = 2000, 256, 256
        X = rng.standard_normal((n, d))
        Y = X @ rng.standard_normal((d, k)) + 3 * rng.standard_normal((n, k))
        alphas = np.logspace(-3, 3, 13)
        train, _ = train_test_rows(n, 0.1, 0)
        f, c, s, a, b = _paired_rounds(
            lambda: _svd_ridge_grid(X, Y, alphas), lambda: _naive_ridge_grid(X, Y, alphas), rounds
        )
        diff = abs(a - b)
        rows.append(_speed_row(f"ridge R², {len(alphas)} alphas (LOO), {n} × {d} → {k}", f, c, s,
                               "one linear solve per alpha", "faster than the peer",
                               bool(np.median(s / f) > 1), f"|Δ R²| = {diff:.1e}"))  # fmt: skip
        out["ridge_speedup"] = float(np.median(s / f))
        f2, c2, s2, _, sk = _paired_rounds(
            lambda: _svd_ridge_grid(X, Y, alphas),
            lambda: RidgeCV(alphas=alphas).fit(X[train], Y[train]),
            rounds,
        )
        ours_alpha = float(alphas[int(np.argmin(RidgeSVD(X[train]).loo_errors(Y[train], alphas)))])
        rows.append(_speed_row(f"ridge R², {len(alphas)} alphas (LOO), {n} × {d} → {k}", f2, c2, s2,
                               "sklearn RidgeCV fit (LOO over the same alphas)", "—", None,
                               f"same alpha: {sk.alpha_ == ours_alpha}"))  # fmt: skip
        out["ridge_vs_sklearn"] = float(np.median(s2 / f2))
    if "permutation" in kernels:
        rng = np.random.default_rng([seed, 3])
        # 3. 1,000-permutation CKA test at n = 2,000, d = 256, reusing the invariant pieces
        n, d, n_perm = 2000, 256, 1000
        X = rng.standard_normal((n, d))
        Y = X[:, : d // 2] @ rng.standard_normal((d // 2, d)) * 0.05 + rng.standard_normal((n, d))
        n_naive = 50
        perm_rng = np.random.default_rng(seed)
        f, c, s, (obs, _, null), naive_null = _paired_rounds(
            lambda: cka_permutation_test(X, Y, n_perm=n_perm, seed=seed),
            lambda: [cka(X, Y[perm_rng.permutation(n)]) for _ in range(n_naive)],
            rounds,
            slow_scale=n_perm / n_naive,
        )
        held = bool(np.median(f) < 10.0)
        rows.append(_speed_row(f"{n_perm:,}-permutation CKA test, n = {n:,}, d = {d}", f, c, s,
                               f"CKA recomputed per permutation (timed on {n_naive}, scaled)",
                               "< 10 s", held,
                               f"|Δ observed| = {abs(obs - cka(X, Y)):.1e}; null sd {np.std(null):.3f} "
                               f"vs {np.std(naive_null):.3f}"))  # fmt: skip
        out |= {"perm_seconds": float(np.median(f)), "perm_speedup": float(np.median(s / f))}
    return rows, out


def _auroc(S: np.ndarray, algo: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    sym = (S + S.T) / 2
    iu = np.triu_indices(len(algo), 1)
    same = (algo[:, None] == algo[None, :])[iu]
    score = sym[iu]
    ok = np.isfinite(score)
    if same[ok].all() or not same[ok].any():
        return float("nan")
    return float(roc_auc_score(same[ok], score[ok]))


def _method_rows(
    w: _World, seed: int, n_boot: int
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    labels = [k for k, g in w.kept.items() if len(g) >= 3]
    groups = {k: w.reps[k] for k in labels}
    reps = [r for k in labels for r in groups[k]]
    algo = np.array([a for a, k in enumerate(labels) for _ in groups[k]])
    rows, grids = [], {}

    def add(name: str, grid: np.ndarray, S: np.ndarray | None, seconds: float) -> None:
        K = len(labels)
        off = ~np.eye(K, dtype=bool)

        def stat(fn, x: np.ndarray) -> float | None:
            return float(fn(x)) if np.isfinite(x).any() else None  # all NaN: not comparable

        rows.append({
            "method": name,
            "type-I (mean diagonal)": stat(np.nanmean, np.diag(grid)),
            "power (mean off-diagonal)": stat(np.nanmean, grid[off]),
            "min off-diagonal": stat(np.nanmin, grid[off]),
            "AUROC same vs different": _auroc(S, algo) if S is not None else None,
            "seconds": seconds,
        })  # fmt: skip
        grids[name] = grid

    for measure in ("predictivity", "cka", "procrustes", "svcca"):
        t0 = time.perf_counter()
        S = similarity_matrix(reps, measure, seed=seed)
        t_sim = time.perf_counter() - t0
        methods = [("point", "official point test"), ("symmetric", "symmetric test")]
        if measure != "predictivity":
            methods = [("symmetric", "symmetric test"), ("permutation", "permutation test")]
        for method, mname in methods:
            t0 = time.perf_counter()
            sel = selectivity_matrix(groups, method=method, S=S, n_boot=n_boot, seed=seed)
            add(f"{measure} + {mname}", sel.rates, S, t_sim + time.perf_counter() - t0)
    t0 = time.perf_counter()
    kept = {k: w.kept[k] for k in labels}
    w2 = _World(w.tier, w.task, w.impls, kept, w.rejected, w.probe, w.corrupted, w.reps, w.train_s)
    agree = _pair_grid(w2, _agreement(w2))
    add(
        "behavioural agreement < 0.95", (agree < 0.95).astype(float), None, time.perf_counter() - t0
    )
    t0 = time.perf_counter()
    wc = _pair_grid(w2, _weight_corr)
    add(
        "weight correlation < 0.5",
        np.where(np.isfinite(wc), (np.abs(wc) < 0.5).astype(float), np.nan),
        None,
        time.perf_counter() - t0,
    )
    t0 = time.perf_counter()
    iia = _iia_baseline(w2)
    if np.isfinite(iia).any():
        add(
            "IIA under the other algorithm's alignment (needs H)",
            iia,
            None,
            time.perf_counter() - t0,
        )
    return rows, grids


def _sensitivity_rows(w: _World, seed: int, n_boot: int) -> list[dict[str, Any]]:
    labels = [k for k, g in w.kept.items() if len(g) >= 3]
    rows = []

    def run(setting: str, value: str, groups: dict[str, list[np.ndarray]], **kw: Any) -> None:
        sel = selectivity_matrix(groups, method="symmetric", n_boot=n_boot, seed=seed, **kw)
        K = len(labels)
        off = ~np.eye(K, dtype=bool)
        rows.append({"setting": setting, "value": value,
                     "type-I (mean diagonal)": float(np.nanmean(np.diag(sel.rates))),
                     "power (mean off-diagonal)": float(np.nanmean(sel.rates[off]))})  # fmt: skip

    full = {k: w.reps[k] for k in labels}
    n_all = full[labels[0]][0].shape[0]
    for n in (100, 300, n_all):
        run("probe inputs n", str(n), {k: [r[:n] for r in g] for k, g in full.items()})
    for name, alphas in (
        ("official (0.1, 1, 10)", OFFICIAL_ALPHAS),
        ("logspace(-3, 3, 7)", np.logspace(-3, 3, 7)),
        ("(1e3, 1e4, 1e5)", (1e3, 1e4, 1e5)),
    ):
        run("ridge alphas", name, full, alphas=alphas)
    for margin in (0.0, 0.01, 0.05):
        run("margin ε", f"{margin:g}" + (" (official)" if margin == 0 else ""), full, margin=margin)
    run("pooling", "mean (official)", full)
    last = {k: [representations(i.model, w.probe, pool="last") for i in w.kept[k]] for k in labels}
    run("pooling", "last position", last)
    aligned = {
        k: [representations(i.model, w.probe, sites=sorted({s.hook for s in i.alignment.values()}))
            for i in w.kept[k]]
        for k in labels
    }  # fmt: skip
    run("sites", "aligned layer only", aligned)
    outs = {}
    for k in labels:
        outs[k] = []
        for i in w.kept[k]:
            sites = [
                h for h in i.model.hook_names if h.endswith("resid_post") or h.startswith("hidden.")
            ][-1:]
            outs[k].append(representations(i.model, w.probe, sites=sites))
    run("sites", "last layer only", outs)
    return rows


def _calibration_rows(quick: bool, seed: int) -> list[dict[str, Any]]:
    """Type-I error and power on synthetic groups (spec test 3's generator), per method."""
    from iclr26.interp_equiv.estimator import equivalence_test, permutation_test

    reps = 10 if quick else 30
    methods = [
        ("predictivity + official point test (ε = 0, with replacement)", lambda a, b, s: not equivalence_test(a, b, symmetric=False, replace=True, margin=0.0, n_boot=10, seed=s).equivalent),
        ("predictivity + symmetric test, ε = 0", lambda a, b, s: not equivalence_test(a, b, margin=0.0, n_boot=10, seed=s).equivalent),
        ("predictivity + symmetric test, ε = 0.01 (default)", lambda a, b, s: not equivalence_test(a, b, n_boot=10, seed=s).equivalent),
        ("debiased CKA + permutation test", lambda a, b, s: permutation_test(a, b, measure="cka", seed=s).reject),
        ("Procrustes + symmetric test, ε = 0.01", lambda a, b, s: not equivalence_test(a, b, measure="procrustes", n_boot=10, seed=s).equivalent),
    ]  # fmt: skip
    rows = []
    for name, rejects in methods:
        null, alt = [], []
        for r in range(reps):
            rng = np.random.default_rng(seed * 7919 + r)
            z = rng.standard_normal((200, 4))
            z2 = np.c_[z[:, :2], np.abs(z[:, 2:]) - z[:, :2] ** 2]

            def mix(latent, rng=rng):
                return latent @ rng.standard_normal((4, 12)) + 0.1 * rng.standard_normal((200, 12))

            null.append(rejects([mix(z) for _ in range(4)], [mix(z) for _ in range(4)], r))
            alt.append(rejects([mix(z) for _ in range(4)], [mix(z2) for _ in range(4)], r))
        rows.append(
            {
                "method": name,
                "type-I error": float(np.mean(null)),
                "power": float(np.mean(alt)),
                "repetitions": reps,
            }
        )
    return rows


def bench(*, quick: bool = True, seed: int = 0, progress: bool = False) -> Report:
    """Kernel speed vs straightforward implementations; every method's grid, AUROC and type-I.

    The speed targets are timed at the issue's shapes on synthetic representations in both modes
    (``quick`` runs fewer interleaved rounds). The method grids run on the MLP tier (trained here
    in a few minutes); the Transformer tier's grids are those of the default ``reproduce``.
    """
    threads = contextlib.ExitStack()
    threads.enter_context(_one_thread())
    try:
        t_start = time.perf_counter()
        tier = MLP_TIER
        per_algorithm, n_probe, n_boot = (4, 600, 20) if quick else (5, 1000, 40)
        report = Report(
            PACKAGE, "bench", "Symmetric interpretive-equivalence tests separate algorithms better "
            "than behaviour and weights, and the similarity kernels meet the speed targets.",
            seed=seed, backends=BACKENDS,
            config={"quick": quick, "tier": tier.name, "per_algorithm": per_algorithm,
                    "n_probe": n_probe, "n_boot": n_boot, "torch_threads": 1,
                    "speed_rounds": 3 if quick else 5,
                    "calibration_repetitions": 10 if quick else 30},
        )  # fmt: skip
        t0 = time.perf_counter()
        speed, ratios = speed_rows(rounds=3 if quick else 5, seed=seed)
        report.add_table(
            "Similarity kernels at the target shapes: ours vs the peer, interleaved rounds "
            "(ratio = peer / ours per round)",
            speed,
        )
        for k, v in ratios.items():
            report.metric(k, v)
        report.metric("speed_section_seconds", time.perf_counter() - t0)
        report.check(
            "debiased CKA on two 10,000 × 512 representations in under 1 s",
            ratios["cka_seconds"] < 1.0,
            f"{ratios['cka_seconds']:.3f} s median wall, {ratios['cka_cpu_seconds']:.3f} s CPU "
            f"({ratios['cka_speedup']:.1f}× the n × n Grams, {ratios['cka_vs_copies']:.1f}× the "
            "centred-copy d × d version)",
        )
        report.check(
            "1,000-permutation test at n = 2,000, d = 256 in under 10 s",
            ratios["perm_seconds"] < 10.0,
            f"{ratios['perm_seconds']:.2f} s median ({ratios['perm_speedup']:.1f}× recomputing)",
        )
        report.check(
            "ridge alpha grid (13 alphas) from one SVD is faster than one solve per alpha",
            ratios["ridge_speedup"] > 1.0,
            f"{ratios['ridge_speedup']:.1f}×",
        )
        cal = _calibration_rows(quick, seed)
        report.add_table(
            "Calibration on synthetic groups (4 vs 4 implementations, same vs different latents)",
            cal,
        )
        default = next(r for r in cal if "(default)" in r["method"])
        report.check("default test: type-I error <= 0.1 and power >= 0.8 on synthetic groups",
                     default["type-I error"] <= 0.1 and default["power"] >= 0.8,
                     f"type-I {default['type-I error']:.2f}, power {default['power']:.2f}")  # fmt: skip
        w = _build(tier, per_algorithm, n_probe, seed, progress)
        report.metric("train_seconds", w.train_s)
        rows, grids = _method_rows(w, seed, n_boot)
        report.add_table(f"Methods on the {tier.name} tier ({w.task.name})", rows)
        report.add_table(
            "Sensitivity of the symmetric predictivity test", _sensitivity_rows(w, seed, n_boot)
        )
        labels = [k for k, g in w.kept.items() if len(g) >= 3]
        names = list(grids)
        report.add_figure(
            "method_grids",
            _heatmaps([(n.replace(" + ", "\n+ "), labels, grids[n], "Reds") for n in names]),
        )
        best = max(
            rows,
            key=lambda r: (
                -1
                if r["AUROC same vs different"] is None
                or not np.isfinite(r["AUROC same vs different"])
                else r["AUROC same vs different"]
            ),
        )
        report.metric("best_auroc_method", best["method"])
        report.metric("bench_seconds", time.perf_counter() - t_start)
        return report
    finally:
        threads.close()
