"""Cost model (spec §2.5): MLP share of per-token MACs and the Amdahl bound of replay."""

from __future__ import annotations

import math

__all__ = ["amdahl_bound", "decode_macs"]


def amdahl_bound(mlp_fraction: float, replay_rate: float) -> float:
    """Largest speed-up from skipping a fraction ``replay_rate`` of MLP work that takes a fraction
    ``mlp_fraction`` of decode time: ``1 / (1 - f r)``. FastCar's FPGA scheduler (DRS) can exceed
    it by moving freed compute to attention; a CPU/GPU cannot."""
    for name, v in (("mlp_fraction", mlp_fraction), ("replay_rate", replay_rate)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not (0.0 <= v <= 1.0):
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    denom = 1.0 - mlp_fraction * replay_rate
    return math.inf if denom <= 0 else 1.0 / denom


def decode_macs(
    hidden: int, intermediate: int, heads: int, kv_heads: int, cached_tokens: int
) -> dict[str, float]:
    """Per-token, per-layer MACs of a LLaMA decode step: projections, attention, SwiGLU MLP, and
    the MLP's share (with and without attention over ``cached_tokens``)."""
    head_dim = hidden // heads
    proj = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim
    attn = 2 * cached_tokens * heads * head_dim
    mlp = 3 * hidden * intermediate
    return {
        "projections": float(proj), "attention": float(attn), "mlp": float(mlp),
        "mlp_share_weights": mlp / (mlp + proj), "mlp_share": mlp / (mlp + proj + attn),
    }  # fmt: skip
