"""``reproduce`` (P1 main comparison, P2 the TD→VA swap, P5 tabular error propagation; the P3
data-quality and P4 preference-budget sweeps in the default run) and ``bench`` (all agents side
by side, vmap-over-seeds throughput, per-step time against the networks' FLOP limit)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from iclr26.pvo.agents import NEEDS_REWARD_MODEL, AgentConfig
from iclr26.pvo.data import make_dataset, reference_returns
from iclr26.pvo.envs import hidden_reward
from iclr26.pvo.evaluate import bootstrap_ci, iqm, normalized_score
from iclr26.pvo.reward_model import fit_reward_models
from iclr26.pvo.segments import label_pairs, sample_segment_pairs
from iclr26.pvo.tabular import (
    fit_tabular_reward,
    fitted_td_tabular,
    gridworld_mdp,
    policy_value,
    sample_tabular_pairs,
    sample_trajectories,
    solve_pvo_tabular,
    value_iteration,
)
from iclr26.pvo.train import train_offline
from iclr26.shared import Report, check_int, seed_everything

__all__ = ["bench", "d3rlpy_parity", "pvo_update_flops", "reproduce"]

PACKAGE = "iclr26-pvo"
BACKENDS = ("jax", "flax", "optax")
LABELS = {
    "pvo": "PVO (IQL + VA)",
    "iql": "MR + IQL",
    "oracle_iql": "Oracle IQL (true reward)",
    "ipl": "IPL",
    "cpl": "CPL",
    "bc": "BC",
    "xql": "MR + XQL",
    "xql_va": "XQL + VA",
    "td3bc": "MR + TD3+BC",
    "td3bc_va": "TD3+BC + VA",
}


def _scale(quick: bool) -> dict[str, Any]:
    if quick:
        return {"episodes": 50, "steps": 2000, "eval_every": 1000, "seeds": 3, "budgets": (100,),
                "rewards": ("sparse",), "p1": ("pvo", "iql", "bc"),
                "p2": (("iql", "pvo"), ("td3bc", "td3bc_va")), "tab_seeds": 10,
                "p3_ratios": (), "p4_budgets": (), "sweep_seeds": 3}  # fmt: skip
    # Sized to fit 15 minutes on an idle 2-core machine (P1 + P2 + P5 took about 6 minutes): the
    # paper's headline pair (PVO vs MR + IQL) at two budgets, the oracle and BC once (they do
    # not read preferences), all three swaps at M = 100; 6 seeds, 4,000 updates each. The P3
    # and P4 sweeps (PVO and MR + IQL only) run on the first 3 of those seeds.
    return {"episodes": 100, "steps": 4000, "eval_every": 1000, "seeds": 6, "budgets": (100, 500),
            "rewards": ("sparse",), "p1": ("pvo", "iql", "oracle_iql", "bc"),
            "p2": (("iql", "pvo"), ("xql", "xql_va"), ("td3bc", "td3bc_va")),
            "tab_seeds": 30, "p3_ratios": (0.1, 0.3, 0.5, 1.0),
            "p4_budgets": (50, 100, 250, 500, 1000), "sweep_seeds": 3}  # fmt: skip


# Agents that never read the preference labels or r̂: trained once, shared by every budget M.
NO_PREFS = ("oracle_iql", "bc")


def _prefs(ds, budget: int, reward: str, seed: int):
    pairs = sample_segment_pairs(ds.obs, ds.act, budget, length=25, seed=seed + 1)
    return label_pairs(pairs, lambda o, a: hidden_reward(o, a, reward), seed=seed + 2)


def _seeds(sc, seed: int) -> list[int]:
    return [seed * 100 + i for i in range(sc["seeds"])]


def _run(algo: str, ds, prefs, sc, reward: str, seed: int, progress: bool, models=None):
    cfg = AgentConfig(algo=algo, hidden=(64, 64))
    return train_offline(
        cfg, ds, prefs, steps=sc["steps"], eval_every=sc["eval_every"], seeds=_seeds(sc, seed),
        reward=reward, progress=progress,
        reward_models=models if algo in NEEDS_REWARD_MODEL else None,
    )  # fmt: skip


def _row(name: str, scores: np.ndarray, seed: int, **extra) -> dict[str, Any]:
    lo, hi = bootstrap_ci(scores, seed=seed, n_boot=1000)
    return {"method": name, **extra, "IQM": iqm(scores), "CI low": lo, "CI high": hi,
            "mean": float(np.mean(scores)), "std": float(np.std(scores))}  # fmt: skip


def tabular_error_propagation(
    n_seeds: int, budgets=(20, 50, 200), seed: int = 0
) -> list[dict[str, Any]]:
    """P5: greedy-policy regret of TD on r̂ (fitted Q iteration) vs tabular PVO under partial
    coverage on a 5 × 5 gridworld; r̂ is BT-fitted from ``budget`` length-5 pairs."""
    mdp = gridworld_mdp(5)
    S, A = mdp.r.shape
    v_star = policy_value(mdp, value_iteration(mdp).argmax(1))
    # A behaviour that mostly moves up/left: the goal corner is rarely reached (partial coverage).
    behaviour = np.tile([0.35, 0.15, 0.35, 0.15], (S, 1))
    rows = []
    for budget in budgets:
        regret = {"TD on r̂": [], "PVO (min-norm)": [], "PVO (anchored at r̂)": []}
        for k in range(n_seeds):
            s = seed * 1000 + k
            states, actions = sample_trajectories(mdp, behaviour, 60, 15, seed=s)
            s0, a0, s1, a1 = sample_tabular_pairs(states, actions, budget, 5, seed=s + 1)
            R0, R1 = mdp.r[s0[:, :-1], a0].sum(1), mdp.r[s1[:, :-1], a1].sum(1)
            y = (np.random.default_rng(s).random(budget) < 1 / (1 + np.exp(-5 * (R1 - R0)))).astype(
                float
            )
            r_hat = fit_tabular_reward(s0, a0, s1, a1, y, S, A)
            u = sample_tabular_pairs(states, actions, 1000, 5, seed=s + 2)
            regret["TD on r̂"].append(
                v_star
                - policy_value(mdp, fitted_td_tabular(states, actions, r_hat, mdp.gamma).argmax(1))
            )
            regret["PVO (min-norm)"].append(
                v_star - policy_value(mdp, solve_pvo_tabular(*u, r_hat, mdp.gamma)[1])
            )
            regret["PVO (anchored at r̂)"].append(
                v_star
                - policy_value(mdp, solve_pvo_tabular(*u, r_hat, mdp.gamma, tie="anchored")[1])
            )
        for name, values in regret.items():
            rows.append({"pairs M": budget, "method": name, "mean regret": float(np.mean(values)),
                         "std": float(np.std(values)), "seeds": n_seeds})  # fmt: skip
    return rows


def _curve_figure(curves: dict[str, tuple[list[int], np.ndarray]], title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (steps, scores) in curves.items():
        mean = scores.mean(1)
        ax.plot(steps, mean, marker="o", label=name)
        ax.fill_between(steps, scores.min(1), scores.max(1), alpha=0.15)
    ax.set_xlabel("update steps")
    ax.set_ylabel("normalised score (seed mean, min–max band)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _pair_sweep(
    settings: list[tuple[dict[str, Any], Any, int]],
    sc: dict[str, Any],
    reward: str,
    seed: int,
    progress: bool,
) -> list[dict[str, Any]]:
    """PVO and MR + IQL on each (row label, dataset, M) of ``settings`` with
    ``sc["sweep_seeds"]`` seeds (the first seeds of P1); one r̂ fit per setting, shared by both
    agents."""
    sub = {**sc, "seeds": sc["sweep_seeds"]}
    rows = []
    for label, ds, budget in settings:
        prefs = _prefs(ds, budget, reward, seed)
        models = fit_reward_models(prefs, _seeds(sub, seed))
        scores = {a: _run(a, ds, prefs, sub, reward, seed, progress, models).final_scores
                  for a in ("pvo", "iql")}  # fmt: skip
        rows.append({**label, "pairs M": budget, "seeds": sub["seeds"],
                     "IQM PVO": iqm(scores["pvo"]), "IQM MR+IQL": iqm(scores["iql"]),
                     "gap": iqm(scores["pvo"]) - iqm(scores["iql"]),
                     "std PVO": float(np.std(scores["pvo"])),
                     "std MR+IQL": float(np.std(scores["iql"])),
                     "r̂ val acc": models[0].val_accuracy})  # fmt: skip
    return rows


def _sweep_figure(p3: list[dict[str, Any]], p4: list[dict[str, Any]]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, rows, key, xlabel, log in (
        (axes[0], p3, "expert ratio", "expert ratio of the mixed dataset (M = 100)", False),
        (axes[1], p4, "pairs M", "preference pairs M (medium-replay)", True),
    ):
        x = [float(r[key]) for r in rows]
        for col in ("IQM PVO", "IQM MR+IQL"):
            ax.plot(x, [r[col] for r in rows], marker="o", label=col.replace("IQM ", ""))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("normalised score (IQM over seeds)")
        if log:
            ax.set_xscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = False) -> Report:
    """P1, P2, P5 (and the P3/P4 sweeps in the default run) on generated Pendulum data."""
    seed_everything(seed)
    sc = _scale(quick)
    report = Report(
        PACKAGE,
        "reproduce",
        "Value alignment beats reward-model-then-TD on offline preference data, with lower "
        "variance, most at small preference budgets and sparse rewards; swapping TD for VA "
        "improves other learners too.",
        seed=seed,
        backends=BACKENDS,
        config={
            "quick": quick,
            **dict(sc.items()),
            "dataset": "medium_replay",
            "segment": 25,
        },
    )
    cpu0 = time.process_time()
    ds = make_dataset("medium_replay", sc["episodes"], seed=seed)
    p1_rows, gaps = [], []
    # One r̂ fit per (reward, budget), shared by every agent that reads r̂ (the same fit each
    # would do on its own: same pairs, seeds, widths and steps).
    fits: dict[tuple[str, int], tuple[Any, list]] = {}

    def fit(reward: str, budget: int):
        if (reward, budget) not in fits:
            prefs = _prefs(ds, budget, reward, seed)
            fits[reward, budget] = (prefs, fit_reward_models(prefs, _seeds(sc, seed)))
        return fits[reward, budget]

    shared: dict[tuple[str, str], Any] = {}
    for reward in sc["rewards"]:
        for budget in sc["budgets"]:
            prefs, models = fit(reward, budget)
            curves = {}
            results = {}
            for algo in sc["p1"]:
                if algo in NO_PREFS and (algo, reward) in shared:
                    res = shared[algo, reward]
                else:
                    res = _run(algo, ds, prefs, sc, reward, seed, progress, models)
                    if algo in NO_PREFS:
                        shared[algo, reward] = res
                results[algo] = res
                curves[LABELS[algo]] = (res.eval_steps, res.scores)
                if algo in NO_PREFS:
                    if budget == sc["budgets"][0]:  # one row: it does not depend on M
                        p1_rows.append(_row(LABELS[algo], res.final_scores, seed, reward=reward,
                                            **{"pairs M": "any", "r̂ val acc": None}))  # fmt: skip
                    continue
                acc = res.reward_models[0].val_accuracy if res.reward_models else None
                p1_rows.append(_row(LABELS[algo], res.final_scores, seed, reward=reward, **{"pairs M": budget},
                                    **{"r̂ val acc": acc}))  # fmt: skip
            pvo, iql = results["pvo"].final_scores, results["iql"].final_scores
            gaps.append(
                (reward, budget, iqm(pvo) - iqm(iql), float(np.std(pvo)), float(np.std(iql)))
            )
            if reward == sc["rewards"][0] and budget == sc["budgets"][0]:
                report.add_figure(
                    "p1_learning_curves",
                    _curve_figure(curves, f"Pendulum medium-replay, {reward} reward, M = {budget}"),
                )
    report.add_table(
        "P1: normalised score at the end of training (IQM over seeds, 95% bootstrap CI)", p1_rows
    )
    for reward, budget, gap, s_pvo, s_iql in gaps:
        report.check(
            f"P1 PVO ≥ MR+IQL ({reward} reward, M = {budget})",
            gap >= 0,
            f"IQM gap {gap:+.1f} points; seed std PVO {s_pvo:.1f} vs MR+IQL {s_iql:.1f}",
        )
    report.check(
        "P1 PVO has lower seed variance than MR+IQL (all settings)",
        all(s_pvo < s_iql for *_, s_pvo, s_iql in gaps),
        "; ".join(f"{r}/M={b}: {sp:.1f} vs {si:.1f}" for r, b, _, sp, si in gaps),
    )
    for reward in sc["rewards"]:
        by_m = sorted((b, g) for r, b, g, *_ in gaps if r == reward)
        if len(by_m) > 1:
            (m_lo, g_lo), (m_hi, g_hi) = by_m[0], by_m[-1]
            report.check(
                f"P1 PVO's lead over MR+IQL is larger at M = {m_lo} than at M = {m_hi} ({reward})",
                g_lo > 0 and g_lo > g_hi,  # a lead at all, and the larger one at small M
                f"IQM gap {g_lo:+.1f} at M = {m_lo} vs {g_hi:+.1f} at M = {m_hi}",
            )
    # P2: the swap ablation on the first setting.
    reward, budget = sc["rewards"][0], sc["budgets"][0]
    prefs, models = fit(reward, budget)
    p2_rows = []
    swap_gaps = {}
    for td, va in sc["p2"]:
        scores = {}
        for algo in (td, va):
            res = (
                _run(algo, ds, prefs, sc, reward, seed, progress, models)
                if algo not in ("iql", "pvo")
                else None
            )
            if res is None:  # P1 already trained these on this setting
                row = next(
                    r
                    for r in p1_rows
                    if r["method"] == LABELS[algo]
                    and r["reward"] == reward
                    and r["pairs M"] == budget
                )
                scores[algo] = row
                p2_rows.append({k: row[k] for k in ("method", "IQM", "CI low", "CI high", "std")})
            else:
                row = _row(LABELS[algo], res.final_scores, seed)
                scores[algo] = row
                p2_rows.append({k: row[k] for k in ("method", "IQM", "CI low", "CI high", "std")})
        swap_gaps[(td, va)] = scores[va]["IQM"] - scores[td]["IQM"]
    report.add_table(
        f"P2: swapping TD for value alignment ({reward} reward, M = {budget})", p2_rows
    )
    for (td, va), gap in swap_gaps.items():
        report.check(f"P2 {LABELS[va]} ≥ {LABELS[td]}", gap >= 0, f"IQM gap {gap:+.1f} points")
    # P5: tabular mechanism.
    p5 = tabular_error_propagation(sc["tab_seeds"], seed=seed)
    report.add_table(
        "P5: greedy-policy regret under partial coverage, 5×5 gridworld (lower is better)", p5
    )
    td_mean = np.mean([r["mean regret"] for r in p5 if r["method"] == "TD on r̂"])
    va_mean = np.mean([r["mean regret"] for r in p5 if r["method"] == "PVO (min-norm)"])
    report.check("P5 tabular PVO regret ≤ TD-on-r̂ regret (mean over budgets)", va_mean <= td_mean,
                 f"{va_mean:.3f} vs {td_mean:.3f}")  # fmt: skip
    # P3 (data quality) and P4 (preference budget): PVO vs MR + IQL, default run only.
    if sc["p3_ratios"]:
        mixed = [
            (
                {"expert ratio": r},
                make_dataset("mixed", sc["episodes"], expert_ratio=r, seed=seed),
                100,
            )
            for r in sc["p3_ratios"]
        ]
        p3 = _pair_sweep(mixed, sc, reward, seed, progress)
        report.add_table(
            f"P3: data-quality sweep, mixed dataset (expert episodes at the given ratio, the rest "
            f"random), {reward} reward, M = 100, {sc['sweep_seeds']} seeds",
            p3,
        )
        wins = sum(r["gap"] >= 0 for r in p3)
        report.check(
            "P3 PVO ≥ MR+IQL at most expert ratios",
            wins > len(p3) / 2,
            f"{wins} of {len(p3)}: gaps "
            + ", ".join(f"{r['expert ratio']}: {r['gap']:+.1f}" for r in p3),
        )
        p4 = _pair_sweep([({}, ds, m) for m in sc["p4_budgets"]], sc, reward, seed,
                         progress)  # fmt: skip
        report.add_table(
            f"P4: preference-budget sweep, medium-replay, {reward} reward, {sc['sweep_seeds']} seeds",
            p4,
        )
        report.check(
            "P4 PVO's lead over MR+IQL is largest at the smallest budget",
            p4[0]["gap"] > 0 and p4[0]["gap"] == max(r["gap"] for r in p4),
            ", ".join(f"M = {r['pairs M']}: {r['gap']:+.1f}" for r in p4),
        )
        report.add_figure("p3_p4_sweeps", _sweep_figure(p3, p4))
    report.metric("P1 IQM gap PVO − MR+IQL (first setting)", gaps[0][2])
    report.metric("CPU seconds (this process, all threads)", time.process_time() - cpu0)
    report.note(
        "Data: Pendulum-v1 (a pure-JAX copy checked step for step against gymnasium), a medium-replay "
        "dataset from a scripted energy-shaping controller with a gain schedule; preferences on "
        "length-25 segments from a script teacher on the hidden reward (sparse: 1 within 0.3 rad of "
        "upright). Networks 64×64 (the paper's 256×256 is 4× slower on 2 CPU cores); IQL defaults from "
        "CORL (expectile 0.7, AWR exp(3·A) clipped at 100). Scores are 100 (R − R_random)/(R_expert − R_random) "
        "under the hidden reward. Short runs on a CPU: small gaps are within noise, read the CIs."
    )
    return report


def pvo_update_flops(
    hidden: int = 64,
    transition_batch: int = 256,
    pair_steps: int = 800,
    obs_dim: int = 3,
    act_dim: int = 1,
) -> int:
    """Multiply-add FLOPs (2 per MAC) of one PVO update with ``hidden`` × ``hidden`` MLPs:
    forward passes only for the frozen or stop-gradient networks (target twin Q and V on the
    transition batch, r̂ and V(s′) on the ``pair_steps`` segment steps), forward + backward
    (3× forward) for what is trained (twin Q on the pair steps, V and the actor on the batch)."""
    for name, value in (("hidden", hidden), ("transition_batch", transition_batch),
                        ("pair_steps", pair_steps), ("obs_dim", obs_dim), ("act_dim", act_dim)):  # fmt: skip
        check_int(value, name, low=1)
    h = hidden

    def mlp(d_in: int, n: int) -> int:
        return 2 * n * (d_in * h + h * h + h)

    sa, s = obs_dim + act_dim, obs_dim
    forward_only = 2 * mlp(sa, transition_batch) + mlp(s, transition_batch)  # Q̄ (twin), V for A
    forward_only += mlp(sa, pair_steps) + mlp(s, pair_steps)  # r̂ and V(s′) on the pairs
    trained = 2 * mlp(sa, pair_steps) + mlp(s, transition_batch) + mlp(s, transition_batch)
    return forward_only + 3 * trained


def _matmul_peak(h: int, n: int, reps: int) -> tuple[float, float]:
    """FLOP/s of the update's largest matmul shape ((n, h) @ (h, h), jitted, in a loop), per
    second of wall time and per second of this process's CPU time."""
    import jax
    import jax.numpy as jnp

    b = jnp.ones((h, h)) / h
    mm = jax.jit(lambda x: jax.lax.fori_loop(0, 50, lambda i, y: y @ b, x))
    a = jnp.ones((n, h))
    mm(a).block_until_ready()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(reps):
        out = mm(a)
    out.block_until_ready()
    flops = reps * 50 * 2 * n * h * h
    return flops / (time.perf_counter() - t), flops / max(time.process_time() - c, 1e-9)


def _bench_figure(rows: list[dict[str, Any]], scaling: dict[int, list[tuple[float, float]]]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["method"] for r in rows]
    y = np.arange(len(names))
    ax0.barh(y - 0.2, [r["ms per seed-update (wall)"] for r in rows], 0.4, label="wall")
    ax0.barh(y + 0.2, [r["ms per seed-update (CPU)"] for r in rows], 0.4, label="CPU (all threads)")
    ax0.set_yticks(y, names, fontsize=8)
    ax0.invert_yaxis()
    ax0.set_xlabel("ms per update of one seed (5 seeds under vmap)")
    ax0.legend(fontsize=8)
    ax0.set_title("time per update, every agent (64×64)")
    ns = sorted(scaling)
    for k, label in ((0, "wall"), (1, "CPU")):
        med = [np.median([r[k] for r in scaling[n]]) for n in ns]
        lo = [np.min([r[k] for r in scaling[n]]) for n in ns]
        hi = [np.max([r[k] for r in scaling[n]]) for n in ns]
        ax1.errorbar(ns, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)], marker="o",
                     capsize=3, label=f"per second of {label} time")  # fmt: skip
    ax1.set_xlabel("seeds trained together under vmap")
    ax1.set_ylabel("seed-updates per second (PVO)")
    ax1.set_xticks(ns)
    ax1.set_title("vmap over seeds: median and range over rounds")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    return fig


def bench(*, quick: bool = False, seed: int = 0, progress: bool = False) -> Report:
    """All agents on the same data and seeds; vmap-over-seeds speed-up; per-step time vs FLOPs."""
    seed_everything(seed)
    n_seeds = 5
    steps = 500 if quick else 2000
    rounds, chunk = (3, 100) if quick else (5, 250)
    report = Report(
        PACKAGE,
        "bench",
        "Training 5 seeds under vmap is at least 2.5× the throughput of 5 sequential runs, one "
        "PVO update runs within 3× of its networks' forward+backward FLOP limit, and our IQL "
        "matches d3rlpy's IQL (return within its CI) at no more time per update.",
        seed=seed,
        backends=BACKENDS,
        config={
            "quick": quick,
            "steps": steps,
            "seeds": n_seeds,
            "rounds": rounds,
            "chunk": chunk,
        },
    )
    ds = make_dataset("medium_replay", 50, seed=seed)
    prefs = _prefs(ds, 100, "sparse", seed)
    seeds = list(range(n_seeds))
    models = fit_reward_models(prefs, seeds)  # one r̂ fit per seed, shared by every agent
    rows = []
    results = {}
    for algo in LABELS:
        cfg = AgentConfig(algo=algo, hidden=(64, 64))
        t = time.perf_counter()
        res = train_offline(cfg, ds, prefs, steps=steps, eval_every=steps // 2, seeds=seeds,
                            reward="sparse", progress=progress,
                            reward_models=models if algo in NEEDS_REWARD_MODEL else None)  # fmt: skip
        results[algo] = res
        rows.append({**_row(LABELS[algo], res.final_scores, seed),
                     "ms per seed-update (wall)": 1e3 / res.steps_per_second,
                     "ms per seed-update (CPU)": 1e3 / res.cpu_steps_per_second,
                     "wall s": time.perf_counter() - t})  # fmt: skip
    report.add_table(
        f"All agents, same data (sparse reward, M = 100), {steps} steps, {n_seeds} seeds", rows
    )
    # vmap over seeds vs one seed at a time, and the FLOP limit, in interleaved rounds: each
    # round runs 1, 2 and 5 seeds (3 chunks; the median of the last two is timed) and the matmul
    # peak, so a change of the machine's load hits every mode alike.
    cfg = AgentConfig(algo="pvo", hidden=(64, 64))
    h = cfg.hidden[0]
    flops = pvo_update_flops(h, cfg.transition_batch, 2 * cfg.pair_batch * 25)
    scaling: dict[int, list[tuple[float, float]]] = {1: [], 2: [], n_seeds: []}
    peaks: list[tuple[float, float]] = []
    for _ in range(rounds):
        for n in scaling:
            res = train_offline(cfg, ds, prefs, steps=3 * chunk, eval_every=chunk,
                                seeds=seeds[:n], reward="sparse",
                                reward_models=models[:n])  # fmt: skip
            scaling[n].append((res.steps_per_second, res.cpu_steps_per_second))
        peaks.append(_matmul_peak(h, 2 * cfg.pair_batch * 25, 40))
    speed = {k: [v[k] / s[k] for v, s in zip(scaling[n_seeds], scaling[1], strict=True)]
             for k in (0, 1)}  # fmt: skip
    # FLOP-limit ratio per round: measured time of one single-seed update over FLOPs / peak.
    ratio = {k: [p[k] * (1.0 / s[k]) / flops for s, p in zip(scaling[1], peaks, strict=True)]
             for k in (0, 1)}  # fmt: skip

    def stat(x: list[float]) -> dict[str, float]:
        return {"median": float(np.median(x)), "min": float(np.min(x)), "max": float(np.max(x))}

    report.add_table(f"vmap over seeds vs one seed at a time (PVO), {rounds} interleaved rounds", [
        *({"quantity": f"seed-updates/s, {n} seed{'s' if n > 1 else ''} (wall)", **stat([r[0] for r in scaling[n]])}
          for n in scaling),
        *({"quantity": f"seed-updates/s, {n} seed{'s' if n > 1 else ''} (CPU)", **stat([r[1] for r in scaling[n]])}
          for n in scaling),
        {"quantity": f"speed-up, vmap {n_seeds} seeds / 1 seed (wall)", **stat(speed[0])},
        {"quantity": f"speed-up, vmap {n_seeds} seeds / 1 seed (CPU)", **stat(speed[1])},
    ])  # fmt: skip
    report.check(
        f"vmap over {n_seeds} seeds ≥ 2.5× sequential throughput (wall, median of {rounds} rounds)",
        float(np.median(speed[0])) >= 2.5,
        f"{np.median(speed[0]):.2f}× (range {min(speed[0]):.2f}–{max(speed[0]):.2f}; "
        f"per CPU-second {np.median(speed[1]):.2f}×)",
    )
    report.add_table("One PVO update (one seed) vs its FLOP limit, same rounds", [
        {"quantity": "FLOPs per update (fwd + bwd where trained)", "median": flops, "min": flops, "max": flops},
        {"quantity": f"matmul peak at ({2 * cfg.pair_batch * 25}, {h}) @ ({h}, {h}), GFLOP/s of wall time",
         **stat([p[0] / 1e9 for p in peaks])},
        {"quantity": "matmul peak, GFLOP per CPU-second", **stat([p[1] / 1e9 for p in peaks])},
        {"quantity": "ms per update (wall)", **stat([1e3 / s[0] for s in scaling[1]])},
        {"quantity": "ms per update (CPU)", **stat([1e3 / s[1] for s in scaling[1]])},
        {"quantity": "ratio to the FLOP limit (wall)", **stat(ratio[0])},
        {"quantity": "ratio to the FLOP limit (CPU)", **stat(ratio[1])},
    ])  # fmt: skip
    report.check(
        "PVO update within 3× of the FLOP limit (CPU time, median of rounds)",
        float(np.median(ratio[1])) <= 3,
        f"{np.median(ratio[1]):.1f}× per CPU-second (range {min(ratio[1]):.1f}–{max(ratio[1]):.1f}); "
        f"{np.median(ratio[0]):.1f}× in wall time",
    )
    report.metric("load average (1 min) at the end", os.getloadavg()[0])
    report.add_figure("bench_time_per_update", _bench_figure(rows, scaling))
    report.note(
        "Wall time on a shared machine mixes our work with waiting for the CPU; CPU time (user + "
        "system of this process, all its threads) does not, so both are printed. vmap can only "
        "pay where an update is dominated by per-operation overhead: a PVO update with 64×64 "
        "networks is dominated by its matmuls (see the FLOP-limit table), so batching seeds "
        "leaves the CPU work per seed-update nearly unchanged; any wall-time gain comes from "
        "filling the second core."
    )
    d3rlpy_parity(report, ds, results["oracle_iql"], steps, n_seeds, seed)
    return report


def d3rlpy_parity(report: Report, ds, ours, steps: int, n_seeds: int, seed: int) -> None:
    """Add to ``report`` d3rlpy's IQL against our ``oracle_iql`` run ``ours`` (a
    :class:`~iclr26.pvo.train.TrainResult` on ``ds`` with the true sparse reward): the same
    transitions, networks, batch and seeds; returns from the same start states, learned V and Q,
    time per update; or a "skipped: d3rlpy not installed" row when d3rlpy cannot be imported."""
    import jax

    from iclr26.pvo.agents import act
    from iclr26.pvo.evaluate import rollout_returns
    from iclr26.pvo.nets import TwinQ, ValueNet
    from iclr26.pvo.peers import d3rlpy_version, train_d3rlpy_iql

    version = d3rlpy_version()
    steps_s = f"{steps} steps"
    if version is None:
        title = f"d3rlpy IQL parity: true sparse reward, {steps_s}"
        report.add_table(
            title, [{"method": "d3rlpy IQL", "status": "skipped: d3rlpy not installed"}]
        )
        report.note(
            "d3rlpy's IQL parity check was skipped: d3rlpy is not installed. It is not a dependency "
            "(d3rlpy 2.8.1 pins gymnasium==1.0.0); install it in an environment of its own "
            "(pip install iclr26-pvo d3rlpy) and run bench there."
        )
        return
    cfg = ours.config
    width = "×".join(map(str, cfg.hidden))
    title = (
        f"d3rlpy IQL parity: true sparse reward, {width} networks, batch {cfg.transition_batch}, "
        f"{steps_s}"
    )
    seeds = list(range(n_seeds))
    eval_seed = seed + 424242
    theirs = train_d3rlpy_iql(ds, reward="sparse", steps=steps, seeds=seeds, hidden=cfg.hidden,
                              batch_size=cfg.transition_batch, eval_episodes=10,
                              eval_seed=eval_seed)  # fmt: skip
    tr = ds.transitions("sparse")
    our_returns, our_v, our_q = [], [], []
    for i in range(n_seeds):
        state = jax.tree.map(lambda x, i=i: x[i], ours.states)
        our_returns.append(np.asarray(rollout_returns(
            lambda o, s=state: act(s, o, cfg, 1), jax.random.key(eval_seed), 10, "sparse")))  # fmt: skip
        our_v.append(float(ValueNet(cfg.hidden).apply(state.v, tr["obs"]).mean()))
        our_q.append(float(TwinQ(cfg.hidden).apply(state.q, tr["obs"], tr["act"]).mean()))
    ref = reference_returns("sparse")
    ours_score = normalized_score(np.asarray(our_returns).mean(-1), ref)
    their_score = normalized_score(theirs.returns.mean(-1), ref)
    # Time per update of one seed: our jitted scan (one seed, no vmap) vs d3rlpy's update loop.
    single = train_offline(cfg, ds, None, steps=steps, eval_every=steps // 2, seeds=[0],
                           reward="sparse")  # fmt: skip
    our_s = 1.0 / single.steps_per_second
    rows = []
    for name, score, v, q in (
        ("our oracle IQL (JAX)", ours_score, our_v, our_q),
        (f"d3rlpy {version} IQL (PyTorch)", their_score, theirs.mean_v, theirs.mean_q),
    ):
        rows.append({**_row(name, score, seed), "mean V(s) (expectile)": float(np.mean(v)),
                     "mean Q(s, a)": float(np.mean(q))})  # fmt: skip
    report.add_table(title, rows)
    d3_s = float(np.median(theirs.seconds_per_update))
    d3_grad = float(np.median(theirs.seconds_per_gradient_step))
    report.add_table("Time per IQL update, one seed (same run)", [
        {"implementation": "ours: jitted lax.scan", "ms per update": 1e3 * our_s, "ratio to ours": 1.0},
        {"implementation": "d3rlpy: sample + update", "ms per update": 1e3 * d3_s, "ratio to ours": d3_s / our_s},
        {"implementation": "d3rlpy: update only", "ms per update": 1e3 * d3_grad, "ratio to ours": d3_grad / our_s},
    ])  # fmt: skip
    lo, hi = bootstrap_ci(their_score, seed=seed, n_boot=1000)
    report.check(
        "our IQL's return IQM within d3rlpy IQL's 95% CI (true reward)",
        lo <= iqm(ours_score) <= hi,
        f"ours {iqm(ours_score):.1f}, d3rlpy {iqm(their_score):.1f} [{lo:.1f}, {hi:.1f}]",
    )
    report.check(
        "our IQL update at least as fast as d3rlpy's (same networks and batch)",
        our_s <= d3_s,
        f"d3rlpy {d3_s / our_s:.1f}× our time per update ({d3_grad / our_s:.1f}× without sampling)",
    )
    report.note(
        f"d3rlpy {version} (torch, {theirs.torch_threads} thread) trained with our IQL's settings "
        "(expectile 0.7, exp(3·A) clipped at 100, Adam 3e-4, Polyak 0.005, twin Q, MinMax action "
        "scaling to [−1, 1]) on the same transitions (iclr26.pvo.peers.to_mdp_dataset); both are "
        "evaluated on the same 10 Pendulum start states per seed."
    )
