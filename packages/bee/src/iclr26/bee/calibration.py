"""Null calibration of BEE scores: z-scores against batched probe refits.

Absolute drift scores are confounded by the embedding geometry (a concept can lead a class's
drift ranking on data with no shortcut at all), so a score only means something against what
refits of the probe give on data where the shortcut is absent. All refits are trained at once by
:func:`iclr26.bee.fit_probes` as one ``(B, C, d)`` tensor.

Three nulls, and what each one tests:

* ``"groups"`` (needs the attribute/group labels of training and validation data): refits on
  bootstrap resamples reweighted so that every (class, group) cell carries equal weight, i.e.
  the attribute is decorrelated from the label. Class-related drift is present in both the
  observed and the null refits and cancels; only the shortcut remains. Undefined when a cell is
  empty (ρ = 1, no counterexamples).
* ``"permutation"``: refits on permuted labels. It needs no group labels, but *every*
  class-related concept becomes significant (real labels move the weights towards class
  content; permuted labels do not), so it flags class content as well as shortcuts.
* ``"bootstrap"``: no null refit; ``z = mean / sd`` of the score over bootstrap refits of the
  observed data, i.e. the stability of a score, not its specificity.

The statistic for ``"groups"`` and ``"permutation"`` compares ``n_boot`` bootstrap refits of the
observed data with ``n_null`` null refits::

    z[c, k] = (mean_obs s[c, k] - mean_null s[c, k]) / sqrt(var_obs + var_null)

(with ``n_boot = 0`` the single observed fit is used and ``var_obs = 0``: a classic z against the
null distribution). It is an effect size in units of the refit-to-refit spread. With
``pool="class"`` (default) the variances are averaged over the vocabulary for each class before
the square root: the spread of a concept's score grows with its alignment to the drift, so a
per-concept denominator penalises exactly the concept the probe leans on, and is itself a noisy
estimate from a few refits. ``pool="concept"`` keeps one denominator per concept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from iclr26.bee.probe import as_labels, fit_probes
from iclr26.bee.scoring import alignment, as_matrix
from iclr26.shared import check_choice, check_int

__all__ = ["NullCalibration", "null_calibrate", "refit_scores"]

log = logging.getLogger(__name__)


@dataclass
class NullCalibration:
    """Result of :func:`null_calibrate`.

    Attributes:
        z: ``(C, K)`` z-scores.
        observed: ``(C, K)`` mean score over the observed refits (or the single fit).
        null_mean, null_std: ``(C, K)`` moments of the null scores.
        observed_std: ``(C, K)`` spread of the observed refits (0 with ``n_boot=0``).
        null: which null was used; ``mode``: ``"drift"`` or ``"official"``.
        n_refits: total number of probes trained (one batch).
    """

    z: np.ndarray
    observed: np.ndarray
    null_mean: np.ndarray
    null_std: np.ndarray
    observed_std: np.ndarray
    null: str
    mode: str
    n_refits: int


def refit_scores(W: np.ndarray, W0: np.ndarray, concept_emb: Any, mode: str) -> np.ndarray:
    """Class scores of a batch of probes ``W`` (``(B, C, d)``) -> ``(B, C, K)``."""
    E = as_matrix(concept_emb, "concept_emb", cols=W.shape[-1])
    M = W - W0[None] if mode == "drift" else W
    B, C, d = M.shape
    A = alignment(M.reshape(B * C, d), E).reshape(B, C, -1)
    return A - A.min(axis=1, keepdims=True)


def _group_weights(y: np.ndarray, g: np.ndarray, C: int, name: str) -> np.ndarray:
    """Weights making every (class, group) cell of equal total weight."""
    cells = y * (g.max() + 1) + g
    groups = np.unique(g)
    counts = np.bincount(cells, minlength=C * (g.max() + 1)).astype(np.float64)
    for c in np.unique(y):
        for a in groups:
            if counts[c * (g.max() + 1) + a] == 0:
                raise ValueError(
                    f"null='groups' needs every (class, group) cell in {name}; class {c} has no "
                    f"sample of group {a} (no counterexamples: use null='permutation')"
                )
    w = 1.0 / counts[cells]
    return w * (len(y) / w.sum())


def null_calibrate(
    X_train: Any,
    y_train: Any,
    X_val: Any,
    y_val: Any,
    class_anchors: Any,
    concept_emb: Any,
    *,
    null: Literal["groups", "permutation", "bootstrap"] = "permutation",
    groups_train: Any = None,
    groups_val: Any = None,
    mode: Literal["drift", "official"] = "drift",
    n_null: int = 20,
    n_boot: int = 20,
    seed: int = 0,
    pool: Literal["class", "concept"] = "class",
    min_std: float = 1e-6,
    **probe_kwargs: Any,
) -> NullCalibration:
    """Per-concept z-scores of BEE scores against batched probe refits (see the module docstring).

    Args:
        X_train, y_train, X_val, y_val, class_anchors: as :func:`iclr26.bee.fit_probe`.
        concept_emb: ``(K, d)`` unit-norm concept embeddings.
        null: ``"groups"``, ``"permutation"`` or ``"bootstrap"``.
        groups_train, groups_val: integer attribute labels (``"groups"`` null only).
        mode: score the drift ``W - W0`` (default) or ``W`` (official).
        n_null: null refits (ignored for ``"bootstrap"``).
        n_boot: bootstrap refits of the observed data (``0``: one fit on the data as given).
        seed: seed of the resampling and of the probe shuffling.
        pool: ``"class"`` (variances averaged over concepts per class) or ``"concept"``.
        min_std: floor of the denominator.
        **probe_kwargs: forwarded to :func:`iclr26.bee.fit_probes` (lr, patience, device...).

    Returns:
        :class:`NullCalibration`. All ``n_boot + n_null`` probes are one batched training run.
    """
    check_choice(null, "null", ("groups", "permutation", "bootstrap"))
    check_choice(mode, "mode", ("drift", "official"))
    check_choice(pool, "pool", ("class", "concept"))
    anchors = as_matrix(class_anchors, "class_anchors")
    C, d = anchors.shape
    X = as_matrix(X_train, "X_train", cols=d)
    Xv = as_matrix(X_val, "X_val", cols=d)
    y = as_labels(y_train, "y_train", X.shape[0], C)
    yv = as_labels(y_val, "y_val", Xv.shape[0], C)
    if np.unique(y).size < 2:
        raise ValueError("y_train must hold at least 2 classes")
    E = as_matrix(concept_emb, "concept_emb", cols=d)
    n_null = check_int(n_null, "n_null", low=0)
    n_boot = check_int(n_boot, "n_boot", low=0)
    seed = check_int(seed, "seed", low=0)
    if null == "bootstrap":
        n_null = 0
        if n_boot < 2:
            raise ValueError("null='bootstrap' needs n_boot >= 2")
    elif n_null < 2:
        raise ValueError(f"null={null!r} needs n_null >= 2")
    rng = np.random.default_rng(seed)
    n, m = len(y), len(yv)

    gw = gvw = None
    if null == "groups":
        if groups_train is None or groups_val is None:
            raise ValueError("null='groups' needs groups_train and groups_val")
        g = as_labels(groups_train, "groups_train", n)
        gv = as_labels(groups_val, "groups_val", m)
        gw = _group_weights(y, g, C, "groups_train")
        gvw = _group_weights(yv, gv, C, "groups_val")

    labels, weights, vlabels, vweights = [], [], [], []
    n_obs = max(n_boot, 1)
    for _b in range(n_obs):
        labels.append(y)
        weights.append(rng.multinomial(n, np.full(n, 1 / n)) if n_boot else np.ones(n))
        vlabels.append(yv)
        vweights.append(np.ones(m))
    for _ in range(n_null):
        if null == "groups":
            labels.append(y)
            weights.append(rng.multinomial(n, np.full(n, 1 / n)) * gw)
            vlabels.append(yv)
            vweights.append(gvw)
        else:  # permutation
            labels.append(rng.permutation(y))
            weights.append(np.ones(n))
            vlabels.append(rng.permutation(yv))
            vweights.append(np.ones(m))
    probe_kwargs.setdefault("seed", seed)
    res = fit_probes(
        X,
        np.stack(labels),
        Xv,
        np.stack(vlabels),
        anchors,
        sample_weight=np.stack(weights).astype(np.float64),
        val_weight=np.stack(vweights).astype(np.float64),
        **probe_kwargs,
    )
    S = refit_scores(res.W, res.W0, E, mode)
    obs = S[:n_obs]
    obs_mean = obs.mean(axis=0)
    obs_var = obs.var(axis=0, ddof=1) if n_obs > 1 else np.zeros_like(obs_mean)
    if null == "bootstrap":
        null_mean = np.zeros_like(obs_mean)
        null_var = np.zeros_like(obs_mean)
    else:
        nul = S[n_obs:]
        null_mean = nul.mean(axis=0)
        null_var = nul.var(axis=0, ddof=1)
    var = obs_var + null_var
    if pool == "class":
        var = np.broadcast_to(var.mean(axis=1, keepdims=True), var.shape)
    denom = np.maximum(np.sqrt(var), min_std)
    z = (obs_mean - null_mean) / denom
    return NullCalibration(
        z=z,
        observed=obs_mean,
        null_mean=null_mean,
        null_std=np.sqrt(null_var),
        observed_std=np.sqrt(obs_var),
        null=null,
        mode=mode,
        n_refits=int(S.shape[0]),
    )
