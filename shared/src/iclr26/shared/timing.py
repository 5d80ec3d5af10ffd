"""Repeat-and-summarise timing for benchmarks: medians and spreads, not single wall-clock reads."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from iclr26.shared.validation import check_int

__all__ = ["Timing", "timeit"]


@dataclass(frozen=True)
class Timing:
    """Seconds per call over ``repeats`` timed runs (after warm-up).

    Attributes:
        median: median seconds per call.
        iqr: interquartile range of the seconds per call (spread).
        min: fastest run.
        max: slowest run.
        repeats: number of timed runs.
        number: calls per timed run (each sample is the run's time divided by ``number``).
    """

    median: float
    iqr: float
    min: float
    max: float
    repeats: int
    number: int

    def ratio_to(self, other: Timing) -> float:
        """``other.median / self.median``: how many times faster this is than ``other``."""
        return other.median / self.median

    def as_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict (for report tables)."""
        return asdict(self)


def _block(result: Any) -> None:
    # JAX dispatches asynchronously: time the computation, not the dispatch.
    block = getattr(result, "block_until_ready", None)
    if callable(block):
        block()
    elif isinstance(result, tuple | list):
        for item in result:
            _block(item)


def timeit(
    fn: Callable[[], Any],
    *,
    repeats: int = 5,
    warmup: int = 1,
    number: int = 1,
    sync: Callable[[], None] | None = None,
) -> Timing:
    """Time ``fn()`` like :mod:`timeit`, returning the median and spread of the repeats.

    Results with ``block_until_ready`` (JAX arrays, also inside a tuple/list) are waited on, so
    asynchronous dispatch is not mistaken for speed. Pass ``sync`` (e.g.
    ``torch.cuda.synchronize``) for other asynchronous backends.

    Args:
        fn: zero-argument callable to time.
        repeats: timed runs (>= 1); the median is over these.
        warmup: untimed runs first (compilation, caches).
        number: calls per timed run, for functions too fast to time one by one.
        sync: called after each run, inside the timed region.
    """
    check_int(repeats, "repeats", low=1)
    check_int(warmup, "warmup", low=0)
    check_int(number, "number", low=1)
    for _ in range(warmup):
        _block(fn())
        if sync is not None:
            sync()
    samples = np.empty(repeats)
    for r in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            _block(fn())
        if sync is not None:
            sync()
        samples[r] = (time.perf_counter() - start) / number
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return Timing(
        median=float(med),
        iqr=float(q3 - q1),
        min=float(samples.min()),
        max=float(samples.max()),
        repeats=repeats,
        number=number,
    )
