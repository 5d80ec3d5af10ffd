"""``reproduce`` and ``bench``: EcoDiff on a tiny class-conditional DiT trained on 8×8 digits.

E1: equal-sparsity quality (EcoDiff end-to-end vs its per-step ablation, magnitude, Taylor and
random, all through one :func:`select`); E2: saved-for-backward bytes vs the number of steps with
and without time-step checkpointing; E4 (default run): a sparsity sweep from one learned score;
the flow-matching regime (default run). ``bench`` adds wall time per mask update (checkpointed vs
BPTT) and the measured latency of the materialised model.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import statistics
import time
from typing import Any

import torch

from iclr26.ecodiff.adjoint import SavedTensorMeter, trajectory_grad
from iclr26.ecodiff.baselines import (
    magnitude_scores,
    random_scores,
    taylor_scores,
    torch_pruning_scores,
)
from iclr26.ecodiff.data import digits_split
from iclr26.ecodiff.learn import EcoDiffConfig, learn_masks
from iclr26.ecodiff.masking import MaskedModel
from iclr26.ecodiff.materialize import materialize
from iclr26.ecodiff.metrics import DigitsJudge, mse, psnr
from iclr26.ecodiff.sampler import diffusers_model_fn, from_scheduler
from iclr26.ecodiff.select import count_macs, count_params, select
from iclr26.ecodiff.toy import load_toy, load_toy_unet, toy_scheduler
from iclr26.ecodiff.units import find_prunable_units

__all__ = ["METHOD_CHECK_METHODS", "bench", "method_check", "reproduce", "toy_config"]

log = logging.getLogger(__name__)
PACKAGE = "iclr26-ecodiff"
CLAIM = (
    "End-to-end mask learning through the whole sampler prunes ~20 % of a diffusion/flow "
    "transformer's parameters with no retraining and keeps its samples closer to the dense "
    "model's than magnitude, Taylor, random and local-objective pruning at equal sparsity, with "
    "saved-activation memory constant in the number of sampling steps."
)


def toy_config(quick: bool, seed: int) -> EcoDiffConfig:
    """Mask-learning settings for the toy (official DiT config where it applies)."""
    return EcoDiffConfig(
        epochs=3 if quick else 4, lr_attn=0.5, lr_ffn=0.5, warmup=2, beta=1.0, reg="l2",
        init_logit=3.0, noise_eps=0.5, grad_accum=1, checkpoint=True, seed=seed,
    )  # fmt: skip


METHOD_CHECK_METHODS = ("EcoDiff", "EcoDiff-local", "Taylor", "magnitude", "random")


def _count(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def method_check(
    seeds=(0, 1, 2, 3, 4),
    *,
    calibration: int = 32,
    epochs: int = 3,
    steps: int = 10,
    sparsity: float = 0.2,
    n_eval: int = 128,
    n_random: int = 2,
    progress: bool = False,
) -> dict[str, Any]:
    """The spec's seeded method check (§5.5) on the shipped DDPM DiT.

    For every seed: fresh calibration noise and classes (``calibration`` samples in batches of
    4), fresh gate noise, fresh evaluation noise (``n_eval`` pairs); EcoDiff (end-to-end), its
    per-step local ablation, the Taylor criterion, magnitude and random pruning (mean of
    ``n_random`` draws) remove ``sparsity`` of all parameters through one :func:`select`, and
    each pruned model's final samples are compared with the dense model's (MSE, DDIM with
    ``steps`` steps). Mask learning uses :func:`toy_config` with ``epochs`` passes (one update
    per calibration batch, so ``epochs * ceil(calibration / 4)`` updates).

    Returns:
        ``{"rows": [{"seed", <method>: MSE, ...}], "wins": {method: seeds where EcoDiff's MSE
        is lower}, "mean": {method: mean MSE}, "n_seeds", "updates"}``.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    for s in seeds:
        _count("seeds", s, 0)
    if len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be distinct")
    calibration = _count("calibration", calibration, 1)
    epochs = _count("epochs", epochs, 1)
    steps = _count("steps", steps, 1)
    n_eval = _count("n_eval", n_eval, 1)
    n_random = _count("n_random", n_random, 1)
    if isinstance(sparsity, bool) or not isinstance(sparsity, int | float) or not 0 < sparsity < 1:
        raise ValueError(f"sparsity must be a number in (0, 1), got {sparsity!r}")
    from iclr26.shared import progress as bar

    model = load_toy("ddpm")
    units = find_prunable_units(model)
    sampler = from_scheduler(toy_scheduler("ddpm"), steps)
    fn = diffusers_model_fn(model)
    total = count_params(model)["total"]
    rows = []
    pbar = bar(total=len(seeds), enabled=progress, desc="method check", unit="seed")
    with pbar:
        for seed in seeds:
            x_tr, y_tr, _, _ = digits_split(seed)
            cal = _calibration(calibration, min(4, calibration), seed + 1,
                               sampler.init_noise_sigma)  # fmt: skip
            gen = torch.Generator().manual_seed(seed + 2)
            z = torch.randn(n_eval, 1, 8, 8, generator=gen) * sampler.init_noise_sigma
            y = torch.arange(n_eval) % 10
            with torch.no_grad():
                dense = sampler.sample(fn, z, y)

            def score(scores, z=z, y=y, dense=dense):
                keep = select(scores, sparsity, total_params=total)
                masked = MaskedModel(model, units)
                with torch.no_grad(), masked, masked.use("keep", keep):
                    return mse(sampler.sample(fn, z, y), dense)

            row: dict[str, Any] = {"seed": seed}
            for name, objective in (("EcoDiff", "end_to_end"), ("EcoDiff-local", "local")):
                cfg = toy_config(True, seed)
                cfg.epochs, cfg.objective = epochs, objective
                row[name] = score(learn_masks(model, sampler, cal, units=units, config=cfg))
            losses = _denoise_losses((x_tr, y_tr), "ddpm", 8, 64, seed, model, lambda v: v)
            row["Taylor"] = score(taylor_scores(model, units, losses))
            row["magnitude"] = score(magnitude_scores(model, units))
            row["random"] = statistics.fmean(
                score(random_scores(units, seed=seed * 100 + r)) for r in range(n_random)
            )
            rows.append(row)
            pbar.update(1)
    others = [m for m in METHOD_CHECK_METHODS if m != "EcoDiff"]
    return {
        "rows": rows,
        "wins": {m: sum(r["EcoDiff"] < r[m] for r in rows) for m in others},
        "mean": {m: statistics.fmean(r[m] for r in rows) for m in METHOD_CHECK_METHODS},
        "n_seeds": len(rows),
        "updates": epochs * math.ceil(calibration / min(4, calibration)),
        "settings": {"calibration": calibration, "epochs": epochs, "steps": steps,
                     "sparsity": sparsity, "n_eval": n_eval, "n_random": n_random},
    }  # fmt: skip


def _calibration(n: int, batch: int, seed: int, sigma: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(0, n, batch):
        z = torch.randn(batch, 1, 8, 8, generator=gen) * sigma
        y = torch.randint(0, 10, (batch,), generator=gen)
        out.append((z, y))
    return out


def _denoise_losses(x, sched_name, n_batches, batch, seed, model, encode):
    """Closures of the training loss on real digits at random timesteps (for Taylor)."""
    gen = torch.Generator().manual_seed(seed + 7)
    ac = toy_scheduler("ddpm").alphas_cumprod.float() if sched_name == "ddpm" else None
    fn = diffusers_model_fn(model)
    xs, ys = x

    def make(i):
        idx = torch.randint(0, len(ys), (batch,), generator=gen)
        x0, c = xs[idx], encode(ys[idx])
        noise = torch.randn(x0.shape, generator=gen)
        if sched_name == "ddpm":
            t = torch.randint(0, 1000, (batch,), generator=gen)
            a = ac[t].view(-1, 1, 1, 1)
            xt, target, tt = a.sqrt() * x0 + (1 - a).sqrt() * noise, noise, t.float()
        else:
            s = torch.rand(batch, generator=gen)
            sv = s.view(-1, 1, 1, 1)
            xt, target, tt = (1 - sv) * x0 + sv * noise, noise - x0, s * 1000

        return lambda: (fn(xt, tt, c) - target).pow(2).mean()

    return [make(i) for i in range(n_batches)]


def _sample_metrics(out, dense, y, judge, x_ref):
    return {
        "MSE to dense": mse(out, dense),
        "PSNR dB": psnr(out, dense),
        "class acc": judge.accuracy(out, y),
        "feature FD": judge.frechet(out, x_ref),
    }


def _evaluate(model, units, keep, sampler, fn, z, cond, y, dense, judge, x_ref):
    masked = MaskedModel(model, units)
    with torch.no_grad(), masked, masked.use("keep", keep):
        out = sampler.sample(fn, z, cond)
    return out, _sample_metrics(out, dense, y, judge, x_ref)


def _compare(regime: str, *, quick: bool, seed: int, progress: bool, sparsities, report_rows,
             n_random: int) -> dict[str, Any]:  # fmt: skip
    """E1 on one toy: ``regime`` is ``"ddpm"`` / ``"flow"`` (the DiT; sparsity = fraction of all
    parameters) or ``"unet"`` (E5, the U-Net; sparsity = fraction of the prunable parameters,
    since its attention/FFN blocks hold only about a fifth of its weights)."""
    if regime == "unet":
        model, prompts = load_toy_unet()

        def encode(labels):
            return prompts[labels]

        sched_name, model_name = "ddpm", "U-Net ddpm"
    else:
        model = load_toy(regime)

        def encode(labels):
            return labels

        sched_name, model_name = regime, f"DiT {regime}"
    units = find_prunable_units(model)
    T = 5 if regime == "unet" else 10 if quick or regime != "ddpm" else 25
    sampler = from_scheduler(toy_scheduler(sched_name), T)
    fn = diffusers_model_fn(model)
    x_tr, y_tr, x_te, y_te = digits_split(seed)
    judge = DigitsJudge(x_tr, y_tr, seed=seed)
    n_cal = 16 if regime == "unet" else 32 if quick else 64
    cal = [
        (zz, encode(yy)) for zz, yy in _calibration(n_cal, 4, seed + 1, sampler.init_noise_sigma)
    ]
    n_eval = 128 if quick or regime == "unet" else 512
    gen = torch.Generator().manual_seed(seed + 2)
    z = torch.randn(n_eval, 1, 8, 8, generator=gen) * sampler.init_noise_sigma
    y = torch.arange(n_eval) % 10
    cond = encode(y)
    with torch.no_grad():
        dense = sampler.sample(fn, z, cond)
    total = count_params(model)["total"]
    of_total = None if regime == "unet" else total
    budget = "prunable params" if regime == "unet" else "all params"
    cfg = toy_config(quick, seed)
    t0 = time.perf_counter()
    e2e = learn_masks(model, sampler, cal, units=units, config=cfg, progress=progress)
    t_e2e = time.perf_counter() - t0
    t0 = time.perf_counter()
    local_cfg = toy_config(quick, seed)
    local_cfg.objective = "local"
    local = learn_masks(model, sampler, cal, units=units, config=local_cfg, progress=progress)
    t_local = time.perf_counter() - t0
    t0 = time.perf_counter()
    taylor = taylor_scores(model, units, _denoise_losses((x_tr, y_tr), sched_name, 8, 64, seed,
                                                         model, encode))  # fmt: skip
    t_taylor = time.perf_counter() - t0
    methods = {
        "EcoDiff (end-to-end)": (e2e, t_e2e),
        "EcoDiff-local (per-step)": (local, t_local),
        "Taylor (Diff-Pruning criterion)": (taylor, t_taylor),
        "magnitude": (magnitude_scores(model, units), 0.0),
    }
    if regime != "unet" and importlib.util.find_spec("torch_pruning") is not None:
        t0 = time.perf_counter()
        tp_scores = torch_pruning_scores(model, units, (z[:2], torch.tensor([1, 1]), y[:2]))
        methods["torch-pruning group magnitude"] = (tp_scores, time.perf_counter() - t0)
    results: dict[str, Any] = {"dense": {"class acc": judge.accuracy(dense, y),
                                         "feature FD": judge.frechet(dense, x_te)}}  # fmt: skip
    report_rows.append({"model": model_name, "sparsity": 0.0, "of": budget, "method": "dense",
                        "params": total, **results["dense"]})  # fmt: skip
    samples = {"dense": dense}
    for sp in sparsities:
        for name, (scores, secs) in methods.items():
            keep = select(scores, sp, total_params=of_total)
            out, m = _evaluate(model, units, keep, sampler, fn, z, cond, y, dense, judge, x_te)
            pruned = total - sum(u.params_per_unit * int((~keep[u.key]).sum()) for u in units)
            row = {"model": model_name, "sparsity": sp, "of": budget, "method": name,
                   "params": pruned, **m, "score time s": secs}  # fmt: skip
            report_rows.append(row)
            results[(name, sp)] = row
            if sp == sparsities[0]:
                samples[name] = out
        rand = []
        for r in range(n_random):
            keep = select(random_scores(units, seed=seed * 100 + r), sp, total_params=of_total)
            rand.append(
                _evaluate(model, units, keep, sampler, fn, z, cond, y, dense, judge, x_te)[1]
            )
        row = {"model": model_name, "sparsity": sp, "of": budget,
               "method": f"random (mean of {n_random})",
               **{k: statistics.fmean(r[k] for r in rand) for k in rand[0]}}  # fmt: skip
        report_rows.append(row)
        results[("random", sp)] = row
    results.update(samples=samples, y=y, history=e2e.history, units=units, model=model, e2e=e2e,
                   total=total, sampler=sampler, z=z, cond=cond, dense_samples=dense, judge=judge,
                   data=(x_tr, y_tr, x_te, y_te), encode=encode, sched_name=sched_name,
                   model_name=model_name, of_total=of_total)  # fmt: skip
    return results


def _recovery_rows(res: dict, sparsity: float, *, quick: bool, seed: int, progress: bool):
    """Prune the DiT with EcoDiff's scores at a high sparsity, materialise it, and fine-tune it
    with LoRA (peft) on the training digits with the diffusion loss; quality before and after."""
    from iclr26.ecodiff.recover import denoising_loss, lora_recover

    model, units, sampler = res["model"], res["units"], res["sampler"]
    z, cond, y, judge = res["z"], res["cond"], res["y"], res["judge"]
    dense = res["dense_samples"]
    x_tr, y_tr, x_te, y_te = res["data"]
    sched = toy_scheduler(res["sched_name"])
    encode = res["encode"]
    keep = select(res["e2e"], sparsity, total_params=res["of_total"])
    pruned = materialize(model, units, keep)
    steps, batch = (60, 32) if quick else (200, 64)
    rows = []
    for name, m in (("dense", model), ("EcoDiff, no retraining", pruned)):
        with torch.no_grad():
            out = sampler.sample(diffusers_model_fn(m), z, cond)
        metrics = _sample_metrics(out, dense, y, judge, x_te)
        if m is model:  # distance of the dense model to itself: not a measurement
            metrics.update({"MSE to dense": None, "PSNR dB": None})
        rows.append({"model": name, "params": count_params(m)["total"],
                     "held-out denoising loss": denoising_loss(m, sched, x_te, encode(y_te),
                                                               seed=seed),
                     **metrics})  # fmt: skip
    t0 = time.perf_counter()
    rec, losses = lora_recover(pruned, sched, x_tr, encode(y_tr), steps=steps, batch_size=batch,
                               rank=8, lr=1e-3, seed=seed, progress=progress)  # fmt: skip
    secs = time.perf_counter() - t0
    with torch.no_grad():
        out = sampler.sample(diffusers_model_fn(rec), z, cond)
    rows.append({"model": f"EcoDiff + LoRA (r=8, {steps} steps x {batch})",
                 "params": count_params(rec)["total"],
                 "held-out denoising loss": denoising_loss(rec, sched, x_te, encode(y_te),
                                                           seed=seed),
                 **_sample_metrics(out, dense, y, judge, x_te), "recovery s": secs,
                 "train loss first/last 10 steps": f"{statistics.fmean(losses[:10]):.4g} / "
                                                   f"{statistics.fmean(losses[-10:]):.4g}"})  # fmt: skip
    return rows, {"LoRA recovered": out}


def _memory_rows(steps_list, seed: int) -> list[dict]:
    model = load_toy("ddpm")
    units = find_prunable_units(model)
    fn = diffusers_model_fn(model)
    rows = []
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(4, 1, 8, 8, generator=gen)
    y = torch.arange(4)
    masked = MaskedModel(model, units)
    for p in model.parameters():
        p.requires_grad_(False)
    with masked:
        masked.resample_noise(torch.Generator().manual_seed(seed))
        for T in steps_list:
            sampler = from_scheduler(toy_scheduler("ddpm"), T)
            row = {"T": T}
            for ck in (True, False):
                meter = SavedTensorMeter()
                trajectory_grad(lambda zz, k, s=sampler: s.step(fn, zz, k, y), z, T,
                                lambda zz: zz.pow(2).mean(), list(masked.parameters()),
                                checkpoint=ck, meter=meter)  # fmt: skip
                row["checkpointed MiB" if ck else "BPTT MiB"] = meter.peak / 2**20
            rows.append(row)
    for p in model.parameters():
        p.requires_grad_(True)
    return rows


def _grid_figure(res: dict, title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = res["samples"]
    y = res["y"]
    idx = [int((y == c).nonzero()[0]) for c in range(10)]
    fig, axes = plt.subplots(len(samples), 10, figsize=(10, 1.1 * len(samples) + 0.4))
    for r, (name, s) in enumerate(samples.items()):
        for c, i in enumerate(idx):
            ax = axes[r, c]
            ax.imshow(s[i, 0].clamp(-1, 1).numpy(), cmap="gray_r", vmin=-1, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name.split(" (")[0], rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle(title, fontsize=10)
    return fig


def _memory_figure(rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    Ts = [r["T"] for r in rows]
    ax.plot(Ts, [r["BPTT MiB"] for r in rows], "o-", label="BPTT (naive)")
    ax.plot(Ts, [r["checkpointed MiB"] for r in rows], "s-", label="time-step checkpointing")
    ax.set_xlabel("sampling steps T")
    ax.set_ylabel("peak saved-for-backward MiB")
    ax.legend()
    ax.set_title("Memory of one mask-gradient evaluation (batch 4)")
    fig.tight_layout()
    return fig


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True):
    """The headline experiment at toy scale (E1, E2, LoRA recovery; the default run adds E4, the
    flow regime and E5, the U-Net repeat of E1)."""
    from iclr26.shared import Report

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    sparsities = [0.2] if quick else [0.2, 0.1, 0.3, 0.4]
    regimes = ["ddpm"] if quick else ["ddpm", "flow", "unet"]
    unet_sparsity = 0.3
    recovery_sparsity = 0.4
    report = Report(PACKAGE, "reproduce", CLAIM, seed=seed, backends=["torch", "diffusers"],
                    config={"quick": quick, "sparsities": sparsities, "regimes": regimes,
                            "unet_sparsity_of_prunable": unet_sparsity,
                            "recovery_sparsity": recovery_sparsity,
                            "mask_learning": vars(toy_config(quick, seed))})  # fmt: skip
    rows: list[dict] = []
    results = {}
    for regime in regimes:
        results[regime] = _compare(regime, quick=quick, seed=seed, progress=progress,
                                   sparsities=[unet_sparsity] if regime == "unet" else sparsities,
                                   report_rows=rows, n_random=2 if quick else 3)  # fmt: skip
    report.add_table("E1/E4/E5: equal-sparsity quality, no retraining (sparsity = fraction of "
                     "the parameters named in 'of' removed)", rows,
                     ["model", "sparsity", "of", "method", "params", "MSE to dense", "PSNR dB",
                      "class acc", "feature FD", "score time s"])  # fmt: skip
    for regime, res in results.items():
        sp = unet_sparsity if regime == "unet" else 0.2
        tag = f"{res['model_name']}, {sp:.0%}" + (" of prunable" if regime == "unet" else "")
        e = res[("EcoDiff (end-to-end)", sp)]
        others = ["EcoDiff-local (per-step)", "Taylor (Diff-Pruning criterion)", "magnitude"]
        others += ["torch-pruning group magnitude", "random"]
        for other in others:
            if (other, sp) not in res:  # torch-pruning is an optional extra
                continue
            o = res[(other, sp)]
            report.check(
                f"{tag}: EcoDiff MSE to dense < {other.split(' (')[0]}",
                e["MSE to dense"] < o["MSE to dense"],
                f"{e['MSE to dense']:.4g} vs {o['MSE to dense']:.4g}",
            )
        report.metric(f"{regime} MSE@{sp:.0%} EcoDiff", e["MSE to dense"])
        report.metric(f"{regime} MSE@{sp:.0%} magnitude", res[("magnitude", sp)]["MSE to dense"])
        report.metric(f"{regime} acc@{sp:.0%} EcoDiff (dense {res['dense']['class acc']:.3f})",
                      e["class acc"])  # fmt: skip
        report.add_figure(f"samples_{regime}", _grid_figure(
            res, f"{tag}: dense vs pruned (same noise, same class)"))  # fmt: skip
    if importlib.util.find_spec("peft") is not None:
        rec_rows, _ = _recovery_rows(results["ddpm"], recovery_sparsity, quick=quick,
                                               seed=seed, progress=progress)  # fmt: skip
        report.add_table(f"LoRA recovery (peft) of the DiT ddpm pruned by EcoDiff at "
                         f"{recovery_sparsity:.0%} of all parameters", rec_rows)  # fmt: skip
        before, after = rec_rows[1], rec_rows[2]
        report.check(
            "LoRA recovery lowers the held-out denoising loss",
            after["held-out denoising loss"] < before["held-out denoising loss"],
            f"{before['held-out denoising loss']:.4g} -> {after['held-out denoising loss']:.4g}",
        )
        report.check(
            "LoRA recovery brings the samples closer to the dense model's (MSE)",
            after["MSE to dense"] < before["MSE to dense"],
            f"{before['MSE to dense']:.4g} -> {after['MSE to dense']:.4g}",
        )
        report.metric("recovery MSE before", before["MSE to dense"])
        report.metric("recovery MSE after", after["MSE to dense"])
    else:
        report.note("LoRA recovery skipped: install the [lora] extra (peft).")
    mem = _memory_rows([5, 10, 20] if quick else [5, 10, 20, 40], seed)
    report.add_table("E2: peak saved-for-backward memory vs sampling steps", mem)
    ck = mem[-1]["checkpointed MiB"] / mem[0]["checkpointed MiB"]
    naive = mem[-1]["BPTT MiB"] / mem[0]["BPTT MiB"]
    span = mem[-1]["T"] / mem[0]["T"]
    report.check(f"checkpointed memory at T={mem[-1]['T']} within 1.5x of T={mem[0]['T']}",
                 ck < 1.5, f"ratio {ck:.3f}")  # fmt: skip
    report.check(
        "BPTT memory grows ~linearly in T",
        naive > 0.8 * span,
        f"ratio {naive:.2f} for {span:g}x steps",
    )
    report.metric("memory ratio checkpointed (T max/min)", ck)
    report.metric("memory ratio BPTT (T max/min)", naive)
    report.add_figure("memory_vs_steps", _memory_figure(mem))
    report.note("Toy scale: a 0.39 M-parameter diffusers DiTTransformer2DModel trained here on "
                "8x8 scikit-learn digits; 'feature FD' is a Frechet distance in the hidden layer of "
                "a small digits MLP, not FID. MSE/PSNR compare pruned and dense final samples from "
                "the same noise and class.")  # fmt: skip
    report.note("Mask learning uses the official DiT config's beta=1, L2 regulariser, lr 0.5, "
                "but init logit 3 (not 10) and one calibration batch per update, so that a few "
                "CPU-minutes of training suffice.")  # fmt: skip
    return report


def bench(*, quick: bool = False, seed: int = 0, progress: bool = True):
    """Memory and cost of time-step checkpointing vs BPTT and latency of the materialised
    pruned model."""
    from iclr26.shared import Report

    torch.set_num_threads(1)
    report = Report(PACKAGE, "bench", "Time-step checkpointing keeps saved-activation memory flat "
                    "in the number of steps (T=40 within 1.5x of T=5), costs about one extra "
                    "forward per step (<= 2.2x BPTT wall time), and the materialised 20 %-sparse model runs "
                    "faster than the dense one (<= 0.85x latency).", seed=seed,
                    backends=["torch", "diffusers"], config={"quick": quick})  # fmt: skip
    model = load_toy("ddpm")
    units = find_prunable_units(model)
    fn = diffusers_model_fn(model)
    T = 10
    sampler = from_scheduler(toy_scheduler("ddpm"), T)
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(4, 1, 8, 8, generator=gen)
    y = torch.arange(4)
    masked = MaskedModel(model, units)
    for p in model.parameters():
        p.requires_grad_(False)
    reps = 3 if quick else 7
    times: dict[bool, list[float]] = {True: [], False: []}
    with masked:
        masked.resample_noise(torch.Generator().manual_seed(seed))
        for _ in range(reps):
            for ck in (True, False):
                t0 = time.perf_counter()
                trajectory_grad(lambda zz, k: sampler.step(fn, zz, k, y), z, T,
                                lambda zz: zz.pow(2).mean(), list(masked.parameters()),
                                checkpoint=ck)  # fmt: skip
                times[ck].append(time.perf_counter() - t0)
    for p in model.parameters():
        p.requires_grad_(True)
    ratios = [a / b for a, b in zip(times[True], times[False], strict=True)]
    rows = [{"quantity": "wall per mask gradient, checkpointed / BPTT (T=10, batch 4)",
             "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
             "repeats": reps}]  # fmt: skip
    # latency of the materialised model (EcoDiff scores from a short run)
    total = count_params(model)["total"]
    cal = _calibration(8, 4, seed + 1)
    scores = learn_masks(
        model, sampler, cal, units=units, config=toy_config(True, seed), progress=progress
    )
    lat_rows = []
    batch = torch.randn(64, 1, 8, 8, generator=gen)
    yb = torch.arange(64) % 10
    tb = torch.full((64,), 500.0)
    for sp in (0.2, 0.4):
        keep = select(scores, sp, total_params=total)
        pruned = materialize(model, units, keep)
        fp = diffusers_model_fn(pruned)
        lat = []
        with torch.no_grad():
            for _ in range(reps * 3):
                t0 = time.perf_counter()
                fn(batch, tb, yb)
                td = time.perf_counter() - t0
                t0 = time.perf_counter()
                fp(batch, tb, yb)
                lat.append((time.perf_counter() - t0) / td)
        lat_rows.append({"sparsity": sp, "params": count_params(pruned)["total"], "dense params": total,
                         "MACs": count_macs(fp, batch, tb, yb),
                         "dense MACs": count_macs(fn, batch, tb, yb),
                         "latency ratio median": statistics.median(lat), "min": min(lat),
                         "max": max(lat)})  # fmt: skip
    rows.append({"quantity": "latency pruned / dense at 20 % (batch 64, one forward)",
                 "median": lat_rows[0]["latency ratio median"], "min": lat_rows[0]["min"],
                 "max": lat_rows[0]["max"], "repeats": reps * 3})  # fmt: skip
    report.add_table("Ratios (same run, interleaved)", rows)
    report.add_table("Materialised models", lat_rows)
    mem = _memory_rows([5, 10, 20, 40], seed)
    report.add_table("Peak saved-for-backward memory of one mask gradient vs sampling steps "
                     "(batch 4)", mem)  # fmt: skip
    ck = mem[-1]["checkpointed MiB"] / mem[0]["checkpointed MiB"]
    naive = mem[-1]["BPTT MiB"] / mem[0]["BPTT MiB"]
    report.check("checkpointed memory at T=40 within 1.5x of T=5", ck <= 1.5, f"ratio {ck:.3f}")
    report.check("BPTT memory grows ~linearly in T (T=40 vs T=5)", naive > 0.8 * 8,
                 f"ratio {naive:.2f} for 8x steps")  # fmt: skip
    report.metric("memory ratio checkpointed T=40/T=5", ck)
    report.metric("memory ratio BPTT T=40/T=5", naive)
    report.check(
        "checkpointed wall time <= 2.2x BPTT",
        rows[0]["median"] <= 2.2,
        f"median {rows[0]['median']:.2f}",
    )
    report.check(
        "20 % pruned latency <= 0.85x dense",
        rows[1]["median"] <= 0.85,
        f"median {rows[1]['median']:.2f}",
    )
    report.metric("checkpoint/BPTT wall", rows[0]["median"])
    report.metric("pruned/dense latency @20%", rows[1]["median"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.boxplot([ratios, [lat_rows[0]["latency ratio median"]]])
    ax.set_xticks([1, 2], ["ckpt / BPTT wall", "pruned / dense latency"])
    ax.axhline(1.0, color="gray", lw=0.5)
    fig.tight_layout()
    report.add_figure("ratios", fig)
    return report
