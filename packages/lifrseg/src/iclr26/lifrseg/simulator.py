"""An ESIM-style event camera simulator (Rebecq et al., CoRL 2018; rpg_esim's principle).

Each pixel keeps a reference log intensity ``L_ref``. Between two rendered samples the log
intensity ``L = log(I + eps)`` is interpolated linearly in time; every crossing of
``L_ref ± k·C`` fires an event at the interpolated crossing time with polarity ±1, and the
reference moves to the crossed level. A crossing that lands exactly on a sample fires.
Refractory period: an event closer than ``refractory_s`` to the pixel's last *emitted* event is
suppressed but the reference level still advances (as rpg_esim does). Contrast noise: per-pixel
thresholds ``C ~ N(C, sigma)`` drawn once at :meth:`EsimSimulator.reset` (clipped at 0.01;
rpg_esim redraws per crossing, our choice keeps the crossing levels equally spaced so a step is
vectorised). Noise events: a homogeneous Poisson process per pixel with random polarity.
"""

from __future__ import annotations

import numpy as np

from iclr26.lifrseg.events import EventStream

__all__ = ["EsimSimulator", "simulate_from_frames"]

_TOL = 1e-9  # a crossing exactly on a sample (up to float round-off) fires


def _as_gray(image: object, name: str = "image") -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim == 3 and arr.shape[-1] == 3:
        arr = arr @ np.array([0.299, 0.587, 0.114])
    if arr.ndim != 2:
        raise ValueError(f"{name} must be [H, W] or [H, W, 3], got shape {np.asarray(image).shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if arr.min() < 0:
        raise ValueError(f"{name} must hold non-negative linear intensities")
    return arr


class EsimSimulator:
    """Convert a stream of rendered intensity images into events.

    Args:
        contrast_pos, contrast_neg: thresholds on the log intensity (ESIM/v2e use 0.15–0.5).
        contrast_sigma: std of the per-pixel threshold mismatch.
        refractory_s: minimum time between two emitted events of one pixel.
        log_eps: ``eps`` in ``log(I + eps)``.
        noise_rate_hz: rate of noise events per pixel.
        seed: seeds the threshold mismatch and the noise events.
    """

    def __init__(
        self,
        contrast_pos: float = 0.2,
        contrast_neg: float = 0.2,
        contrast_sigma: float = 0.0,
        refractory_s: float = 0.0,
        log_eps: float = 1e-3,
        noise_rate_hz: float = 0.0,
        seed: int | None = None,
    ) -> None:
        for name, v, low in (
            ("contrast_pos", contrast_pos, 0.0), ("contrast_neg", contrast_neg, 0.0),
        ):  # fmt: skip
            if not np.isfinite(v) or v <= low:
                raise ValueError(f"{name} must be a positive finite number, got {v}")
        for name, v in (
            ("contrast_sigma", contrast_sigma), ("refractory_s", refractory_s),
            ("noise_rate_hz", noise_rate_hz),
        ):  # fmt: skip
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a non-negative finite number, got {v}")
        if not np.isfinite(log_eps) or log_eps <= 0:
            raise ValueError(f"log_eps must be positive, got {log_eps}")
        self.contrast_pos, self.contrast_neg = float(contrast_pos), float(contrast_neg)
        self.contrast_sigma, self.refractory_s = float(contrast_sigma), float(refractory_s)
        self.log_eps, self.noise_rate_hz = float(log_eps), float(noise_rate_hz)
        self.rng = np.random.default_rng(seed)
        self._ref: np.ndarray | None = None

    def reset(self, image: np.ndarray, t: float) -> None:
        """Start at ``image`` (linear intensity ``[H, W]`` or RGB ``[H, W, 3]``) at time ``t``."""
        gray = _as_gray(image)
        if not np.isfinite(t) or t < 0:
            raise ValueError(f"t must be a non-negative finite time, got {t}")
        self._log = np.log(gray + self.log_eps)
        self._ref = self._log.copy()
        self._t = float(t)
        self._last = np.full(gray.shape, -np.inf)
        shape = gray.shape
        if self.contrast_sigma > 0:
            self._cp = np.maximum(
                self.rng.normal(self.contrast_pos, self.contrast_sigma, shape), 0.01
            )
            self._cn = np.maximum(
                self.rng.normal(self.contrast_neg, self.contrast_sigma, shape), 0.01
            )
        else:
            self._cp = np.full(shape, self.contrast_pos)
            self._cn = np.full(shape, self.contrast_neg)

    def step(self, image: np.ndarray, t: float) -> EventStream:
        """Events in ``(t_prev, t]`` from the linear log-intensity path to ``image`` at ``t``."""
        if self._ref is None:
            raise ValueError("call reset(image, t) before step()")
        new = np.log(_as_gray(image) + self.log_eps)
        if new.shape != self._log.shape:
            raise ValueError(
                f"image shape {new.shape} differs from the reset image {self._log.shape}"
            )
        if not np.isfinite(t) or t <= self._t:
            raise ValueError(f"t must be later than the previous sample {self._t}, got {t}")
        old, ref, t0, dt = self._log, self._ref, self._t, t - self._t
        dl = new - old
        height, width = new.shape
        xs, ys, ts, ps = [], [], [], []
        for sign, c in ((1, self._cp), (-1, self._cn)):
            # crossings of ref + sign·k·c, k = 1..n, between old and new
            reach = sign * (new - ref) / c
            n = np.floor(reach + _TOL).astype(np.int64)
            n[(sign * dl) <= 0] = 0
            n = np.maximum(n, 0)
            if not n.any():
                continue
            for k in range(1, int(n.max()) + 1):
                idx = np.flatnonzero(n.ravel() >= k)
                level = ref.ravel()[idx] + sign * k * c.ravel()[idx]
                frac = np.clip((level - old.ravel()[idx]) / dl.ravel()[idx], 0.0, 1.0)
                tk = t0 + frac * dt
                if self.refractory_s > 0:
                    ok = tk - self._last.ravel()[idx] >= self.refractory_s - _TOL
                    idx, tk = idx[ok], tk[ok]
                self._last.ravel()[idx] = tk
                ys.append(idx // width)
                xs.append(idx % width)
                ts.append(tk)
                ps.append(np.full(len(idx), sign, dtype=np.int8))
            ref_flat = ref.ravel()
            moved = np.flatnonzero(n.ravel() > 0)
            ref_flat[moved] += sign * n.ravel()[moved] * c.ravel()[moved]
        if self.noise_rate_hz > 0:
            count = self.rng.poisson(self.noise_rate_hz * dt * height * width)
            idx = self.rng.integers(0, height * width, count)
            ys.append(idx // width)
            xs.append(idx % width)
            ts.append(t0 + dt * (1.0 - self.rng.random(count)))  # in (t0, t]
            ps.append(self.rng.choice(np.array([-1, 1], dtype=np.int8), count))
        self._log, self._t = new, float(t)
        if not ts:
            return EventStream.empty(height=height, width=width)
        x, y, tt, p = (np.concatenate(a) for a in (xs, ys, ts, ps))
        order = np.argsort(tt, kind="stable")
        return EventStream(x[order], y[order], tt[order], p[order], height=height, width=width)


def simulate_from_frames(frames: np.ndarray, times: np.ndarray, **sim_kw: float) -> EventStream:
    """Events of a whole video: ``frames`` ``[T, H, W]`` (or ``[T, H, W, 3]``) linear intensities
    sampled at increasing ``times`` ``[T]`` (seconds). Keyword arguments go to
    :class:`EsimSimulator`."""
    frames = np.asarray(frames)
    times = np.asarray(times, dtype=np.float64)
    if frames.ndim not in (3, 4) or len(frames) < 1:
        raise ValueError(f"frames must be [T, H, W] or [T, H, W, 3], got shape {frames.shape}")
    if times.shape != (len(frames),):
        raise ValueError(f"times must have shape ({len(frames)},), got {times.shape}")
    if len(times) > 1 and np.any(np.diff(times) <= 0):
        raise ValueError("times must be strictly increasing")
    sim = EsimSimulator(**sim_kw)
    sim.reset(frames[0], float(times[0]))
    streams = [sim.step(f, float(t)) for f, t in zip(frames[1:], times[1:], strict=True)]
    h, w = frames.shape[1:3]
    return EventStream.concatenate(streams) if streams else EventStream.empty(height=h, width=w)
