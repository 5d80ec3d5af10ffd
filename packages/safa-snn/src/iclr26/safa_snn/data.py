"""Bundled data for the FSCIL experiments (no downloads): scikit-learn's digits, glyphs
rendered with the fonts that ship inside matplotlib, and synthetic DVS-like event streams."""

from __future__ import annotations

import functools

import numpy as np
import torch

from iclr26.safa_snn.fscil import FSCILData

__all__ = [
    "EVENT_CLASSES",
    "GLYPHS",
    "glyph_fonts",
    "load_digits_fscil",
    "load_events_fscil",
    "load_glyphs_fscil",
]


def load_digits_fscil(test_fraction: float = 0.5, seed: int = 0) -> FSCILData:
    """scikit-learn's 1,797 8×8 digits (10 classes, ~180 each), scaled to [0, 1], flattened to
    64 features, split per class into train and test with ``test_fraction`` (seeded)."""
    from sklearn.datasets import load_digits

    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        k = round(len(idx) * test_fraction)
        test.append(idx[:k])
        train.append(idx[k:])
    tr, te = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    return FSCILData(
        torch.from_numpy(X[tr]), torch.from_numpy(y[tr]).long(),
        torch.from_numpy(X[te]), torch.from_numpy(y[te]).long(),
        classes=tuple(range(10)),
    )  # fmt: skip


# 0-9, A-Z, a-z without the look-alikes "O" (of 0) and "l" (of I and 1): 60 characters
GLYPHS = tuple(
    c for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in "Ol"
)


def _render(font, ch: str, size: int, rng: np.random.Generator | None) -> np.ndarray:
    from PIL import Image, ImageDraw

    canvas = Image.new("L", (4 * size, 4 * size), 0)
    ImageDraw.Draw(canvas).text((size, size), ch, fill=255, font=font)
    box = canvas.getbbox()
    if box is None:
        return np.zeros((size, size), dtype=np.float32)
    glyph = canvas.crop(box)
    fit = 0.8 if rng is None else float(rng.uniform(0.65, 0.9))
    scale = fit * size / max(glyph.size)
    w, h = max(1, round(glyph.size[0] * scale)), max(1, round(glyph.size[1] * scale))
    glyph = glyph.resize((w, h), Image.Resampling.BILINEAR)
    out = Image.new("L", (size, size), 0)
    out.paste(glyph, ((size - w) // 2, (size - h) // 2))
    if rng is not None:  # random affine: rotation ±10°, shift ±size/14
        shift = size / 14
        out = out.rotate(
            float(rng.uniform(-10, 10)),
            resample=Image.Resampling.BILINEAR,
            translate=(float(rng.uniform(-shift, shift)), float(rng.uniform(-shift, shift))),
        )
    return np.asarray(out, dtype=np.float32) / 255.0


# TeX's symbol and math-extension fonts map ASCII code points to symbols, not characters
_SYMBOL_FONTS = {"cmex10", "cmsy10"}


def glyph_fonts(chars: tuple[str, ...] = GLYPHS) -> list[str]:
    """The TrueType fonts shipped with matplotlib that draw every character of ``chars`` as a
    distinct, non-empty glyph; symbol fonts and fonts that draw a missing-glyph box instead are
    left out (22 of matplotlib 3.x's 40 fonts remain)."""
    if not isinstance(chars, tuple) or not all(isinstance(c, str) and len(c) == 1 for c in chars):
        raise TypeError("chars must be a tuple of single characters")
    return list(_glyph_fonts(chars))


@functools.lru_cache(maxsize=4)
def _glyph_fonts(chars: tuple[str, ...]) -> tuple[str, ...]:
    from pathlib import Path

    import matplotlib
    from PIL import ImageFont

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    usable = []
    for path in sorted(folder.glob("*.ttf")):
        if path.stem in _SYMBOL_FONTS:
            continue
        font = ImageFont.truetype(str(path), 32)
        imgs = [_render(font, c, 16, None) for c in chars]
        if any(float(im.sum()) == 0.0 for im in imgs):
            continue
        distinct = {np.round(im, 2).tobytes() for im in imgs}
        if len(distinct) >= 0.95 * len(chars):
            usable.append(str(path))
    return tuple(usable)


def load_glyphs_fscil(
    classes: int = 60,
    *,
    size: int = 28,
    test_fonts: float = 0.3,
    copies: int = 2,
    augment: bool = True,
    noise: float = 0.05,
    flatten: bool = False,
    seed: int = 0,
) -> FSCILData:
    """Characters rendered with the fonts that ship inside matplotlib (no download).

    ``classes`` of the 60 characters in :data:`GLYPHS` (0-9, A-Z, a-z without O and l); the
    usable fonts (:func:`glyph_fonts`) are split into train and test fonts (``test_fonts`` of
    them, seeded), so the test measures generalisation to unseen fonts. Every (font, character)
    gives ``copies`` images of ``size`` × ``size`` in [0, 1] with a random affine (if
    ``augment``) and Gaussian pixel noise of sd ``noise``. ``x`` is ``[n, 1, size, size]``
    (``[n, size²]`` with ``flatten``); labels are 0 .. classes − 1 in :data:`GLYPHS` order.
    """
    from PIL import ImageFont

    if isinstance(classes, bool) or not isinstance(classes, int) or not 2 <= classes <= 60:
        raise ValueError(f"classes must be an int in [2, 60], got {classes!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies must be an int >= 1, got {copies!r}")
    if not 0.0 < test_fonts < 1.0:
        raise ValueError(f"test_fonts must be in (0, 1), got {test_fonts}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite float >= 0, got {noise}")
    chars = GLYPHS[:classes]
    fonts = glyph_fonts(GLYPHS)
    if len(fonts) < 2:
        raise ValueError("fewer than two usable fonts ship with this matplotlib")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(fonts))
    n_test = min(len(fonts) - 1, max(1, round(len(fonts) * test_fonts)))
    split = {
        "test": [fonts[i] for i in order[:n_test]],
        "train": [fonts[i] for i in order[n_test:]],
    }
    out = {}
    for name, paths in split.items():
        xs, ys = [], []
        for path in paths:
            font = ImageFont.truetype(path, 2 * size)
            for label, ch in enumerate(chars):
                for _ in range(copies):
                    xs.append(_render(font, ch, size, rng if augment else None))
                    ys.append(label)
        x = np.stack(xs)[:, None]
        if noise > 0:
            x = np.clip(x + rng.normal(0.0, noise, x.shape), 0.0, 1.0)
        x = torch.from_numpy(x.astype(np.float32))
        out[name] = (x.flatten(1) if flatten else x, torch.tensor(ys, dtype=torch.long))
    return FSCILData(*out["train"], *out["test"], classes=tuple(range(classes)))


EVENT_CLASSES = (
    "bar right", "bar left", "bar down", "bar up", "blob down-right", "blob up-left",
    "blob clockwise", "blob counter-clockwise", "grating right", "ring expanding",
    "ring contracting",
)  # fmt: skip


def _event_intensity(k: int, p: float, yy: np.ndarray, xx: np.ndarray, prm: dict) -> np.ndarray:
    """Intensity of class ``k`` at clip phase ``p`` ∈ [0, 1] on the pixel grid (values in [0, 1])."""
    size = xx.shape[0]

    def edge(
        d,
    ):  # soft band of half-width w around d = 0 (anti-aliased, so sub-pixel motion counts)
        return 1.0 / (1.0 + np.exp((np.abs(d) - prm["w"]) / 0.4))

    shift = prm["v"] * p * size
    if k in (0, 1, 2, 3):  # bars
        coord = xx if k in (0, 1) else yy
        pos = prm["x0"] * size + (shift if k in (0, 2) else -shift)
        if k in (1, 3):
            pos = (1 - prm["x0"]) * size - shift
        return prm["c"] * edge(coord - pos)
    if k in (4, 5, 6, 7):  # blobs
        if k in (4, 5):
            sgn = 1.0 if k == 4 else -1.0
            start = prm["x0"] if k == 4 else 1 - prm["x0"]
            cx = cy = start * size + sgn * shift * 0.8
            cy = cy + prm["off"] * size
        else:
            sgn = 1.0 if k == 6 else -1.0  # image y points down: +angle turns clockwise
            ang = prm["phi"] + sgn * prm["omega"] * p
            cx = size / 2 + prm["R"] * size * np.cos(ang)
            cy = size / 2 + prm["R"] * size * np.sin(ang)
        r2 = (xx - cx) ** 2 + (yy - cy) ** 2
        return prm["c"] * np.exp(-r2 / (2 * prm["sigma"] ** 2))
    if k == 8:  # grating drifting right
        lam = prm["lam"]
        return prm["c"] * 0.5 * (1 + np.sin(2 * np.pi * (xx - 0.6 * lam * p * prm["v"] * 4) / lam))
    # rings around a jittered centre
    cx, cy = size / 2 + prm["off"] * size, size / 2 - prm["off"] * size
    dist = np.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
    grow = prm["v"] * size * 0.6 * p
    r = 0.1 * size + grow if k == 9 else 0.45 * size - grow
    return prm["c"] * edge(dist - r)


def load_events_fscil(
    classes: int = 11,
    *,
    T: int = 8,
    size: int = 32,
    train_per_class: int = 40,
    test_per_class: int = 20,
    contrast_threshold: float = 0.15,
    noise: float = 0.01,
    seed: int = 0,
) -> FSCILData:
    """Synthetic DVS-like event streams (no download), shaped like DVS128 Gesture: 11 classes of
    moving patterns (:data:`EVENT_CLASSES`: bars moving in 4 directions, blobs moving along two
    diagonals and circling both ways, a drifting grating, expanding and contracting rings).

    Every sample draws its own start position, speed (±25 %), width and contrast. A pattern's
    intensity is rendered at T + 1 instants of the clip; frame t holds an ON event at a pixel
    whose intensity rose by more than ``contrast_threshold`` since the previous instant and an
    OFF event where it fell by more (a DVS pixel's log-intensity change, linearised), plus
    background events with probability ``noise`` per pixel, polarity and frame. ``x`` is
    ``[n, T, 2, size, size]`` with 0/1 entries (channel 0 ON, 1 OFF); labels 0 .. classes − 1.
    """
    for name, v, low in (
        ("classes", classes, 2), ("T", T, 1), ("size", size, 8),
        ("train_per_class", train_per_class, 1), ("test_per_class", test_per_class, 1),
    ):  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    if classes > len(EVENT_CLASSES):
        raise ValueError(f"classes must be <= {len(EVENT_CLASSES)}, got {classes}")
    if not (np.isfinite(contrast_threshold) and contrast_threshold > 0):
        raise ValueError(f"contrast_threshold must be > 0, got {contrast_threshold}")
    if not (np.isfinite(noise) and 0 <= noise < 1):
        raise ValueError(f"noise must be in [0, 1), got {noise}")
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    phases = np.linspace(0.0, 1.0, T + 1)

    def sample(k: int) -> np.ndarray:
        prm = {
            "x0": rng.uniform(0.15, 0.3), "v": rng.uniform(0.45, 0.6) * rng.uniform(0.8, 1.25),
            "w": rng.uniform(1.0, 2.0), "c": rng.uniform(0.7, 1.0),
            "off": rng.uniform(-0.08, 0.08), "phi": rng.uniform(0, 2 * np.pi),
            "omega": rng.uniform(1.2, 1.6) * np.pi, "R": rng.uniform(0.22, 0.3),
            "sigma": rng.uniform(1.5, 2.5) * size / 32, "lam": rng.uniform(6, 10) * size / 32,
        }  # fmt: skip
        frames = np.stack([_event_intensity(k, p, yy, xx, prm) for p in phases])
        diff = np.diff(frames, axis=0)
        ev = np.stack([diff > contrast_threshold, diff < -contrast_threshold], axis=1)
        ev |= rng.random(ev.shape) < noise
        return ev.astype(np.float32)

    out = {}
    for split, n in (("train", train_per_class), ("test", test_per_class)):
        xs = [sample(k) for k in range(classes) for _ in range(n)]
        ys = np.repeat(np.arange(classes), n)
        out[split] = (torch.from_numpy(np.stack(xs)), torch.from_numpy(ys).long())
    return FSCILData(*out["train"], *out["test"], classes=tuple(range(classes)))
