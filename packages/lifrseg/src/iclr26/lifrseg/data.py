"""SHF-Shapes: a synthetic analogue of the paper's SHF-DSEC (CARLA, 100 Hz labels).

Textured sprites (disc, box, triangle; textures cut from scikit-image's bundled images or
procedural noise) move on a textured background with affine trajectories, z-order occlusion,
emergence from the border and camera ego-motion (translation + zoom). Any time ``t`` renders an
RGB frame, a label map and an analytic forward flow; the event stream comes from
:class:`~iclr26.lifrseg.simulator.EsimSimulator` run on the scene rendered at ``sim_hz``.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from iclr26.lifrseg.events import EventStream, voxel_grid
from iclr26.lifrseg.simulator import EsimSimulator

__all__ = [
    "CLASSES",
    "AnytimeSegDataset",
    "Sequence",
    "ShapesWorld",
    "collate_anytime",
    "load_sequences",
    "make_sequence",
    "make_split",
    "night_degrade",
    "save_sequences",
]

CLASSES = ("background", "disc", "box", "triangle")
# Each class has its own texture and colour family (as road, car, sky do in driving data); the
# background draws from the other images. Textures span 2 px per texel (TEX_SCALE).
_TEXTURES = ("brick", "grass", "gravel", "camera", "coins", "moon", "page", "astronaut", "coffee",
             "chelsea", "rocket", "text", "cell", "clock", "hubble_deep_field")  # fmt: skip
_CLASS_TEXTURE = {1: 0, 2: 1, 3: 2}  # disc: brick, box: grass, triangle: gravel
_CLASS_TINT = {1: (0.95, 0.45, 0.35), 2: (0.35, 0.6, 0.95), 3: (0.9, 0.85, 0.3)}
_TEX_SCALE = 0.5
_TEX_SIZE = 96


@functools.cache
def _skimage_texture(i: int) -> np.ndarray:
    from skimage import data
    from skimage.color import rgb2gray
    from skimage.transform import resize

    img = getattr(data, _TEXTURES[i])()
    img = rgb2gray(img) if img.ndim == 3 else img / 255.0
    f = max(min(img.shape) // _TEX_SIZE, 1)
    s = f * _TEX_SIZE if min(img.shape) >= _TEX_SIZE else min(img.shape)
    img = img[:s, :s].reshape(s // f, f, s // f, f).mean(axis=(1, 3))  # box-filter downsampling
    if img.shape[0] != _TEX_SIZE:
        img = resize(img, (_TEX_SIZE, _TEX_SIZE), order=1, anti_aliasing=False)
    img = (img - img.min()) / max(img.max() - img.min(), 1e-6)
    return img.astype(np.float64)


def _procedural_texture(rng: np.random.Generator) -> np.ndarray:
    noise = rng.random((_TEX_SIZE // 8, _TEX_SIZE // 8))
    tex = np.kron(noise, np.ones((8, 8)))
    k = np.ones(5) / 5  # box blur (separable, wraps)
    for ax in (0, 1):
        tex = sum(np.roll(tex, s, axis=ax) * w for s, w in zip(range(-2, 3), k, strict=True))
    return (tex - tex.min()) / max(tex.max() - tex.min(), 1e-6)


def _bilinear_wrap(tex: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    h, w = tex.shape
    u0, v0 = np.floor(u), np.floor(v)
    fu, fv = u - u0, v - v0
    u0, v0 = u0.astype(np.int64) % w, v0.astype(np.int64) % h
    u1, v1 = (u0 + 1) % w, (v0 + 1) % h
    return (
        tex[v0, u0] * (1 - fu) * (1 - fv) + tex[v0, u1] * fu * (1 - fv)
        + tex[v1, u0] * (1 - fu) * fv + tex[v1, u1] * fu * fv
    )  # fmt: skip


@dataclass(frozen=True)
class _Sprite:
    cls: int
    radius: float
    pos: np.ndarray  # world position at t = 0
    vel: np.ndarray
    acc: np.ndarray
    angle: float
    omega: float
    tex: int
    tint: np.ndarray
    tex_offset: np.ndarray


class ShapesWorld:
    """A scene of textured moving sprites over a textured background, renderable at any time.

    Args:
        height, width: image size in pixels.
        num_sprites: sprites in the scene (2–5 in the default protocol).
        textures: ``"skimage"`` (bundled scikit-image images) or ``"procedural"`` (noise).
        ego_motion: camera translation and zoom.
        speed: sprite speed range in pixels per second.
        emergence: probability that a sprite starts outside the image and enters it.
        seed: seeds everything about the scene.
    """

    def __init__(
        self,
        height: int = 64,
        width: int = 64,
        num_sprites: int = 3,
        *,
        textures: Literal["skimage", "procedural"] = "skimage",
        ego_motion: bool = True,
        speed: tuple[float, float] = (20.0, 60.0),
        emergence: float = 0.3,
        seed: int = 0,
    ) -> None:
        for name, v, low in (
            ("height", height, 8),
            ("width", width, 8),
            ("num_sprites", num_sprites, 0),
        ):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        if textures not in ("skimage", "procedural"):
            raise ValueError(f"textures must be 'skimage' or 'procedural', got {textures!r}")
        if len(speed) != 2 or not (0 <= speed[0] <= speed[1]) or not np.all(np.isfinite(speed)):
            raise ValueError(f"speed must be (low, high) with 0 <= low <= high, got {speed!r}")
        if not 0.0 <= emergence <= 1.0:
            raise ValueError(f"emergence must be in [0, 1], got {emergence}")
        rng = np.random.default_rng(seed)
        self.params = {
            "height": int(height), "width": int(width), "num_sprites": int(num_sprites),
            "textures": textures, "ego_motion": bool(ego_motion), "speed": [float(v) for v in speed],
            "emergence": float(emergence), "seed": int(seed),
        }  # fmt: skip
        self.height, self.width = int(height), int(width)
        self.num_classes = len(CLASSES)
        if textures == "skimage":
            self._class_tex = {c: _skimage_texture(i) for c, i in _CLASS_TEXTURE.items()}
            self._bg_tex = _skimage_texture(int(rng.integers(len(_CLASS_TEXTURE), len(_TEXTURES))))
        else:
            self._class_tex = {
                c: _procedural_texture(np.random.default_rng(c)) for c in _CLASS_TINT
            }
            self._bg_tex = _procedural_texture(rng)
        self._bg_tint = rng.uniform(0.3, 0.7) * (1 + rng.uniform(-0.15, 0.15, 3))
        self._bg_offset = rng.uniform(0, _TEX_SIZE, 2)
        self._ego_vel = rng.uniform(-12, 12, 2) if ego_motion else np.zeros(2)
        self._zoom_rate = rng.uniform(-0.08, 0.08) if ego_motion else 0.0
        size = min(height, width)
        self._center = np.array([(width - 1) / 2, (height - 1) / 2])
        sprites = []
        for i in range(num_sprites):
            radius = rng.uniform(0.12, 0.22) * size
            speed_i = rng.uniform(*speed)
            cls = int(rng.integers(1, len(CLASSES)))
            if rng.random() < emergence:  # start beyond a border, heading inwards
                side = rng.integers(4)
                along = rng.uniform(0.2, 0.8)
                pos = {
                    0: [-radius * 0.8, along * height], 1: [width + radius * 0.8, along * height],
                    2: [along * width, -radius * 0.8], 3: [along * width, height + radius * 0.8],
                }[int(side)]  # fmt: skip
                pos = np.array(pos, dtype=float)
                direction = self._center - pos
                direction = direction / np.linalg.norm(direction)
            else:
                pos = rng.uniform([0.15 * width, 0.15 * height], [0.85 * width, 0.85 * height])
                a = rng.uniform(0, 2 * np.pi)
                direction = np.array([np.cos(a), np.sin(a)])
            sprites.append(
                _Sprite(
                    cls=cls,
                    radius=radius,
                    pos=pos,
                    vel=direction * speed_i,
                    acc=rng.normal(0, 15, 2),
                    angle=rng.uniform(0, 2 * np.pi),
                    omega=rng.uniform(-2.0, 2.0),
                    tex=i + 1,
                    tint=np.clip(
                        np.array(_CLASS_TINT[cls]) * rng.uniform(0.75, 1.05)
                        + rng.uniform(-0.1, 0.1, 3),
                        0.05,
                        1.0,
                    ),
                    tex_offset=rng.uniform(0, _TEX_SIZE, 2),
                )
            )
        self.sprites = tuple(sprites)  # painted in this order: later sprites occlude earlier
        ys, xs = np.mgrid[0:height, 0:width].astype(np.float64)
        self._grid = np.stack([xs, ys], axis=-1)

    # camera: q = s(t)·(w − c − e(t)) + c. Times are arrays [T] broadcast as [T, 1, 1, 1].
    def _to_world(self, q: np.ndarray, t: np.ndarray) -> np.ndarray:
        t4 = t[:, None, None, None]
        return (q - self._center) / (1.0 + self._zoom_rate * t4) + self._center + self._ego_vel * t4

    def _to_image(self, w: np.ndarray, t: np.ndarray) -> np.ndarray:
        t4 = t[:, None, None, None]
        return (1.0 + self._zoom_rate * t4) * (w - self._center - self._ego_vel * t4) + self._center

    @staticmethod
    def _pose(sp: _Sprite, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t4 = t[:, None, None, None]
        return sp.pos + sp.vel * t4 + 0.5 * sp.acc * t4 * t4, (sp.angle + sp.omega * t)[
            :, None, None
        ]

    @staticmethod
    def _local(sp: _Sprite, w: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m, th = ShapesWorld._pose(sp, t)
        dx, dy = w[..., 0] - m[..., 0], w[..., 1] - m[..., 1]
        c, s = np.cos(th), np.sin(th)
        return c * dx + s * dy, -s * dx + c * dy

    @staticmethod
    def _inside(sp: _Sprite, ux: np.ndarray, uy: np.ndarray) -> np.ndarray:
        r = sp.radius
        if sp.cls == 1:  # disc
            return (ux * ux + uy * uy) <= r * r
        if sp.cls == 2:  # box (half side r·0.85)
            return (np.abs(ux) <= 0.85 * r) & (np.abs(uy) <= 0.85 * r)
        inside = np.ones(ux.shape, dtype=bool)  # equilateral triangle, circumradius r
        for k in range(3):
            a = np.pi / 2 + 2 * np.pi * k / 3
            inside &= (ux * np.cos(a) + uy * np.sin(a)) >= -0.5 * r
        return inside

    @staticmethod
    def _times(t: float | np.ndarray) -> np.ndarray:
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        if ts.ndim != 1 or not np.all(np.isfinite(ts)):
            raise ValueError(f"t must be a finite time or a 1-D array of times, got {t!r}")
        return ts

    def surfaces(self, t: float | np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
        """World coordinates ``[T, H, W, 2]``, visible surface ids ``[T, H, W]`` (0 = background,
        ``k`` = sprite ``k - 1``) and each sprite's local coordinates, at times ``t``."""
        ts = self._times(t)
        w = self._to_world(self._grid[None], ts)
        sid = np.zeros(w.shape[:-1], dtype=np.int64)
        local = []
        for k, sp in enumerate(self.sprites):
            ux, uy = self._local(sp, w, ts)
            local.append((ux, uy))
            sid[self._inside(sp, ux, uy)] = k + 1
        return w, sid, local

    def render_many(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`render` at several times at once: ``[T, H, W, 3]``, ``[T, H, W]``, ``[T, H, W]``."""
        w, sid, local = self.surfaces(t)
        ts = _TEX_SCALE
        tex0 = _bilinear_wrap(
            self._bg_tex, ts * w[..., 0] + self._bg_offset[0], ts * w[..., 1] + self._bg_offset[1]
        )
        rgb = (0.15 + 0.85 * tex0)[..., None] * self._bg_tint
        label = np.zeros(sid.shape, dtype=np.uint8)
        for k, sp in enumerate(self.sprites):
            m = sid == k + 1
            if not m.any():
                continue
            ux, uy = local[k][0][m], local[k][1][m]
            tex = _bilinear_wrap(
                self._class_tex[sp.cls], ts * ux + sp.tex_offset[0], ts * uy + sp.tex_offset[1]
            )
            rgb[m] = (0.1 + 0.9 * tex)[:, None] * sp.tint
            label[m] = sp.cls
        return np.clip(rgb, 0.0, 1.0), label, sid

    def render(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rgb [H, W, 3] float in [0, 1], label [H, W] uint8, surface id [H, W])`` at ``t``."""
        if not np.isscalar(t) or not np.isfinite(t):
            raise ValueError(f"t must be a finite time, got {t!r}")
        rgb, label, sid = self.render_many(np.array([t], dtype=np.float64))
        return rgb[0], label[0], sid[0]

    def flow(self, t0: float, t1: float) -> np.ndarray:
        """Analytic forward flow ``[2, H, W]`` (x first) of the surface visible at each pixel at
        ``t0``, to its image position at ``t1`` (occlusion order respected at ``t0``)."""
        if not (np.isfinite(t0) and np.isfinite(t1)):
            raise ValueError(f"t0 and t1 must be finite, got {t0}, {t1}")
        ta, tb = np.array([t0], dtype=np.float64), np.array([t1], dtype=np.float64)
        w, sid, local = self.surfaces(ta)
        w1 = w.copy()
        for k, sp in enumerate(self.sprites):
            m = sid == k + 1
            if not m.any():
                continue
            ux, uy = local[k][0][m], local[k][1][m]
            m1, th1 = self._pose(sp, tb)
            c, s = np.cos(th1[0, 0, 0]), np.sin(th1[0, 0, 0])
            w1[m] = m1[0, 0, 0] + np.stack([c * ux - s * uy, s * ux + c * uy], -1)
        q1 = self._to_image(w1, tb)[0]
        return np.moveaxis(q1 - self._grid, -1, 0).astype(np.float32)


def night_degrade(
    rgb: np.ndarray, *, seed: int = 0, gain: float = 0.15, photons: float = 80.0
) -> np.ndarray:
    """A "night" version of linear RGB in [0, 1]: gamma-darkened by ``gain``, compressed contrast,
    Poisson shot noise (``photons`` at full scale) and Gaussian read noise."""
    rgb = np.asarray(rgb, dtype=np.float64)
    if not np.all(np.isfinite(rgb)):
        raise ValueError("rgb must be finite")
    rng = np.random.default_rng(seed)
    dark = gain * np.clip(rgb, 0, 1) ** 1.5 + 0.02
    noisy = rng.poisson(dark * photons) / photons + rng.normal(0, 0.02, rgb.shape)
    return np.clip(noisy, 0.0, 1.0).astype(np.float32)


@dataclass
class Sequence:
    """One rendered sequence.

    Attributes:
        hfr_rgb: ``[L, H, W, 3]`` uint8 frames at every label time (the HFR oracle's input).
        labels: ``[L, H, W]`` uint8 class maps at ``label_times``.
        label_times: ``[L]`` seconds.
        rgb_stride: the LFR RGB frames are ``hfr_rgb[::rgb_stride]``.
        events: the simulated events of the whole sequence.
        world: the scene (for analytic flow).
        night: RGB frames are degraded ("night" split).
    """

    hfr_rgb: np.ndarray
    labels: np.ndarray
    label_times: np.ndarray
    rgb_stride: int
    events: EventStream
    world: ShapesWorld
    night: bool = False

    @property
    def height(self) -> int:
        return self.labels.shape[1]

    @property
    def width(self) -> int:
        return self.labels.shape[2]

    def frame_index(self, t: float) -> int:
        """Index of the label time ``t`` (must be on the label grid)."""
        i = int(np.argmin(np.abs(self.label_times - t)))
        if abs(self.label_times[i] - t) > 1e-6:
            raise ValueError(f"time {t} is not on the label grid of this sequence")
        return i


def make_sequence(
    world: ShapesWorld,
    duration_s: float = 1.0,
    rgb_hz: int = 20,
    label_hz: int = 200,
    sim_hz: int = 600,
    *,
    night: bool = False,
    contrast: float = 0.2,
    contrast_sigma: float = 0.02,
    noise_rate_hz: float | None = None,
    seed: int = 0,
) -> Sequence:
    """Render ``world`` for ``duration_s`` seconds: labels and HFR RGB at ``label_hz``, LFR RGB at
    ``rgb_hz`` (a subset), events from the scene rendered at ``sim_hz``. ``night`` degrades the
    RGB frames and adds noise events (default 0.5 Hz per pixel at night, 0.05 Hz by day); events
    are simulated from the clean scene (the HDR advantage of event cameras)."""
    if not isinstance(world, ShapesWorld):
        raise TypeError(f"world must be a ShapesWorld, got {type(world).__name__}")
    if not np.isfinite(duration_s) or duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    for name, v in (("rgb_hz", rgb_hz), ("label_hz", label_hz), ("sim_hz", sim_hz)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if label_hz % rgb_hz or sim_hz % label_hz:
        raise ValueError("rgb_hz must divide label_hz and label_hz must divide sim_hz")
    n_sim = round(duration_s * sim_hz) + 1
    every = sim_hz // label_hz
    rate = (0.5 if night else 0.05) if noise_rate_hz is None else noise_rate_hz
    sim = EsimSimulator(
        contrast, contrast, contrast_sigma=contrast_sigma, noise_rate_hz=rate, seed=seed
    )
    times_sim = np.arange(n_sim) / sim_hz
    streams = []
    rgbs, labels = [], []
    chunk = 100
    for c0 in range(0, n_sim, chunk):
        rgb, label, _ = world.render_many(times_sim[c0 : c0 + chunk])
        for k in range(len(rgb)):
            i = c0 + k
            if i == 0:
                sim.reset(rgb[k], 0.0)
            else:
                streams.append(sim.step(rgb[k], times_sim[i]))
            if i % every == 0:
                rgbs.append(rgb[k])
                labels.append(label[k])
    times = times_sim[::every]
    hfr = np.stack(rgbs)
    if night:
        hfr = night_degrade(hfr, seed=seed)
    return Sequence(
        hfr_rgb=np.round(hfr * 255).astype(np.uint8), labels=np.stack(labels),
        label_times=np.asarray(times), rgb_stride=label_hz // rgb_hz,
        events=EventStream.concatenate(streams) if streams else EventStream.empty(),
        world=world, night=night,
    )  # fmt: skip


def make_split(
    n: int,
    *,
    seed: int,
    duration_s: float = 1.0,
    size: int = 64,
    night: bool = False,
    progress: bool = False,
    **seq_kw: float,
) -> list[Sequence]:
    """``n`` sequences with 2–5 sprites each, scene ``i`` seeded by ``seed`` and ``i``."""
    from iclr26.shared import progress as progress_bar

    out = []
    for i in progress_bar(range(n), desc="render", enabled=progress):
        s = int(np.random.default_rng([seed, i]).integers(2**31))
        world = ShapesWorld(size, size, num_sprites=2 + s % 4, seed=s)
        out.append(make_sequence(world, duration_s, night=night, seed=s, **seq_kw))
    return out


def save_sequences(sequences: Seq[Sequence], folder: str | os.PathLike[str]) -> list[Path]:
    """Write each sequence to ``folder/seq_XXX/``: ``events.h5`` (DSEC layout), ``frames.npz``
    (HFR RGB, labels, label times, RGB stride, the scene parameters) and ``frame.png`` (the
    first LFR frame after 50 ms, for ``iclr26-lifrseg predict``)."""
    import json

    from skimage.io import imsave

    from iclr26.lifrseg.events import write_dsec_h5

    root = Path(folder)
    out = []
    for i, seq in enumerate(sequences):
        d = root / f"seq_{i:03d}"
        d.mkdir(parents=True, exist_ok=True)
        write_dsec_h5(d / "events.h5", seq.events)
        np.savez_compressed(
            d / "frames.npz", hfr_rgb=seq.hfr_rgb, labels=seq.labels, label_times=seq.label_times,
            rgb_stride=seq.rgb_stride, night=seq.night, world=json.dumps(seq.world.params),
        )  # fmt: skip
        lfr = [
            i
            for i in range(0, len(seq.label_times), seq.rgb_stride)
            if seq.label_times[i] >= 0.05 - 1e-9
        ]
        k = lfr[0] if lfr else 0
        imsave(d / "frame.png", seq.hfr_rgb[k], check_contrast=False)
        out.append(d)
    return out


def load_sequences(folder: str | os.PathLike[str]) -> list[Sequence]:
    """Read the sequences written by :func:`save_sequences`."""
    import json

    from iclr26.lifrseg.events import read_dsec_h5

    root = Path(folder)
    if not root.is_dir():
        raise OSError(f"data folder {os.fspath(folder)!r} does not exist")
    dirs = sorted(p for p in root.glob("seq_*") if p.is_dir())
    if not dirs:
        raise ValueError(
            f"{os.fspath(folder)!r} holds no seq_* folders (write one with `iclr26-lifrseg simulate`)"
        )
    out = []
    for d in dirs:
        f = d / "frames.npz"
        if not f.is_file():
            raise ValueError(f"{os.fspath(d)!r} lacks frames.npz")
        with np.load(f, allow_pickle=False) as z:
            missing = {"hfr_rgb", "labels", "label_times", "rgb_stride", "night", "world"} - set(
                z.files
            )
            if missing:
                raise ValueError(f"{os.fspath(f)!r} lacks arrays {sorted(missing)}")
            params = json.loads(str(z["world"]))
            params["speed"] = tuple(params["speed"])
            world = ShapesWorld(**params)
            seq = Sequence(
                hfr_rgb=z["hfr_rgb"], labels=z["labels"], label_times=z["label_times"],
                rgb_stride=int(z["rgb_stride"]), events=read_dsec_h5(d / "events.h5"),
                world=world, night=bool(z["night"]),
            )  # fmt: skip
        out.append(seq)
    return out


class AnytimeSegDataset(torch.utils.data.Dataset):
    """Anytime samples: for every LFR frame at ``t``, the past events ``[t − past_window_s, t)`` and,
    for each ``δt`` in ``deltas_s`` (increasing), the query events ``[t, t + δt)`` and the label at
    ``t + δt``. The queries of one frame form a chain, processed in order (memory is written after
    each one), as at inference.

    Each item is a dict: ``image`` [3, H, W] (I_t), ``ev_past`` [B, H, W], ``ev_query``
    [K, B, H, W] (voxel grids, time normalised by the window bounds), ``label`` [K, H, W] long,
    ``target_image`` [K, 3, H, W] (I_{t+δt}, only for the HFR oracle), ``label_t`` [H, W],
    ``flow`` [K, 2, H, W] (analytic, t → t + δt) and ``dt`` [K] seconds. Frames whose last query
    falls after the sequence's end are skipped.

    The paper's training-only "second warp" (DSEC has labels only at frame times) is not needed
    here: SHF-Shapes has labels at every 5 ms.
    """

    def __init__(
        self,
        sequences: Seq[Sequence],
        deltas_s: Seq[float] = (0.01, 0.025, 0.05),
        num_bins: int = 5,
        past_window_s: float = 0.05,
        *,
        max_frames: int | None = None,
    ) -> None:
        if not sequences:
            raise ValueError("sequences must not be empty")
        if any(not isinstance(s, Sequence) for s in sequences):
            raise TypeError("sequences must hold Sequence objects")
        deltas = [float(d) for d in deltas_s]
        if not deltas or any(not np.isfinite(d) or d < 0 for d in deltas):
            raise ValueError(f"deltas_s must be non-negative finite seconds, got {deltas_s!r}")
        if any(b < a for a, b in itertools.pairwise(deltas)):
            raise ValueError(f"deltas_s must be non-decreasing, got {deltas_s!r}")
        if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 1:
            raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}")
        if not np.isfinite(past_window_s) or past_window_s <= 0:
            raise ValueError(f"past_window_s must be positive, got {past_window_s}")
        self.sequences, self.deltas, self.num_bins = list(sequences), deltas, num_bins
        self.past_window_s = float(past_window_s)
        self.index: list[tuple[int, int]] = []
        for si, seq in enumerate(self.sequences):
            kept = 0
            for fi in range(0, len(seq.label_times), seq.rgb_stride):
                t = seq.label_times[fi]
                if t < past_window_s - 1e-9 or t + deltas[-1] > seq.label_times[-1] + 1e-9:
                    continue
                if max_frames is not None and kept >= max_frames:
                    break
                for d in deltas:
                    seq.frame_index(t + d)  # on the label grid, or a clear error
                self.index.append((si, fi))
                kept += 1
        if not self.index:
            raise ValueError(
                "no frame has all its queries inside a sequence (sequences too short?)"
            )
        self._cache: dict[int, dict[str, torch.Tensor]] = {}

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if i in self._cache:
            return self._cache[i]
        si, fi = self.index[i]
        seq = self.sequences[si]
        t = float(seq.label_times[fi])
        h, w = seq.height, seq.width
        past = seq.events.slice(t - self.past_window_s, t)
        js = [seq.frame_index(t + d) for d in self.deltas]
        rgb = torch.from_numpy(seq.hfr_rgb).permute(0, 3, 1, 2)
        item = {
            "image": rgb[fi].float() / 255.0,
            "target_image": rgb[js].float() / 255.0,
            "ev_past": voxel_grid(past, self.num_bins, h, w, t_start=t - self.past_window_s, t_end=t),
            "ev_query": torch.stack([
                voxel_grid(seq.events.slice(t, t + d), self.num_bins, h, w, t_start=t, t_end=t + d)
                for d in self.deltas
            ]),
            "label": torch.from_numpy(seq.labels[js].astype(np.int64)),
            "label_t": torch.from_numpy(seq.labels[fi].astype(np.int64)),
            "flow": torch.from_numpy(np.stack([seq.world.flow(t, t + d) for d in self.deltas])),
            "dt": torch.tensor(self.deltas, dtype=torch.float32),
        }  # fmt: skip
        self._cache[i] = item
        return item


def collate_anytime(items: Seq[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Stack a list of :class:`AnytimeSegDataset` items into a batch (a leading N axis)."""
    if not items:
        raise ValueError("items must not be empty")
    return {k: torch.stack([it[k] for it in items]) for k in items[0]}
