"""BEE's concept scores and the knee threshold (``step_2bc_rank_and_threshold`` of the official code).

Notation: ``W`` is the trained probe, one (unit-norm) row per class, shape ``(C, d)``; ``W0`` the
zero-shot class anchors it started from; ``E`` the unit-norm concept text embeddings ``(K, d)``.

* alignment ``A[c, k] = w_c · ê_k``;
* official class score ``s_c(k) = A[c, k] - min_c' A[c', k]`` (in ``[0, 2]`` for unit rows);
* global "max-gap" score ``g(k) = max_c A[c, k] - min_c A[c, k]``;
* drift score: the same class score computed on ``W - W0`` (in ``[0, 4]``), i.e. how much more the
  *change* of class ``c``'s weight points at ``k`` than the least-changed class. The official code
  ranks with ``W`` itself; the drift variant removes the zero-shot prior that ``W`` still carries.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from iclr26.shared import check_choice, check_int

__all__ = [
    "ConceptScore",
    "alignment",
    "as_matrix",
    "class_scores",
    "concept_class_scores",
    "discover",
    "drift_scores",
    "knee_threshold",
    "max_gap",
    "select_concepts",
]

log = logging.getLogger(__name__)


def as_matrix(x: Any, name: str, *, ndim: int = 2, cols: int | None = None) -> np.ndarray:
    """A finite, non-empty float array with ``ndim`` dimensions (and ``cols`` columns)."""
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if type(x).__module__.startswith("torch"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.dtype == np.bool_:
        raise TypeError(f"{name} must be a float array, got dtype bool")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if cols is not None and arr.shape[-1] != cols:
        raise ValueError(f"{name} must have {cols} columns (the embedding dim), got {arr.shape}")
    arr = arr.astype(np.float64 if arr.dtype == np.float64 else np.float32, copy=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def alignment(W: Any, concept_emb: Any) -> np.ndarray:
    """``A[c, k] = w_c · ê_k``: each class weight against each concept embedding.

    Args:
        W: ``(C, d)`` class weights (the official probe keeps rows unit-norm).
        concept_emb: ``(K, d)`` concept embeddings, unit-norm rows.

    Returns:
        ``(C, K)`` float array. One matmul (BLAS), so a 50,000-concept vocabulary against 1,000
        classes at d = 384 is ~38 GFLOP.
    """
    W = as_matrix(W, "W")
    E = as_matrix(concept_emb, "concept_emb", cols=W.shape[1])
    dtype = np.result_type(W.dtype, E.dtype)
    return W.astype(dtype, copy=False) @ E.astype(dtype, copy=False).T


def class_scores(A: Any) -> np.ndarray:
    """Official class-specific score ``s_c(k) = A[c, k] - min_c' A[c', k]`` (``(C, K)``, >= 0)."""
    A = as_matrix(A, "A")
    if A.shape[0] < 2:
        raise ValueError(f"A needs at least 2 classes (rows), got shape {A.shape}")
    return A - A.min(axis=0, keepdims=True)


def concept_class_scores(W: Any, concept_emb: Any, *, chunk: int = 4096) -> np.ndarray:
    """``class_scores(alignment(W, concept_emb))`` fused, for large vocabularies.

    The vocabulary is processed in blocks of ``chunk`` concepts: each block of alignments is
    written by one BLAS matmul and its class minimum is subtracted in place while the block is
    still in cache, instead of two further passes over the whole ``(C, K)`` matrix in memory.

    Args:
        W: ``(C, d)`` class weights, ``C >= 2``.
        concept_emb: ``(K, d)`` concept embeddings.
        chunk: concepts per block.

    Returns:
        ``(C, K)`` scores (a transposed view of a ``(K, C)`` C-ordered array), equal to
        ``class_scores(alignment(W, concept_emb))``.
    """
    W = as_matrix(W, "W")
    if W.shape[0] < 2:
        raise ValueError(f"W needs at least 2 classes (rows), got shape {W.shape}")
    E = as_matrix(concept_emb, "concept_emb", cols=W.shape[1])
    chunk = check_int(chunk, "chunk", low=1)
    dtype = np.result_type(W.dtype, E.dtype)
    Wt = np.ascontiguousarray(W.astype(dtype, copy=False).T)
    E = E.astype(dtype, copy=False)
    out = np.empty((E.shape[0], W.shape[0]), dtype=dtype)
    for start in range(0, E.shape[0], chunk):
        block = out[start : start + chunk]
        np.matmul(E[start : start + chunk], Wt, out=block)
        block -= block.min(axis=1, keepdims=True)
    return out.T


def max_gap(A: Any) -> np.ndarray:
    """Global score ``g(k) = max_c A[c, k] - min_c A[c, k]`` (``(K,)``), the official CSV ranking."""
    A = as_matrix(A, "A")
    if A.shape[0] < 2:
        raise ValueError(f"A needs at least 2 classes (rows), got shape {A.shape}")
    return A.max(axis=0) - A.min(axis=0)


def drift_scores(W: Any, W0: Any, concept_emb: Any) -> np.ndarray:
    """Drift variant: class scores of ``(W - W0) · ê_k``, shape ``(C, K)``, values in ``[0, 4]``.

    ``W0`` are the zero-shot anchors the probe was initialised at (``ProbeResult.W0``). Zero
    everywhere before training; removes the prior ``A`` inherits from the class-name embeddings.
    """
    W = as_matrix(W, "W")
    W0 = as_matrix(W0, "W0")
    if W0.shape != W.shape:
        raise ValueError(f"W0 must have the shape of W {W.shape}, got {W0.shape}")
    return class_scores(alignment(W - W0, concept_emb))


def knee_threshold(
    sorted_scores: Any, window: int = 5, *, flat_tol: float = 1e-9
) -> tuple[float, int]:
    """Knee of a descending score curve (``threshold_bias_scores_convolve`` of the official code).

    The curve is smoothed with a moving average of ``window`` ("valid" mode); the chord joins the
    first and last smoothed values; the knee is the smoothed index with the largest gap *below*
    the chord, shifted by ``window // 2`` to the centre of its window. Everything up to and
    including the returned index is kept.

    Edge cases (the official code crashes or returns ``(3, -1)`` here):

    * empty input: ``(inf, -1)``, nothing is kept;
    * ``n <= window``: index ``min(window // 2, n - 1)``;
    * flat curve (no point more than ``flat_tol`` below the chord): index ``window // 2``.

    Args:
        sorted_scores: 1-D scores sorted in descending order (the official code first keeps only
            the positive ones; :func:`select_concepts` does that).
        window: moving-average window (official: 5).
        flat_tol: gap below which the curve counts as a straight line.

    Returns:
        ``(value, index)``: the score at the knee and its 0-based index in ``sorted_scores``.
    """
    window = check_int(window, "window", low=1)
    s = np.asarray(sorted_scores, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"sorted_scores must be 1-dimensional, got shape {s.shape}")
    if not np.isfinite(s).all():
        raise ValueError("sorted_scores contains NaN or inf")
    n = s.size
    if n == 0:
        return math.inf, -1
    if np.any(np.diff(s) > 1e-12 * max(1.0, float(np.abs(s).max()))):
        raise ValueError("sorted_scores must be sorted in descending order")
    half = window // 2
    if n <= window:
        idx = min(half, n - 1)
        return float(s[idx]), idx
    smooth = np.convolve(s, np.ones(window) / window, mode="valid")
    m = smooth.size
    chord = smooth[0] + (smooth[-1] - smooth[0]) * np.arange(m) / (m - 1)
    gap = chord - smooth
    if gap.max() <= flat_tol:
        return float(s[half]), half
    idx = int(np.argmax(gap)) + half
    return float(s[idx]), idx


@dataclass(frozen=True)
class ConceptScore:
    """One discovered concept for one class.

    ``z`` is filled by :func:`iclr26.bee.null_calibrate` results passed to :func:`discover`.
    """

    concept: str
    score: float
    rank: int
    z: float | None = None


Threshold = Literal["knee"] | float | tuple[str, int]


def select_concepts(scores: Any, threshold: Threshold = "knee", window: int = 5) -> np.ndarray:
    """Indices of the kept concepts of one class, best first.

    ``scores`` is the ``(K,)`` row of a class; ties are broken by concept index (stable sort),
    so the result is deterministic. ``threshold``: ``"knee"`` (official: positive scores, then
    :func:`knee_threshold`), a float (keep ``score >= value``), or ``("top", k)``.
    """
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    if isinstance(threshold, tuple):
        if len(threshold) != 2 or threshold[0] != "top":
            raise ValueError(f"threshold tuple must be ('top', k), got {threshold!r}")
        k = check_int(threshold[1], "threshold k", low=1)
        return order[:k]
    if isinstance(threshold, str):
        check_choice(threshold, "threshold", ("knee",))
        positive = order[s[order] > 0]
        _, idx = knee_threshold(s[positive], window)
        return positive[: idx + 1]
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise TypeError(f"threshold must be 'knee', a number or ('top', k), got {threshold!r}")
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be finite, got {threshold}")
    return order[s[order] >= threshold]


def discover(
    W: Any,
    concepts: Sequence[str],
    concept_emb: Any,
    *,
    mode: Literal["official", "drift"] = "official",
    W0: Any = None,
    class_names: Sequence[str] | None = None,
    threshold: Threshold = "knee",
    window: int = 5,
    z: Any = None,
) -> dict[str, list[ConceptScore]]:
    """Rank and select each class's spurious concepts from the probe weights (BEE step 2).

    Args:
        W: ``(C, d)`` trained probe weights.
        concepts: ``K`` concept strings, in the order of ``concept_emb``'s rows.
        concept_emb: ``(K, d)`` unit-norm concept embeddings from the encoder that embedded the data.
        mode: ``"official"`` (score on ``W``, as the paper's code) or ``"drift"`` (on ``W - W0``).
        W0: ``(C, d)`` zero-shot anchors; required for ``mode="drift"``.
        class_names: ``C`` names (default ``"0"``, ``"1"``, ...).
        threshold: ``"knee"`` (official), a float, or ``("top", k)``.
        window: knee smoothing window (official 5).
        z: optional ``(C, K)`` z-scores from :func:`iclr26.bee.null_calibrate`, attached to the
            results (selection itself uses the scores).

    Returns:
        ``{class_name: [ConceptScore, ...]}`` best first.
    """
    check_choice(mode, "mode", ("official", "drift"))
    W = as_matrix(W, "W")
    if isinstance(concepts, str):
        raise TypeError("concepts must be a sequence of strings, got a single str")
    concepts = list(concepts)
    if not concepts:
        raise ValueError("concepts must not be empty")
    if any(not isinstance(c, str) for c in concepts):
        raise TypeError("concepts must hold strings")
    E = as_matrix(concept_emb, "concept_emb", cols=W.shape[1])
    if E.shape[0] != len(concepts):
        raise ValueError(
            f"concept_emb has {E.shape[0]} rows but concepts has {len(concepts)} entries"
        )
    C = W.shape[0]
    if C < 2:
        raise ValueError(f"W needs at least 2 classes (rows), got shape {W.shape}")
    names = [str(i) for i in range(C)] if class_names is None else [str(c) for c in class_names]
    if len(names) != C:
        raise ValueError(f"class_names has {len(names)} entries, W has {C} rows")
    if mode == "drift":
        if W0 is None:
            raise ValueError("mode='drift' needs W0, the zero-shot anchors the probe started from")
        S = drift_scores(W, W0, E)
    else:
        S = class_scores(alignment(W, E))
    Z = None
    if z is not None:
        Z = np.asarray(z, dtype=np.float64)
        if Z.shape != S.shape:
            raise ValueError(f"z must have shape {S.shape}, got {Z.shape}")
    out: dict[str, list[ConceptScore]] = {}
    for c in range(C):
        kept = select_concepts(S[c], threshold, window)
        out[names[c]] = [
            ConceptScore(concepts[k], float(S[c, k]), r + 1, None if Z is None else float(Z[c, k]))
            for r, k in enumerate(kept)
        ]
    return out
