"""Peer methods BEE is compared with, re-implemented on embeddings (the originals need captioners
and CLIP weights). Each returns ``(C, K)`` class-by-concept scores, higher = more suspicious.

* :func:`b2t_scores` (B2T, Kim et al. CVPR 2024): error-driven. For each class, a concept's
  similarity to the *misclassified* validation samples minus its similarity to the correctly
  classified ones. With no validation errors there is nothing to explain: the class gets no
  scores (``NaN`` row) and :attr:`B2TScores.classes_with_errors` is empty.
* :func:`cooccurrence_scores` (Lg-style data statistics): how much more often a concept occurs in
  class ``c``'s texts than overall (``P(k | c) - P(k)``), or for embeddings the class-conditional
  mean similarity minus the overall mean.
* :func:`splice_scores` (SpLiCE, Bhalla et al. NeurIPS 2024): sparse non-negative decomposition of
  each (centred) sample embedding onto the concept dictionary (non-negative Lasso), then the
  class-conditional mean weight minus the overall mean weight.
* :func:`domino_like` (Domino, Eyuboglu et al. ICLR 2022): a Gaussian mixture over embeddings,
  labels and predicted probabilities; the highest-error slice of each class is described by the
  concepts most similar to its members relative to the class.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iclr26.bee.encoders import check_texts
from iclr26.bee.probe import as_labels
from iclr26.bee.scoring import as_matrix
from iclr26.shared import check_int, check_range

__all__ = ["B2TScores", "b2t_scores", "cooccurrence_scores", "domino_like", "splice_scores"]

log = logging.getLogger(__name__)


@dataclass
class B2TScores:
    """``scores`` ``(C, K)`` (NaN rows for classes without errors) and which classes had errors."""

    scores: np.ndarray
    classes_with_errors: list[int]
    n_errors: int


def b2t_scores(
    val_emb: Any, y_val: Any, y_pred: Any, concept_emb: Any, n_classes: int | None = None
) -> B2TScores:
    """B2T-style error-driven concept scores.

    ``score[c, k] = mean_{i: y_i = c, wrong} ê_k · x_i - mean_{i: y_i = c, right} ê_k · x_i``.

    Args:
        val_emb: ``(m, d)`` validation embeddings.
        y_val: ``(m,)`` true labels.
        y_pred: ``(m,)`` the classifier's predictions.
        concept_emb: ``(K, d)`` concept embeddings.
        n_classes: number of classes (default ``max(y_val) + 1``).
    """
    X = as_matrix(val_emb, "val_emb")
    E = as_matrix(concept_emb, "concept_emb", cols=X.shape[1])
    y = as_labels(y_val, "y_val", X.shape[0])
    p = as_labels(y_pred, "y_pred", X.shape[0])
    C = int(y.max()) + 1 if n_classes is None else check_int(n_classes, "n_classes", low=2)
    sims = X @ E.T
    scores = np.full((C, E.shape[0]), np.nan)
    with_errors = []
    for c in range(C):
        wrong = (y == c) & (p != y)
        right = (y == c) & (p == y)
        if wrong.any() and right.any():
            scores[c] = sims[wrong].mean(0) - sims[right].mean(0)
            with_errors.append(c)
    n_err = int((p != y).sum())
    if not with_errors:
        log.info("b2t_scores: no validation errors, nothing to explain")
    return B2TScores(scores=scores, classes_with_errors=with_errors, n_errors=n_err)


def cooccurrence_scores(
    y: Any,
    concepts: Sequence[str] | None = None,
    *,
    texts: Sequence[str] | None = None,
    emb: Any = None,
    concept_emb: Any = None,
    n_classes: int | None = None,
) -> np.ndarray:
    """Data-driven concept-class association, from texts (word occurrence) or embeddings.

    Texts: ``P(k occurs | y = c) - P(k occurs)`` with whole-word, case-insensitive matching.
    Embeddings: ``mean_{y = c} ê_k · x - mean ê_k · x``.
    """
    if (texts is None) == (emb is None):
        raise ValueError("pass exactly one of texts= (with concepts) or emb= (with concept_emb)")
    if texts is not None:
        import re

        texts = check_texts(texts, "texts")
        concepts = check_texts(concepts, "concepts")
        yy = as_labels(y, "y", len(texts))
        pats = [re.compile(r"\b" + re.escape(k.lower()) + r"\b") for k in concepts]
        M = np.array([[bool(p.search(t.lower())) for p in pats] for t in texts], dtype=np.float64)
    else:
        X = as_matrix(emb, "emb")
        E = as_matrix(concept_emb, "concept_emb", cols=X.shape[1])
        yy = as_labels(y, "y", X.shape[0])
        M = X @ E.T
    C = int(yy.max()) + 1 if n_classes is None else check_int(n_classes, "n_classes", low=2)
    base = M.mean(0)
    out = np.zeros((C, M.shape[1]))
    for c in range(C):
        if (yy == c).any():
            out[c] = M[yy == c].mean(0) - base
    return out


def splice_scores(
    emb: Any,
    y: Any,
    concept_emb: Any,
    *,
    l1: float = 0.01,
    n_classes: int | None = None,
    max_samples: int | None = 2000,
    seed: int = 0,
) -> np.ndarray:
    """SpLiCE-style scores: non-negative sparse codes of the samples over the concepts.

    Embeddings and concepts are centred by their means (SpLiCE's modality-gap correction) and
    renormalised; each sample is decomposed with ``sklearn.linear_model.Lasso(positive=True,
    alpha=l1)``; the score is the class-conditional mean code minus the overall mean code.
    ``max_samples`` caps the decomposed samples (a seeded subset) to bound the cost.
    """
    from sklearn.linear_model import Lasso

    X = as_matrix(emb, "emb")
    E = as_matrix(concept_emb, "concept_emb", cols=X.shape[1])
    yy = as_labels(y, "y", X.shape[0])
    l1 = check_range(l1, "l1", low=0, low_inclusive=False)
    if max_samples is not None and X.shape[0] > max_samples:
        idx = np.random.default_rng(seed).choice(X.shape[0], max_samples, replace=False)
        X, yy = X[idx], yy[idx]
    Xc = X - X.mean(0)
    Xc /= np.maximum(np.linalg.norm(Xc, axis=1, keepdims=True), 1e-12)
    Ec = E - E.mean(0)
    Ec /= np.maximum(np.linalg.norm(Ec, axis=1, keepdims=True), 1e-12)
    model = Lasso(alpha=l1, positive=True, fit_intercept=False, max_iter=2000)
    model.fit(Ec.T, Xc.T)
    codes = np.atleast_2d(model.coef_)  # (n, K)
    C = int(yy.max()) + 1 if n_classes is None else check_int(n_classes, "n_classes", low=2)
    base = codes.mean(0)
    out = np.zeros((C, E.shape[0]))
    for c in range(C):
        if (yy == c).any():
            out[c] = codes[yy == c].mean(0) - base
    return out


def domino_like(
    emb: Any,
    y: Any,
    probs: Any,
    concept_emb: Any,
    *,
    n_slices: int = 8,
    y_weight: float = 10.0,
    p_weight: float = 10.0,
    seed: int = 0,
) -> np.ndarray:
    """Domino-like error-aware slicing, described with concepts.

    A diagonal Gaussian mixture (scikit-learn) is fitted on ``[emb, y_weight * onehot(y),
    p_weight * probs]``; for each class the slice (among those holding >= 5 of its samples)
    with the lowest accuracy is described by ``mean_{slice} ê_k · x - mean_{class} ê_k · x``.
    """
    from sklearn.mixture import GaussianMixture

    X = as_matrix(emb, "emb")
    E = as_matrix(concept_emb, "concept_emb", cols=X.shape[1])
    yy = as_labels(y, "y", X.shape[0])
    P = as_matrix(probs, "probs")
    if P.shape[0] != X.shape[0]:
        raise ValueError(f"probs has {P.shape[0]} rows but emb has {X.shape[0]}")
    n_slices = check_int(n_slices, "n_slices", low=1)
    C = P.shape[1]
    onehot = np.eye(C)[yy]
    Z = np.hstack([X, y_weight * onehot, p_weight * P])
    gmm = GaussianMixture(n_slices, covariance_type="diag", random_state=seed, reg_covar=1e-4)
    slices = gmm.fit_predict(Z)
    correct = P.argmax(1) == yy
    sims = X @ E.T
    out = np.zeros((C, E.shape[0]))
    for c in range(C):
        in_c = yy == c
        if not in_c.any():
            continue
        best, best_acc = None, np.inf
        for s in range(n_slices):
            m = in_c & (slices == s)
            if m.sum() >= 5 and correct[m].mean() < best_acc:
                best, best_acc = m, correct[m].mean()
        if best is not None:
            out[c] = sims[best].mean(0) - sims[in_c].mean(0)
    return out
