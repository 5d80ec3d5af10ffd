"""Validation of discovered concepts: worst-group accuracy, bias-enhanced zero-shot prompts
(``zero_shot_bias_enhanced_prompts.py``) and the insertion attack (the text analogue of the
paper's ImageNet object-insertion experiment)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iclr26.bee.encoders import TextEncoder, check_texts
from iclr26.bee.probe import as_labels
from iclr26.bee.scoring import as_matrix

__all__ = [
    "InsertionResult",
    "bias_enhanced_zero_shot",
    "insertion_attack",
    "worst_group_accuracy",
]

#: Official prompt templates (``templates.py``); ``{cls}`` and ``{bias}`` are filled in.
TEMPLATES = {
    "waterbirds": "a photo of a {cls} in the {bias}",
    "celeba": "a photo of a {bias} with {cls}",
    "civilcomments": "a/an {cls} comment about {bias}",
}


def worst_group_accuracy(y: Any, y_pred: Any, groups: Any) -> tuple[float, dict[int, float]]:
    """Minimum accuracy over the groups present, and the accuracy of each group.

    Args:
        y, y_pred: ``(n,)`` true and predicted labels.
        groups: ``(n,)`` integer group ids (e.g. ``y * n_attr + a``).
    """
    yy = as_labels(y, "y")
    p = as_labels(y_pred, "y_pred", yy.size)
    g = as_labels(groups, "groups", yy.size)
    acc = {int(k): float((p[g == k] == yy[g == k]).mean()) for k in np.unique(g)}
    return min(acc.values()), acc


def bias_enhanced_zero_shot(
    X: Any,
    y: Any,
    groups: Any,
    class_names: Sequence[str],
    concepts: dict[int, Sequence[str]] | Sequence[str],
    template: str,
    encoder: TextEncoder,
) -> dict[str, float]:
    """Zero-shot classification with prompts enriched by discovered concepts (official protocol).

    For every class and every concept a prompt ``template.format(cls=..., bias=...)`` is
    embedded; a sample is assigned the class of its most similar prompt. Concepts are either one
    list used for all classes or ``{class index: [concepts]}`` (prompts of each class use all
    concepts, as in the official script).

    Returns ``{"accuracy", "worst_group_accuracy"}``.
    """
    Xm = as_matrix(X, "X")
    yy = as_labels(y, "y", Xm.shape[0])
    g = as_labels(groups, "groups", Xm.shape[0])
    names = check_texts(class_names, "class_names")
    if "{cls}" not in template or "{bias}" not in template:
        raise ValueError("template must contain {cls} and {bias}")
    if isinstance(concepts, dict):
        pool = [k for ks in concepts.values() for k in check_texts(ks, "concepts")]
    else:
        pool = check_texts(concepts, "concepts")
    pool = list(dict.fromkeys(pool))
    if not pool:
        raise ValueError("concepts must not be empty")
    prompts, owner = [], []
    for c, name in enumerate(names):
        for k in pool:
            prompts.append(template.format(cls=name, bias=k))
            owner.append(c)
    P = np.asarray(encoder.encode(prompts))
    if P.shape[1] != Xm.shape[1]:
        raise ValueError(f"encoder dim {P.shape[1]} differs from the embeddings' {Xm.shape[1]}")
    pred = np.asarray(owner)[np.argmax(Xm @ P.T, axis=1)]
    wga, _ = worst_group_accuracy(yy, pred, g)
    return {"accuracy": float((pred == yy).mean()), "worst_group_accuracy": wga}


@dataclass
class InsertionResult:
    """Flip rate among originally correct samples, and the accuracy drop, for one concept."""

    concept: str
    flip_rate: float
    accuracy_drop: float
    n: int


def insertion_attack(
    texts: Sequence[str],
    y: Any,
    concept: str,
    predict_fn: Callable[[list[str]], Any],
    *,
    template: str = "{text} near the {concept}",
    y_pred: Any = None,
) -> InsertionResult:
    """Insert ``concept`` into each text and measure how often the prediction flips.

    Args:
        texts: the texts to attack (typically test samples of the classes *other* than the one
            the concept was discovered for).
        y: their true labels.
        concept: the inserted concept.
        predict_fn: ``list[str] -> (n,)`` predicted labels (e.g. encoder + probe).
        template: how the concept is inserted (default: appended as a suffix).
        y_pred: predictions on the clean texts (computed if omitted).

    Returns:
        :class:`InsertionResult`: ``flip_rate`` = fraction of originally correct samples whose
        prediction changed; ``accuracy_drop`` = clean accuracy minus attacked accuracy.
    """
    texts = check_texts(texts)
    yy = as_labels(y, "y", len(texts))
    if not isinstance(concept, str) or not concept.strip():
        raise ValueError("concept must be a non-empty string")
    if "{text}" not in template or "{concept}" not in template:
        raise ValueError("template must contain {text} and {concept}")
    clean = np.asarray(predict_fn(texts) if y_pred is None else y_pred)
    if clean.shape != yy.shape:
        raise ValueError(f"predictions have shape {clean.shape}, expected {yy.shape}")
    attacked = np.asarray(predict_fn([template.format(text=t, concept=concept) for t in texts]))
    ok = clean == yy
    flips = float((attacked[ok] != clean[ok]).mean()) if ok.any() else 0.0
    drop = float(ok.mean() - (attacked == yy).mean())
    return InsertionResult(concept=concept, flip_rate=flips, accuracy_drop=drop, n=int(ok.sum()))
