"""The FSCIL protocol engine: sessions, ways, shots, seeded class orders and per-session metrics.

One base session with all training data of ``base_classes`` classes, then ``sessions``
incremental sessions, each with ``way`` new classes and ``shot`` training samples per class, no
replay; after each session the model is tested on every class seen so far. Metrics follow the
official ``test()``: top-1 accuracy over seen classes, per-class mean accuracy of base and novel
classes, their harmonic mean, and the performance drop PD = acc₀ − acc_last.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from iclr26.safa_snn.checkpoint import (
    config_mismatch,
    fingerprint_tensors,
    latest_session,
    load_session,
    save_session,
)
from iclr26.safa_snn.energy import count_sops, energy_joules, training_energy

__all__ = [
    "FSCILData",
    "FSCILMethod",
    "FSCILProtocol",
    "FSCILResult",
    "SessionSplit",
    "make_sessions",
    "run_fscil",
]

log = logging.getLogger(__name__)


def _pos_int(v: Any, name: str, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class FSCILProtocol:
    """``base_classes`` base classes, then ``sessions`` incremental sessions of ``way``-way
    ``shot``-shot. ``class_order`` fixes the order (else a permutation drawn with ``seed``)."""

    base_classes: int
    way: int
    shot: int
    sessions: int
    class_order: tuple[int, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _pos_int(self.base_classes, "base_classes")
        _pos_int(self.way, "way")
        _pos_int(self.shot, "shot")
        _pos_int(self.sessions, "sessions", low=0)
        if self.class_order is not None:
            order = tuple(int(c) for c in self.class_order)
            if len(set(order)) != len(order):
                raise ValueError(f"class_order has repeated classes: {order}")
            if len(order) != self.n_classes:
                raise ValueError(
                    f"class_order must list base_classes + way * sessions = {self.n_classes} "
                    f"classes, got {len(order)}"
                )
            object.__setattr__(self, "class_order", order)

    @property
    def n_classes(self) -> int:
        return self.base_classes + self.way * self.sessions


@dataclass
class FSCILData:
    """Train and test tensors: ``x_*`` float ``[n, ...]``, ``y_*`` int64 ``[n]`` in ``classes``."""

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    classes: tuple[int, ...]

    def __post_init__(self) -> None:
        self.classes = tuple(int(c) for c in self.classes)
        if len(set(self.classes)) != len(self.classes) or not self.classes:
            raise ValueError("classes must be a non-empty list of distinct ints")
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if not isinstance(x, Tensor) or not x.is_floating_point():
                raise TypeError(f"x_{split} must be a floating-point torch.Tensor")
            if not isinstance(y, Tensor) or y.is_floating_point() or y.ndim != 1:
                raise TypeError(f"y_{split} must be a 1-D integer torch.Tensor")
            if x.shape[0] != y.shape[0] or x.shape[0] == 0:
                raise ValueError(f"x_{split} and y_{split} must have the same, non-zero length")
            if not torch.isfinite(x).all():
                raise ValueError(f"x_{split} contains NaN or inf")
            outside = set(torch.unique(y).tolist()) - set(self.classes)
            if outside:
                raise ValueError(
                    f"y_{split} has labels outside the declared classes: {sorted(outside)}"
                )


@dataclass
class SessionSplit:
    """One session: its new classes, all seen classes, and indices into train / test."""

    index: int
    new_classes: tuple[int, ...]
    seen_classes: tuple[int, ...]
    train_idx: np.ndarray
    test_idx: np.ndarray


def make_sessions(data: FSCILData, protocol: FSCILProtocol) -> list[SessionSplit]:
    """Split ``data`` into the sessions of ``protocol`` (deterministic under ``protocol.seed``).

    Session 0 trains on every training sample of the base classes; session s ≥ 1 on exactly
    ``shot`` samples (drawn with the seed) of each of its ``way`` new classes. Test sets hold
    every test sample of the classes seen so far.
    """
    if not isinstance(data, FSCILData):
        raise TypeError("data must be an FSCILData")
    if not isinstance(protocol, FSCILProtocol):
        raise TypeError("protocol must be an FSCILProtocol")
    rng = np.random.default_rng(protocol.seed)
    if protocol.n_classes > len(data.classes):
        raise ValueError(
            f"the protocol needs {protocol.n_classes} classes but the data declares {len(data.classes)}"
        )
    if protocol.class_order is not None:
        missing = set(protocol.class_order) - set(data.classes)
        if missing:
            raise ValueError(f"class_order has classes not in the data: {sorted(missing)}")
        order = list(protocol.class_order)
    else:
        order = [int(c) for c in rng.permutation(np.asarray(data.classes))[: protocol.n_classes]]
    y_tr, y_te = data.y_train.cpu().numpy(), data.y_test.cpu().numpy()
    for c in order:
        n_tr, n_te = int((y_tr == c).sum()), int((y_te == c).sum())
        need = 1 if c in order[: protocol.base_classes] else protocol.shot
        if n_tr < need:
            raise ValueError(f"class {c} has {n_tr} training samples, fewer than shot={need}")
        if n_te == 0:
            raise ValueError(f"class {c} has no test samples")
    out = []
    for s in range(protocol.sessions + 1):
        if s == 0:
            new = order[: protocol.base_classes]
            train_idx = np.flatnonzero(np.isin(y_tr, new))
        else:
            lo = protocol.base_classes + (s - 1) * protocol.way
            new = order[lo : lo + protocol.way]
            train_idx = np.sort(
                np.concatenate(
                    [
                        rng.choice(np.flatnonzero(y_tr == c), protocol.shot, replace=False)
                        for c in new
                    ]
                )
            )
        seen = order[: protocol.base_classes + s * protocol.way]
        test_idx = np.flatnonzero(np.isin(y_te, seen))
        out.append(SessionSplit(s, tuple(new), tuple(seen), train_idx, test_idx))
    return out


class FSCILMethod(Protocol):
    """What :func:`run_fscil` needs from a method (see :mod:`iclr26.safa_snn.methods`)."""

    name: str
    model: nn.Module

    def setup(self, model: nn.Module, x: Tensor, y: Tensor, classes: tuple[int, ...]) -> None: ...

    def learn(self, x: Tensor, y: Tensor, classes: tuple[int, ...]) -> dict[str, float]: ...

    def predict(self, x: Tensor) -> Tensor: ...


@dataclass
class FSCILResult:
    """Per-session metrics of one run (lists indexed by session)."""

    method: str
    acc: list[float] = field(default_factory=list)
    base_acc: list[float] = field(default_factory=list)
    novel_acc: list[float] = field(default_factory=list)
    hmean: list[float] = field(default_factory=list)
    inference_energy: list[float] = field(default_factory=list)  # J per test sample
    sops: list[float] = field(default_factory=list)  # per test sample
    session_energy: list[float] = field(default_factory=list)  # J to learn the session
    thresholds: list[float] = field(default_factory=list)  # mean θ after the session

    @property
    def pd(self) -> float:
        """Performance drop: accuracy of session 0 minus accuracy of the last session."""
        return self.acc[0] - self.acc[-1]


class _Features(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.T = getattr(model, "T", 1)
        # mirror the wrapped model's mode: count_sops restores the wrapper's mode afterwards, and
        # a wrapper left in training mode would switch the backbone's BatchNorm to batch
        # statistics (and update its running statistics on test data)
        self.train(model.training)

    def forward(self, x: Tensor) -> Tensor:
        return self.model.features(x)


def _per_class(pred: np.ndarray, y: np.ndarray, classes) -> float:
    accs = [float((pred[y == c] == c).mean()) for c in classes if (y == c).any()]
    return float(np.mean(accs)) if accs else math.nan


def run_fscil(
    method: FSCILMethod,
    data: FSCILData,
    protocol: FSCILProtocol,
    base_model: nn.Module,
    *,
    seed: int = 0,
    energy_samples: int = 128,
    backward_factor: float = 2.0,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
) -> FSCILResult:
    """Run ``method`` through every session of ``protocol`` on ``data``.

    ``base_model`` is a base-trained model (e.g. from :func:`~iclr26.safa_snn.methods.train_base`)
    exposing ``features(x) -> [B, T, D]``; the method gets a deep copy, so every method of a
    comparison starts from the same base model. Energy: inference J per test sample (spike counts
    on up to ``energy_samples`` test inputs) and the J each incremental session costs to learn
    (forwards as counted, backwards as ``backward_factor`` × dense MACs).

    With ``checkpoint_dir`` the method's state (safetensors) and the metrics so far (JSON) are
    saved after every session. ``resume=True`` continues from the last finished session there:
    no session is repeated or skipped, and the result equals an uninterrupted run. A folder
    written by another configuration (method, protocol, seed, data or base model) is refused,
    as is a folder that already holds sessions when ``resume`` is False.
    """
    if not hasattr(base_model, "features"):
        raise TypeError("base_model must expose features(x) -> [B, T, D]")
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be a bool, got {type(resume).__name__}")
    if resume and checkpoint_dir is None:
        raise ValueError("resume=True needs a checkpoint_dir")
    sessions = make_sessions(data, protocol)
    ckpt, last, config = None, None, {}
    if checkpoint_dir is not None:
        if not (hasattr(method, "state_tensors") and hasattr(method, "load_state_tensors")):
            raise TypeError("checkpoint_dir needs a method with state_tensors/load_state_tensors")
        ckpt = os.fspath(checkpoint_dir)
        if os.path.exists(ckpt) and not os.path.isdir(ckpt):
            raise ValueError(f"checkpoint_dir {ckpt} exists and is not a folder")
        last = latest_session(ckpt)
        if last is not None and not resume:
            raise ValueError(
                f"checkpoint_dir {ckpt} already holds finished sessions: resume, or use an "
                "empty folder"
            )
        config = {
            "method": method.config() if hasattr(method, "config") else type(method).__name__,
            "protocol": dataclasses.asdict(protocol),
            "seed": seed,
            "energy_samples": energy_samples,
            "backward_factor": backward_factor,
            "data": fingerprint_tensors([data.x_train, data.y_train, data.x_test, data.y_test]),
            "classes": list(data.classes),
            "base_model": fingerprint_tensors(base_model.state_dict()),
        }
    torch.manual_seed(seed)
    result = FSCILResult(getattr(method, "name", type(method).__name__))
    s0 = sessions[0]
    base_classes = s0.new_classes
    method.setup(
        copy.deepcopy(base_model),
        data.x_train[s0.train_idx],
        data.y_train[s0.train_idx],
        base_classes,
    )
    start = 0
    if ckpt is not None and last is not None:
        tensors, meta = load_session(ckpt, last)
        diff = config_mismatch(meta.get("config", {}), config)
        if diff:
            raise ValueError(
                f"checkpoint_dir {ckpt} was written by another configuration (differs in: "
                f"{', '.join(diff)})"
            )
        rng = tensors.pop("rng.torch")
        method.load_state_tensors(tensors)
        torch.set_rng_state(rng)
        for f in dataclasses.fields(FSCILResult):
            if f.name != "method":
                vals = meta["result"][f.name]
                setattr(result, f.name, [math.nan if v is None else float(v) for v in vals])
        start = last + 1
        log.info("%s: resumed after session %d from %s", result.method, last, ckpt)
    y_test = data.y_test.cpu().numpy()
    for sess in sessions[start:]:
        cost = {"forwards": 0.0, "backwards": 0.0}
        if sess.index > 0:
            xs, ys = data.x_train[sess.train_idx], data.y_train[sess.train_idx]
            cost = method.learn(xs, ys, sess.new_classes)
            rep = count_sops(_Features(method.model), xs)
            e_fwd = energy_joules(rep)
            e_bwd = training_energy(rep, backward_factor) - e_fwd
            result.session_energy.append(cost["forwards"] * e_fwd + cost["backwards"] * e_bwd)
        else:
            result.session_energy.append(0.0)
        xt = data.x_test[sess.test_idx]
        pred = method.predict(xt).cpu().numpy()
        yt = y_test[sess.test_idx]
        novel = [c for c in sess.seen_classes if c not in base_classes]
        acc = float((pred == yt).mean())
        b = _per_class(pred, yt, base_classes)
        n = _per_class(pred, yt, novel)
        result.acc.append(acc)
        result.base_acc.append(b)
        result.novel_acc.append(n)
        result.hmean.append(2 * b * n / (b + n) if novel and (b + n) > 0 else math.nan)
        rep = count_sops(_Features(method.model), xt[:energy_samples])
        result.inference_energy.append(energy_joules(rep))
        result.sops.append(rep.sops)
        thetas = [
            m.threshold.detach().mean() for m in method.model.modules() if hasattr(m, "threshold")
        ]
        result.thresholds.append(float(torch.stack(thetas).mean()) if thetas else math.nan)
        log.info("%s session %d: acc %.3f", result.method, sess.index, acc)
        if ckpt is not None:
            save_session(
                ckpt,
                sess.index,
                {**method.state_tensors(), "rng.torch": torch.get_rng_state()},
                {"config": config, "result": dataclasses.asdict(result)},
            )
    return result
