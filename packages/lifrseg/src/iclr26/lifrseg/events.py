"""Event streams and their representations: validated containers, time slicing, the DSEC voxel
grid, count frames, the DSEC-layout HDF5 files and tonic-style structured arrays.

Conventions: ``x``/``y`` are integer pixel coordinates, ``t`` is in seconds (float64), ``p`` is
the polarity in {-1, +1} (a 0 on input means negative, as in DSEC's {0, 1} files). Every
constructor copies: the caller's arrays are never modified (tonic's ``ToVoxelGrid`` rewrites the
input's ``p`` field in place; this package does not).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

__all__ = [
    "EventStream",
    "event_count_frame",
    "read_dsec_h5",
    "voxel_grid",
    "voxel_grid_reference",
    "write_dsec_h5",
]

STRUCTURED_DTYPE = np.dtype([("x", "<i2"), ("y", "<i2"), ("t", "<i8"), ("p", "<i1")])


def _int_coords(a: object, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold whole pixel coordinates (no fractions, NaN or inf)")
    if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.int16).max):
        raise ValueError(f"{name} must lie in [0, 32767], got range [{arr.min()}, {arr.max()}]")
    return arr.astype(np.int16)


@dataclass(frozen=True, eq=False)
class EventStream:
    """A time-sorted event stream ``(x, y, t, p)``.

    Args:
        x, y: pixel coordinates, 1-D integers in [0, 32767] (whole-valued floats are accepted).
        t: timestamps in seconds, 1-D, finite, non-negative and non-decreasing.
        p: polarities in {-1, 0, +1}; 0 is read as -1 (DSEC stores {0, 1}).
        height, width: optional sensor size; coordinates outside it are refused.

    The arrays are copied (``x``, ``y`` int16, ``t`` float64, ``p`` int8).
    """

    x: np.ndarray
    y: np.ndarray
    t: np.ndarray
    p: np.ndarray
    height: int | None = None
    width: int | None = None

    def __init__(self, x, y, t, p, *, height: int | None = None, width: int | None = None):
        xs, ys = _int_coords(x, "x"), _int_coords(y, "y")
        ts = np.asarray(t)
        if ts.ndim != 1:
            raise ValueError(f"t must be 1-D, got shape {ts.shape}")
        if ts.size and not (
            np.issubdtype(ts.dtype, np.floating) or np.issubdtype(ts.dtype, np.integer)
        ):
            raise TypeError(f"t must be numeric seconds, got dtype {ts.dtype}")
        ts = ts.astype(np.float64)
        ps = np.asarray(p)
        if ps.ndim != 1:
            raise ValueError(f"p must be 1-D, got shape {ps.shape}")
        if ps.size and ps.dtype == np.bool_:
            ps = ps.astype(np.int8)
        if ps.size and not np.isin(ps, (-1, 0, 1)).all():
            raise ValueError("p must hold polarities in {-1, 0, +1}")
        ps = np.where(ps > 0, 1, -1).astype(np.int8)
        n = {len(xs), len(ys), len(ts), len(ps)}
        if len(n) != 1:
            raise ValueError(
                f"x, y, t, p must have one length, got {len(xs)}, {len(ys)}, {len(ts)}, {len(ps)}"
            )
        if ts.size:
            if not np.all(np.isfinite(ts)):
                raise ValueError("t must be finite (no NaN or inf)")
            if ts[0] < 0:
                raise ValueError(f"t must be non-negative, got {ts.min()}")
            if np.any(np.diff(ts) < 0):
                raise ValueError("t must be sorted (non-decreasing timestamps)")
        for name, size, coord in (("height", height, ys), ("width", width, xs)):
            if size is None:
                continue
            if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
                raise ValueError(f"{name} must be a positive integer, got {size!r}")
            if coord.size and coord.max() >= size:
                axis = "y" if name == "height" else "x"
                raise ValueError(
                    f"{axis} coordinate {coord.max()} is outside the sensor ({name} {size})"
                )
        object.__setattr__(self, "x", xs)
        object.__setattr__(self, "y", ys)
        object.__setattr__(self, "t", ts)
        object.__setattr__(self, "p", ps)
        object.__setattr__(self, "height", None if height is None else int(height))
        object.__setattr__(self, "width", None if width is None else int(width))

    def __len__(self) -> int:
        return len(self.t)

    @classmethod
    def empty(cls, *, height: int | None = None, width: int | None = None) -> EventStream:
        """A stream with no events."""
        z = np.zeros(0)
        return cls(
            z.astype(np.int16), z.astype(np.int16), z, z.astype(np.int8), height=height, width=width
        )

    @classmethod
    def concatenate(cls, streams: list[EventStream]) -> EventStream:
        """Join streams whose times follow each other (the result must be sorted)."""
        if not streams:
            raise ValueError("streams must not be empty")
        first = streams[0]
        return cls(
            np.concatenate([s.x for s in streams]), np.concatenate([s.y for s in streams]),
            np.concatenate([s.t for s in streams]), np.concatenate([s.p for s in streams]),
            height=first.height, width=first.width,
        )  # fmt: skip

    def slice(self, t0: float, t1: float) -> EventStream:
        """Events with ``t0 <= t < t1`` (half-open, binary search on the sorted times)."""
        if not (np.isfinite(t0) and np.isfinite(t1)):
            raise ValueError(f"t0 and t1 must be finite, got {t0}, {t1}")
        if t1 < t0:
            raise ValueError(f"t1 must be >= t0, got t0={t0}, t1={t1}")
        i0, i1 = np.searchsorted(self.t, [t0, t1], side="left")
        return EventStream(
            self.x[i0:i1], self.y[i0:i1], self.t[i0:i1], self.p[i0:i1],
            height=self.height, width=self.width,
        )  # fmt: skip

    def to_structured(self, polarity: Literal["01", "signed"] = "01") -> np.ndarray:
        """A tonic-style structured array: ``x``, ``y`` int16, ``t`` int64 microseconds, ``p``
        int8. ``polarity="01"`` (default): tonic's convention, 1 = ON, 0 = OFF (tonic's
        ``ToFrame`` indexes its polarity channel with ``p``, so a −1 would land in the ON
        channel); ``"signed"``: ±1 as stored here. A new array every call."""
        if polarity not in ("01", "signed"):
            raise ValueError(f"polarity must be '01' or 'signed', got {polarity!r}")
        out = np.empty(len(self), dtype=STRUCTURED_DTYPE)
        out["x"], out["y"] = self.x, self.y
        out["p"] = self.p if polarity == "signed" else (self.p > 0)
        out["t"] = np.round(self.t * 1e6).astype(np.int64)
        return out

    @classmethod
    def from_structured(
        cls, arr: np.ndarray, time_unit: Literal["us", "ms", "s"] = "us", **sensor: int
    ) -> EventStream:
        """Read a structured array with fields ``x, y, t, p`` (tonic's layout: ``p`` bool or
        integer, 0 → −1), ``t`` in ``time_unit``; the input is copied, never modified."""
        if not isinstance(arr, np.ndarray) or arr.dtype.names is None:
            raise TypeError("arr must be a structured numpy array with fields x, y, t, p")
        missing = {"x", "y", "t", "p"} - set(arr.dtype.names)
        if missing:
            raise ValueError(f"arr lacks fields {sorted(missing)}")
        scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
        if time_unit not in scale:
            raise ValueError(f"time_unit must be one of {sorted(scale)}, got {time_unit!r}")
        return cls(
            arr["x"].copy(), arr["y"].copy(), arr["t"].astype(np.float64) * scale[time_unit],
            arr["p"].astype(np.int8), **sensor,
        )  # fmt: skip


def _check_stream(ev: object, name: str = "ev") -> EventStream:
    if not isinstance(ev, EventStream):
        raise TypeError(f"{name} must be an EventStream, got {type(ev).__name__}")
    return ev


def _check_size(height: int, width: int, ev: EventStream) -> None:
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if len(ev) and (ev.x.max() >= width or ev.y.max() >= height):
        raise ValueError(
            f"event coordinates (max x {ev.x.max()}, max y {ev.y.max()}) lie outside {height}x{width}"
        )


def _time_axis(
    ev: EventStream, num_bins: int, t_start: float | None, t_end: float | None, time_ref: str
) -> np.ndarray:
    if time_ref not in ("window", "events", "tonic"):
        raise ValueError(f"time_ref must be 'window', 'events' or 'tonic', got {time_ref!r}")
    if time_ref in ("events", "tonic"):
        if not len(ev):
            return np.zeros(0)
        t0, t1 = ev.t[0], ev.t[-1]  # first and last event, as DSEC does (not min/max)
    else:
        t0 = ev.t[0] if (t_start is None and len(ev)) else (t_start or 0.0)
        t1 = ev.t[-1] if (t_end is None and len(ev)) else (t_end if t_end is not None else t0)
        if not (np.isfinite(t0) and np.isfinite(t1)):
            raise ValueError(f"t_start and t_end must be finite, got {t_start}, {t_end}")
        if t1 < t0:
            raise ValueError(f"t_end must be >= t_start, got {t_start}, {t_end}")
    span = t1 - t0
    if span <= 0:  # zero time span: DSEC divides by zero here; every event goes to t* = 0
        return np.zeros(len(ev))
    scale = num_bins if time_ref == "tonic" else num_bins - 1
    return scale * (ev.t - t0) / span


def voxel_grid(
    ev: EventStream,
    num_bins: int,
    height: int,
    width: int,
    *,
    t_start: float | None = None,
    t_end: float | None = None,
    time_ref: Literal["window", "events", "tonic"] = "window",
    normalize: bool = True,
) -> torch.Tensor:
    """The DSEC / E-RAFT event voxel grid, ``[num_bins, height, width]`` float32.

    ``t*_j = (B-1)(t_j - t_0)/(t_N - t_0)`` and ``V(x, y, b) = Σ_j p_j max(0, 1 - |b - t*_j|)``
    (integer pixel coordinates: the spatial tent kernel is a delta). E-RAFT uses ``B = 15``.

    Args:
        ev: the events (coordinates must lie inside ``height x width``).
        num_bins: ``B >= 1``.
        t_start, t_end: the window; with ``time_ref="window"`` (default, our choice for anytime
            queries) time is scaled by these bounds (missing bounds: first / last event), so a
            sparse window does not stretch time. ``time_ref="events"``: first and last event, as
            DSEC's ``VoxelGrid.convert``. Events outside ``[t_start, t_end]`` fall outside the
            bins and are dropped. ``time_ref="tonic"``: the convention of tonic's
            ``ToVoxelGrid`` and evlib's ``create_voxel_grid`` (Zhu et al. 2019),
            ``t* = B(t - t_first)/(t_last - t_first)``: time scaled by ``B`` instead of ``B - 1``,
            so the right-hand weight of events past bin ``B - 1`` and the last event(s) are
            dropped; with ``normalize=False`` this equals tonic's grid (``[B, 1, H, W]`` there).
        normalize: over the non-zero cells, ``v <- (v - mean)/std`` with the unbiased std (as
            DSEC); if the std is 0 or undefined only the mean is subtracted. An empty window gives
            zeros, never NaN.
    """
    ev = _check_stream(ev)
    if isinstance(num_bins, bool) or not isinstance(num_bins, int | np.integer) or num_bins < 1:
        raise ValueError(f"num_bins must be a positive integer, got {num_bins!r}")
    _check_size(height, width, ev)
    tstar = _time_axis(ev, num_bins, t_start, t_end, time_ref)
    n_cells = height * width
    # only events with -1 < t* < B touch a bin; t* is non-decreasing (sorted times), so they are
    # one contiguous run, found by binary search
    i0 = int(np.searchsorted(tstar, -1.0, side="right"))
    i1 = int(np.searchsorted(tstar, float(num_bins), side="left"))
    # planes -1 .. B (B + 2 of them) take both tent halves of every kept event without masks;
    # the bins are planes 0 .. B-1. One scatter-add over the flattened indices, in float64 (in
    # float32, cells where events of both polarities cancel end at exactly 0 or not depending on
    # rounding, which the normalisation then maps to different values than DSEC's loop)
    grid = torch.zeros((num_bins + 2) * n_cells, dtype=torch.float64)
    if i1 > i0:
        ts = tstar[i0:i1]
        lo = np.floor(ts)
        frac = ts - lo
        idx = (lo.astype(np.int64) + 1) * n_cells + (
            ev.y[i0:i1].astype(np.int64) * width + ev.x[i0:i1]
        )
        right = ev.p[i0:i1] * frac  # p (t* - floor t*)
        left = ev.p[i0:i1] - right  # p (1 - (t* - floor t*))
        tidx = torch.from_numpy(idx)
        grid.index_add_(0, tidx, torch.from_numpy(left))
        grid.index_add_(0, tidx.add_(n_cells), torch.from_numpy(right))
    out = grid[n_cells : (num_bins + 1) * n_cells].view(num_bins, height, width)
    if normalize:
        nz = out != 0
        vals = out[nz]
        if vals.numel() > 0:
            mean = vals.mean()
            std = vals.std() if vals.numel() > 1 else torch.tensor(0.0, dtype=vals.dtype)
            out[nz] = (vals - mean) / std if std > 0 else vals - mean
    return out.float()


def voxel_grid_reference(
    ev: EventStream, num_bins: int, height: int, width: int, *, normalize: bool = True
) -> torch.Tensor:
    """A direct port of DSEC's ``VoxelGrid.convert`` loop (``time_ref="events"``), kept slow and
    literal as the reference the tests and the bench compare :func:`voxel_grid` with."""
    ev = _check_stream(ev)
    _check_size(height, width, ev)
    grid = torch.zeros((num_bins, height, width), dtype=torch.float64)
    if len(ev) == 0:
        return grid.float()
    t = torch.from_numpy(ev.t.copy())
    span = float(t[-1] - t[0])
    t_norm = (num_bins - 1) * (t - t[0]) / span if span > 0 else torch.zeros_like(t)
    x, y = torch.from_numpy(ev.x.astype(np.float64)), torch.from_numpy(ev.y.astype(np.float64))
    value = torch.from_numpy(ev.p.astype(np.float64))
    x0, y0, t0 = x.int(), y.int(), t_norm.int()
    for xlim in (x0, x0 + 1):
        for ylim in (y0, y0 + 1):
            for tlim in (t0, t0 + 1):
                mask = (xlim < width) & (xlim >= 0) & (ylim < height) & (ylim >= 0)
                mask &= (tlim >= 0) & (tlim < num_bins)
                interp = value * (1 - (xlim - x).abs()) * (1 - (ylim - y).abs())
                interp = interp * (1 - (tlim - t_norm).abs())
                index = height * width * tlim.long() + width * ylim.long() + xlim.long()
                grid.view(-1).index_add_(0, index[mask], interp[mask])
    if normalize:
        mask = torch.nonzero(grid, as_tuple=True)
        if mask[0].numel() > 0:
            mean, std = grid[mask].mean(), grid[mask].std()
            grid[mask] = (grid[mask] - mean) / std if std > 0 else grid[mask] - mean
    return grid.float()


def event_count_frame(ev: EventStream, height: int, width: int) -> torch.Tensor:
    """Per-pixel event counts ``[2, height, width]`` float32: channel 0 positive, 1 negative."""
    ev = _check_stream(ev)
    _check_size(height, width, ev)
    pix = ev.y.astype(np.int64) * width + ev.x.astype(np.int64)
    idx = np.where(ev.p > 0, 0, 1) * height * width + pix
    counts = np.bincount(idx, minlength=2 * height * width).astype(np.float32)
    return torch.from_numpy(counts.reshape(2, height, width))


# --- DSEC-layout HDF5: events/{x,y,t,p} (t in µs relative to t_offset), ms_to_idx, t_offset


def write_dsec_h5(path: str | os.PathLike[str], ev: EventStream, *, t_offset_us: int = 0) -> None:
    """Write ``ev`` in the DSEC layout: ``events/{x,y,t,p}`` (``t`` int64 µs minus ``t_offset``,
    ``p`` uint8 in {0, 1}), ``ms_to_idx`` (index of the first event at or after each millisecond)
    and ``t_offset`` (µs)."""
    import h5py

    ev = _check_stream(ev)
    t_us = np.round(ev.t * 1e6).astype(np.int64) - int(t_offset_us)
    if len(t_us) and t_us[0] < 0:
        raise ValueError("t_offset_us is later than the first event")
    n_ms = int(t_us[-1] // 1000) + 2 if len(t_us) else 1
    ms_to_idx = np.searchsorted(t_us, np.arange(n_ms, dtype=np.int64) * 1000, side="left")
    with h5py.File(path, "w") as f:
        g = f.create_group("events")
        g.create_dataset("x", data=ev.x.astype(np.uint16))
        g.create_dataset("y", data=ev.y.astype(np.uint16))
        g.create_dataset("t", data=t_us)
        g.create_dataset("p", data=(ev.p > 0).astype(np.uint8))
        f.create_dataset("ms_to_idx", data=ms_to_idx.astype(np.uint64))
        f.create_dataset("t_offset", data=np.int64(t_offset_us))


def read_dsec_h5(
    path: str | os.PathLike[str],
    t0: float | None = None,
    t1: float | None = None,
    *,
    height: int | None = None,
    width: int | None = None,
) -> EventStream:
    """Read the events with ``t0 <= t < t1`` (seconds, absolute: ``t_offset`` included) from a
    DSEC-layout file, using ``ms_to_idx`` to read only the needed rows (like DSEC's
    ``EventSlicer``). ``None`` bounds read from the start / to the end."""
    import h5py

    if not os.path.isfile(path):
        raise OSError(f"events file {os.fspath(path)!r} does not exist")
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise OSError(f"{os.fspath(path)!r} is not a readable HDF5 file ({err})") from None
    with f:
        for key in ("events/x", "events/y", "events/t", "events/p", "ms_to_idx", "t_offset"):
            if key not in f:
                raise ValueError(f"{os.fspath(path)!r} lacks the dataset {key!r} (DSEC layout)")
        offset = int(f["t_offset"][()])
        ms_to_idx = f["ms_to_idx"][:]
        n = f["events/t"].shape[0]
        i0, i1 = 0, n
        if t0 is not None:
            ms = max(int(np.floor((t0 * 1e6 - offset) / 1000)), 0)
            i0 = int(ms_to_idx[ms]) if ms < len(ms_to_idx) else n
        if t1 is not None:
            ms = int(np.ceil((t1 * 1e6 - offset) / 1000))
            i1 = int(ms_to_idx[ms]) if 0 <= ms < len(ms_to_idx) else (n if ms >= 0 else 0)
        i1 = max(i1, i0)
        t = (f["events/t"][i0:i1].astype(np.int64) + offset) * 1e-6
        ev = EventStream(
            f["events/x"][i0:i1].astype(np.int64), f["events/y"][i0:i1].astype(np.int64), t,
            f["events/p"][i0:i1].astype(np.int8), height=height, width=width,
        )  # fmt: skip
    keep = np.ones(len(ev), dtype=bool)
    if t0 is not None:
        keep &= ev.t >= t0
    if t1 is not None:
        keep &= ev.t < t1
    if keep.all():
        return ev
    return EventStream(ev.x[keep], ev.y[keep], ev.t[keep], ev.p[keep], height=height, width=width)
