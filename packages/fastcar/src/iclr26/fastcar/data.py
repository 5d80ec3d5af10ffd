"""Generated token videos: moving scikit-learn digits and a k-means patch tokenizer.

A stand-in for VILA-U's text-conditioned RQ-VAE token videos that runs on a CPU: an 8x8 digit
(scikit-learn's bundled ``load_digits``) moves on a ``canvas x canvas`` frame with constant
velocity and wall bounce; a k-means codebook over ``patch x patch`` patches turns each frame into
``(canvas/patch)^2`` tokens (row-major). The prompt is ``[BOS, class, velocity, x0, y0]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "DigitClassifier", "PatchTokenizer", "VideoTokens", "moving_digits", "real_clip_frames",
    "trajectory",
]  # fmt: skip

VELOCITIES = tuple((vy, vx) for vy in (-1, 0, 1) for vx in (-1, 0, 1))
DIGIT = 8


def _check_int(value, name, low):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def moving_digits(
    num_videos: int, num_frames: int = 8, canvas: int = 16, *, seed: int = 0,
    variants: int | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Videos of one moving digit.

    Args:
        variants: sprites per class: ``None`` draws any of scikit-learn's 1,797 digit images;
            ``k`` draws the class uniformly and then one of its first ``k`` images, so the
            prompt (class, velocity, start) nearly determines the video.

    Returns:
        dict with ``frames`` ``(V, F, canvas, canvas)`` float32 in [0, 1], ``label`` ``(V,)``,
        ``velocity`` ``(V,)`` index into the 9 velocities (dy, dx in {-1, 0, 1}), ``y0``, ``x0``
        ``(V,)`` start corner, and ``digit`` ``(V, 8, 8)`` the digit image used.
    """
    from sklearn.datasets import load_digits

    num_videos = _check_int(num_videos, "num_videos", 1)
    num_frames = _check_int(num_frames, "num_frames", 1)
    canvas = _check_int(canvas, "canvas", DIGIT)
    if variants is not None:
        variants = _check_int(variants, "variants", 1)
    rng = np.random.default_rng(seed)
    d = load_digits()
    images = (d.images / 16.0).astype(np.float32)
    if variants is None:
        idx = rng.integers(0, len(images), num_videos)
    else:
        smallest = int(np.bincount(d.target).min())
        if variants > smallest:
            raise ValueError(f"variants must be <= {smallest} (images of the rarest class)")
        per_class = np.stack([np.flatnonzero(d.target == c)[:variants] for c in range(10)])
        idx = per_class[rng.integers(0, 10, num_videos), rng.integers(0, variants, num_videos)]
    span = canvas - DIGIT + 1
    y0 = rng.integers(0, span, num_videos)
    x0 = rng.integers(0, span, num_videos)
    vel = rng.integers(0, len(VELOCITIES), num_videos)
    frames = np.zeros((num_videos, num_frames, canvas, canvas), np.float32)
    for v in range(num_videos):
        y, x = int(y0[v]), int(x0[v])
        dy, dx = VELOCITIES[vel[v]]
        for f in range(num_frames):
            frames[v, f, y : y + DIGIT, x : x + DIGIT] = images[idx[v]]
            if not 0 <= y + dy < span:
                dy = -dy
            if not 0 <= x + dx < span:
                dx = -dx
            y, x = y + dy, x + dx
    return {
        "frames": frames, "label": d.target[idx].astype(np.int64), "velocity": vel.astype(np.int64),
        "y0": y0.astype(np.int64), "x0": x0.astype(np.int64), "digit": images[idx],
    }  # fmt: skip


def trajectory(y0, x0, velocity, num_frames: int, canvas: int = 16) -> np.ndarray:
    """``(V, F, 2)`` top-left corners of the digit per frame (the bounce rule of
    :func:`moving_digits`), from the prompt's conditioning."""
    y0, x0, velocity = (np.atleast_1d(np.asarray(a, np.int64)) for a in (y0, x0, velocity))
    span = canvas - DIGIT + 1
    out = np.zeros((len(y0), num_frames, 2), np.int64)
    for v in range(len(y0)):
        y, x = int(y0[v]), int(x0[v])
        dy, dx = VELOCITIES[int(velocity[v])]
        for f in range(num_frames):
            out[v, f] = (y, x)
            if not 0 <= y + dy < span:
                dy = -dy
            if not 0 <= x + dx < span:
                dx = -dx
            y, x = y + dy, x + dx
    return out


class DigitClassifier:
    """Nearest class mean (cosine) on scikit-learn's 8x8 digits, applied to the digit's crop of a
    frame (its position follows from the prompt): the per-frame "classifier accuracy" metric."""

    def __init__(self, *, seed: int = 0) -> None:
        from sklearn.datasets import load_digits

        d = load_digits()
        x = d.images.reshape(len(d.images), -1) / 16.0
        means = np.stack([x[d.target == c].mean(0) for c in range(10)])
        self.means = means / np.linalg.norm(means, axis=1, keepdims=True)
        self.seed = seed

    def predict(self, crops: np.ndarray) -> np.ndarray:
        """Class of each flattened 8x8 crop ``(M, 64)``."""
        crops = np.asarray(crops, np.float64)
        return (crops @ self.means.T).argmax(1)

    def accuracy_per_frame(self, frames: np.ndarray, corners: np.ndarray, labels) -> np.ndarray:
        """``(F,)`` accuracy over videos of ``frames`` ``(V, F, H, W)`` cropped at ``corners``."""
        frames = np.asarray(frames)
        v, f = frames.shape[:2]
        crops = np.stack([
            frames[i, j, corners[i, j, 0] : corners[i, j, 0] + DIGIT,
                   corners[i, j, 1] : corners[i, j, 1] + DIGIT]
            for i in range(v) for j in range(f)
        ]).reshape(v * f, -1)  # fmt: skip
        pred = self.predict(crops).reshape(v, f)
        return (pred == np.asarray(labels)[:, None]).mean(0)


class PatchTokenizer:
    """k-means codebook over non-overlapping ``patch x patch`` patches (VQ stand-in).

    Args:
        patch: patch side (4 gives 16 tokens per 16x16 frame).
        codebook_size: number of codes ``K``.
    """

    def __init__(self, patch: int = 4, codebook_size: int = 64) -> None:
        self.patch = _check_int(patch, "patch", 1)
        self.codebook_size = _check_int(codebook_size, "codebook_size", 2)
        self.codebook_: np.ndarray | None = None

    def _patches(self, frames: np.ndarray) -> np.ndarray:
        frames = np.asarray(frames, dtype=np.float32)
        if frames.ndim < 2:
            raise ValueError(f"frames must be (..., H, W), got shape {frames.shape}")
        h, w = frames.shape[-2:]
        p = self.patch
        if h % p or w % p:
            raise ValueError(f"frame size {h}x{w} is not a multiple of patch {p}")
        lead = frames.shape[:-2]
        x = frames.reshape(*lead, h // p, p, w // p, p)
        x = np.moveaxis(x, -3, -2)  # (..., h/p, w/p, p, p)
        return x.reshape(*lead, (h // p) * (w // p), p * p)

    def fit(self, frames: np.ndarray, *, seed: int = 0) -> PatchTokenizer:
        """Fit the codebook on the patches of ``frames`` ``(..., H, W)``."""
        from sklearn.cluster import MiniBatchKMeans

        x = self._patches(frames).reshape(-1, self.patch**2)
        if not np.isfinite(x).all():
            raise ValueError("frames must be finite")
        km = MiniBatchKMeans(self.codebook_size, random_state=seed, n_init=3, batch_size=4096)
        km.fit(x)
        self.codebook_ = km.cluster_centers_.astype(np.float32)
        return self

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """``(..., H, W)`` frames → ``(..., tokens_per_frame)`` int64 codes (nearest centre)."""
        cb = self._fitted()
        x = self._patches(frames)
        flat = x.reshape(-1, x.shape[-1])
        d = (cb**2).sum(1)[None, :] - 2.0 * flat @ cb.T  # ||x||^2 is constant per row
        return d.argmin(-1).astype(np.int64).reshape(x.shape[:-1])

    def decode(self, codes: np.ndarray, size: int) -> np.ndarray:
        """``(..., tokens_per_frame)`` codes → ``(..., size, size)`` frames."""
        cb = self._fitted()
        codes = np.asarray(codes)
        if codes.dtype.kind not in "iu":
            raise TypeError(f"codes must be integers, got {codes.dtype}")
        if codes.size and (codes.min() < 0 or codes.max() >= len(cb)):
            raise ValueError(f"codes must lie in [0, {len(cb)})")
        g, p = size // self.patch, self.patch
        if g * g != codes.shape[-1]:
            raise ValueError(f"{codes.shape[-1]} codes do not tile a {size}x{size} frame")
        x = cb[codes].reshape(*codes.shape[:-1], g, g, p, p)
        x = np.moveaxis(x, -2, -3)
        return x.reshape(*codes.shape[:-1], size, size)

    def _fitted(self) -> np.ndarray:
        if self.codebook_ is None:
            raise ValueError("the tokenizer is not fitted: call fit() or load a shipped one")
        return self.codebook_


@dataclass(frozen=True)
class VideoTokens:
    """The token vocabulary of a moving-digit video model.

    Layout: ids ``[0, K)`` are image codes, then BOS, 10 class tokens, 9 velocity tokens and
    ``span`` tokens each for the start row and column. The prefix has 5 tokens.
    """

    codebook_size: int = 64
    canvas: int = 16
    patch: int = 4

    @property
    def span(self) -> int:
        return self.canvas - DIGIT + 1

    @property
    def bos(self) -> int:
        return self.codebook_size

    @property
    def vocab_size(self) -> int:
        return self.codebook_size + 1 + 10 + len(VELOCITIES) + 2 * self.span

    @property
    def tokens_per_frame(self) -> int:
        return (self.canvas // self.patch) ** 2

    prefix_len = 5

    def prefix(self, label, velocity, y0, x0) -> np.ndarray:
        """``(V, 5)`` prompt ids from the conditioning arrays."""
        label, velocity, y0, x0 = (np.asarray(a, dtype=np.int64) for a in (label, velocity, y0, x0))
        k = self.codebook_size
        if (label < 0).any() or (label > 9).any():
            raise ValueError("label must lie in [0, 9]")
        if (velocity < 0).any() or (velocity >= len(VELOCITIES)).any():
            raise ValueError(f"velocity must lie in [0, {len(VELOCITIES)})")
        for name, a in (("y0", y0), ("x0", x0)):
            if (a < 0).any() or (a >= self.span).any():
                raise ValueError(f"{name} must lie in [0, {self.span})")
        cols = [
            np.full_like(label, self.bos), k + 1 + label, k + 11 + velocity,
            k + 20 + y0, k + 20 + self.span + x0,
        ]  # fmt: skip
        return np.stack(cols, 1)


def real_clip_frames(max_frames: int = 16) -> np.ndarray:
    """Grey frames ``(F, H, W)`` in [0, 1] of the GIF bundled with scikit-image (extra ``skimage``).

    Used only to measure patch-level temporal redundancy of a real clip.
    """
    from iclr26.shared import import_optional

    import_optional(
        "skimage", dist="iclr26-fastcar", extra="skimage", purpose="the real-clip measurement"
    )
    from pathlib import Path

    import skimage.data
    from PIL import Image, ImageSequence

    path = Path(skimage.data.__file__).parent / "no_time_for_that_tiny.gif"
    with Image.open(path) as im:
        x = np.stack(
            [np.asarray(f.convert("L"), dtype=np.float32) for f in ImageSequence.Iterator(im)]
        )
    x = x / max(float(x.max()), 1e-6)
    return x[:max_frames]
