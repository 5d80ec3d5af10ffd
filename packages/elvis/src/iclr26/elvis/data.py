"""The paste-in-clutter instance-retrieval benchmark built from images that ship with
scikit-image and scikit-learn (design notes §6.1–6.2), plus the bundled stereo pair.

An instance is a crop of a source image (the central 50% for evaluation, random crops for
training). Its query is the crop under a light homography and photometric jitter; each database
positive is the crop warped, scaled and pasted at a random place on a random texture background;
distractors are pure background crops. Each positive carries a difficulty label for the revisited
easy/medium/hard protocol: an *easy* paste covers 45–60% of the canvas side under a light warp,
a *hard* one 28–40% under a strong warp (fewer and more distorted object keypoints). The labels are
balanced per query and drawn from the seed. Domains: photo (train and
in-domain test), science and docs (out of domain). All images are grey float32 in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import cv2
import numpy as np
from numpy.typing import NDArray

from iclr26.shared import check_choice, check_int

__all__ = [
    "DOCS",
    "PHOTO",
    "SCIENCE",
    "SHIFTS",
    "TEXTURES",
    "RetrievalSet",
    "load_image",
    "make_retrieval_set",
    "make_training_pairs",
    "stereo_pair",
]

PHOTO = ("astronaut", "camera", "chelsea", "coffee", "rocket", "horse", "china", "flower")
SCIENCE = ("moon", "hubble_deep_field", "immunohistochemistry", "retina", "cell", "coins")
DOCS = ("page", "text", "logo", "clock")
TEXTURES = ("brick", "grass", "gravel")
SHIFTS = ("none", "invert", "sketch", "perspective", "jpeg")

Image = NDArray[np.float32]


@cache
def _raw(name: str) -> Image:
    if name in ("china", "flower"):
        from sklearn.datasets import load_sample_image

        img = load_sample_image(f"{name}.jpg")
    else:
        from skimage import data

        if not hasattr(data, name):
            raise ValueError(f"unknown bundled image {name!r}")
        img = getattr(data, name)()
    img = np.asarray(img)
    if img.dtype == bool:
        img = img.astype(np.float32)
    else:
        img = img.astype(np.float32) / (255.0 if img.dtype == np.uint8 else max(img.max(), 1.0))
    if img.ndim == 3:
        img = img[..., :3].mean(axis=2)
    img.setflags(write=False)
    return img


def load_image(name: str, max_side: int = 512) -> Image:
    """A bundled image as grey float32 in [0, 1], resized so its longest side ≤ ``max_side``."""
    check_int(max_side, "max_side", low=8)
    img = _raw(name)
    scale = max_side / max(img.shape)
    if scale < 1:
        img = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(img, dtype=np.float32)


def stereo_pair(max_side: int = 400) -> tuple[Image, Image]:
    """The real motorcycle stereo pair shipped with scikit-image (left, right), grey."""
    from skimage import data

    left, right, _ = data.stereo_motorcycle()
    out = []
    for im in (left, right):
        g = im.astype(np.float32).mean(axis=2) / 255.0
        s = max_side / max(g.shape)
        out.append(cv2.resize(g, None, fx=s, fy=s, interpolation=cv2.INTER_AREA))
    return out[0], out[1]


def _crop(img: Image, rng: np.random.Generator | None, frac: float = 0.5) -> Image:
    h, w = img.shape
    ch, cw = int(h * frac), int(w * frac)
    if rng is None:
        y, x = (h - ch) // 2, (w - cw) // 2
    else:
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    return img[y : y + ch, x : x + cw]


def _homography(w: int, h: int, rng: np.random.Generator, strength: float) -> NDArray:
    src = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    jitter = rng.uniform(-strength, strength, size=(4, 2)) * np.float32([w, h])
    return cv2.getPerspectiveTransform(src, (src + jitter).astype(np.float32))


def _warp(img: Image, rng: np.random.Generator, strength: float, out_side: int) -> Image:
    """Homography-warp ``img`` and resize so the longest side is ``out_side`` (black border)."""
    h, w = img.shape
    s = out_side / max(h, w)
    img = cv2.resize(img, (max(8, int(w * s)), max(8, int(h * s))), interpolation=cv2.INTER_AREA)
    h, w = img.shape
    H = _homography(w, h, rng, strength)
    return cv2.warpPerspective(img, H, (w, h), flags=cv2.INTER_LINEAR, borderValue=0.0)


def _jitter(img: Image, rng: np.random.Generator) -> Image:
    gain, bias = rng.uniform(0.8, 1.2), rng.uniform(-0.08, 0.08)
    noisy = img * gain + bias + rng.normal(0.0, 0.015, size=img.shape)
    return np.clip(noisy, 0, 1).astype(np.float32)


def _background(rng: np.random.Generator, canvas: int) -> Image:
    tex = load_image(str(rng.choice(TEXTURES)))
    h, w = tex.shape
    side = int(rng.integers(canvas // 2, min(h, w) + 1))
    y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
    bg = cv2.resize(tex[y : y + side, x : x + side], (canvas, canvas), interpolation=cv2.INTER_AREA)
    return bg * rng.uniform(0.6, 1.0) + rng.uniform(0.0, 0.2)


# (paste side as a fraction of the canvas, homography corner jitter) per difficulty
PASTE_EASY = ((0.45, 0.60), 0.06)
PASTE_HARD = ((0.28, 0.40), 0.12)


def _paste(obj: Image, rng: np.random.Generator, canvas: int, hard: bool = False) -> Image:
    (lo, hi), strength = PASTE_HARD if hard else PASTE_EASY
    side = int(canvas * rng.uniform(lo, hi))
    warped = _warp(obj, rng, strength, side)
    bg = _background(rng, canvas)
    h, w = warped.shape
    y, x = int(rng.integers(0, canvas - h + 1)), int(rng.integers(0, canvas - w + 1))
    region = bg[y : y + h, x : x + w]
    bg[y : y + h, x : x + w] = np.where(warped > 0, warped, region)
    return _jitter(bg, rng)


def _shift(img: Image, shift: str, rng: np.random.Generator) -> Image:
    if shift == "invert":
        return (1.0 - img).astype(np.float32)
    if shift == "sketch":
        from skimage.feature import canny

        edges = canny(img, sigma=1.5)
        return cv2.GaussianBlur(1.0 - edges.astype(np.float32), (3, 3), 0)
    if shift == "perspective":
        h, w = img.shape
        H = _homography(w, h, rng, 0.18)
        return cv2.warpPerspective(img, H, (w, h), borderValue=0.5)
    if shift == "jpeg":
        _, buf = cv2.imencode(".jpg", (img * 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 10])
        return cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE).astype(np.float32) / 255.0
    return img


@dataclass(frozen=True)
class RetrievalSet:
    """Queries, database and ground truth of one benchmark split.

    queries: Q grey images; database: N grey images; relevant: (Q, N) bool;
    query_names: source image per query; db_names: source per database image ("" = distractor);
    hard: (N,) bool, True for the hard positives (small, strongly warped pastes).
    """

    queries: list[Image]
    database: list[Image]
    relevant: NDArray[np.bool_]
    query_names: list[str]
    db_names: list[str]
    hard: NDArray[np.bool_]

    def revisited(self, protocol: str) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """(positives, junk), each (Q, N), of the revisited ``easy``/``medium``/``hard`` protocol."""
        from iclr26.elvis.metrics import revisited_ground_truth

        return revisited_ground_truth(self.relevant, self.hard, protocol)


def make_retrieval_set(
    names: Sequence[str],
    *,
    n_pos: int = 3,
    n_distractors: int = 10,
    canvas: int = 320,
    query_side: int = 200,
    shift: str = "none",
    random_crops: bool = False,
    seed: int = 0,
) -> RetrievalSet:
    """One paste-in-clutter split: a query and ``n_pos`` pasted positives per source image.

    Half of each query's positives (rounded down, in a random order) are hard pastes, the rest
    easy ones (see the module docstring); ``RetrievalSet.hard`` records which.

    Args:
        names: bundled images (see :data:`PHOTO`, :data:`SCIENCE`, :data:`DOCS`).
        n_pos: database positives per query (3 in the design notes).
        n_distractors: pure-background database images.
        canvas: database image side in pixels (design notes: 360).
        query_side: longest side of a query image.
        shift: extra out-of-domain transform of the database images, one of :data:`SHIFTS`.
        random_crops: random 50% crops instead of the central one (training instances).
        seed: everything random (crops, warps, pastes, backgrounds, jitter).
    """
    check_int(n_pos, "n_pos", low=1)
    check_int(n_distractors, "n_distractors", low=0)
    check_choice(shift, "shift", SHIFTS)
    if not len(names):
        raise ValueError("names must list at least one bundled image")
    rng = np.random.default_rng(seed)
    queries, database, q_names, d_names, hard = [], [], [], [], []
    for name in names:
        obj = _crop(load_image(name), rng if random_crops else None)
        queries.append(_jitter(_warp(obj, rng, 0.05, query_side), rng))
        q_names.append(name)
        for is_hard in rng.permutation(np.arange(n_pos) % 2 == 1):
            database.append(_shift(_paste(obj, rng, canvas, bool(is_hard)), shift, rng))
            d_names.append(name)
            hard.append(bool(is_hard))
    for _ in range(n_distractors):
        database.append(_shift(_jitter(_background(rng, canvas), rng), shift, rng))
        d_names.append("")
        hard.append(False)
    relevant = np.array([[q == d for d in d_names] for q in q_names], dtype=bool)
    return RetrievalSet(queries, database, relevant, q_names, d_names, np.array(hard, dtype=bool))


def make_training_pairs(
    feats_query: Sequence,
    feats_db: Sequence,
    relevant: NDArray,
    *,
    neg_per_pos: int = 1,
    seed: int = 0,
) -> list[tuple]:
    """(query, database, label) pairs from a featurised split: every positive plus random negatives."""
    check_int(neg_per_pos, "neg_per_pos", low=0)
    relevant = np.asarray(relevant)
    if relevant.dtype != bool:
        raise TypeError(f"relevant must be a bool array, got dtype {relevant.dtype}")
    if relevant.shape != (len(feats_query), len(feats_db)):
        raise ValueError(
            f"relevant must have shape ({len(feats_query)}, {len(feats_db)}), got {relevant.shape}"
        )
    rng = np.random.default_rng(seed)
    pairs = []
    for qi in range(len(feats_query)):
        pos = np.nonzero(relevant[qi])[0]
        neg = np.nonzero(~relevant[qi])[0]
        for j in pos:
            pairs.append((feats_query[qi], feats_db[j], 1))
            for k in rng.choice(neg, size=min(neg_per_pos, len(neg)), replace=False):
                pairs.append((feats_query[qi], feats_db[k], 0))
    return pairs
