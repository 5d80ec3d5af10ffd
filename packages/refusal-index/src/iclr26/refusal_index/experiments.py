"""``reproduce`` and ``bench``: the paper's headline claim at small scale, and RI against peers.

E1 sweeps the refusal rate of simulated models with a known true RI; E2 ranks a zoo of 16
simulated models on 5 datasets at several prompt strengths; E3 repeats both on a zoo of
:class:`~iclr26.refusal_index.facts.FactMemorizer` models trained from scratch on real country
facts. Plain functions returning :class:`iclr26.shared.Report`.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import NDArray
from scipy.stats import kendalltau, norm, spearmanr
from threadpoolctl import threadpool_limits

from iclr26.refusal_index.estimators import (
    RefusalIndexWarning,
    disattenuate,
    refusal_index_direct,
    refusal_index_from_rates,
    refusal_index_ksample,
    refusal_index_paired,
    retest_reliability,
)
from iclr26.refusal_index.facts import FactMemorizer, load_fact_table
from iclr26.refusal_index.metrics import (
    aurc,
    auroc,
    brier,
    ece,
    peer_metrics,
    phi_coefficient,
    refusal_auroc_binary,
    refusal_precision,
    refusal_recall,
    simpleqa_f_score,
)
from iclr26.refusal_index.simulate import LatentPropensityModel, make_model_zoo
from iclr26.shared import Report, progress, seed_everything, timeit

__all__ = ["bench", "reproduce"]

PACKAGE = "iclr26-refusal-index"
BACKENDS = ("scipy", "matplotlib")
CLAIM = (
    "RI stays stable as the refusal rate changes while threshold metrics drift, and ranks models "
    "independently of their accuracy."
)
THRESHOLD_METRICS = (
    "refusal_precision",
    "refusal_recall",
    "refusal_f1",
    "refusal_auroc",
    "phi",
    "simpleqa_f",
)
RATES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)


def _two_pass(refused: NDArray, wrong: NDArray) -> dict[str, float]:
    """RI (rates form, n known) plus every peer metric for one simulated run."""
    n = refused.size
    q, pe, w = refused.mean(), wrong.mean(), (~refused & wrong).mean()
    with warnings.catch_warnings():
        # continuity corrections of empty cells are expected in sweeps with few refusals
        warnings.simplefilter("ignore", RefusalIndexWarning)
        ri = refusal_index_from_rates(float(q), float(pe), float(w), n)
    return {"ri": ri.ri, "ri_se": ri.se, **peer_metrics(refused, wrong)}


# ---------------------------------------------------------------- E1: refusal-rate sweep


def e1_rate_sweep(
    rhos: tuple[float, ...], n_items: int, replications: int, seed: int, *, show: bool = False
) -> list[dict[str, float]]:
    """Per (latent ρ, refusal rate): metrics averaged over ``replications`` question sets, each
    evaluated at every refusal rate (same questions, different refusal prompts). ``ri_se`` is the
    standard error of the averaged RI (delta method)."""
    rows = []
    rng = np.random.default_rng(seed)
    for rho in progress(rhos, enabled=show, desc="E1 rate sweep"):
        models = [
            LatentPropensityModel(n_items, rho, 0.4, seed=int(rng.integers(2**31)))
            for _ in range(replications)
        ]
        for q in RATES:
            runs = [_two_pass(*_flags(m.sample(q, rng))) for m in models]
            mean = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
            mean["ri_se"] = math.sqrt(np.mean([r["ri_se"] ** 2 for r in runs]) / replications)
            rows.append({"rho": rho, "true_ri": models[0].true_ri(), "refusal_rate": q} | mean)
    return rows


def _flags(sample) -> tuple[NDArray, NDArray]:
    return sample.refused, sample.forced_wrong


def _drift(rows: list[dict], metric: str) -> float:
    values = np.array([r[metric] for r in rows], dtype=float)
    return float(np.nanmax(values) - np.nanmin(values))


# ---------------------------------------------------------------- E2: ranking stability


def _strength_rates(n_models: int, rng: np.random.Generator) -> NDArray:
    """Refusal rate of each model at prompt strengths 0..3: models react differently to prompts."""
    base = rng.uniform(0.03, 0.2, n_models)
    slope = rng.uniform(0.03, 0.12, n_models)
    return np.clip(base[:, None] + slope[:, None] * np.arange(4)[None, :], 0.02, 0.7)


def _ranking_stats(scores: dict[str, NDArray], accuracy: NDArray) -> list[dict[str, float]]:
    """scores[metric]: (models, datasets, strengths). Kendall τ of model rankings between prompt
    strengths (same dataset) and between datasets (same strength); Spearman with accuracy."""
    rows = []
    for metric, s in scores.items():
        _, n_d, n_s = s.shape
        across_strengths = [
            kendalltau(s[:, d, i], s[:, d, j]).statistic
            for d in range(n_d)
            for i, j in itertools.combinations(range(n_s), 2)
        ]
        across_datasets = [
            kendalltau(s[:, i, k], s[:, j, k]).statistic
            for k in range(n_s)
            for i, j in itertools.combinations(range(n_d), 2)
        ]
        rows.append(
            {
                "metric": metric,
                "kendall_tau_across_strengths": float(np.nanmean(across_strengths)),
                "kendall_tau_across_datasets": float(np.nanmean(across_datasets)),
                "spearman_with_accuracy": float(
                    spearmanr(np.nanmean(s, axis=(1, 2)), accuracy).statistic
                ),
            }
        )
    return rows


def e2_zoo_ranking(n_items: int, seed: int, *, show: bool = False) -> tuple[list[dict], NDArray]:
    """16 simulated models × 5 datasets × 4 prompt strengths."""
    zoo = make_model_zoo(16, 5, n_items=n_items, seed=seed)
    rng = np.random.default_rng(seed + 1)
    rates = _strength_rates(len(zoo), rng)
    metrics = ("ri", *THRESHOLD_METRICS)
    scores = {m: np.empty((len(zoo), 5, rates.shape[1])) for m in metrics}
    accuracy = np.array([1.0 - np.mean([ds.error_rate for ds in row]) for row in zoo])
    for m, row in enumerate(progress(zoo, enabled=show, desc="E2 model zoo")):
        for d, model in enumerate(row):
            for k in range(rates.shape[1]):
                sample = model.sample(float(rates[m, k]), rng)
                result = _two_pass(sample.refused, sample.forced_wrong)
                for metric in metrics:
                    scores[metric][m, d, k] = result[metric]
    return _ranking_stats(scores, accuracy), accuracy


# ---------------------------------------------------------------- E3: trained fact models


def _fact_zoo(quick: bool, seed: int) -> list[FactMemorizer]:
    # accuracy varies with width and exposure, refusal quality with miscalibration
    return [
        FactMemorizer(
            width=w, steps=150 if quick else 400, exposure=exp, miscalibration=mis, seed=seed + i
        )
        for i, (w, exp, mis) in enumerate(
            itertools.product((16, 64), (1500, 6000), (0.0, 0.75, 1.5, 3.0))
        )
    ]


def e3_fact_models(quick: bool, seed: int, *, show: bool = False) -> dict:
    """Train the 16-model FactMemorizer zoo; sweep refusal rates with repeated stochastic passes."""
    table = load_fact_table()
    models = _fact_zoo(quick, seed)
    reps = 5 if quick else 20
    rng = np.random.default_rng(seed + 2)
    rates = (0.1, 0.2, 0.3, 0.4, 0.5)
    metrics = ("ri", *THRESHOLD_METRICS)
    # scores[metric]: (models, datasets = relations, rates), averaged over repeated passes
    n_rel = len(table.relations)
    scores = {m: np.zeros((len(models), n_rel, len(rates))) for m in metrics}
    whole = {m: np.zeros((len(models), len(rates))) for m in metrics}
    direct, accuracy, conf_metrics = [], [], []
    for i, model in enumerate(progress(models, enabled=show, desc="E3 fact models")):
        model.fit(table)
        p_correct, confidence, score = model.behaviour(table)
        accuracy.append(float(p_correct.mean()))
        error = 1.0 - p_correct
        direct.append([])
        conf_metrics.append(
            {
                "ece": ece(confidence, rng.random(error.size) >= error),
                "brier": brier(confidence, rng.random(error.size) >= error),
            }
        )
        for k, q in enumerate(rates):
            threshold = model.threshold_for_rate(score, q)
            r_prob = model.refusal_probs(score, threshold)
            # RI by its definition, from the model's own per-question probabilities
            direct[-1].append(refusal_index_direct(r_prob, error).ri)
            for _ in range(reps):
                wrong = rng.random(error.size) < error
                refused = rng.random(error.size) < r_prob
                res = _two_pass(refused, wrong)
                for metric in metrics:
                    whole[metric][i, k] += res[metric] / reps
                for d in range(n_rel):
                    sel = table.relation_ids == d
                    res_d = _two_pass(refused[sel], wrong[sel])
                    for metric in metrics:
                        scores[metric][i, d, k] += res_d[metric] / reps
    return {
        "table": table,
        "rates": rates,
        "whole": whole,
        "direct": np.array(direct),
        "accuracy": np.array(accuracy),
        "ranking": _ranking_stats(scores, np.array(accuracy)),
        "conf_metrics": conf_metrics,
    }


# ---------------------------------------------------------------- K-sample vs two-pass

KS = (2, 5, 10, 20)
KSAMPLE_RATES = (0.1, 0.3, 0.5)


def _ksample_rows(
    setting: str,
    cases: list[tuple[NDArray, NDArray, float]],
    sample: Callable[[int, NDArray, NDArray], tuple[NDArray, NDArray]],
    reps: int,
    coverage_reps: int,
    n_boot: int,
    seed: int,
) -> list[dict]:
    """Bias, spread, drift, CI coverage and cost of each estimator over ``cases``.

    Each case is ``(r, e, truth)``: per-question refusal and error probabilities of one model at
    one refusal rate and the RI of the definition, ``Spearman(r, e)``. ``sample(k, r, e)`` draws
    ``k`` independent refusal-allowed and forced runs as ``(k, n)`` bool arrays. The two-pass
    estimator sees the first run of each pass; the K-sample estimator sees ``K`` runs; cases are
    grouped by model in blocks of ``len(KSAMPLE_RATES)`` for the drift over refusal rates.
    """
    k_max = max(KS)
    names = ["two-pass (paired)", "two-pass, mean of 10 runs", *[f"K-sample K={k}" for k in KS]]
    calls = {names[0]: 2, names[1]: 20, **{f"K-sample K={k}": 2 * k for k in KS}}
    est = {m: np.full((len(cases), reps), np.nan) for m in names}
    covered = {m: [] for m in (names[0], *names[2:])}
    for c, (r, e, truth_c) in enumerate(cases):
        for j in range(reps):
            refused, wrong = sample(k_max, r, e)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RefusalIndexWarning)
                boot = j < coverage_reps
                paired = [
                    refusal_index_paired(
                        refused[i], ~wrong[i], ci="bootstrap" if (boot and i == 0) else None,
                        n_boot=n_boot, seed=seed + j,
                    )
                    for i in range(10)
                ]  # fmt: skip
            est[names[0]][c, j] = paired[0].ri
            est[names[1]][c, j] = np.nanmean([p.ri for p in paired])
            if boot and paired[0].ci is not None:
                covered[names[0]].append(paired[0].ci[0] <= truth_c <= paired[0].ci[1])
            for k in KS:
                res = refusal_index_ksample(
                    refused[:k], wrong[:k], ci="bootstrap" if boot else None,
                    n_boot=n_boot, seed=seed + j,
                )  # fmt: skip
                est[f"K-sample K={k}"][c, j] = res.ri
                if boot and res.ci is not None:
                    covered[f"K-sample K={k}"].append(res.ci[0] <= truth_c <= res.ci[1])
    truth = np.array([t for _, _, t in cases])
    rows = []
    for m in names:
        values = est[m]
        err = values - truth[:, None]
        per_model = values.mean(axis=1).reshape(-1, len(KSAMPLE_RATES))
        rows.append(
            {"setting": setting, "estimator": m, "calls per question": calls[m],
             "mean RI": float(np.nanmean(values)), "truth": float(truth.mean()),
             "bias": float(np.nanmean(err)), "sd": float(np.nanmean(np.nanstd(values, axis=1, ddof=1))),
             "rmse": float(np.sqrt(np.nanmean(err**2))),
             "drift over rates": float(np.mean(np.ptp(per_model, axis=1))),
             "95% CI coverage": float(np.mean(covered[m])) if covered.get(m) else math.nan}
        )  # fmt: skip
    return rows


def ksample_comparison(quick: bool, seed: int, *, show: bool = False) -> dict:
    """The K-sample estimator against the two-pass one, on the copula simulator and on trained
    FactMemorizer models: bias, spread, drift over refusal rates and CI coverage against the RI
    of the definition (Spearman of the model's own per-question probabilities), and the cost in
    calls per question."""
    rng = np.random.default_rng(seed + 7)
    reps = 12 if quick else 40
    coverage_reps = 6 if quick else 20
    n_boot = 200 if quick else 500

    def bernoulli(k: int, r: NDArray, e: NDArray) -> tuple[NDArray, NDArray]:
        return rng.random((k, r.size)) < r, rng.random((k, e.size)) < e

    # Copula simulator with per-run noise, so per-question probabilities are not 0/1.
    n_sim = 1000 if quick else 2000
    sim_cases = []
    for m in range(2 if quick else 4):
        model = LatentPropensityModel(
            n_sim, 0.6, 0.4, noise_refusal=0.5, noise_error=0.5, seed=seed + 100 + m
        )
        e = model.error_probs()
        for q in KSAMPLE_RATES:
            r = model.refusal_probs(q)
            sim_cases.append((r, e, float(spearmanr(r, e).statistic)))
    rows = _ksample_rows(
        f"copula simulator (ρ = 0.6, σ = 0.5, {n_sim} questions)",
        sim_cases, bernoulli, reps, coverage_reps, n_boot, seed,
    )  # fmt: skip
    # Trained fact models: errors nearly 0/1, the case where the two-pass estimator drifts (E3).
    table = load_fact_table()
    fact_cases = []
    zoo = [m for m in _fact_zoo(quick, seed) if m.width == 64 and m.exposure == 6000]
    for model in progress(zoo, enabled=show, desc="K-sample: fact models"):
        model.fit(table)
        p_correct, _, score = model.behaviour(table)
        e = 1.0 - p_correct
        for q in KSAMPLE_RATES:
            r = model.refusal_probs(score, model.threshold_for_rate(score, q))
            fact_cases.append((r, e, float(spearmanr(r, e).statistic)))
    rows += _ksample_rows(
        f"{len(zoo)} FactMemorizer models ({table.n_facts} facts)",
        fact_cases, bernoulli, reps, coverage_reps, n_boot, seed,
    )  # fmt: skip
    return {"rows": rows, "reps": reps, "coverage_reps": coverage_reps, "n_boot": n_boot}


def _plot_ksample(rows: list[dict]) -> plt.Figure:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for ax, setting in zip(axes, dict.fromkeys(r["setting"] for r in rows), strict=False):
        sub = [r for r in rows if r["setting"] == setting]
        for key, marker in (("bias", "o-"), ("rmse", "s--"), ("drift over rates", "^:")):
            ks = [r for r in sub if r["estimator"].startswith("K-sample")]
            ax.plot(
                [r["calls per question"] for r in ks],
                [r[key] for r in ks],
                marker,
                label=f"K-sample {key}",
            )
            two = sub[0]
            ax.scatter([two["calls per question"]], [two[key]], marker=marker[0], s=80,
                       edgecolor="k", label=f"two-pass {key}")  # fmt: skip
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ticks = sorted({r["calls per question"] for r in sub})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set(xlabel="calls per question", ylabel="RI error", title=setting)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- reproduce


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = False) -> Report:
    """E1–E3 of the spec: stability of RI across refusal rates, ranking stability, trained zoo."""
    # The matrices here are tiny: a multi-threaded BLAS only spins (14x the CPU time measured
    # for one FactMemorizer fit on a busy 2-core machine), so BLAS runs on one thread.
    with threadpool_limits(limits=1, user_api="blas"):
        return _reproduce(quick=quick, seed=seed, progress=progress)


def _reproduce(*, quick: bool, seed: int, progress: bool) -> Report:
    seed_everything(seed)
    n_e1 = 5000 if quick else 20000
    reps_e1 = 3 if quick else 5
    n_e2 = 1000 if quick else 3000
    report = Report(
        PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS,
        config={"quick": quick, "e1_items": n_e1, "e1_question_sets": reps_e1, "e2_items": n_e2, "refusal_rates": list(RATES)},
    )  # fmt: skip
    rhos = (0.2, 0.4, 0.6, 0.8)

    # E1
    rows = e1_rate_sweep(rhos, n_e1, reps_e1, seed, show=progress)
    report.add_table(
        f"E1: ρ = 0.6 (true RI 0.582), mean of {reps_e1} question sets of {n_e1} per refusal rate",
        [
            {k: r[k] for k in ("refusal_rate", "ri", "ri_se", *THRESHOLD_METRICS)}
            for r in rows
            if r["rho"] == 0.6
        ],
    )
    drift_rows, within, ratios = [], [], []
    # Bonferroni over every (ρ, rate) cell at a 5 % family-wise level
    z_crit = float(norm.ppf(1.0 - 0.025 / (len(rhos) * len(RATES))))
    for rho in rhos:
        sub = [r for r in rows if r["rho"] == rho]
        z = np.array([(r["ri"] - r["true_ri"]) / r["ri_se"] for r in sub])
        within.append(bool(np.all(np.abs(z) < z_crit)))
        peer_drift = {m: _drift(sub, m) for m in THRESHOLD_METRICS}
        ratios.append(min(peer_drift.values()) / max(_drift(sub, "ri"), 1e-9))
        drift_rows.append(
            {"rho": rho, "true_ri": sub[0]["true_ri"], "ri_mean": float(np.mean([r["ri"] for r in sub])),
             "max_abs_z": float(np.max(np.abs(z))), "ri_drift": _drift(sub, "ri"), **{f"{m}_drift": v for m, v in peer_drift.items()}}
        )  # fmt: skip
    report.add_table("E1: drift (max − min) over refusal rates 5–50 %", drift_rows)
    report.check(
        "E1: RI within sampling error of the truth at every refusal rate",
        all(within),
        f"|RI − truth| < {z_crit:.2f} SE (Bonferroni, 5 % family-wise) at every rate for {sum(within)} of {len(within)} ρ values; "
        f"largest |z| {max(r['max_abs_z'] for r in drift_rows):.2f}",
    )
    report.check(
        "E1: every threshold metric drifts more than RI",
        min(ratios) > 1.0,
        f"smallest (peer drift / RI drift) over ρ: {min(ratios):.1f}",
    )
    report.metric("E1 largest z of RI − truth", max(r["max_abs_z"] for r in drift_rows))
    report.metric("E1 RI drift (ρ=0.6)", drift_rows[2]["ri_drift"])
    report.metric("E1 precision drift (ρ=0.6)", drift_rows[2]["refusal_precision_drift"])

    # E2
    ranking, _ = e2_zoo_ranking(n_e2, seed, show=progress)
    report.add_table("E2: 16 simulated models × 5 datasets × 4 prompt strengths", ranking)
    by = {r["metric"]: r for r in ranking}
    best_peer_tau = max(by[m]["kendall_tau_across_strengths"] for m in THRESHOLD_METRICS)
    report.check(
        "E2: RI rankings are the most stable across prompt strengths",
        by["ri"]["kendall_tau_across_strengths"] > best_peer_tau,
        f"Kendall τ RI {by['ri']['kendall_tau_across_strengths']:.3f} vs best threshold metric {best_peer_tau:.3f}",
    )
    acc_corr = by["ri"]["spearman_with_accuracy"]
    prec_corr = by["refusal_precision"]["spearman_with_accuracy"]
    report.check(
        "E2: RI ranks models independently of accuracy (|Spearman with accuracy| < 0.5, "
        "the accuracy-driven refusal precision above it)",
        abs(acc_corr) < 0.5 and abs(prec_corr) > abs(acc_corr),
        f"Spearman(RI, accuracy) {acc_corr:.3f}; Spearman(precision, accuracy) {prec_corr:.3f}",
    )
    report.metric("E2 Kendall τ RI across strengths", by["ri"]["kendall_tau_across_strengths"])
    report.metric("E2 Spearman(RI, accuracy)", acc_corr)

    # E3
    e3 = e3_fact_models(quick, seed, show=progress)
    whole = e3["whole"]
    rates = e3["rates"]
    e3_rows = []
    for metric in ("ri", *THRESHOLD_METRICS):
        e3_rows.append(
            {"metric": metric, **{f"q={q:g}": float(np.mean(whole[metric][:, k])) for k, q in enumerate(rates)},
             "mean_drift_per_model": float(np.mean(np.ptp(whole[metric], axis=1)))}
        )  # fmt: skip
    exact = e3["direct"]  # (models, rates)
    e3_rows.insert(
        0,
        {"metric": "ri_exact (definition, from model probabilities)",
         **{f"q={q:g}": float(np.mean(exact[:, k])) for k, q in enumerate(rates)},
         "mean_drift_per_model": float(np.mean(np.ptp(exact, axis=1)))},
    )  # fmt: skip
    report.add_table(
        f"E3: 16 FactMemorizer models on {e3['table'].n_facts} countryinfo facts (zoo means; "
        "ri = two-pass estimate)",
        e3_rows,
    )
    report.add_table("E3: ranking of the trained zoo", e3["ranking"])
    ri_mean = whole["ri"].mean(axis=1)
    track = float(spearmanr(ri_mean, e3["direct"].mean(axis=1)).statistic)
    e3_by = {r["metric"]: r for r in e3_rows}
    peer_min_drift = min(e3_by[m]["mean_drift_per_model"] for m in THRESHOLD_METRICS)
    report.check(
        "E3: on trained models RI drifts less across refusal rates than every threshold metric",
        e3_by["ri"]["mean_drift_per_model"] < peer_min_drift,
        f"mean per-model drift RI {e3_by['ri']['mean_drift_per_model']:.3f} vs smallest peer {peer_min_drift:.3f}",
    )
    e3_rank = {r["metric"]: r for r in e3["ranking"]}
    e3_best_peer = max(e3_rank[m]["kendall_tau_across_strengths"] for m in THRESHOLD_METRICS)
    report.check(
        "E3: RI rankings of trained models are the most stable across refusal rates",
        e3_rank["ri"]["kendall_tau_across_strengths"] > e3_best_peer,
        f"Kendall τ RI {e3_rank['ri']['kendall_tau_across_strengths']:.3f} vs best threshold metric {e3_best_peer:.3f}",
    )
    report.metric("E3 Spearman(two-pass RI, exact RI) over models", track)
    report.note(
        f"E3: the two-pass RI ranks the trained models like their exact RI (from their own "
        f"probabilities) with Spearman {track:.3f}; its level differs because one stochastic draw "
        "per question attenuates the correlation and the Gaussian copula is only an approximation "
        "for these models."
    )
    report.note(
        "The two-pass estimator (Gaussian copula, tetrachoric ρ, RI = (6/π)·arcsin(ρ/2)) is our "
        "reconstruction of the paper's Section 3, not its verified formula."
    )
    report.add_figure("e1_rate_sweep", _plot_e1(rows, rhos))
    report.add_figure("e2_e3_ranking", _plot_ranking(ranking, e3["ranking"]))
    return report


def _plot_e1(rows: list[dict], rhos: tuple[float, ...]) -> plt.Figure:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for rho in rhos:
        sub = [r for r in rows if r["rho"] == rho]
        x = [r["refusal_rate"] for r in sub]
        y = np.array([r["ri"] for r in sub])
        se = np.array([r["ri_se"] for r in sub])
        line = ax1.plot(x, y, "o-", label=f"ρ={rho}")[0]
        ax1.fill_between(x, y - 1.96 * se, y + 1.96 * se, color=line.get_color(), alpha=0.15)
        ax1.axhline(sub[0]["true_ri"], color=line.get_color(), ls="--", lw=1)
    ax1.set(
        xlabel="refusal rate",
        ylabel="RI (two-pass estimate, 95 % CI)",
        title="RI vs refusal rate (dashed: truth)",
    )
    ax1.legend(fontsize=8)
    sub = [r for r in rows if r["rho"] == 0.6]
    x = [r["refusal_rate"] for r in sub]
    for metric in ("ri", *THRESHOLD_METRICS):
        ax2.plot(
            x,
            [r[metric] for r in sub],
            "o-" if metric == "ri" else ".--",
            lw=2.5 if metric == "ri" else 1,
            label=metric,
        )
    ax2.set(xlabel="refusal rate", ylabel="score", title="ρ = 0.6: RI vs threshold metrics")
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _plot_ranking(sim: list[dict], trained: list[dict]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(9, 3.8))
    names = [r["metric"] for r in sim]
    x = np.arange(len(names))
    ax.bar(
        x - 0.2, [r["kendall_tau_across_strengths"] for r in sim], 0.4, label="simulated zoo (E2)"
    )
    ax.bar(
        x + 0.2,
        [r["kendall_tau_across_strengths"] for r in trained],
        0.4,
        label="trained fact zoo (E3)",
    )
    ax.set_xticks(x, names, rotation=20, fontsize=8)
    ax.set(ylabel="Kendall τ of model rankings\nacross refusal prompts", title="Ranking stability")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- bench


def _plot_ci_width(rows: list[dict]) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(6, 4))
    n = [r["questions"] for r in rows]
    for key in ("bootstrap CI width", "delta CI width", "direct (known probabilities) CI width"):
        ax.loglog(n, [r[key] for r in rows], "o-", label=key)
    ax.loglog(
        n, [rows[0]["delta CI width"] * (n[0] / k) ** 0.5 for k in n], "k:", lw=1, label="∝ 1/√n"
    )
    ax.set(
        xlabel="questions", ylabel="95 % CI width of RI", title="RI uncertainty vs evaluation size"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _time_per(fn: Callable[[], object], repeats: int) -> float:
    return timeit(fn, repeats=repeats, warmup=1).median


def bench(*, quick: bool = False, seed: int = 0, progress: bool = False) -> Report:
    """RI estimators against peer metrics: drift, ranking, accuracy coupling, CI width, speed,
    and the K-sample estimator against the two-pass one (bias, spread, cost in calls)."""
    with threadpool_limits(limits=1, user_api="blas"):  # see reproduce
        return _bench(quick=quick, seed=seed, progress=progress)


def _bench(*, quick: bool, seed: int, progress: bool) -> Report:
    seed_everything(seed)
    rng = np.random.default_rng(seed)
    report = Report(
        PACKAGE, "bench",
        "The RI estimators are as fast as the peer metrics (1M questions in under a second), "
        "only RI is both rate-stable and accuracy-independent, and the K-sample estimator "
        "(no copula assumed) is worth its extra calls: lower RMSE than the two-pass one.",
        seed=seed, backends=BACKENDS, config={"quick": quick},
    )  # fmt: skip
    # Quality: drift over refusal rates (simulator, ρ = 0.6, noisy per-run behaviour, K = 2 runs)
    n = 5000 if quick else 20000
    model = LatentPropensityModel(n, 0.6, 0.4, noise_refusal=0.5, noise_error=0.5, seed=seed)
    conf = None
    per_rate: dict[str, list[float]] = {}
    for q in RATES:
        runs = [model.sample(q, rng) for _ in range(2)]
        s = runs[0]
        rates = refusal_index_from_rates(*s.rates, n=n)
        paired = refusal_index_paired(s.refused, ~s.forced_wrong, ci=None)
        rel_r = retest_reliability(runs[0].refused, runs[1].refused)
        rel_e = retest_reliability(runs[0].forced_wrong, runs[1].forced_wrong)
        direct_k = refusal_index_direct(
            np.stack([r.refused for r in runs]).astype(float),
            np.stack([r.forced_wrong for r in runs]).astype(float),
        )
        conf = 1.0 - model.error_probs()
        values = {
            "RI rates": rates.ri,
            "RI paired": paired.ri,
            "RI disattenuated (K=2)": float(
                np.sign(rates.rho)
                * 6
                / math.pi
                * math.asin(disattenuate(rates.rho, rel_r, rel_e) / 2)
            ),
            "RI direct (K=2 samples)": direct_k.ri,
            **peer_metrics(s.refused, s.forced_wrong, confidence=conf),
        }
        for k, v in values.items():
            per_rate.setdefault(k, []).append(v)
    truth = model.true_ri()
    report.add_table(
        f"Drift over refusal rates 5–50 % (simulator, ρ = 0.6, per-run noise σ = 0.5; true RI {truth:.3f}, "
        f"observable {model.observable_ri():.3f})",
        [
            {"metric": k, "mean": float(np.mean(v)), "drift": float(np.ptp(v))}
            for k, v in per_rate.items()
        ],
    )
    # CI width vs number of questions
    ci_rows = []
    for n_q in (100, 300, 1000, 3000, 10000):
        m = LatentPropensityModel(n_q, 0.6, 0.4, seed=seed + n_q)
        s = m.sample(0.3, rng)
        boot = refusal_index_paired(s.refused, ~s.forced_wrong, ci="bootstrap", seed=seed)
        delta = refusal_index_paired(s.refused, ~s.forced_wrong, ci="delta")
        direct = refusal_index_direct(
            m.refusal_probs(0.3) * 0.98 + 0.01 * rng.random(n_q),
            m.error_probs() * 0.98 + 0.01 * rng.random(n_q),
        )
        ci_rows.append(
            {"questions": n_q, "RI": boot.ri, "bootstrap CI width": boot.ci[1] - boot.ci[0] if boot.ci else math.nan,
             "delta CI width": delta.ci[1] - delta.ci[0] if delta.ci else math.nan,
             "direct (known probabilities) CI width": direct.ci[1] - direct.ci[0] if direct.ci else math.nan}
        )  # fmt: skip
    report.add_table("95 % CI width vs number of questions (ρ = 0.6, refusal rate 0.3)", ci_rows)
    report.add_figure("ci_width", _plot_ci_width(ci_rows))
    # Rankings and accuracy coupling on the simulated zoo (same runs for every metric)
    ranking, _ = e2_zoo_ranking(1000 if quick else 3000, seed, show=progress)
    report.add_table(
        "Model rankings: 16 simulated models × 5 datasets × 4 prompt strengths", ranking
    )
    # Speed
    big = 1_000_000
    m = LatentPropensityModel(big, 0.6, 0.4, seed=seed)
    s = m.sample(0.3, rng)
    confidence = 1.0 - m.error_probs() * 0.9
    wrong, refused = s.forced_wrong, s.refused
    repeats = 3 if quick else 7
    timings = {
        "RI rates (counting + tetrachoric)": lambda: refusal_index_from_rates(*s.rates, n=big),
        "RI paired (no CI)": lambda: refusal_index_paired(refused, ~wrong, ci=None),
        "RI paired (delta CI)": lambda: refusal_index_paired(refused, ~wrong, ci="delta"),
        "RI paired (bootstrap 1000)": lambda: refusal_index_paired(refused, ~wrong, ci="bootstrap"),
        "refusal precision": lambda: refusal_precision(refused, wrong),
        "refusal recall": lambda: refusal_recall(refused, wrong),
        "binary AUROC": lambda: refusal_auroc_binary(refused, wrong),
        "phi": lambda: phi_coefficient(refused, wrong),
        "SimpleQA F": lambda: simpleqa_f_score(refused, ~wrong),
        "ECE (10 bins)": lambda: ece(confidence, ~wrong),
        "Brier": lambda: brier(confidence, ~wrong),
        "AURC": lambda: aurc(confidence, ~wrong),
        "confidence AUROC": lambda: auroc(confidence, ~wrong),
    }
    speed_rows = []
    for name, fn in timings.items():
        t = _time_per(fn, repeats)
        speed_rows.append(
            {"metric": name, "s per 1M questions": t, "µs per 10k questions": t * 1e4 / big * 1e6}
        )
    try:
        from sklearn.metrics import roc_auc_score

        t = _time_per(lambda: roc_auc_score(~wrong, confidence), repeats)
        speed_rows.append(
            {
                "metric": "confidence AUROC (scikit-learn, reference)",
                "s per 1M questions": t,
                "µs per 10k questions": t * 1e4 / big * 1e6,
            }
        )
    except ImportError:
        report.note(
            "scikit-learn is not installed: its AUROC timing reference is missing (pip install 'iclr26-refusal-index[peers]')."
        )
    report.add_table("Time per metric (median of repeats)", speed_rows)
    slow = [
        r
        for r in speed_rows
        if "bootstrap" not in r["metric"]
        and "scikit" not in r["metric"]
        and r["s per 1M questions"] >= 1.0
    ]
    report.check(
        "every RI estimator and peer metric handles 1M questions in under a second (bootstrap excepted)",
        not slow,
        "slowest: "
        + max(
            (
                r
                for r in speed_rows
                if "bootstrap" not in r["metric"] and "scikit" not in r["metric"]
            ),
            key=lambda r: r["s per 1M questions"],
        )["metric"],
    )
    drifts = {k: float(np.ptp(v)) for k, v in per_rate.items()}
    report.check(
        "RI (rates, paired) drifts less over refusal rates than every threshold metric",
        max(drifts["RI rates"], drifts["RI paired"]) < min(drifts[m] for m in THRESHOLD_METRICS),
        f"RI drift {max(drifts['RI rates'], drifts['RI paired']):.3f}, smallest threshold drift "
        f"{min(drifts[m] for m in THRESHOLD_METRICS):.3f}",
    )
    report.metric(
        "RI paired s / 1M questions",
        next(r for r in speed_rows if r["metric"] == "RI paired (no CI)")["s per 1M questions"],
    )
    report.metric("RI drift", drifts["RI rates"])
    # K-sample vs two-pass: bias, spread and cost in calls (issue: E3 drift of the two-pass RI)
    ks = ksample_comparison(quick, seed, show=progress)
    report.add_table(
        f"K-sample vs two-pass estimator ({ks['reps']} replications per model and refusal rate "
        f"{', '.join(f'{q:g}' for q in KSAMPLE_RATES)}; truth = Spearman of the model's own "
        f"per-question probabilities; CI coverage over {ks['coverage_reps']} replications, "
        f"{ks['n_boot']} bootstrap resamples)",
        ks["rows"],
    )
    report.add_figure("ksample_vs_two_pass", _plot_ksample(ks["rows"]))
    for setting in dict.fromkeys(r["setting"] for r in ks["rows"]):
        sub = {r["estimator"]: r for r in ks["rows"] if r["setting"] == setting}
        two, best = sub["two-pass (paired)"], sub[f"K-sample K={max(KS)}"]
        report.check(
            f"{setting}: K-sample RI (K={max(KS)}, {best['calls per question']} calls per "
            f"question) has a lower RMSE than the two-pass RI (2 calls per question)",
            best["rmse"] < two["rmse"],
            f"RMSE {best['rmse']:.3f} vs {two['rmse']:.3f}; bias {best['bias']:+.3f} vs "
            f"{two['bias']:+.3f}; drift over refusal rates {best['drift over rates']:.3f} vs "
            f"{two['drift over rates']:.3f}",
        )
        report.metric(f"K-sample K={max(KS)} RMSE, {setting}", best["rmse"])
        report.metric(f"two-pass RMSE, {setting}", two["rmse"])
    report.note(
        "The K-sample estimator is the definition applied to estimated probabilities: each r̂_i, "
        "ê_i is a share of K Bernoulli draws, so its rank correlation is attenuated towards 0 "
        "(binomial noise and ties, worst at low refusal rates where most r̂_i are 0) and only "
        "approaches the truth as K grows; the two-pass estimator is attenuated by one draw per "
        "question too, and additionally relies on the Gaussian copula."
    )
    report.note(
        "Confidence metrics (confidence AUROC, ECE, Brier, AURC) never look at refusals: their drift "
        "above is only the sampling noise of a fresh run per rate. They score the confidence signal, "
        "not the refusal behaviour."
    )
    report.note(
        "RI direct (K=2 samples) averages two binary runs per question: heavy ties attenuate it, "
        "which is why the tetrachoric estimators exist."
    )
    return report
