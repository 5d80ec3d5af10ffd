"""Interchange-intervention training (IIT) of implementations of a known algorithm, and IIA.

An *implementation* of an algorithm ``H`` is a model ``M`` with an alignment ``π`` (variable ->
:class:`Site`) such that interchange interventions on ``π(V)`` reproduce ``H``'s counterfactual
outputs (Geiger et al. 2022). IIT trains for it directly: run the model on a base input with the
aligned sites of a random subset of variables taken from a source input, and fit ``H``'s output
under the same intervention. Interchange-intervention accuracy (IIA) measures how well it holds.

Sampling implementations over seeds, architectures and alignments is how the paper's toy
setting obtains several members of ``Impl(H)``; the models are then kept only if they pass an
accuracy gate (official ``baseline_acc = 0.8``; ours 0.95) and, here, an IIA gate.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from iclr26.interp_equiv.models import Site, TinyMLP, TinyTransformer
from iclr26.interp_equiv.tasks import Algorithm, Task
from iclr26.shared import check_int, check_range
from iclr26.shared import progress as progress_bar

__all__ = [
    "Implementation",
    "accuracy",
    "gate",
    "interchange_accuracy",
    "load_implementation",
    "save_implementation",
    "train_implementation",
]

logger = logging.getLogger(__name__)

Alignment = Mapping[str, Site]


@dataclass
class Implementation:
    """A trained model with the algorithm it implements, its alignment and its measured quality."""

    model: Any
    task: Task
    algorithm: Algorithm
    alignment: dict[str, Site]
    accuracy: float
    iia: dict[str, float]
    seed: int = 0
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def min_iia(self) -> float:
        return min(self.iia.values()) if self.iia else float("nan")

    def passes(self, min_accuracy: float = 0.95, min_iia: float = 0.9) -> bool:
        """Whether the implementation is good enough to stand for its algorithm."""
        return self.accuracy >= min_accuracy and self.min_iia >= min_iia


def _device(model: Any) -> torch.device:
    try:
        return next(iter(model.parameters())).device
    except StopIteration:
        return torch.device("cpu")


def _check_alignment(model: Any, algorithm: Algorithm, alignment: Alignment) -> dict[str, Site]:
    if not isinstance(alignment, Mapping) or not alignment:
        raise ValueError("alignment must be a non-empty mapping variable -> Site")
    unknown = set(alignment) - set(algorithm.variables)
    if unknown:
        raise ValueError(
            f"alignment names variables {sorted(unknown)} that {algorithm.name} does not have "
            f"({list(algorithm.variables)})"
        )
    sites = dict(alignment)
    model._check_sites(sites.values())
    if len(set(sites.values())) != len(sites):
        raise ValueError("two variables are aligned to the same site")
    return sites


def _check_model(model: Any) -> None:
    for attr in ("run_with_cache", "patched", "hook_names"):
        if not hasattr(model, attr):
            raise TypeError(
                f"model must follow the hook protocol (TinyTransformer, TinyMLP, ModuleHooks); "
                f"{type(model).__name__} has no {attr}"
            )


@torch.no_grad()
def accuracy(model: Any, task: Task, *, n: int = 2048, seed: int = 0) -> float:
    """Task accuracy on ``n`` fresh inputs from the task's sampler."""
    check_int(n, "n", low=1)
    gen = torch.Generator().manual_seed(seed)
    tokens, labels = task.sample(n, gen)
    dev = _device(model)
    pred = model(tokens.to(dev)).argmax(-1).cpu()
    return float((pred == labels).float().mean())


@torch.no_grad()
def interchange_accuracy(
    model: Any,
    task: Task,
    algorithm: Algorithm,
    alignment: Alignment,
    *,
    variables: Sequence[str] | None = None,
    n: int = 512,
    seed: int = 0,
) -> dict[str, float]:
    """IIA of each aligned variable: swap its site from a source input into a base input and
    compare the model's prediction with the algorithm's counterfactual output.

    Args:
        model: a hook-protocol model.
        alignment: variable -> site. Pass a deliberately wrong site to measure specificity.
        variables: which variables (default: all in ``alignment``).
        n: base/source pairs per variable.

    Returns:
        ``variable -> IIA`` in ``[0, 1]``.
    """
    _check_model(model)
    check_int(n, "n", low=1)
    sites = _check_alignment(model, algorithm, alignment)
    names = list(sites) if variables is None else list(variables)
    for v in names:
        if v not in sites:
            raise ValueError(f"variable {v!r} is not aligned; aligned: {list(sites)}")
    gen = torch.Generator().manual_seed(seed)
    dev = _device(model)
    out = {}
    for v in names:
        base, _ = task.sample(n, gen)
        source, _ = task.sample(n, gen)
        _, cache = model.run_with_cache(source.to(dev), sites=[sites[v]])
        with model.patched({sites[v]: cache[sites[v]]}):
            pred = model(base.to(dev)).argmax(-1).cpu()
        target = algorithm.counterfactual(base, source, {v: torch.ones(n, dtype=torch.bool)})
        out[v] = float((pred == target).float().mean())
    return out


def train_implementation(
    task: Task,
    algorithm: Algorithm | str,
    model: Any,
    alignment: Alignment,
    *,
    steps: int = 1500,
    lr: float = 3e-3,
    batch: int = 256,
    behaviour_w: float = 1.0,
    iit_w: float = 1.0,
    probe_w: float = 0.0,
    strict_w: float = 0.4,
    strict_sites: Sequence[Site] = (),
    intervention: str = "single",
    swap_prob: float = 0.5,
    separate_steps: bool = False,
    clip_grad_norm: float | None = 1.0,
    detach_source: bool = True,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
    eval_n: int = 1024,
    seed: int = 0,
    progress: bool = False,
) -> Implementation:
    """Train ``model`` in place to implement ``algorithm`` under ``alignment`` (IIT).

    Loss per step: ``behaviour_w·CE(M(base), y) + iit_w·CE(M_{π(S)←source}(base), H_{S←source}(base))
    + strict_w·CE(M_{u←source}(base), y) + probe_w·Σ_V CE(probe_V(π(V)), V)``.

    * IIT term: with ``intervention="single"`` (the ``iit`` library behind InterpBench, whose
      SIIT models the official code uses) one variable ``S = {V}`` is drawn per step and swapped in
      every example of the batch — the same single-variable interventions IIA measures. With
      ``"independent"`` each variable is swapped with probability ``swap_prob`` independently per
      example (several at once; the 0.1/0.2 behaviour of this package).
    * Strict (SIIT) term: one of ``strict_sites`` — sites *outside* the alignment — is drawn per
      step and resample-ablated from the source; the output must stay the base label, so the
      computation cannot bypass the aligned sites (``iit``'s ``StrictIITModelPair``; the official
      training script uses ``strict_weight = 0.4``). Skipped when ``strict_sites`` is empty.
    * Probe term: optional linear probes make each variable linearly decodable at its site (the
      spec's fast MLP tier uses them for the integer ``total``, which interventions alone cannot
      pin down).

    Args:
        task, algorithm: what to implement (algorithm object or its name in ``task.algorithms``).
        model: a hook-protocol model (:class:`TinyTransformer`, :class:`TinyMLP`, :class:`ModuleHooks`).
        alignment: variable -> :class:`Site`.
        steps, lr, batch, betas, weight_decay: AdamW schedule (cosine decay to 0).
        separate_steps: one optimiser step per loss term (``iit``'s default
            ``use_single_loss=False``) instead of one step on their sum.
        clip_grad_norm: gradient-norm clipping (``iit`` default 1.0); ``None`` turns it off.
        detach_source: patch detached source activations (``iit``'s ``detach_while_caching``);
            ``False`` lets the IIT gradient flow through the source run too (0.1/0.2 behaviour).
        seed: seeds the data stream; initialise the model with your own seed before calling.
        progress: show a progress bar.

    Returns:
        :class:`Implementation` with held-out accuracy and per-variable IIA.
    """
    _check_model(model)
    if isinstance(algorithm, str):
        algorithm = task.algorithm(algorithm)
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm must be an Algorithm or a name, got {type(algorithm).__name__}")
    sites = _check_alignment(model, algorithm, alignment)
    check_int(steps, "steps", low=0)
    check_int(batch, "batch", low=2)
    check_int(eval_n, "eval_n", low=1)
    check_int(seed, "seed", low=0)
    check_range(lr, "lr", low=0.0, low_inclusive=False)
    for name, w in (("behaviour_w", behaviour_w), ("iit_w", iit_w), ("probe_w", probe_w),
                    ("strict_w", strict_w), ("weight_decay", weight_decay)):  # fmt: skip
        check_range(w, name, low=0.0)
    check_range(swap_prob, "swap_prob", low=0.0, high=1.0)
    if intervention not in ("single", "independent"):
        raise ValueError(f"intervention must be 'single' or 'independent', got {intervention!r}")
    if clip_grad_norm is not None:
        check_range(clip_grad_norm, "clip_grad_norm", low=0.0, low_inclusive=False)
    if not isinstance(betas, tuple | list) or len(betas) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    for b in betas:
        check_range(b, "betas", low=0.0, high=1.0, high_inclusive=False)
    if isinstance(strict_sites, Site):
        strict_sites = [strict_sites]
    strict = model._check_sites(list(strict_sites))
    overlap = set(strict) & set(sites.values())
    if overlap:
        raise ValueError(
            f"strict_sites must lie outside the alignment; aligned: {sorted(overlap, key=str)}"
        )
    dev = _device(model)
    gen = torch.Generator().manual_seed(seed)
    probes = nn.ModuleDict()
    if probe_w > 0:
        with torch.no_grad():
            probe_tokens, _ = task.sample(2, gen)
            _, cache = model.run_with_cache(probe_tokens.to(dev), sites=sites.values())
        for v, site in sites.items():
            width = cache[site][0].numel()
            probes[v] = nn.Linear(width, algorithm.variables[v].n_values).to(dev)
    params = [*model.parameters(), *probes.parameters()]
    opt = torch.optim.AdamW(params, lr=lr, betas=tuple(betas), weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(steps, 1))
    ce = nn.functional.cross_entropy
    names = list(sites)
    history: list[dict[str, float]] = []

    def step_on(loss: torch.Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(params, clip_grad_norm)
        opt.step()

    terms: list[torch.Tensor] = []  # this step's loss terms (summed unless separate_steps)

    def add(loss: torch.Tensor) -> None:
        if separate_steps:
            step_on(loss)
        terms.append(loss.detach() if separate_steps else loss)

    bar = progress_bar(range(steps), enabled=progress, desc=f"IIT {algorithm.name}")
    for step in bar:
        base, yb = task.sample(batch, gen)
        source, ys = task.sample(batch, gen)
        if intervention == "single":
            pick = names[int(torch.randint(len(names), (1,), generator=gen))]
            masks = {v: torch.full((batch,), v == pick) for v in names}
        else:
            masks = {v: torch.rand(batch, generator=gen) < swap_prob for v in names}
        strict_site = (
            strict[int(torch.randint(len(strict), (1,), generator=gen))]
            if strict and strict_w > 0
            else None
        )
        target = algorithm.counterfactual(base, source, masks).to(dev)
        base, source, yb, ys = base.to(dev), source.to(dev), yb.to(dev), ys.to(dev)
        terms.clear()
        # one source run serves every term (with separate steps, each term re-runs it after the
        # previous step); with ``detach_source`` its activations are detached, as ``iit`` caches
        # them (``detach_while_caching=True``): the gradient flows through the base run only.
        swapped = {site: masks[v] for v, site in sites.items() if bool(masks[v].any())}
        want = [*swapped, *([strict_site] if strict_site is not None else [])]
        logits_s, cache_s = model.run_with_cache(source, sites=want or sites.values())
        if iit_w > 0:
            patches = {
                site: (cache_s[site].detach() if detach_source else cache_s[site], m.to(dev))
                for site, m in swapped.items()
            }
            with model.patched(patches):
                add(iit_w * ce(model(base), target))
            if separate_steps:
                logits_s, cache_s = model.run_with_cache(source, sites=want or sites.values())
        if strict_site is not None:
            with model.patched({strict_site: cache_s[strict_site].detach()}):
                add(strict_w * ce(model(base), yb))
            if separate_steps:
                logits_s = model(source)
        if behaviour_w > 0 or probe_w > 0:
            logits_b, cache_b = model.run_with_cache(base, sites=sites.values())
            loss_b = behaviour_w * 0.5 * (ce(logits_s, ys) + ce(logits_b, yb))
            if probe_w > 0:
                vals = algorithm.values(base.cpu())
                loss_p = sum(
                    ce(probes[v](cache_b[site].flatten(1)), vals[v].to(dev))
                    for v, site in sites.items()
                ) / len(sites)
                loss_b = loss_b + probe_w * loss_p
            add(loss_b)
        if terms and not separate_steps:
            step_on(sum(terms))
        total = float(sum(float(t.detach()) for t in terms))
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            history.append({"step": step, "loss": total})
            bar.set_postfix(loss=f"{total:.3f}")
    bar.close()
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    acc = accuracy(model, task, n=eval_n, seed=seed + 10_000)
    iia = interchange_accuracy(model, task, algorithm, sites, n=eval_n, seed=seed + 20_000)
    if was_training and hasattr(model, "train"):
        model.train(False)
    logger.info(
        "%s seed %d: accuracy %.3f, min IIA %.3f", algorithm.name, seed, acc, min(iia.values())
    )
    return Implementation(model, task, algorithm, sites, acc, iia, seed, history)


def gate(
    implementations: Sequence[Implementation],
    *,
    min_accuracy: float = 0.95,
    min_iia: float = 0.9,
) -> tuple[list[Implementation], list[tuple[Implementation, str]]]:
    """Keep implementations that solve the task and satisfy their alignment.

    Returns:
        ``(kept, rejected)`` where each rejected entry carries the reason, so a caller reports
        "not comparable" instead of silently comparing a model that implements nothing.
    """
    check_range(min_accuracy, "min_accuracy", low=0.0, high=1.0)
    check_range(min_iia, "min_iia", low=0.0, high=1.0)
    kept, rejected = [], []
    for impl in implementations:
        if not isinstance(impl, Implementation):
            raise TypeError(f"expected Implementation objects, got {type(impl).__name__}")
        reasons = []
        if impl.accuracy < min_accuracy:
            reasons.append(f"accuracy {impl.accuracy:.3f} < {min_accuracy}")
        if impl.min_iia < min_iia:
            reasons.append(f"IIA {impl.min_iia:.3f} < {min_iia}")
        if reasons:
            rejected.append((impl, "; ".join(reasons)))
        else:
            kept.append(impl)
    return kept, rejected


def save_implementation(impl: Implementation, path: str | os.PathLike[str]) -> None:
    """Write the weights as safetensors, with architecture, algorithm and alignment as metadata."""
    from safetensors.torch import save_file

    if not isinstance(impl.model, TinyTransformer | TinyMLP):
        raise TypeError("only TinyTransformer and TinyMLP implementations can be saved")
    meta = {
        "kind": type(impl.model).__name__,
        "config": json.dumps(impl.model.config),
        "task": impl.task.name,
        "task_args": json.dumps(
            {"n": impl.task.n}
            if hasattr(impl.task, "n")
            else {"p": impl.task.p, "length": impl.task.seq_len}
        ),
        "algorithm": impl.algorithm.name,
        "alignment": json.dumps(
            {k: [s.hook, s.pos, s.head, s.dims] for k, s in impl.alignment.items()}
        ),
        "accuracy": repr(impl.accuracy),
        "iia": json.dumps(impl.iia),
        "seed": str(impl.seed),
    }
    state = {k: v.detach().cpu().contiguous() for k, v in impl.model.state_dict().items()}
    save_file(state, os.fspath(path), metadata=meta)


def load_implementation(path: str | os.PathLike[str]) -> Implementation:
    """Read an implementation written by :func:`save_implementation`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from iclr26.interp_equiv.tasks import ModSum, PermutationDetection

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise OSError(f"no such file: {path}")
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    if "kind" not in meta:
        raise ValueError(f"{path} is not an implementation written by save_implementation")
    config = json.loads(meta["config"])
    if meta["kind"] == "TinyTransformer":
        model: Any = TinyTransformer(
            config.pop("vocab"), config.pop("seq_len"), config.pop("n_classes"), **config
        )
    else:
        model = TinyMLP(config["vocab"], config["seq_len"], config["widths"], config["n_classes"])
    model.load_state_dict(load_file(path))
    model.eval()
    args = json.loads(meta["task_args"])
    task = (
        PermutationDetection(**args) if meta["task"] == "permutation_detection" else ModSum(**args)
    )
    alignment = {
        k: Site(h, pos, head, tuple(dims) if dims else None)
        for k, (h, pos, head, dims) in json.loads(meta["alignment"]).items()
    }
    return Implementation(
        model, task, task.algorithm(meta["algorithm"]), alignment,
        float(meta["accuracy"]), json.loads(meta["iia"]), int(meta["seed"]),
    )  # fmt: skip
