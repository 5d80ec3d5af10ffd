"""The diagnostic linear probe of BEE (``step_1_ERM.py`` / ``utils.train`` of the official code).

A bias-free linear layer ``W`` (``C x d``) with a frozen logit scale ``exp(4.60517) = 100``,
initialised at the normalised class-name embeddings (the zero-shot classifier), trained with
class-balanced cross-entropy and AdamW (lr 1e-4, weight decay 1e-5, batch 1024), every row
renormalised to unit norm after **every** optimiser step, and early stopping with patience 5 on
validation balanced accuracy (the best checkpoint is kept).

:func:`fit_probes` trains ``B`` independent probes at once as one ``(B, C, d)`` tensor: per-probe
labels (label permutations) and per-probe sample weights (bootstrap counts, group reweighting)
share the same embedding matrix, so a refit costs one batched matmul per step instead of a Python
loop over seeds. AdamW's update is elementwise, so the probes do not interact.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iclr26.bee.scoring import as_matrix
from iclr26.shared import check_int, check_range

__all__ = [
    "ProbeResult",
    "as_labels",
    "balanced_accuracy",
    "fit_probe",
    "fit_probes",
    "normalize_anchors",
]

log = logging.getLogger(__name__)

LOGIT_SCALE = 100.0  # exp(4.60517), CLIP's scale, frozen in the official probe


def as_labels(y: Any, name: str, n: int | None = None, n_classes: int | None = None) -> np.ndarray:
    """Integer class labels ``0..C-1`` as int64; floats are accepted only if integral."""
    if type(y).__module__.startswith("torch"):
        y = y.detach().cpu().numpy()
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold integer class labels, got non-integral floats")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        raise ValueError(f"{name} must hold labels >= 0, got {arr.min()}")
    if n is not None and arr.size != n:
        raise ValueError(f"{name} has {arr.size} entries but the embeddings have {n} rows")
    if n_classes is not None and arr.max() >= n_classes:
        raise ValueError(
            f"{name} holds label {arr.max()} but there are only {n_classes} class anchors"
        )
    return arr


def balanced_accuracy(y: np.ndarray, yhat: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Mean per-class recall over the classes present in ``y`` (optionally sample-weighted)."""
    y, yhat = np.asarray(y), np.asarray(yhat)
    w = np.ones(y.shape, dtype=np.float64) if weight is None else np.asarray(weight, np.float64)
    recalls = []
    for c in np.unique(y):
        m = (y == c) & (w > 0)
        if m.any():
            recalls.append(float((w[m] * (yhat[m] == c)).sum() / w[m].sum()))
    return float(np.mean(recalls)) if recalls else float("nan")


@dataclass
class ProbeResult:
    """A trained probe.

    Attributes:
        W: ``(C, d)`` trained weights (best validation checkpoint), unit-norm rows if
            ``renormalize``; for :func:`fit_probes` ``(B, C, d)``.
        W0: ``(C, d)`` normalised anchors the probe started from (the zero-shot classifier).
        best_epoch: epoch of the kept checkpoint (0 = no training); ``(B,)`` for a batch.
        history: per-epoch ``{"epoch", "loss", "val_balanced_accuracy"}`` (probe 0 of a batch).
        logit_scale: the frozen scale.
    """

    W: np.ndarray
    W0: np.ndarray
    best_epoch: Any
    history: list[dict[str, float]] = field(default_factory=list)
    logit_scale: float = LOGIT_SCALE

    def predict(self, X: Any) -> np.ndarray:
        """Class predictions ``argmax_c w_c · x`` for ``(n, d)`` embeddings."""
        W = self.W if self.W.ndim == 2 else self.W[0]
        X = as_matrix(X, "X", cols=W.shape[1])
        return np.argmax(X @ W.T, axis=1)


def _batched_balanced_accuracy(
    Y: np.ndarray, pred: np.ndarray, w: np.ndarray, C: int
) -> np.ndarray:
    """:func:`balanced_accuracy` of ``B`` probes at once: ``Y``, ``pred``, ``w`` are ``(B, m)``."""
    onehot = Y[..., None] == np.arange(C)  # (B, m, C)
    wc = w[..., None] * onehot
    tot = wc.sum(axis=1)  # (B, C)
    hit = (wc * (pred == Y)[..., None]).sum(axis=1)
    present = tot > 0
    rec = np.where(present, hit / np.where(present, tot, 1.0), 0.0)
    return rec.sum(axis=1) / np.maximum(present.sum(axis=1), 1)


def normalize_anchors(class_anchors: Any) -> np.ndarray:
    """The probe's starting weights ``W0``: class anchors as float64 with unit-norm rows.

    Unlike :func:`iclr26.bee.encoders.normalize_rows` (which leaves a zero row at 0), a zero
    anchor is refused: a class with no direction cannot start the zero-shot classifier.
    """
    x = as_matrix(class_anchors, "class_anchors").astype(np.float64)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("class_anchors contains a zero row; cannot normalise it")
    return x / norms


def _class_weights(labels: np.ndarray, weights: np.ndarray, C: int) -> np.ndarray:
    """sklearn ``compute_class_weight('balanced')`` per probe: ``n / (C_present * n_c)``."""
    B = labels.shape[0]
    counts = np.zeros((B, C))
    for b in range(B):
        counts[b] = np.bincount(labels[b], weights=weights[b], minlength=C)
    present = (counts > 0).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        cw = counts.sum(axis=1, keepdims=True) / (present * counts)
    cw[~np.isfinite(cw)] = 0.0
    return cw


def fit_probes(
    X_train: Any,
    labels: Any,
    X_val: Any,
    val_labels: Any,
    class_anchors: Any,
    *,
    sample_weight: Any = None,
    val_weight: Any = None,
    logit_scale: float = LOGIT_SCALE,
    lr: float = 1e-4,
    weight_decay: float = 1e-5,
    batch_size: int = 1024,
    patience: int = 5,
    class_balanced: bool = True,
    renormalize: bool = True,
    max_epochs: int = 1000,
    seed: int = 1007,
    extra_loss: Callable[[Any], Any] | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> ProbeResult:
    """Train ``B`` official-recipe probes at once (the batched refits of null calibration).

    Args:
        X_train: ``(n, d)`` unit-norm training embeddings, shared by all probes.
        labels: ``(B, n)`` integer labels per probe (e.g. ``B`` label permutations).
        X_val: ``(m, d)`` validation embeddings.
        val_labels: ``(B, m)`` validation labels per probe.
        class_anchors: ``(C, d)`` class-name embeddings (normalised here).
        sample_weight: ``(B, n)`` non-negative weights (bootstrap counts, group weights).
        val_weight: ``(B, m)`` non-negative weights of the validation accuracy.
        logit_scale: frozen logit scale (official ``exp(4.60517) = 100``).
        lr, weight_decay: AdamW (official 1e-4, 1e-5).
        batch_size: official 1024.
        patience: early-stopping patience in epochs (official 5).
        class_balanced: class-balanced cross-entropy (official True).
        renormalize: project rows to unit norm after every step (official True).
        max_epochs: cap (the official loop is unbounded; 1000 here).
        seed: shuffling seed (official 1007).
        extra_loss: optional ``f(W) -> scalar tensor`` added to the loss; ``W`` is the
            ``(C, d)`` parameter when ``B = 1``, else ``(B, C, d)``.
        device: torch device (CPU default).
        dtype: ``"float32"`` (default) or ``"float64"`` training precision.

    Returns:
        :class:`ProbeResult` with ``W`` of shape ``(B, C, d)`` and ``best_epoch`` ``(B,)``.
    """
    import torch

    anchors = as_matrix(class_anchors, "class_anchors")
    C, d = anchors.shape
    if C < 2:
        raise ValueError(f"class_anchors needs at least 2 classes, got {C}")
    X = as_matrix(X_train, "X_train", cols=d)
    Xv = as_matrix(X_val, "X_val", cols=d)
    Y = np.asarray(labels)
    Yv = np.asarray(val_labels)
    if Y.ndim != 2 or Y.shape[1] != X.shape[0]:
        raise ValueError(f"labels must have shape (B, {X.shape[0]}), got {Y.shape}")
    if Yv.ndim != 2 or Yv.shape != (Y.shape[0], Xv.shape[0]):
        raise ValueError(
            f"val_labels must have shape ({Y.shape[0]}, {Xv.shape[0]}), got {Yv.shape}"
        )
    for name, arr in (("labels", Y), ("val_labels", Yv)):
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
        if arr.min() < 0 or arr.max() >= C:
            raise ValueError(f"{name} must lie in [0, {C - 1}] (one label per class anchor)")
    B, n = Y.shape
    sw = np.ones((B, n)) if sample_weight is None else np.asarray(sample_weight, np.float64)
    vw = np.ones(Yv.shape) if val_weight is None else np.asarray(val_weight, np.float64)
    if sw.shape != (B, n) or vw.shape != Yv.shape:
        raise ValueError("sample_weight / val_weight must match the shapes of labels / val_labels")
    if not (np.isfinite(sw).all() and np.isfinite(vw).all()) or sw.min() < 0 or vw.min() < 0:
        raise ValueError("sample_weight and val_weight must be finite and non-negative")
    logit_scale = check_range(logit_scale, "logit_scale", low=0, low_inclusive=False)
    lr = check_range(lr, "lr", low=0)
    weight_decay = check_range(weight_decay, "weight_decay", low=0)
    batch_size = check_int(batch_size, "batch_size", low=1)
    patience = check_int(patience, "patience", low=1)
    max_epochs = check_int(max_epochs, "max_epochs", low=0)
    seed = check_int(seed, "seed", low=0)
    tdtype = {"float32": torch.float32, "float64": torch.float64}.get(dtype)
    if tdtype is None:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")

    W0 = normalize_anchors(anchors)
    cw = _class_weights(Y, sw, C) if class_balanced else np.ones((B, C))
    # per-sample loss weight = class weight of its label x its sample weight
    omega = np.take_along_axis(cw, Y, axis=1) * sw

    dev = torch.device(device)
    Xt = torch.as_tensor(X, dtype=tdtype, device=dev)
    Xvt = torch.as_tensor(Xv, dtype=tdtype, device=dev)
    # sample-major (n, B) layouts: a minibatch is a row gather and the logits come out as a
    # contiguous (nb, B, C) block, so the softmax runs over the contiguous class axis
    Yt = torch.as_tensor(np.ascontiguousarray(Y.T), dtype=torch.long, device=dev)
    Om = torch.as_tensor(np.ascontiguousarray(omega.T), dtype=tdtype, device=dev)
    W = torch.nn.Parameter(
        torch.as_tensor(np.broadcast_to(W0, (B, C, d)).copy(), dtype=tdtype, device=dev)
    )
    opt = torch.optim.AdamW([W], lr=lr, weight_decay=weight_decay)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    scale = float(logit_scale)

    best_W = W.detach().clone()
    best_score = np.full(B, -np.inf)
    best_epoch = np.zeros(B, dtype=np.int64)
    stale = np.zeros(B, dtype=np.int64)
    active = np.ones(B, dtype=bool)
    history: list[dict[str, float]] = []
    for epoch in range(1, max_epochs + 1):
        perm = torch.randperm(n, generator=gen).to(dev)
        total = 0.0
        # Stopped probes keep their best checkpoint, so only the live ones are trained (the
        # probes are independent: dropping the others changes no live probe's update).
        live = np.flatnonzero(active)
        full = live.size == B
        lt = None if full else torch.as_tensor(live, device=dev)
        Bl = live.size
        # one row gather per epoch; the minibatches are then contiguous slices
        Xe = Xt[perm]
        Ye = Yt[perm] if full else Yt[perm][:, lt]
        Ome = Om[perm] if full else Om[perm][:, lt]
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            xb = Xe[start:stop]  # (nb, d)
            Wl = W if full else W[lt]
            logits = scale * (xb @ Wl.reshape(Bl * C, d).T).reshape(-1, Bl, C)
            logp = torch.log_softmax(logits, dim=-1)  # (nb, Bl, C)
            nll = -logp.gather(-1, Ye[start:stop].unsqueeze(-1)).squeeze(-1)  # (nb, Bl)
            om = Ome[start:stop]
            denom = om.sum(dim=0).clamp_min(1e-12)
            loss = ((om * nll).sum(dim=0) / denom).sum()
            if extra_loss is not None:
                loss = loss + extra_loss(W[0] if B == 1 else W)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if renormalize:
                with torch.no_grad():
                    W.div_(W.norm(dim=-1, keepdim=True))
            total += float(loss.detach()) * (stop - start)
        with torch.no_grad():
            Wl = W.detach() if full else W.detach()[lt]
            pred = (Xvt @ Wl.reshape(Bl * C, d).T).reshape(-1, Bl, C).argmax(-1).T.cpu().numpy()
        scores = np.full(B, -np.inf)
        scores[live] = _batched_balanced_accuracy(Yv[live], pred, vw[live], C)
        improved = active & (scores > best_score)
        if improved.any():
            mask = torch.as_tensor(improved, device=dev)
            best_W[mask] = W.detach()[mask]
            best_score[improved] = scores[improved]
            best_epoch[improved] = epoch
        stale = np.where(improved, 0, stale + 1)
        active &= stale < patience
        if live[0] == 0:  # probe 0 is still training
            history.append(
                {"epoch": epoch, "loss": total / n / Bl, "val_balanced_accuracy": float(scores[0])}
            )
        if not active.any():
            break
    Wb = best_W.cpu().numpy().astype(np.float64)
    log.debug("probes stopped at epochs %s", best_epoch)
    return ProbeResult(W=Wb, W0=W0, best_epoch=best_epoch, history=history, logit_scale=scale)


#: The recipe keywords :func:`fit_probe` forwards to :func:`fit_probes` (its keyword-only
#: arguments other than the per-probe weights).
_RECIPE_KEYS = frozenset(
    name
    for name, p in inspect.signature(fit_probes).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("sample_weight", "val_weight")
)


def fit_probe(
    X_train: Any,
    y_train: Any,
    X_val: Any,
    y_val: Any,
    class_anchors: Any,
    *,
    sample_weight: Any = None,
    **recipe: Any,
) -> ProbeResult:
    """Train BEE's diagnostic probe with the official recipe (paper §3 / ``step_1_ERM.py``).

    Args:
        X_train: ``(n, d)`` unit-norm training embeddings (float).
        y_train: ``(n,)`` integer labels in ``0..C-1``.
        X_val: ``(m, d)`` validation embeddings; early stopping watches their balanced accuracy.
        y_val: ``(m,)`` validation labels.
        class_anchors: ``(C, d)`` text embeddings of the raw class names (normalised here); the
            probe starts at them, i.e. as the zero-shot classifier.
        sample_weight: optional ``(n,)`` non-negative weights multiplying the loss.
        **recipe: the keywords of :func:`fit_probes` with the official defaults:
            ``logit_scale=100, lr=1e-4, weight_decay=1e-5, batch_size=1024, patience=5,
            class_balanced=True, renormalize=True, max_epochs=1000, seed=1007,
            extra_loss=None, device="cpu", dtype="float32"``; ``extra_loss`` receives the
            ``(C, d)`` parameter (see :func:`iclr26.bee.concept_variance_penalty`). An unknown
            keyword is a ``TypeError`` naming it.

    Returns:
        :class:`ProbeResult` (``W`` ``(C, d)``, ``W0``, ``best_epoch``, ``history``).
    """
    unknown = sorted(set(recipe) - _RECIPE_KEYS)
    if unknown:
        raise TypeError(f"fit_probe got unexpected keyword argument(s) {unknown}")
    anchors = as_matrix(class_anchors, "class_anchors")
    C, d = anchors.shape
    if C < 2:
        raise ValueError(f"class_anchors needs at least 2 classes, got {C}")
    X = as_matrix(X_train, "X_train", cols=d)
    Xv = as_matrix(X_val, "X_val", cols=d)
    y = as_labels(y_train, "y_train", X.shape[0], C)
    yv = as_labels(y_val, "y_val", Xv.shape[0], C)
    if np.unique(y).size < 2:
        raise ValueError(f"y_train must hold at least 2 classes, got only {np.unique(y).tolist()}")
    sw = None
    if sample_weight is not None:
        sw = as_matrix(sample_weight, "sample_weight", ndim=1)
        if sw.shape[0] != X.shape[0] or sw.min() < 0:
            raise ValueError("sample_weight must be (n,) and non-negative")
        sw = sw[None]
    res = fit_probes(
        X,
        y[None],
        Xv,
        yv[None],
        anchors,
        sample_weight=sw,
        **recipe,
    )
    return ProbeResult(
        W=res.W[0],
        W0=res.W0,
        best_epoch=int(res.best_epoch[0]),
        history=res.history,
        logit_scale=res.logit_scale,
    )
