"""``reproduce`` and ``bench`` of SAFA-SNN at CPU scale.

reproduce — E1: scikit-learn digits FSCIL, 5 base classes then 5 sessions of 1-way 5-shot, a
spiking MLP 64-128-64; E2: 60 font-rendered glyphs, 30 base classes then 6 sessions of 5-way
5-shot, a spiking conv net; E3: synthetic event streams, 6 base classes then 5 sessions of 1-way
1-shot. One base model per seed (T steps, LocalZO spikes) shared by every method; accuracy per
session, PD, base/novel/harmonic mean, paired tests across seeds, energy.

bench — multi-step LIF MLP (784-512-512-10, T = 8, batch 128) forward+backward: this package's
fused LIF against its own autograd loop, snnTorch ``Leaky`` and spikingjelly ``LIFNode`` (torch
backend), with numerical equivalence of outputs and gradients checked in the same run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy import stats
from torch import nn

from iclr26.safa_snn.data import load_digits_fscil, load_events_fscil, load_glyphs_fscil
from iclr26.safa_snn.energy import E_AC, E_MAC, ann_twin_energy, count_sops
from iclr26.safa_snn.fscil import (
    FSCILData,
    FSCILProtocol,
    FSCILResult,
    make_sessions,
    run_fscil,
)
from iclr26.safa_snn.methods import SAFA, TEENSNN, FineTuneSNN, PrototypeSNN, train_base
from iclr26.safa_snn.models import SpikingConvNet, SpikingMLP
from iclr26.safa_snn.neurons import LIF
from iclr26.shared import Report
from iclr26.shared import progress as progress_bar

__all__ = ["bench", "e1_digits", "e2_glyphs", "e3_events", "reproduce"]

PACKAGE = "iclr26-safa-snn"
BACKENDS = ("torch", "scikit-learn", "scipy", "snntorch", "spikingjelly")
CLAIM = (
    "SAFA forgets far less than a fine-tuned SNN, is at least as accurate as a prototype SNN, "
    "and costs less energy per incremental session than fine-tuning."
)


def _methods(seed: int, full: bool = True) -> list[Any]:
    """Every method and ablation (``full``), or the five the checks and paired tests need."""
    core = [
        FineTuneSNN(epochs=20, lr=1e-3, seed=seed),
        PrototypeSNN(),
        SAFA(alpha=0.1, name="SAFA (α=0.1)"),
        SAFA(alpha=0.1, regulate=False, name="SAFA w/o regulation (released code)"),
        SAFA(alpha=0.1, project=False, name="SAFA w/o projection"),
    ]
    if not full:
        return core
    return [
        *core[:2],
        TEENSNN(),
        core[2],
        SAFA(alpha=0.5, name="SAFA (α=0.5)"),
        *core[3:],
        SAFA(alpha=0.1, homeostatic=True, name="SAFA homeostatic sign"),
    ]


ANN_TWIN = "ANN twin (ReLU, trained; prototype)"


def _run_all(
    data, protocol: FSCILProtocol, model: nn.Module, seed: int, epochs: int, progress: bool,
    energy_x: torch.Tensor, full: bool = True, batch_size: int = 64,
    ann: tuple[nn.Module, FSCILData] | None = None,
) -> tuple[list[FSCILResult], dict[str, float]]:  # fmt: skip
    """Every method from one trained base model; then, with ``ann`` = (model, data), the ANN
    twin trained the same way (same loss, optimiser, epochs and seed) and run as a prototype
    classifier through the same protocol, its energy counted by the same counter."""
    s0 = make_sessions(data, protocol)[0]
    train_base(
        model, data.x_train[s0.train_idx], data.y_train[s0.train_idx], s0.new_classes,
        epochs=epochs, seed=seed, progress=progress, batch_size=batch_size,
    )  # fmt: skip
    results = [run_fscil(m, data, protocol, model, seed=seed) for m in _methods(seed, full)]
    rep = count_sops(_FeatureNet(model), energy_x)
    energy = {"ann_twin_J": ann_twin_energy(rep), "snn_J": E_MAC * rep.macs + E_AC * rep.sops}
    if ann is not None:
        ann_model, ann_data = ann
        torch.manual_seed(seed)
        train_base(
            ann_model, ann_data.x_train[s0.train_idx], ann_data.y_train[s0.train_idx],
            s0.new_classes, epochs=epochs, seed=seed, progress=progress, batch_size=batch_size,
        )  # fmt: skip
        twin = PrototypeSNN()
        twin.name = ANN_TWIN
        results.append(run_fscil(twin, ann_data, protocol, ann_model, seed=seed))
    return results, energy


def e1_digits(
    seed: int, *, epochs: int = 40, progress: bool = False
) -> tuple[list[FSCILResult], dict[str, float]]:
    """One seed of E1: train the base model once, run every method from a copy of it."""
    data = load_digits_fscil(test_fraction=0.5, seed=seed)
    protocol = FSCILProtocol(base_classes=5, way=1, shot=5, sessions=5, seed=seed)
    torch.manual_seed(seed)
    model = SpikingMLP(
        64, hidden=(128,), feat_dim=64, T=4, num_classes=5, spike="zo", mask_seed=seed
    )
    twin = SpikingMLP(64, hidden=(128,), feat_dim=64, T=1, num_classes=5, neuron="relu")
    return _run_all(
        data, protocol, model, seed, epochs, progress, data.x_test[:128], ann=(twin, data)
    )


def e2_glyphs(
    seed: int, *, epochs: int = 8, size: int = 20, widths: tuple[int, ...] = (8, 16),
    copies: int = 1, full: bool = False, progress: bool = False,
) -> tuple[list[FSCILResult], dict[str, float]]:  # fmt: skip
    """One seed of E2: 60 font-rendered characters, 30 base classes then 6 sessions of 5-way
    5-shot (the CIFAR-100 60/5/5 shape), test fonts unseen in training, a spiking conv net
    (T = 4) on ``size`` × ``size`` glyphs."""
    data = load_glyphs_fscil(60, size=size, copies=copies, seed=seed)
    protocol = FSCILProtocol(base_classes=30, way=5, shot=5, sessions=6, seed=seed)
    torch.manual_seed(seed)
    model = SpikingConvNet(
        1, img_size=size, T=4, widths=widths, feat_dim=128, num_classes=30, spike="zo",
        mask_seed=seed,
    )  # fmt: skip
    twin = SpikingConvNet(
        1, img_size=size, T=1, widths=widths, feat_dim=128, num_classes=30, neuron="relu"
    )
    return _run_all(
        data, protocol, model, seed, epochs, progress, data.x_test[:64], full, 16, (twin, data)
    )


def e3_events(
    seed: int, *, epochs: int = 8, size: int = 16, widths: tuple[int, ...] = (8, 16),
    per_class: tuple[int, int] = (30, 15), full: bool = False, progress: bool = False,
) -> tuple[list[FSCILResult], dict[str, float]]:  # fmt: skip
    """One seed of E3: synthetic DVS-like event streams (11 classes, T = 8 frames, 2 polarities,
    ``size`` × ``size``; ``per_class`` train/test samples), 6 base classes then 5 sessions of
    1-way 1-shot (the DVS128 Gesture protocol), a spiking conv net on the frames."""
    data = load_events_fscil(
        11, T=8, size=size, train_per_class=per_class[0], test_per_class=per_class[1], seed=seed
    )
    protocol = FSCILProtocol(base_classes=6, way=1, shot=1, sessions=5, seed=seed)
    torch.manual_seed(seed)
    model = SpikingConvNet(
        2, img_size=size, T=8, widths=widths, feat_dim=128, num_classes=6, spike="zo",
        mask_seed=seed,
    )  # fmt: skip
    # the ANN twin sees the 8 ON/OFF frames stacked as 16 input channels, in one pass
    stacked = FSCILData(
        data.x_train.flatten(1, 2), data.y_train, data.x_test.flatten(1, 2), data.y_test,
        data.classes,
    )  # fmt: skip
    twin = SpikingConvNet(
        16, img_size=size, T=1, widths=widths, feat_dim=128, num_classes=6, neuron="relu"
    )
    return _run_all(
        data, protocol, model, seed, epochs, progress, data.x_test[:64], full, 16,
        (twin, stacked),
    )  # fmt: skip


class _FeatureNet(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model, self.T = model, model.T
        self.train(model.training)  # count_sops restores this wrapper's mode onto the model

    def forward(self, x):
        return self.model.features(x)


def _ms(v) -> str:
    v = np.asarray(v, dtype=float)
    return f"{np.nanmean(v):.3f} ± {np.nanstd(v, ddof=1) if v.size > 1 else 0.0:.3f}"


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    d = a - b
    out = {"mean diff": float(d.mean()), "t p": math.nan, "wilcoxon p": math.nan}
    if d.size > 1 and np.any(d != 0):
        out["t p"] = float(stats.ttest_rel(a, b).pvalue)
        out["wilcoxon p"] = float(stats.wilcoxon(a, b).pvalue)
    return out


EXPERIMENTS = {
    "E1": ("digits", "digits 5 + 5×1-way 5-shot", "SpikingMLP 64-128-64, T=4"),
    "E2": ("glyphs", "glyphs 30 + 6×5-way 5-shot, test fonts unseen", "SpikingConvNet 8-16, T=4"),
    "E3": ("events", "synthetic events 6 + 5×1-way 1-shot", "SpikingConvNet 8-16, 2 polarities, T=8 frames"),
}  # fmt: skip


def _fscil_tables(
    report: Report, tag: str, runs: dict[str, list[FSCILResult]], ann: list[dict[str, float]]
) -> None:
    """The accuracy, per-session and energy tables of one experiment, every method (ANN twin
    included), as ``reproduce`` and ``bench`` print them."""
    name = EXPERIMENTS[tag][0]
    names = list(runs)
    n_seeds = len(next(iter(runs.values())))
    last = {n: np.array([r.acc[-1] for r in runs[n]]) for n in names}
    pd = {n: np.array([r.pd for r in runs[n]]) for n in names}
    rows = []
    for n in names:
        rs = runs[n]
        rows.append(
            {
                "method": n,
                "session 0": _ms([r.acc[0] for r in rs]),
                "last session": _ms(last[n]),
                "PD": _ms(pd[n]),
                "base (last)": _ms([r.base_acc[-1] for r in rs]),
                "novel (last)": _ms([r.novel_acc[-1] for r in rs]),
                "hmean (last)": _ms([r.hmean[-1] for r in rs]),
            }
        )
    report.add_table(f"{tag} {name} FSCIL accuracy (mean ± sd over {n_seeds} seeds)", rows)
    sess_rows = []
    for n in names:
        acc = np.array([r.acc for r in runs[n]])
        sess_rows.append({"method": n, **{f"s{i}": f"{m:.3f}" for i, m in enumerate(acc.mean(0))}})
    report.add_table(f"{tag} accuracy per session (mean over seeds)", sess_rows)

    e_rows = []
    for n in names:
        rs = runs[n]
        e_rows.append(
            {
                "method": n,
                "inference nJ/sample (s0)": f"{np.mean([r.inference_energy[0] for r in rs]) * 1e9:.2f}",
                "inference nJ/sample (last)": f"{np.mean([r.inference_energy[-1] for r in rs]) * 1e9:.2f}",
                "SOPs/sample (last)": f"{np.mean([r.sops[-1] for r in rs]):.0f}",
                "µJ per incremental session": f"{np.mean([np.mean(r.session_energy[1:]) for r in rs]) * 1e6:.3f}",
                "mean θ (last)": (
                    "" if n == ANN_TWIN else f"{np.mean([r.thresholds[-1] for r in rs]):.4f}"
                ),
            }
        )
    e_rows.append(
        {
            "method": "ANN twin, analytic (dense MACs of the SNN backbone / T)",
            "inference nJ/sample (s0)": f"{np.mean([a['ann_twin_J'] for a in ann]) * 1e9:.2f}",
            "inference nJ/sample (last)": "",
            "SOPs/sample (last)": "0",
            "µJ per incremental session": "",
            "mean θ (last)": "",
        }
    )
    report.add_table(
        f"{tag} energy (E_MAC {E_MAC * 1e12:.1f} pJ, E_AC {E_AC * 1e12:.1f} pJ; fine-tune backward = 2× dense MACs)",
        e_rows,
    )


def _summarise(
    report: Report, tag: str, runs: dict[str, list[FSCILResult]], ann: list[dict[str, float]]
) -> None:
    """Tables, paired tests, checks, metrics and a figure for one experiment."""
    _fscil_tables(report, tag, runs, ann)
    name = EXPERIMENTS[tag][0]
    names = list(runs)
    n_seeds = len(next(iter(runs.values())))
    last = {n: np.array([r.acc[-1] for r in runs[n]]) for n in names}
    pd = {n: np.array([r.pd for r in runs[n]]) for n in names}
    safa, proto, ft, released = (
        "SAFA (α=0.1)", "prototype", "fine-tune", "SAFA w/o regulation (released code)",
    )  # fmt: skip
    tests = []
    for a, b in ((safa, proto), (safa, released), (safa, ft), ("SAFA w/o projection", proto)):
        if a not in last or b not in last:
            continue
        t = _paired(last[a], last[b])
        tests.append(
            {"comparison (last-session acc)": f"{a} − {b}", **{k: f"{v:.4f}" for k, v in t.items()}}
        )
    report.add_table(f"{tag} paired tests across seeds", tests)

    gap = float(last[safa].mean() - last[ft].mean())
    report.check(
        f"{tag} {name}: SAFA forgets far less than fine-tuning (last-session acc > +20 pp, smaller PD)",
        gap > 0.20 and pd[safa].mean() < pd[ft].mean(),
        f"last acc {last[safa].mean():.3f} vs {last[ft].mean():.3f} ({gap * 100:+.1f} pp); "
        f"PD {pd[safa].mean():.3f} vs {pd[ft].mean():.3f}",
    )
    diff = float(last[safa].mean() - last[proto].mean())
    report.check(
        f"{tag} {name}: SAFA is non-inferior to the prototype SNN (mean last-session diff ≥ −2 pp)",
        diff >= -0.02,
        f"diff {diff * 100:+.2f} pp",
    )
    e_safa = np.mean([np.mean(r.session_energy[1:]) for r in runs[safa]])
    e_ft = np.mean([np.mean(r.session_energy[1:]) for r in runs[ft]])
    e_pr = np.mean([np.mean(r.session_energy[1:]) for r in runs[proto]])
    report.check(
        f"{tag} {name}: SAFA's incremental session costs less energy than fine-tuning",
        e_safa < e_ft,
        f"{e_safa * 1e6:.3f} µJ vs {e_ft * 1e6:.3f} µJ ({e_ft / e_safa:.0f}×); prototype {e_pr * 1e6:.3f} µJ",
    )
    sup = _paired(last[safa], last[proto])
    # the spec's rule: a Wilcoxon test, or a paired t-test over at least 10 seeds
    superior = sup["mean diff"] > 0 and (
        sup["wilcoxon p"] < 0.05 or (sup["t p"] < 0.05 and n_seeds >= 10)
    )
    report.note(
        f"{tag} {name}: superiority over the prototype SNN {'is' if superior else 'is NOT'} "
        f"supported: mean last-session diff {sup['mean diff'] * 100:+.2f} pp, paired t p = "
        f"{sup['t p']:.3g}, Wilcoxon p = {sup['wilcoxon p']:.3g} over {n_seeds} seeds."
    )
    if ANN_TWIN in runs:
        tw = runs[ANN_TWIN]
        e_tw = np.mean([r.inference_energy[-1] for r in tw])
        e_sn = np.mean([r.inference_energy[-1] for r in runs[safa]])
        report.note(
            f"{tag} {name}: the trained ANN twin (same layers with ReLU, one pass, same base "
            f"training, prototype classifier) reaches last-session acc {last[ANN_TWIN].mean():.3f} "
            f"(session 0 {np.mean([r.acc[0] for r in tw]):.3f}) vs SAFA {last[safa].mean():.3f}, "
            f"at {e_tw * 1e9:.2f} nJ per inference vs SAFA's {e_sn * 1e9:.2f} nJ "
            f"({e_sn / e_tw:.2f}×)."
        )
        report.metric(f"{tag} ANN twin last acc", float(last[ANN_TWIN].mean()))
        report.metric(f"{tag} ANN twin nJ per inference", float(e_tw * 1e9))
    report.metric(f"{tag} SAFA last acc", float(last[safa].mean()))
    report.metric(f"{tag} prototype last acc", float(last[proto].mean()))
    report.metric(f"{tag} fine-tune last acc", float(last[ft].mean()))
    report.metric(f"{tag} SAFA − prototype (pp)", diff * 100)
    report.metric(f"{tag} SAFA vs prototype paired t p", sup["t p"])

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for n in names:
        acc = np.array([r.acc for r in runs[n]])
        ax[0].errorbar(np.arange(acc.shape[1]), acc.mean(0), yerr=acc.std(0), label=n, capsize=2)
    ax[0].set(xlabel="session", ylabel="top-1 accuracy (seen classes)", title=f"{tag} {name} FSCIL")
    ax[0].legend(fontsize=7)
    en = [np.mean([np.mean(r.session_energy[1:]) for r in runs[n]]) * 1e6 for n in names]
    ax[1].barh(names, en)
    ax[1].set(xscale="log", xlabel="µJ per incremental session", title="Incremental-session energy")
    ax[1].tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    report.add_figure(f"{tag.lower()}_{name}", fig)


def reproduce(*, quick: bool = False, seed: int = 0, progress: bool = True) -> Report:
    """E1 (digits), E2 (glyphs) and E3 (synthetic events) over several seeds.

    Default: 10 / 5 / 5 seeds (E1 runs every method and ablation; E2 and E3 the five the checks
    and paired tests need); ``quick``: 2 / 2 / 2 seeds, shorter base training, smaller images.
    """
    torch.set_num_threads(1)  # tiny ops: one thread is faster on a shared 2-core machine
    plan = {  # tag: (runner, seeds, base epochs, extra kwargs)
        "E1": (e1_digits, 2 if quick else 10, 15 if quick else 40, {}),
        "E2": (e2_glyphs, 2 if quick else 5, 4 if quick else 8,
               {"size": 16, "copies": 1} if quick else {"size": 20, "copies": 1}),
        "E3": (e3_events, 2 if quick else 5, 6 if quick else 8,
               {"size": 16, "per_class": (20, 10)} if quick else {"size": 16, "per_class": (30, 15)}),
    }  # fmt: skip
    config = {"quick": quick}
    for tag, (_, n, ep, kw) in plan.items():
        _, protocol, model = EXPERIMENTS[tag]
        config[tag] = {"seeds": [seed + i for i in range(n)], "base_epochs": ep,
                       "protocol": protocol, "model": f"{model}, LocalZO", **kw}  # fmt: skip
    report = Report(PACKAGE, "reproduce", CLAIM, seed=seed, backends=BACKENDS, config=config)
    for tag, (runner, n, ep, kw) in plan.items():
        runs: dict[str, list[FSCILResult]] = {}
        ann: list[dict[str, float]] = []
        for s in progress_bar(range(seed, seed + n), desc=f"{tag} seeds", enabled=progress):
            results, a = runner(s, epochs=ep, **kw)
            ann.append(a)
            for r in results:
                runs.setdefault(r.method, []).append(r)
        _summarise(report, tag, runs, ann)
    report.note(
        "The released code never runs the threshold update (its session counter is never set); "
        "'SAFA w/o regulation (released code)' is that behaviour, 'SAFA (α=0.1)' runs the "
        "published rule once per session on the support set."
    )
    return report


# --------------------------------------------------------------------------------------------
# bench


def _mlp_layers(seed: int, sizes=(784, 512, 512, 10)) -> nn.ModuleList:
    torch.manual_seed(seed)
    return nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))


def _make_ours(
    layers: nn.ModuleList, spike: str, fused: bool = True, loop: str = "fused"
) -> Callable:
    from iclr26.safa_snn.neurons import lif_reference

    neurons = [
        LIF(layer.out_features, spike=spike, learn_threshold=False, loop=loop)
        for layer in layers[:-1]
    ]

    def run(x_bt):  # x [B, T, 784]
        h = x_bt
        for layer, n in zip(layers[:-1], neurons, strict=True):
            h = layer(h)
            h = n(h) if fused else lif_reference(h, 1.0, 0.5, spike)
        return layers[-1](h).mean(1)

    return run


def _make_snntorch(layers: nn.ModuleList) -> Callable:
    import snntorch
    from snntorch import surrogate

    neurons = [
        snntorch.Leaky(
            beta=0.5, threshold=1.0, reset_mechanism="zero", reset_delay=False,
            spike_grad=surrogate.atan(alpha=2.0),
        )
        for _ in layers[:-1]
    ]  # fmt: skip

    def run(x_tb):  # x [T, B, 784]
        mems = [None] * len(neurons)
        outs = []
        for t in range(x_tb.shape[0]):
            h = x_tb[t]
            for i, (layer, n) in enumerate(zip(layers[:-1], neurons, strict=True)):
                if mems[i] is None:
                    mems[i] = torch.zeros(h.shape[0], layer.out_features)
                h, mems[i] = n(layer(h), mems[i])
            outs.append(layers[-1](h))
        return torch.stack(outs).mean(0)

    return run


def _make_spikingjelly(layers: nn.ModuleList) -> Callable:
    from spikingjelly.activation_based import functional, neuron, surrogate

    neurons = nn.ModuleList(
        neuron.LIFNode(
            tau=2.0, decay_input=False, v_threshold=1.0, v_reset=0.0,
            surrogate_function=surrogate.ATan(alpha=2.0), detach_reset=False,
            step_mode="m",
        )
        for _ in layers[:-1]
    )  # fmt: skip

    def run(x_tb):  # x [T, B, 784]
        functional.reset_net(neurons)
        h = x_tb
        for layer, n in zip(layers[:-1], neurons, strict=True):
            h = n(layer(h))
        return layers[-1](h).mean(0)

    return run


def _compile_comparison(
    report: Report, layers: nn.ModuleList, x_bt: torch.Tensor, repeats: int, progress: bool
) -> None:
    """Compiled (torch.compile / inductor) vs fused eager time loop, interleaved repeats."""
    import time

    B, T = x_bt.shape[:2]
    g = torch.Generator().manual_seed(1)
    x_lif = (torch.rand(B, T, 512, generator=g) * 1.2).requires_grad_(True)

    def lif_step(loop: str, spike: str) -> Callable:
        lif = LIF(512, spike=spike, learn_threshold=False, loop=loop)

        def run():
            x_lif.grad = None
            out = lif(x_lif)
            out.sum().backward()
            return out.detach()

        return run

    def mlp_step(loop: str, spike: str) -> Callable:
        fn = _make_ours(layers, spike, loop=loop)

        def run():
            for p in layers.parameters():
                p.grad = None
            out = fn(x_bt)
            out.square().sum().backward()
            return out.detach()

        return run

    # compile time: the first call of each compiled workload (forward + backward kernels)
    comp_rows = []
    for what, make in (("LIF layer", lif_step), ("LIF MLP", mlp_step)):
        t0 = time.perf_counter()
        out_c = make("compiled", "atan")()
        dt = time.perf_counter() - t0
        out_f = make("fused", "atan")()
        comp_rows.append(
            {
                "workload": f"{what} fwd+bwd, B={B}, T={T}",
                "first call incl. compile s": f"{dt:.1f}",
                "max |Δ output| vs fused": f"{float((out_c - out_f).abs().max()):.1e}",
            }
        )
        report.check(
            f"compiled {what} equals the fused loop",
            bool(torch.allclose(out_c, out_f, atol=1e-5)),
            f"max |Δ| {float((out_c - out_f).abs().max()):.1e}",
        )
    report.add_table(
        "torch.compile: compile time (first call; kernels are cached per shape)", comp_rows
    )
    rows = []
    old = torch.get_num_threads()
    for threads in progress_bar((1, 2), desc="compiled vs fused", enabled=progress):
        torch.set_num_threads(threads)
        for what, make in (("LIF layer", lif_step), ("LIF MLP", mlp_step)):
            for spike in ("atan", "zo"):
                fused, compiled = make("fused", spike), make("compiled", spike)
                fused(), compiled()  # warm (compiled: already compiled above)
                tf, tc = np.empty(repeats), np.empty(repeats)
                for r in range(repeats):  # interleaved, so load changes hit both alike
                    t0 = time.perf_counter()
                    fused()
                    tf[r] = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    compiled()
                    tc[r] = time.perf_counter() - t0
                ratio = tf / tc
                q1, q3 = np.percentile(ratio, [25, 75])
                rows.append(
                    {
                        "threads": threads,
                        "workload": what,
                        "spike": "LocalZO" if spike == "zo" else "ATan",
                        "fused median ms": f"{np.median(tf) * 1e3:.1f}",
                        "compiled median ms": f"{np.median(tc) * 1e3:.1f}",
                        "speed-up (fused / compiled), median": f"{np.median(ratio):.2f}",
                        "IQR of speed-up": f"{q1:.2f}–{q3:.2f}",
                    }
                )
    torch.set_num_threads(old)
    report.add_table(
        f"Compiled vs fused time loop (forward+backward, {repeats} interleaved repeats; "
        "LIF layer = one LIF on [B, T, 512])",
        rows,
    )
    report.metric(
        "compiled speed-up, LIF layer, 1 thread (ATan)",
        float(rows[0]["speed-up (fused / compiled), median"]),
    )


def _mm(v: np.ndarray, digits: int) -> str:
    return f"{np.median(v):.{digits}f} [{v.min():.{digits}f}, {v.max():.{digits}f}]"


def _interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Wall and process-CPU seconds of every ``fns`` entry per repeat, interleaved: each repeat
    runs every function once, in an order rotated by one per repeat, so a load change on the
    shared machine hits all of them alike."""
    import time

    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    wall = {n: np.empty(repeats) for n in names}
    cpu = {n: np.empty(repeats) for n in names}
    for r in range(repeats):
        for k in range(len(names)):
            n = names[(r + k) % len(names)]
            c0, t0 = time.process_time(), time.perf_counter()
            fns[n]()
            wall[n][r] = time.perf_counter() - t0
            cpu[n][r] = time.process_time() - c0
    return wall, cpu


def bench(
    *, quick: bool = False, seed: int = 0, progress: bool = True, compile_loop: bool = True
) -> Report:
    """LIF MLP forward+backward throughput and equivalence against snnTorch and spikingjelly at
    the target shapes (B = 128, T = 8; interleaved repeats, 1 and 2 threads); then, in the
    default run (``compile_loop`` and not ``quick``), the ``torch.compile``-d time loop against
    the fused eager one (minutes of compilation on a CPU); last, the FSCIL accuracy and energy
    tables of every method, the trained ANN twin included, on E1 (digits; 2 seeds with
    ``quick``, 3 by default)."""
    B, T = 128, 8
    repeats = 5 if quick else 15
    report = Report(
        PACKAGE, "bench",
        "The fused multi-step LIF computes the same spikes and gradients as snnTorch and "
        "spikingjelly and runs a 784-512-512-10 LIF MLP forward+backward at least as fast.",
        seed=seed, backends=BACKENDS,
        config={"quick": quick, "B": B, "T": T, "repeats": repeats,
                "fscil": {"experiment": "E1", "seeds": 2 if quick else 3,
                          "base_epochs": 15 if quick else 40}},
    )  # fmt: skip
    layers = _mlp_layers(seed)
    g = torch.Generator().manual_seed(seed)
    x_bt = torch.rand(B, T, 784, generator=g) * 0.2
    x_tb = x_bt.transpose(0, 1).contiguous()
    impls: dict[str, tuple[Callable, torch.Tensor]] = {
        "ours fused (ATan)": (_make_ours(layers, "atan"), x_bt),
        "ours fused (LocalZO)": (_make_ours(layers, "zo"), x_bt),
        "ours autograd loop (ATan)": (_make_ours(layers, "atan", fused=False), x_bt),
    }
    missing = []
    try:
        impls["snnTorch Leaky (ATan)"] = (_make_snntorch(layers), x_tb)
    except ImportError:
        missing.append("snntorch (pip install 'iclr26-safa-snn[peers]')")
    try:
        impls["spikingjelly LIFNode torch (ATan)"] = (_make_spikingjelly(layers), x_tb)
    except ImportError:
        missing.append("spikingjelly (pip install 'iclr26-safa-snn[spikingjelly]')")
    for m in missing:
        report.note(f"peer not installed, skipped: {m}")

    def step(fn, x):
        for p in layers.parameters():
            p.grad = None
        out = fn(x)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in layers.parameters()]

    ref_out, ref_grads = step(*impls["ours fused (ATan)"])
    eq_rows = []
    for name, (fn, x) in impls.items():
        if "LocalZO" in name:
            continue
        out, grads = step(fn, x)
        dout = float((out - ref_out).abs().max())
        dgrad = max(
            float((a - b).abs().max() / (b.abs().max() + 1e-12))
            for a, b in zip(grads, ref_grads, strict=True)
        )
        eq_rows.append(
            {
                "implementation": name,
                "max |Δ output|": f"{dout:.2e}",
                "max rel |Δ grad|": f"{dgrad:.2e}",
            }
        )
        report.check(
            f"{name} equals ours fused (ATan)",
            dout < 1e-4 and dgrad < 1e-3,
            f"Δout {dout:.1e}, Δgrad {dgrad:.1e}",
        )
    report.add_table("Numerical equivalence (same weights, same input)", eq_rows)

    rows = []
    old = torch.get_num_threads()
    ratios: dict[tuple[str, int], float] = {}
    names = list(impls)
    for threads in progress_bar((1, 2), desc="threads", enabled=progress):
        torch.set_num_threads(threads)
        wall, cpu = _interleaved(
            {n: (lambda fn=fn, x=x: step(fn, x)) for n, (fn, x) in impls.items()}, repeats
        )
        base = wall["ours fused (ATan)"]
        for name in names:
            # per-repeat ratios: the implementations of one repeat ran back to back
            r = wall[name] / base
            ratios[(name, threads)] = float(np.median(r))
            rows.append(
                {
                    "threads": threads,
                    "implementation": name,
                    "median ms [min, max]": _mm(wall[name] * 1e3, 1),
                    "CPU ms, median": f"{np.median(cpu[name]) * 1e3:.1f}",
                    "samples/s": f"{B / np.median(wall[name]):.0f}",
                    "time / ours fused (ATan), median [min, max]": _mm(r, 2),
                }
            )
    torch.set_num_threads(old)
    report.add_table(
        f"LIF MLP 784-512-512-10 forward+backward, B={B}, T={T}: {repeats} interleaved repeats "
        "(each repeat runs every implementation once, in a rotating order)",
        rows,
    )
    for threads in (1, 2):
        for name in impls:
            if name.startswith(("snnTorch", "spikingjelly")):
                r = ratios[(name, threads)]
                report.check(
                    f"ours fused at least as fast as {name} on {threads} thread(s)",
                    r >= 1.0,
                    f"peer time / ours, median of per-repeat ratios = {r:.2f}",
                )
    report.note(
        "Timings are medians over interleaved repeats on a possibly shared machine; the ratios "
        "are medians of per-repeat ratios (implementations of one repeat ran back to back). "
        "CPU ms is process CPU time (with 2 threads it includes the second thread)."
    )
    if compile_loop and not quick:
        _compile_comparison(report, layers, x_bt, repeats, progress)
    # FSCIL accuracy and energy of every method (ANN twin included) on E1 digits, as reproduce
    # prints them (reproduce adds the checks, paired tests and the other experiments).
    torch.set_num_threads(1)
    n_seeds, epochs = report.config["fscil"]["seeds"], report.config["fscil"]["base_epochs"]
    runs: dict[str, list[FSCILResult]] = {}
    ann: list[dict[str, float]] = []
    for s in progress_bar(range(seed, seed + n_seeds), desc="E1 seeds", enabled=progress):
        results, a = e1_digits(s, epochs=epochs)
        ann.append(a)
        for r in results:
            runs.setdefault(r.method, []).append(r)
    _fscil_tables(report, "E1", runs, ann)
    torch.set_num_threads(old)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(impls)
    for k, threads in enumerate((1, 2)):
        ax.barh(
            np.arange(len(names)) + 0.4 * k, [ratios[(n, threads)] for n in names], height=0.4,
            label=f"{threads} thread(s)",
        )  # fmt: skip
    ax.set_yticks(np.arange(len(names)) + 0.2, names, fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set(xlabel="time / ours fused (ATan)", title="LIF MLP forward+backward")
    ax.legend()
    fig.tight_layout()
    report.add_figure("lif_throughput", fig)
    return report
