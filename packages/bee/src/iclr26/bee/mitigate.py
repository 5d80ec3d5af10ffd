"""Mitigation: BEE's concept-variance regulariser and the group-DRO probe baseline.

The regulariser (``utils.debiasing_loss_l2`` of the official code) makes the probe's logits for
each discovered concept equal across classes: with ``S = scale * E W^T`` (concepts x classes),

    L_reg = mean_{k, c} (S[k, c] - mean_c' S[k, c'])^2,

added to the cross-entropy with weight ``strength``. The official control regularises random
concepts instead (``--random_biases``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from iclr26.bee.probe import (
    LOGIT_SCALE,
    ProbeResult,
    as_labels,
    balanced_accuracy,
    normalize_anchors,
)
from iclr26.bee.scoring import as_matrix
from iclr26.shared import check_int, check_range

__all__ = ["concept_variance_penalty", "group_dro_probe"]


def concept_variance_penalty(
    concept_emb: Any, *, strength: float = 1.0, logit_scale: float = LOGIT_SCALE
) -> Callable[[Any], Any]:
    """The BEE regulariser as an ``extra_loss`` for :func:`iclr26.bee.fit_probe`.

    Args:
        concept_emb: ``(K, d)`` embeddings of the concepts to neutralise.
        strength: weight of the penalty (a [reconstructed] default; the official value was not
            read, tune it on validation worst-group accuracy).
        logit_scale: the probe's logit scale (official 100).

    Returns:
        ``penalty(W)`` for ``W`` of shape ``(..., C, d)`` (torch), a scalar tensor.
    """
    E = as_matrix(concept_emb, "concept_emb")
    strength = check_range(strength, "strength", low=0)
    scale = check_range(logit_scale, "logit_scale", low=0, low_inclusive=False)

    def penalty(W: Any) -> Any:
        import torch

        Et = torch.as_tensor(E, dtype=W.dtype, device=W.device)
        S = scale * torch.matmul(W, Et.T)  # (..., C, K)
        dev = S - S.mean(dim=-2, keepdim=True)
        return strength * (dev**2).mean()

    return penalty


def group_dro_probe(
    X_train: Any,
    y_train: Any,
    groups_train: Any,
    X_val: Any,
    y_val: Any,
    groups_val: Any,
    class_anchors: Any,
    *,
    eta: float = 0.01,
    logit_scale: float = LOGIT_SCALE,
    lr: float = 1e-4,
    weight_decay: float = 1e-5,
    batch_size: int = 1024,
    patience: int = 5,
    max_epochs: int = 1000,
    seed: int = 1007,
    device: str = "cpu",
) -> ProbeResult:
    """Online group DRO (Sagawa et al. 2020) on the same probe (``lp_groupdro.py``'s role).

    Same parametrisation and optimiser as :func:`iclr26.bee.fit_probe` (anchored start, unit
    rows, frozen scale, AdamW); the loss is ``sum_g q_g L_g`` with ``q_g <- q_g exp(eta L_g)``
    renormalised after every step; early stopping on validation worst-group accuracy. Needs group
    labels, which BEE does not.
    """
    import torch

    anchors = as_matrix(class_anchors, "class_anchors")
    C, d = anchors.shape
    X = as_matrix(X_train, "X_train", cols=d)
    Xv = as_matrix(X_val, "X_val", cols=d)
    y = as_labels(y_train, "y_train", X.shape[0], C)
    yv = as_labels(y_val, "y_val", Xv.shape[0], C)
    g = as_labels(groups_train, "groups_train", X.shape[0])
    gv = as_labels(groups_val, "groups_val", Xv.shape[0])
    eta = check_range(eta, "eta", low=0)
    batch_size = check_int(batch_size, "batch_size", low=1)
    patience = check_int(patience, "patience", low=1)
    max_epochs = check_int(max_epochs, "max_epochs", low=0)
    G = int(max(g.max(), gv.max())) + 1
    W0 = normalize_anchors(anchors)
    dev = torch.device(device)
    Xt = torch.as_tensor(X, dtype=torch.float32, device=dev)
    yt = torch.as_tensor(y, device=dev)
    gt = torch.as_tensor(g, device=dev)
    W = torch.nn.Parameter(torch.as_tensor(W0, dtype=torch.float32, device=dev))
    opt = torch.optim.AdamW([W], lr=lr, weight_decay=weight_decay)
    q = torch.full((G,), 1.0 / G, device=dev)
    gen = torch.Generator().manual_seed(check_int(seed, "seed", low=0))
    best, best_score, best_epoch, stale = W0.copy(), -np.inf, 0, 0
    history = []
    for epoch in range(1, max_epochs + 1):
        perm = torch.randperm(len(y), generator=gen).to(dev)
        for start in range(0, len(y), batch_size):
            idx = perm[start : start + batch_size]
            nll = torch.nn.functional.cross_entropy(
                logit_scale * Xt[idx] @ W.T, yt[idx], reduction="none"
            )
            gb = gt[idx]
            sums = torch.zeros(G, device=dev).index_add(0, gb, nll)
            counts = torch.bincount(gb, minlength=G).float()
            present = counts > 0
            losses = torch.where(present, sums / counts.clamp_min(1), torch.zeros_like(sums))
            with torch.no_grad():
                q = q * torch.exp(eta * losses.detach() * present)
                q = q / q.sum()
            loss = (q * losses).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                W.div_(W.norm(dim=-1, keepdim=True))
        Wn = W.detach().cpu().numpy().astype(np.float64)
        pred = np.argmax(Xv @ Wn.T, axis=1)
        accs = [(pred[gv == k] == yv[gv == k]).mean() for k in np.unique(gv)]
        score = float(min(accs))
        history.append(
            {
                "epoch": epoch,
                "val_worst_group_accuracy": score,
                "val_balanced_accuracy": balanced_accuracy(yv, pred),
            }
        )
        if score > best_score:
            best, best_score, best_epoch, stale = Wn, score, epoch, 0
        else:
            stale += 1
            if stale >= patience:
                break
    return ProbeResult(W=best, W0=W0, best_epoch=best_epoch, history=history)
