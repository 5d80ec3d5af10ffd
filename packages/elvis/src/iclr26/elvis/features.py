"""Descriptor-agnostic local features (ELViS §1.1) and hand-crafted extractors that run offline.

The paper feeds DINOv2/DINOv3/SigLIP2 patch tokens (D = 768) selected by a learned detector.
Those need downloaded weights, so this package ships SIFT/RootSIFT and ORB (OpenCV) and dense DAISY
(scikit-image) as stand-ins; any (N, D) array of descriptors works with the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from iclr26.shared import check_int

__all__ = [
    "LocalFeatures",
    "extract_daisy",
    "extract_orb",
    "extract_sift",
    "pad_batch",
    "score_pairs",
    "to_gray_uint8",
]


@dataclass(frozen=True)
class LocalFeatures:
    """Local descriptors of one image.

    Attributes:
        desc: (N, D) float32 descriptors, N ≥ 1, finite.
        xy: (N, 2) float32 keypoint positions in pixels (x, y), or None (needed only by
            spatial verification).
        weight: (N,) detector strengths used to keep the top-k, or None.
    """

    desc: NDArray[np.float32]
    xy: NDArray[np.float32] | None = None
    weight: NDArray[np.float32] | None = None

    def __post_init__(self) -> None:
        if type(self.desc).__module__.startswith("torch"):
            object.__setattr__(self, "desc", self.desc.detach().cpu().numpy())
        raw = np.asarray(self.desc)
        if raw.dtype == bool or not (
            np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)
        ):
            raise TypeError(f"desc must hold real numbers, got dtype {raw.dtype}")
        desc = raw.astype(np.float32)
        if desc.ndim != 2:
            raise ValueError(f"desc must be an (N, D) array, got shape {desc.shape}")
        if desc.shape[0] == 0 or desc.shape[1] == 0:
            raise ValueError(f"desc must hold at least one descriptor, got shape {desc.shape}")
        if not np.isfinite(desc).all():
            raise ValueError("desc contains NaN or inf")
        object.__setattr__(self, "desc", desc)
        for name, width in (("xy", 2), ("weight", None)):
            val = getattr(self, name)
            if val is None:
                continue
            val = np.asarray(val, dtype=np.float32)
            want = (desc.shape[0], width) if width else (desc.shape[0],)
            if val.shape != want:
                raise ValueError(f"{name} must have shape {want}, got {val.shape}")
            if not np.isfinite(val).all():
                raise ValueError(f"{name} contains NaN or inf")
            object.__setattr__(self, name, val)

    def __len__(self) -> int:
        return int(self.desc.shape[0])

    @property
    def dim(self) -> int:
        """Descriptor dimension D."""
        return int(self.desc.shape[1])

    def top(self, k: int) -> LocalFeatures:
        """The k descriptors with the largest weight (all of them if there are fewer)."""
        if len(self) <= k:
            return self
        order = np.argsort(-self.weight)[:k] if self.weight is not None else np.arange(k)
        return LocalFeatures(
            self.desc[order],
            None if self.xy is None else self.xy[order],
            None if self.weight is None else self.weight[order],
        )


def to_gray_uint8(image: NDArray) -> NDArray[np.uint8]:
    """(H, W) or (H, W, 3|4) image, uint8 or float in [0, 1] → (H, W) uint8 grey."""
    img = np.asarray(image)
    if img.ndim not in (2, 3):
        raise ValueError(f"image must be (H, W) or (H, W, C), got shape {np.shape(image)}")
    if img.size == 0:
        raise ValueError(f"image is empty, shape {img.shape}")
    if img.dtype == bool or not (
        np.issubdtype(img.dtype, np.integer) or np.issubdtype(img.dtype, np.floating)
    ):
        raise TypeError(f"image must hold real numbers, got dtype {img.dtype}")
    if img.dtype != np.uint8 and not np.isfinite(img).all():
        raise ValueError("image contains NaN or inf")
    if img.ndim == 3:
        img = img[..., :3].mean(axis=2)
    if img.dtype != np.uint8:
        img = img.astype(np.float64)
        if img.max() <= 1.0:
            img = img * 255.0
        img = np.clip(img, 0, 255).astype(np.uint8)
    return img


def _empty_guard(desc: NDArray | None, dim: int) -> NDArray[np.float32]:
    if desc is None or len(desc) == 0:
        # a blank image has no keypoints; a single zero descriptor keeps shapes valid and
        # contributes nothing after the remap's normalisation
        return np.zeros((1, dim), np.float32)
    return desc.astype(np.float32)


def extract_sift(image: NDArray, n_features: int = 600, *, root: bool = True) -> LocalFeatures:
    """SIFT (RootSIFT by default: L1-normalise then square-root) via OpenCV.

    Args:
        image: (H, W) or (H, W, C) uint8 / float image.
        n_features: keep the strongest ``n_features`` keypoints (paper: k = 600 tokens at test).
        root: apply RootSIFT (Arandjelović & Zisserman 2012).

    Returns:
        :class:`LocalFeatures` with (N, 128) descriptors, positions and responses.
    """
    check_int(n_features, "n_features", low=1)
    gray = to_gray_uint8(image)
    sift = cv2.SIFT_create(nfeatures=n_features)
    kps, desc = sift.detectAndCompute(gray, None)
    desc = _empty_guard(desc, 128)
    if root and len(kps):
        desc = np.sqrt(desc / np.maximum(desc.sum(1, keepdims=True), 1e-7))
    xy = np.array([k.pt for k in kps], np.float32).reshape(-1, 2) if kps else np.zeros((1, 2))
    resp = np.array([k.response for k in kps], np.float32) if kps else np.zeros(1)
    return LocalFeatures(desc, xy, resp).top(n_features)


def extract_orb(image: NDArray, n_features: int = 600) -> LocalFeatures:
    """ORB via OpenCV; the 256 binary bits become ±1 floats (cosine = 1 − 2·Hamming/256)."""
    check_int(n_features, "n_features", low=1)
    gray = to_gray_uint8(image)
    orb = cv2.ORB_create(nfeatures=n_features)
    kps, desc = orb.detectAndCompute(gray, None)
    if desc is None or not len(kps):
        return LocalFeatures(np.zeros((1, 256), np.float32), np.zeros((1, 2)), np.zeros(1))
    bits = np.unpackbits(desc, axis=1).astype(np.float32) * 2.0 - 1.0
    xy = np.array([k.pt for k in kps], np.float32)
    resp = np.array([k.response for k in kps], np.float32)
    return LocalFeatures(bits, xy, resp).top(n_features)


def extract_daisy(
    image: NDArray, *, step: int = 8, radius: int = 15, n_keep: int = 600
) -> LocalFeatures:
    """Dense DAISY descriptors (scikit-image) on a grid; keeps the ``n_keep`` with most variance.

    Variance stands in for the paper's learned token detector (§9 of the design notes).
    """
    from skimage.feature import daisy

    check_int(step, "step", low=1)
    check_int(n_keep, "n_keep", low=1)
    gray = to_gray_uint8(image).astype(np.float64) / 255.0
    if min(gray.shape) <= 2 * radius + 1:
        raise ValueError(f"image {gray.shape} is too small for DAISY radius {radius}")
    grid = daisy(gray, step=step, radius=radius, rings=2, histograms=6, orientations=8)
    h, w, d = grid.shape
    desc = grid.reshape(-1, d).astype(np.float32)
    ys, xs = np.mgrid[0:h, 0:w]
    xy = np.stack([xs.ravel() * step + radius, ys.ravel() * step + radius], 1).astype(np.float32)
    return LocalFeatures(desc, xy, desc.var(axis=1)).top(n_keep)


def pad_batch(feats: Sequence[LocalFeatures], max_len: int | None = None) -> tuple[Tensor, Tensor]:
    """Stack variable-length descriptor sets into (B, L, D) float32 plus a (B, L) padding mask.

    The mask follows the official convention: True marks padding. Sets longer than ``max_len``
    keep their first ``max_len`` descriptors (use :meth:`LocalFeatures.top` to keep the strongest).
    """
    if not len(feats):
        raise ValueError("feats must contain at least one LocalFeatures")
    dims = {f.dim for f in feats}
    if len(dims) != 1:
        raise ValueError(f"all descriptor sets must share one dimension, got {sorted(dims)}")
    length = max(len(f) for f in feats) if max_len is None else max_len
    check_int(length, "max_len", low=1)
    out = np.zeros((len(feats), length, dims.pop()), np.float32)
    mask = np.ones((len(feats), length), bool)
    for i, f in enumerate(feats):
        k = min(len(f), length)
        out[i, :k] = f.desc[:k]
        mask[i, :k] = False
    return torch.from_numpy(out), torch.from_numpy(mask)


def score_pairs(
    logits: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor],
    queries: Sequence[LocalFeatures],
    database: Sequence[LocalFeatures],
    *,
    batch_pairs: int = 64,
    max_len: int | None = None,
) -> NDArray[np.float64]:
    """Score the pairs ``(queries[i], database[i])`` in padded batches of ``batch_pairs``.

    ``logits(q, d, q_mask, d_mask)`` takes the outputs of :func:`pad_batch` and returns one
    score per pair; returns a ``(P,)`` float64 array (the re-rankers' ``score`` methods).
    """
    if len(queries) != len(database):
        raise ValueError(f"got {len(queries)} queries and {len(database)} database items")
    check_int(batch_pairs, "batch_pairs", low=1)
    out = []
    for start in range(0, len(queries), batch_pairs):
        qb, qm = pad_batch(queries[start : start + batch_pairs], max_len)
        db, dm = pad_batch(database[start : start + batch_pairs], max_len)
        out.append(logits(qb, db, qm, dm).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)
