"""``reproduce`` and ``bench`` of MaskGRPO at CPU scale.

reproduce — E1: estimator comparison (MaskGRPO vs diffu-GRPO vs uniform remask vs the naive M = 1
baseline) from the shipped tiny denoisers (quick: Sort-8 and Sudoku-4×4, one seed; default: 3
seeds each on Sort-8 with the unfixed-seed ablation, Digits-T2I 4×4, Sudoku-4×4 and Add-3),
held-out success (sampled) before/after, area under the curve, steps and seconds to a threshold;
E2: rollout diversity of the emerge, MaskGIT and low-confidence samplers for one fixed policy, on
Sort-8 and on Digits-T2I (with sample grids); E3: each estimator against a Monte-Carlo ELBO proxy.

bench — seconds per update of each estimator at equal M and batch (ratios to diffu-GRPO), the
batched vs looped old/reference passes, and sampler throughput against a forward-FLOP limit.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from iclr26.maskgrpo.data import load_pretrained
from iclr26.maskgrpo.logprob import masked_token_logps
from iclr26.maskgrpo.sampling import emerge_sample, low_confidence_block_sample, maskgit_sample
from iclr26.maskgrpo.tasks import get_task
from iclr26.maskgrpo.trainer import MaskGRPOConfig, MaskGRPOTrainer, build_estimator_inputs
from iclr26.shared import Report, timeit
from iclr26.shared import progress as progress_bar

__all__ = [
    "ARMS", "DEFAULT_PLAN", "FULL_IMAGE_TASK", "IMAGE_TASK", "QUICK_PLAN", "TASK_CONFIG", "bench", "denoiser_matmuls", "digits_sample_grid",
    "e1_run",
    "e2_sampler_diversity", "e3_estimator_quality", "reproduce", "trl_parity",
]  # fmt: skip

PACKAGE = "iclr26-maskgrpo"
BACKENDS = ("torch", "safetensors", "matplotlib")
CLAIM = (
    "MaskGRPO's masking-aware importance estimator gives a larger RL gain, no slower, than "
    "diffu-GRPO, uniform remasking and the naive M = 1 baseline, and the emerge sampler gives "
    "more diverse rollout groups than MaskGIT."
)
EVAL_SEED = 10**6  # held-out prompts: seeds the training stream never uses

#: E1 arms (spec §5.4): the paper's and d1's released hyper-parameters where they differ.
ARMS: dict[str, dict[str, Any]] = {
    "MaskGRPO": {"estimator": "maskgrpo", "epsilon": 0.2, "beta": 0.01},
    "diffu-GRPO (d1)": {"estimator": "d1", "epsilon": 0.5, "beta": 0.04},
    "uniform remask (UniGRPO-like)": {"estimator": "uniform", "epsilon": 0.2, "beta": 0.01},
    "naive M=1 (d1, REINFORCE)": {"estimator": "d1", "num_iterations": 1, "beta": 0.04},
}
ABLATION = {"MaskGRPO w/o fixed seeds": {"estimator": "maskgrpo", "fixed_mask_seeds": False}}
#: Per-task rollout / estimator settings: the image task uses the image branch of the release
#: (random remasking at the t_μ schedule, the emerge sampler with T = 12, τ = 1).
_IMAGE = {"remask": "random", "sampler": "emerge", "sampling_steps": 12, "temperature": 1.0}
TASK_CONFIG: dict[str, dict[str, Any]] = {"digits": _IMAGE, "digits4": _IMAGE}
#: The image task of reproduce's E1: Digits-T2I 4×4 (16 image tokens).
IMAGE_TASK = "digits4"
#: The 8×8 preset (64 image tokens): E2 and sample grids in the default run.
FULL_IMAGE_TASK = "digits"


def e1_run(
    task_name: str,
    arm: dict[str, Any],
    *,
    seed: int,
    steps: int,
    prompts_per_step: int = 8,
    num_generations: int = 8,
    num_iterations: int = 4,
    eval_every: int = 10,
    n_eval: int = 64,
    learning_rate: float = 5e-5,
    keep_policy: bool = False,
) -> dict[str, Any]:
    """One E1 run from the shipped checkpoint of ``task_name``: curve of held-out success (mean
    reward of 4 rollouts per held-out prompt, training sampler, fixed seed: exact match on the
    text tasks, the classifier's probability of the prompted class on Digits-T2I).
    ``keep_policy``: also return the trained policy (key ``policy``)."""
    task = get_task(task_name)
    ev = task.sample_prompts(n_eval, EVAL_SEED)
    cfg = MaskGRPOConfig(
        **{"num_generations": num_generations, "num_iterations": num_iterations,
           "learning_rate": learning_rate, "seed": seed, **TASK_CONFIG.get(task_name, {}),
           **arm},
    )  # fmt: skip
    tr = MaskGRPOTrainer(load_pretrained(task_name), task, cfg)
    curve = [(0, 0.0, tr.evaluate(ev))]
    clock = 0.0
    hist = []
    while tr.step_count < steps:
        rec = tr.step(task.sample_prompts(prompts_per_step, tr._prompt_seed(tr.step_count)))
        clock += rec["step_s"]
        hist.append(rec)
        if tr.step_count % eval_every == 0 or tr.step_count == steps:
            curve.append((tr.step_count, clock, tr.evaluate(ev)))
    return {
        **({"policy": tr.policy} if keep_policy else {}),
        "curve": curve,
        "train_reward": [r["reward"] for r in hist],
        "zero_std_frac": float(np.mean([r["zero_std_frac"] for r in hist])),
        "clip_frac": float(np.mean([r["clip_frac"] for r in hist])),
        "kl": float(np.mean([r["kl"] for r in hist[-10:]])),
        "secs_per_step": float(np.median([r["step_s"] for r in hist])),
        "update_secs": float(np.median([r["update_s"] for r in hist])),
    }


def _to_threshold(curve: list[tuple[int, float, float]], thr: float) -> tuple[float, float]:
    for step, secs, v in curve:
        if v >= thr:
            return float(step), secs
    return math.nan, math.nan


def _ms(v) -> str:
    v = np.asarray(v, dtype=float)
    if np.isnan(v).all():
        return "not reached"
    m = np.nanmean(v)
    return (
        f"{m:.3f}"
        if v.size == 1
        else f"{m:.3f} ± {np.nanstd(v, ddof=1) if np.sum(~np.isnan(v)) > 1 else 0.0:.3f}"
    )


def e2_sampler_diversity(
    task_name: str = "sort8", *, seed: int = 0, n_prompts: int = 32, group: int = 8
) -> list[dict[str, Any]]:
    """E2: for the fixed shipped policy, group statistics of each rollout sampler (on
    Digits-T2I also the emerge sampler with classifier-free guidance w = 3, the release's, and
    the low-confidence sampler with 16 steps of 4 tokens; rows 0 and 1 are always emerge and
    MaskGIT without guidance)."""
    task = get_task(task_name)
    policy = load_pretrained(task_name)
    prompts = task.sample_prompts(n_prompts, EVAL_SEED + 1).repeat_interleave(group, 0)
    L, p = task.completion_len, task.prompt_len
    image = task_name.startswith("digits")
    samplers = {
        "emerge (T=12, τ=1)": lambda: emerge_sample(
            policy, prompts, L, task.mask_id, steps=12, generator=seed
        ),
        "MaskGIT (T=12, τ=1)": lambda: maskgit_sample(
            policy, prompts, L, task.mask_id, steps=12, generator=seed
        ),
        f"low-confidence (τ=0.9{', 16 steps' if image else ''})": lambda: (
            low_confidence_block_sample(
                policy, prompts, L, task.mask_id, steps=16 if image else None, temperature=0.9,
                generator=seed,
            )
        ),
    }  # fmt: skip
    if image:
        samplers["emerge + CFG (w=3)"] = lambda: emerge_sample(
            policy, prompts, L, task.mask_id, steps=12, cfg_scale=3.0,
            uncond_ids=task.uncond_ids, generator=seed,
        )  # fmt: skip
    rows = []
    for name, fn in samplers.items():
        t0 = time.perf_counter()
        seqs = fn()
        secs = time.perf_counter() - t0
        comp = seqs[:, p:].view(n_prompts, group, L)
        r = task.reward(seqs[:, :p], seqs[:, p:]).view(n_prompts, group).double()
        ham = (comp[:, :, None, :] != comp[:, None, :, :]).double().mean(-1)
        pair = ham.sum((1, 2)) / (group * (group - 1))
        uniq = np.mean([len({tuple(x.tolist()) for x in c}) / group for c in comp])
        rows.append(
            {
                "sampler": name,
                "mean reward": float(r.mean()),
                "mean score": float(task.score(seqs[:, :p], seqs[:, p:]).mean()),
                "within-group reward std": float(r.std(1).mean()),
                "zero-std group fraction": float((r.amax(1) == r.amin(1)).double().mean()),
                "pairwise Hamming diversity": float(pair.mean()),
                "distinct completions / G": float(uniq),
                "seconds": secs,
            }
        )
    return rows


@torch.no_grad()
def digits_sample_grid(
    policies: dict[str, torch.nn.Module],
    *,
    task_name: str = IMAGE_TASK,
    seed: int = 0,
    per_class: int = 8,
    cfg_scale: float = 0.0,
) -> tuple[plt.Figure, dict[str, float]]:
    """Sample grids of Digits-T2I: for each policy, ``per_class`` emerge samples (T = 12) of
    every digit class, one row per class, titled with the classifier's mean reward; returns the
    figure and the mean reward per policy."""
    task = get_task(task_name)
    prompts = torch.arange(task.levels, task.levels + 10).repeat_interleave(per_class)[:, None]
    fig, axes = plt.subplots(
        1, len(policies), figsize=(max(0.5 * per_class * len(policies) + 0.5, 5), 5.5),
        squeeze=False,
    )  # fmt: skip
    means = {}
    for ax, (name, pol) in zip(axes[0], policies.items(), strict=True):
        pol.eval()
        seqs = emerge_sample(
            pol, prompts, task.completion_len, task.mask_id, steps=12, cfg_scale=cfg_scale,
            uncond_ids=task.uncond_ids if cfg_scale else None, generator=seed,
        )  # fmt: skip
        comps = seqs[:, 1:].clone()
        bad = (comps >= task.levels).view(-1, task.size, task.size).numpy()
        comps[comps >= task.levels] = 0  # a class / null token in a pixel: drawn red below
        imgs = task.decode_tokens(comps).numpy()
        imgs[bad] = np.nan
        means[name] = float(task.reward(seqs[:, :1], seqs[:, 1:]).mean())
        s = task.size
        grid = np.full((10 * (s + 1) - 1, per_class * (s + 1) - 1), -1.0)  # separators
        for i, img in enumerate(imgs):
            r, c = divmod(i, per_class)
            grid[r * (s + 1) : r * (s + 1) + s, c * (s + 1) : c * (s + 1) + s] = img
        cmap = matplotlib.colormaps["gray_r"].copy()
        cmap.set_bad("red")
        cmap.set_under("lightsteelblue")
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=16)
        ax.set_yticks([r * (s + 1) + s / 2 for r in range(10)], [str(d) for d in range(10)])
        ax.set_xticks([])
        ax.set_title(f"{name}\nmean reward {means[name]:.3f}", fontsize=8)
    fig.suptitle(
        f"Digits-T2I {task.size}×{task.size}, emerge, CFG w = {cfg_scale:g}\n"
        "(rows: prompted class; red: non-pixel token)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig, means


@torch.no_grad()
def _elbo(policy, seqs: torch.Tensor, p: int, mask_id: int, draws: int, seed: int) -> torch.Tensor:
    """Monte-Carlo masked-diffusion ELBO per sequence (§2.2): t on a stratified grid, i.i.d.
    masks, Σ_masked log π / t; the same draws (seed) for every policy (common random numbers)."""
    n, length = seqs.shape[0], seqs.shape[1] - p
    g = torch.Generator().manual_seed(seed)
    total = torch.zeros(n, dtype=torch.float64)
    for d in range(draws):
        t = (d + float(torch.rand((), generator=g))) / draws
        t = min(max(t, 1e-3), 1.0)
        mask = torch.rand(n, length, generator=g) < t
        noised = seqs.clone()
        noised[:, p:] = torch.where(mask, mask_id, seqs[:, p:])
        lp = masked_token_logps(policy, noised, seqs, p).double()
        total += (lp * mask).sum(1) / t
    return total / draws


def e3_estimator_quality(
    *, seed: int = 0, n_seqs: int = 64, draws: int = 64, mask_seeds: int = 8, update_steps: int = 5
) -> list[dict[str, Any]]:
    """E3 (our addition): each estimator's sequence log-ratio log π_θ/π_old against a Monte-Carlo
    ELBO difference (a proxy, not the exact likelihood) after a fixed update.

    θ_old is the shipped Sort-8 denoiser; θ is θ_old after ``update_steps`` MDLM steps (an update
    no estimator produced). For ``n_seqs`` rollouts of θ_old each estimator gives L·mean over its
    credited tokens of (l_θ − l_old), for ``mask_seeds`` seeds; reported: Pearson correlation of
    the seed-averaged estimate with the ELBO difference, and the variance across seeds.
    """
    from iclr26.maskgrpo.pretrain import pretrain_denoiser

    task = get_task("sort8")
    old = load_pretrained("sort8")
    new = load_pretrained("sort8")
    pretrain_denoiser(new, task, steps=update_steps, batch_size=64, lr=1e-3, seed=seed + 7)
    tr = MaskGRPOTrainer(old, task, MaskGRPOConfig(num_generations=8, seed=seed))
    seqs = tr.rollout(task.sample_prompts(n_seqs // 8, EVAL_SEED + 2), 0)
    p, length = task.prompt_len, task.completion_len
    ref = (
        _elbo(new, seqs, p, task.mask_id, draws, seed)
        - _elbo(old, seqs, p, task.mask_id, draws, seed)
    ).numpy()
    variants = {
        "MaskGRPO AR-like, t_μ=0.7 (μ=1 of 4)": ({"estimator": "maskgrpo"}, 0),
        "MaskGRPO AR-like, t_μ=0.9 (μ=3 of 4)": ({"estimator": "maskgrpo"}, 2),
        "MaskGRPO AR-like, mean of the 4 iterations": ({"estimator": "maskgrpo"}, None),
        "random remask, t_μ schedule (image variant)": (
            {"estimator": "maskgrpo", "remask": "random"},
            None,
        ),
        "uniform t ~ U(0,1) (UniGRPO-like)": ({"estimator": "uniform"}, 0),
        "diffu-GRPO (d1)": ({"estimator": "d1"}, 0),
    }
    rows = []
    for name, (arm, it) in variants.items():
        cfg = MaskGRPOConfig(num_iterations=4, seed=seed, **arm)
        est = np.zeros((mask_seeds, seqs.shape[0]))
        for s in range(mask_seeds):
            its = range(4) if it is None else [it]
            vals = []
            for mu in its:
                noised, mask = build_estimator_inputs(seqs, p, task.mask_id, cfg, s, mu)
                with torch.no_grad():
                    d = masked_token_logps(new, noised, seqs, p) - masked_token_logps(
                        old, noised, seqs, p
                    )
                w = mask.double()
                vals.append(length * ((d.double() * w).sum(1) / w.sum(1).clamp_min(1)).numpy())
            est[s] = np.mean(vals, 0)
        mean_est = est.mean(0)
        corr = float(np.corrcoef(mean_est, ref)[0, 1]) if np.std(mean_est) > 0 else math.nan
        rows.append(
            {
                "estimator": name,
                "corr. with ΔELBO (seed-avg.)": corr,
                "corr. one seed": float(np.mean([np.corrcoef(e, ref)[0, 1] for e in est])),
                "variance across mask seeds": float(est.var(0, ddof=1).mean()),
            }
        )
    return rows


#: Default-run E1 plan per task: (steps, seeds, with the unfixed-seed ablation). Sized to fit
#: the 15-minute CPU budget of the default run (user + sys): one E1 step costs about 0.28 s of
#: one CPU core on Sort-8, 0.63 s on Sudoku-4×4, 0.21 s on Add-3 and 0.29 s on Digits-T2I 4×4
#: (M = 4; the naive M = 1 arm about half), an evaluation of 64 prompts × 4 rollouts 0.33, 1.0,
#: 0.12 and 0.33 s (measured on an idle core), so E1 below costs about 8.5 min of CPU and E2, E3
#: and the sample grids about 1 more. Every arm the claim compares runs on every task, with 3
#: seeds each (the pre-registered ">= 2/3 of seeds"); the ablation runs on Sort-8 only.
DEFAULT_PLAN: dict[str, tuple[int, int, bool]] = {
    "sort8": (40, 3, True),
    IMAGE_TASK: (20, 3, False),
    "sudoku4": (20, 3, False),
    "add3": (40, 3, False),
}
#: The quick run's E1: Sort-8 (20 steps) and Sudoku-4×4 (10 steps, about 30 s of CPU for the
#: four arms), one seed each.
QUICK_PLAN: dict[str, tuple[int, int, bool]] = {"sort8": (20, 1, False), "sudoku4": (10, 1, False)}


def _image_e2(
    report: Report, task: str, table_name: str, check_name: str, seed: int, n: int
) -> None:
    """E2 on an image task: the diversity table of emerge vs MaskGIT groups and its check."""
    rows = e2_sampler_diversity(task, seed=seed, n_prompts=n)
    report.add_table(
        f"E2 rollout groups of one fixed policy ({table_name}, {n} prompts × G=8)", rows
    )
    em, mg = rows[0], rows[1]
    report.check(
        f"{check_name}: emerge gives more diverse image groups than MaskGIT (pairwise Hamming)",
        em["pairwise Hamming diversity"] > mg["pairwise Hamming diversity"],
        f"Hamming {em['pairwise Hamming diversity']:.3f} vs {mg['pairwise Hamming diversity']:.3f}; "
        f"within-group reward std {em['within-group reward std']:.3f} vs "
        f"{mg['within-group reward std']:.3f}",
    )


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """E1 + E2 + E3 (quick: :data:`QUICK_PLAN`, 1 seed on Sort-8 (20 steps) and Sudoku-4×4 (10
    steps); default: :data:`DEFAULT_PLAN`, 3 seeds each on Sort-8 (40 steps, with the unfixed-seed
    ablation), Digits-T2I 4×4 (20 steps), Sudoku-4×4 (20 steps) and Add-3 (40 steps)), E2 also on
    Digits-T2I with sample grids (PNG; the default run adds the 8×8 preset)."""
    torch.set_num_threads(1)  # tiny models: one thread is faster on a shared 2-core machine
    plan, eval_every = (QUICK_PLAN if quick else DEFAULT_PLAN), 10
    tasks = list(plan)
    task_seeds = {t: [seed + i for i in range(n)] for t, (_s, n, _a) in plan.items()}
    task_arms = {t: {**ARMS, **(ABLATION if abl else {})} for t, (_n, _s, abl) in plan.items()}
    report = Report(
        PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS,
        config={"quick": quick, "tasks": tasks, "seeds": task_seeds,
                "steps": {t: n for t, (n, _s, _a) in plan.items()}, "prompts_per_step": 8,
                "num_generations": 8, "num_iterations": 4, "min_mask_rate": 0.6, "learning_rate": 5e-5,
                "eval": "64 held-out prompts × 4 rollouts (training sampler, fixed seed): exact match (text), classifier probability (digits)",
                "image_task": {"task": IMAGE_TASK, **_IMAGE},
                "model": "shipped TinyMaskedDenoiser d=64, 2 layers (~0.1 M params) per task"},
    )  # fmt: skip
    jobs = [(t, a, s) for t in tasks for a in task_arms[t] for s in task_seeds[t]]
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for t, a, s in progress_bar(jobs, desc="E1 runs", enabled=progress):
        runs[(t, a, s)] = e1_run(
            t, task_arms[t][a], seed=s, steps=plan[t][0], eval_every=eval_every,
            keep_policy=(t == IMAGE_TASK and a == "MaskGRPO" and s == seed),
        )  # fmt: skip

    fig, axes = plt.subplots(len(tasks), 2, figsize=(10, 3.2 * len(tasks)), squeeze=False)
    verdicts = {}
    best_other: dict[str, tuple[float, float]] = {}
    for ti, t in enumerate(tasks):
        arms, seeds = task_arms[t], task_seeds[t]
        rows = []
        init = runs[(t, "MaskGRPO", seeds[0])]["curve"][0][2]
        gains = {
            a: [runs[(t, a, s)]["curve"][-1][2] - runs[(t, a, s)]["curve"][0][2] for s in seeds]
            for a in arms
        }
        best = max(np.mean(g) for g in gains.values())
        thr = init + 0.5 * best if best > 0 else math.inf  # pre-registered: half the best mean gain
        for a in arms:
            rs = [runs[(t, a, s)] for s in seeds]
            tt = [_to_threshold(r["curve"], thr) for r in rs]
            rows.append(
                {
                    "arm": a,
                    "initial success": _ms([r["curve"][0][2] for r in rs]),
                    "final success": _ms([r["curve"][-1][2] for r in rs]),
                    "RL gain": _ms(gains[a]),
                    "AUC (mean success)": _ms([np.mean([c[2] for c in r["curve"]]) for r in rs]),
                    "steps to thr": _ms([x[0] for x in tt]),
                    "seconds to thr": _ms([x[1] for x in tt]),
                    "zero-std frac": _ms([r["zero_std_frac"] for r in rs]),
                    "clip frac": _ms([r["clip_frac"] for r in rs]),
                    "KL": _ms([r["kl"] for r in rs]),
                    "s/step": _ms([r["secs_per_step"] for r in rs]),
                }
            )
            for r in rs:
                steps_, secs_, vals = zip(*r["curve"], strict=True)
                axes[ti, 0].plot(
                    steps_,
                    vals,
                    color=f"C{list(arms).index(a)}",
                    alpha=0.8,
                    label=a if r is rs[0] else None,
                )
                axes[ti, 1].plot(secs_, vals, color=f"C{list(arms).index(a)}", alpha=0.8)
        thr_txt = f"{thr:.3f}" if math.isfinite(thr) else "none (no arm gained)"
        report.add_table(
            f"E1 {t}: held-out success, {len(seeds)} seed(s) × {plan[t][0]} steps (threshold {thr_txt})",
            rows,
        )
        others = [a for a in ARMS if a != "MaskGRPO"]
        best_other[t] = (
            float(np.mean(gains["MaskGRPO"])),
            max(float(np.mean(gains[a])) for a in others),
        )
        axes[ti, 0].set(title=f"{t}: success vs step", xlabel="step", ylabel="held-out success")
        axes[ti, 1].set(title=f"{t}: success vs wall-clock", xlabel="seconds (training only)")
        ours, d1 = gains["MaskGRPO"], gains["diffu-GRPO (d1)"]
        wins = sum(o > d for o, d in zip(ours, d1, strict=True))
        t_ours = (
            np.nanmean([_to_threshold(runs[(t, "MaskGRPO", s)]["curve"], thr)[1] for s in seeds])
            if math.isfinite(thr)
            else math.nan
        )
        t_d1 = (
            np.nanmean(
                [_to_threshold(runs[(t, "diffu-GRPO (d1)", s)]["curve"], thr)[1] for s in seeds]
            )
            if math.isfinite(thr)
            else math.nan
        )
        verdicts[t] = (wins, len(seeds), float(np.mean(ours)), float(np.mean(d1)), t_ours, t_d1)
        report.metric(f"{t} RL gain MaskGRPO", float(np.mean(ours)))
        report.metric(f"{t} RL gain diffu-GRPO", float(np.mean(d1)))
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    report.add_figure("e1_curves", fig)

    need_tasks = 1 if quick else 2  # spec §5.4: at least two tasks (one in the quick run)
    won = [t for t, (w, n, *_rest) in verdicts.items() if w >= math.ceil(2 * n / 3)]
    detail = "; ".join(
        f"{t}: gain {o:+.3f} vs {d:+.3f}, MaskGRPO ahead in {w}/{n} seeds"
        for t, (w, n, o, d, _a, _b) in verdicts.items()
    )
    report.check(
        f"MaskGRPO's RL gain exceeds diffu-GRPO's on >= {need_tasks} task(s) in >= 2/3 of seeds",
        len(won) >= need_tasks,
        detail,
    )
    slower = [
        t
        for t, (*_x, a, b) in verdicts.items()
        if t in won and not (np.isnan(b) or (not np.isnan(a) and a <= b))
    ]
    report.check(
        "MaskGRPO reaches the threshold no later (wall-clock) than diffu-GRPO where it wins",
        bool(won) and not slower,
        "; ".join(f"{t}: {a:.1f} s vs {b:.1f} s" for t, (*_x, a, b) in verdicts.items()),
    )
    for t, (g_ours, g_other) in best_other.items():
        report.check(
            f"MaskGRPO has the largest mean RL gain of all arms on {t}",
            g_ours > g_other,
            f"{g_ours:+.3f} vs best other {g_other:+.3f}",
        )

    e3 = e3_estimator_quality(seed=seed, draws=32 if quick else 128, mask_seeds=4 if quick else 8)
    report.add_table(
        "E3 estimator log-ratio vs a Monte-Carlo ELBO difference (proxy, Sort-8, 64 rollouts)", e3
    )
    ours = e3[2]["corr. with ΔELBO (seed-avg.)"]
    d1c = e3[5]["corr. with ΔELBO (seed-avg.)"]
    report.check(
        "MaskGRPO's estimate tracks the ELBO-difference proxy better than diffu-GRPO's",
        ours > d1c,
        f"correlation {ours:.3f} vs {d1c:.3f}",
    )

    e2 = e2_sampler_diversity(seed=seed)
    report.add_table("E2 rollout groups of one fixed policy (Sort-8, 32 prompts × G=8)", e2)
    em, mg = e2[0], e2[1]
    report.check(
        "emerge gives more diverse groups than MaskGIT (pairwise Hamming) and no more zero-std groups",
        em["pairwise Hamming diversity"] > mg["pairwise Hamming diversity"]
        and em["zero-std group fraction"] <= mg["zero-std group fraction"],
        f"Hamming {em['pairwise Hamming diversity']:.3f} vs {mg['pairwise Hamming diversity']:.3f}; "
        f"zero-std {em['zero-std group fraction']:.3f} vs {mg['zero-std group fraction']:.3f}",
    )

    # E2 on the visual task (the paper's setting): groups of 8 images per class prompt
    n_img = 20 if quick else 40
    _image_e2(report, IMAGE_TASK, "Digits-T2I 4×4", "Digits-T2I", seed, n_img)
    grid_policies = {"shipped denoiser (before RL)": load_pretrained(IMAGE_TASK)}
    if (IMAGE_TASK, "MaskGRPO", seed) in runs:
        n_steps = plan[IMAGE_TASK][0]
        grid_policies[f"after {n_steps} MaskGRPO steps"] = runs[(IMAGE_TASK, "MaskGRPO", seed)][
            "policy"
        ]
    for w in (0.0, 3.0):
        fig, means = digits_sample_grid(grid_policies, seed=seed, cfg_scale=w)
        report.add_figure(f"digits_samples_cfg{w:g}", fig)
        for name, v in means.items():
            report.metric(f"digits grid mean reward, {name}, CFG w={w:g}", v)
    if not quick:
        # the 8×8 preset (64 image tokens): E2 and sample grids of its shipped denoiser; its E1
        # (12 runs at about 4× the 4×4 cost) does not fit the default run's budget
        _image_e2(report, FULL_IMAGE_TASK, "Digits-T2I 8×8", "Digits-T2I 8×8", seed, n_img)
        for w in (0.0, 3.0):
            fig, means = digits_sample_grid(
                {"shipped 8×8 denoiser": load_pretrained(FULL_IMAGE_TASK)},
                task_name=FULL_IMAGE_TASK, seed=seed, cfg_scale=w,
            )  # fmt: skip
            report.add_figure(f"digits8_samples_cfg{w:g}", fig)
            report.metric(f"digits 8×8 grid mean reward, shipped denoiser, CFG w={w:g}", means[
                "shipped 8×8 denoiser"])  # fmt: skip
    report.note(
        "Tiny shipped denoisers on generated tasks stand in for LLaDA-8B / MMaDA-8B on GSM8K, "
        "MATH500 and GenEval; Digits-T2I (scikit-learn's 8×8 digits, 5 grey levels, a logistic "
        "regression's class probability as reward; E1 on the 4×4 average-pooled preset, E2 "
        "also on 8×8 in the default run) stands in for text-to-image with GenEval."
    )
    return report


def trl_parity(*, seed: int = 0) -> list[dict[str, Any]] | None:
    """Parity run of the GRPO parts shared with TRL: on one MaskGRPO inner iteration of real
    Sort-8 rollouts (AR-like remask, credit mask), our loss and its gradient against TRL's
    ``GRPOTrainer._compute_loss`` (float64). ``None`` when trl is not installed."""
    try:
        from iclr26.maskgrpo.trl_adapter import trl_grpo_loss
    except ImportError:
        return None
    from iclr26.maskgrpo.advantages import group_advantages
    from iclr26.maskgrpo.loss import clipped_surrogate

    task = get_task("sort8")
    policy = load_pretrained("sort8").double()
    tr = MaskGRPOTrainer(policy, task, MaskGRPOConfig(num_generations=8, seed=seed))
    seqs = tr.rollout(task.sample_prompts(8, 0), 0)
    p = task.prompt_len
    adv = group_advantages(task.reward(seqs[:, :p], seqs[:, p:]).double(), 8)
    rows = []
    for agg in ("token_mean", "seq_mean"):
        noised, mask = build_estimator_inputs(seqs, p, task.mask_id, tr.config, 0, 1)
        with torch.no_grad():
            old = masked_token_logps(policy, noised, seqs, p).double()
        # θ ≠ θ_old: perturb the log-probs so the ratios leave the clip range
        shift = 0.3 * torch.randn(
            old.shape, generator=torch.Generator().manual_seed(seed), dtype=old.dtype
        )
        out = {}
        for name, fn in (("ours", clipped_surrogate), ("trl", trl_grpo_loss)):
            lp = (old + shift).requires_grad_()
            loss, st = fn(lp, old, adv, mask, epsilon=0.2, ref_logps=old, beta=0.01, loss_agg=agg)
            (grad,) = torch.autograd.grad(loss, lp)
            out[name] = (loss.detach(), grad, st["clip_frac"])
        rows.append(
            {"loss aggregation": f"{agg} (TRL {'bnpo' if agg == 'token_mean' else 'grpo'})",
             "loss (ours)": float(out["ours"][0]), "loss (TRL)": float(out["trl"][0]),
             "max |Δ loss|": float((out["ours"][0] - out["trl"][0]).abs()),
             "max |Δ grad|": float((out["ours"][1] - out["trl"][1]).abs().max()),
             "clip frac (ours / TRL)": f"{out['ours'][2]:.3f} / {out['trl'][2]:.3f}"}
        )  # fmt: skip
    return rows


def denoiser_matmuls(
    config: dict[str, Any], batch: int, length: int
) -> list[tuple[str, tuple[int, ...], tuple[int, ...], int]]:
    """The matrix products one :class:`~iclr26.maskgrpo.TinyMaskedDenoiser` forward performs on
    (``batch``, ``length``) token ids, as (name, left shape, right shape, FLOPs), FLOPs = 2·m·k·n
    per product: per layer the fused q/k/v projection, q·kᵀ and softmax·v of every head, the
    output projection and the two feed-forward projections; then the output head. Layer norms,
    biases, softmax, residual adds and the embedding lookups are not counted (they are not
    matrix products). ``config`` is the model's ``config`` dict."""
    d, n_layers, heads, vocab = (
        config["d_model"], config["n_layers"], config["n_heads"], config["vocab_size"]
    )  # fmt: skip
    rows, dh = batch * length, d // heads
    layer = [
        ("q/k/v projection", (rows, d), (d, 3 * d)),
        ("q·kᵀ (all heads)", (batch * heads, length, dh), (batch * heads, dh, length)),
        ("softmax·v (all heads)", (batch * heads, length, length), (batch * heads, length, dh)),
        ("output projection", (rows, d), (d, d)),
        ("feed-forward in", (rows, d), (d, 4 * d)),
        ("feed-forward out", (rows, 4 * d), (4 * d, d)),
    ]
    out = []
    for i in range(n_layers):
        for name, a, b in layer:
            flops = 2 * math.prod(a) * b[-1]
            out.append((f"layer {i + 1} {name}", a, b, flops))
    out.append(("output head", (rows, d), (d, vocab), 2 * rows * d * vocab))
    return out


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """Seconds per update per estimator (ratio to diffu-GRPO), batched vs looped passes, sampler
    throughput against a forward-FLOP limit."""
    torch.set_num_threads(1)
    repeats = 3 if quick else 7
    task = get_task("sort8")
    report = Report(
        PACKAGE, "bench",
        "A MaskGRPO update costs at most 1.3× a diffu-GRPO update at equal M and batch, and the "
        "low-confidence sampler runs within 3× of the denoiser's forward-FLOP limit.",
        seed=seed, backends=BACKENDS,
        config={"quick": quick, "repeats": repeats, "task": "sort8", "batch": "8 prompts × G=8",
                "num_iterations": 4, "threads": 1},
    )  # fmt: skip
    base = load_pretrained("sort8")
    prompts = task.sample_prompts(8, 0)
    rows, times = [], {}
    # the naive arm is d1 with M = 1: at equal M it is the d1 update, so it is not timed here
    timed = {k: v for k, v in ARMS.items() if v.get("num_iterations", 4) == 4}
    setups = {}
    for name, arm in timed.items():
        tr = MaskGRPOTrainer(
            load_pretrained("sort8"), task, MaskGRPOConfig(num_generations=8, seed=seed, **arm)
        )
        seqs = tr.rollout(prompts, 0)
        rewards = task.reward(seqs[:, : task.prompt_len], seqs[:, task.prompt_len :])
        tr.update(seqs, rewards)  # warm-up
        setups[name] = (tr, seqs, rewards)
    # interleaved rounds (one update of each estimator in turn): load from other jobs hits
    # every estimator of a round alike, so the per-round ratios are what is compared
    secs: dict[str, list[float]] = {n: [] for n in setups}
    for _ in progress_bar(range(2 * repeats + 1), desc="bench updates", enabled=progress):
        for name, (tr, seqs, rewards) in setups.items():
            t0 = time.perf_counter()
            tr.update(seqs, rewards)
            secs[name].append(time.perf_counter() - t0)
    per_round = {n: np.asarray(v) / np.asarray(secs["diffu-GRPO (d1)"]) for n, v in secs.items()}

    def _iqr(v):
        return float(np.subtract(*np.percentile(v, [75, 25])))

    times = {n: SimpleNamespace(median=float(np.median(v)), iqr=_iqr(v)) for n, v in secs.items()}
    ref = times["diffu-GRPO (d1)"]
    for name, tm in times.items():
        rows.append(
            {"estimator (M=4, 64 rollouts)": name, "median s/update": tm.median, "IQR": tm.iqr,
             "× diffu-GRPO (median of per-round ratios)": float(np.median(per_round[name])),
             "ratio IQR": _iqr(per_round[name]), "rounds": len(secs[name])}
        )  # fmt: skip
    report.add_table("Update cost at equal M and batch (interleaved rounds)", rows)
    ratio = float(np.median(per_round["MaskGRPO"]))
    report.check("MaskGRPO update <= 1.3× diffu-GRPO update", ratio <= 1.3, f"{ratio:.2f}×")

    # batched vs looped old-policy passes over the M masks
    tr = MaskGRPOTrainer(base, task, MaskGRPOConfig(num_generations=8, seed=seed))
    seqs = tr.rollout(prompts, 0)
    p, m = task.prompt_len, 4
    ins = [build_estimator_inputs(seqs, p, task.mask_id, tr.config, 0, mu)[0] for mu in range(m)]

    @torch.no_grad()
    def batched():
        return masked_token_logps(base, torch.cat(ins), seqs.repeat(m, 1), p)

    @torch.no_grad()
    def looped():
        return [masked_token_logps(base, x, seqs, p) for x in ins]

    tb, tl = timeit(batched, repeats=repeats), timeit(looped, repeats=repeats)
    report.add_table(
        "Old/reference passes over M = 4 masks",
        [{"variant": "batched (used)", "median s": tb.median, "IQR": tb.iqr},
         {"variant": "looped", "median s": tl.median, "IQR": tl.iqr, "× batched": tl.median / tb.median}],
    )  # fmt: skip

    # sampler throughput vs the forward-FLOP limit, in interleaved rounds (one sampler call, the
    # same number of bare forward passes, the forward's own matrix products alone at their own
    # shapes, and 512² matmuls): load from other jobs hits every quantity of a round alike, so
    # the per-round ratios are stable
    tokens = task.prompt_len + task.completion_len
    n_seq = 64
    mms = denoiser_matmuls(base.config, n_seq, tokens)
    flops_fwd = sum(m[3] for m in mms) / n_seq  # per sequence, the products the forward performs
    big = task.sample_prompts(n_seq, 1)
    x_full = torch.cat([big, torch.full((n_seq, task.completion_len), task.mask_id)], 1)
    n_fwd = task.completion_len  # one forward per step, one token per step
    sq = torch.randn(512, 512)
    gen = torch.Generator().manual_seed(seed)

    def right(name, shape):  # nn.Linear weights and the keys enter as transposed views
        if name.endswith("softmax·v (all heads)"):
            return torch.randn(shape, generator=gen)
        return torch.randn((*shape[:-2], shape[-1], shape[-2]), generator=gen).transpose(-1, -2)

    operands = [(torch.randn(a, generator=gen), right(n, b)) for n, a, b, _f in mms]

    def sample():
        return low_confidence_block_sample(
            base, big, task.completion_len, task.mask_id, temperature=0.9, generator=0
        )

    @torch.no_grad()
    def forwards():
        for _ in range(n_fwd):
            base(x_full)

    def mm_forward():
        for _ in range(n_fwd):
            for a, b in operands:
                torch.matmul(a, b)

    def mm_square():
        for _ in range(5):
            sq @ sq

    fns = {"sampler": sample, "forwards": forwards, "mm_forward": mm_forward, "mm512": mm_square}
    for fn in fns.values():
        fn()  # warm-up
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(2 * repeats + 1):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            rounds[k].append(time.perf_counter() - t0)
    r = {k: np.asarray(v) for k, v in rounds.items()}
    peak = 5 * 2 * 512**3 / r["mm512"]  # per round
    shape_rate = n_fwd * n_seq * flops_fwd / r["mm_forward"]  # GFLOP/s at the forward's shapes
    generated = n_seq * task.completion_len
    achieved = generated / r["sampler"]
    limit_512 = generated / (n_fwd * n_seq * flops_fwd / peak)
    limit_shape = generated / r["mm_forward"]  # the forward's products at their shapes' speed
    ratio_512, ratio_shape = limit_512 / achieved, limit_shape / achieved
    overhead = r["sampler"] / r["forwards"]
    fwd_eff = (n_fwd * n_seq * flops_fwd / r["forwards"]) / peak
    mm_share = r["mm_forward"] / r["forwards"]

    def iqr_(v):
        return float(np.subtract(*np.percentile(v, [75, 25])))

    def med_iqr(v):
        return f"{np.median(v):.2f} (IQR {iqr_(v):.2f})"

    mflop = flops_fwd / 1e6
    report.add_table(
        "Sampler throughput against the forward-FLOP limit (Sort-8, 64 sequences, 8 denoising "
        "steps; interleaved rounds, median and IQR of the per-round values)",
        [{"limit": "forward FLOP limit (the target)",
          "definition": f"tokens/s if every forward ran its {mflop:.2f} MFLOP/sequence of matrix "
          "products at the best rate this machine reaches on those products: each product timed "
          "alone at its own shape (FLOPs / the time of the products alone)",
          "GFLOP/s": float(np.median(shape_rate)) / 1e9,
          "limit tokens/s": float(np.median(limit_shape)),
          "measured tokens/s": float(np.median(achieved)),
          "limit / measured": float(np.median(ratio_shape)), "IQR": iqr_(ratio_shape),
          "target <= 3×": "judged here"},
         {"limit": "512² matmul reference (not the target)",
          "definition": "the same FLOPs at the rate of a square 512×512 float32 matmul, a rate "
          "the forward's products (17-token attention, 64-wide projections) do not reach at "
          f"their shapes (they run at {np.median(shape_rate / peak):.2f}× it)",
          "GFLOP/s": float(np.median(peak)) / 1e9,
          "limit tokens/s": float(np.median(limit_512)),
          "measured tokens/s": float(np.median(achieved)),
          "limit / measured": float(np.median(ratio_512)), "IQR": iqr_(ratio_512),
          "target <= 3×": "reported only"}],
    )  # fmt: skip
    report.add_table(
        "Where the sampler's time goes (per-round ratios, median and IQR)",
        [{"sampler / its 8 bare forwards": med_iqr(overhead),
          "forward's products alone / forward": med_iqr(mm_share),
          "forward GFLOP/s ÷ 512² matmul GFLOP/s": med_iqr(fwd_eff),
          "products at their shapes ÷ 512² matmul GFLOP/s": med_iqr(shape_rate / peak),
          "forward MFLOP/sequence (products only)": mflop, "rounds": len(r["sampler"])}],
    )  # fmt: skip
    report.add_table(
        "The forward's matrix products (Sort-8 denoiser, 64 sequences of 17 tokens)",
        [{"product": n, "left": "×".join(map(str, a)), "right": "×".join(map(str, b)),
          "MFLOP": f / 1e6} for n, a, b, f in mms],
    )  # fmt: skip
    report.check(
        "sampler within 3× of the denoiser's forward-FLOP limit (FLOPs / the rate this machine "
        "reaches on the forward's own products)",
        float(np.median(ratio_shape)) <= 3.0,
        f"{np.median(ratio_shape):.2f}× (IQR {iqr_(ratio_shape):.2f}); the sampler costs "
        f"{np.median(overhead):.2f}× its bare forward passes, whose products alone take "
        f"{np.median(mm_share):.2f} of a forward",
    )
    report.metric(
        "sampler limit / measured, forward FLOP limit (target)", float(np.median(ratio_shape))
    )
    report.metric(
        "sampler limit / measured, at 512² matmul speed (reference)", float(np.median(ratio_512))
    )
    report.note(
        "Forward-FLOP limit: the issue's target is 'within 3× of the denoiser's forward FLOP "
        "limit', i.e. the forward's FLOPs divided by the best rate this machine reaches on those "
        "FLOPs. The forward's FLOPs are its matrix products at fixed shapes, so that rate is "
        "measured on exactly those products, each run alone at its own shape; the target is "
        "judged on this limit. The same FLOPs at a 512² matmul's rate are reported as a "
        f"reference only ({np.median(ratio_512):.2f}×): the products reach "
        f"{np.median(shape_rate / peak):.2f}× that rate at their own shapes, so that limit "
        "counts the products' own shape inefficiency against the sampler."
    )
    report.add_table("E2 sampler diversity (Sort-8)", e2_sampler_diversity(seed=seed))
    parity = trl_parity(seed=seed)
    if parity is None:
        report.note("trl is not installed: the TRL parity run was skipped (extra [trl]).")
    else:
        report.add_table(
            "Parity with TRL's GRPOTrainer loss (MaskGRPO credit mask, Sort-8)", parity
        )
        worst = max(max(r["max |Δ loss|"], r["max |Δ grad|"]) for r in parity)
        report.check("TRL's GRPO loss and gradient equal ours on the MaskGRPO inputs", worst < 1e-9,
                     f"largest difference {worst:.1e}")  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 3))
    names = list(times)
    ax.barh(names, [times[n].median / ref.median for n in names])
    ax.axvline(1.3, color="k", ls="--", lw=1)
    ax.set(xlabel="update time / diffu-GRPO update time", title="Update cost at M = 4")
    fig.tight_layout()
    report.add_figure("update_cost", fig)
    return report
