"""Per-layer thresholds for a target replay rate (our addition: TAS is an unnormalised logit).

Run the model densely once with recording on, collect every eligible decode step's score per
layer, and put ``tau_l`` at the ``1 - r`` quantile, so that a fraction ``r`` of the recorded
scores exceeds it. The rate's denominator is the eligible rows (frames >= ``protect_frames``);
the live rate differs slightly because later scores depend on earlier replays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from iclr26.fastcar.replay import ReplayConfig, ReplayState

__all__ = ["calibrate", "calibrate_thresholds", "decode", "record"]


def _check_rate(r, name="target_rate") -> float:
    if isinstance(r, bool) or not isinstance(r, int | float) or not (0.0 <= float(r) <= 1.0):
        raise ValueError(f"{name} must be in [0, 1], got {r!r}")
    return float(r)


def _midpoint_threshold(s: np.ndarray, k: int) -> float:
    """A threshold in a gap between recorded scores with about ``k`` scores above it.

    Never on (or within rounding of) a recorded value: (near-)tied scores, frequent in the first
    layer where equal token pairs give equal logits, would otherwise flip on rounding noise
    between batch sizes. Cuts are only placed in gaps wider than ``1e-5 * max(1, max|s|)``.
    """
    d = np.sort(s)[::-1]
    tol = 1e-5 * max(1.0, float(np.abs(d).max()))
    gaps = d[:-1] - d[1:]
    cuts = np.flatnonzero(gaps > tol) + 1  # replaying d[:c] is possible for c in cuts
    if cuts.size == 0:
        return -math.inf if k >= s.size / 2 else math.inf
    options = np.concatenate([[0], cuts, [s.size]])
    c = int(options[np.argmin(np.abs(options - k))])
    if c == 0:
        return math.inf
    if c == s.size:
        return -math.inf
    return float((d[c - 1] + d[c]) / 2)


def calibrate_thresholds(
    scores: Sequence[torch.Tensor | np.ndarray], target_rate: float | Sequence[float]
) -> list[float]:
    """Thresholds so that a fraction ``target_rate`` of each layer's recorded scores exceeds them.

    Args:
        scores: one 1-D array of recorded scores per layer.
        target_rate: replay rate in [0, 1], one for all layers or one per layer; 0 gives
            ``+inf`` (disabled), 1 gives ``-inf``.
    """
    if isinstance(scores, torch.Tensor | np.ndarray) or not len(scores):
        raise ValueError("scores must be a non-empty sequence with one array per layer")
    if isinstance(target_rate, int | float):
        rates = [_check_rate(target_rate)] * len(scores)
    else:
        rates = [_check_rate(r) for r in target_rate]
        if len(rates) != len(scores):
            raise ValueError(f"target_rate has {len(rates)} values for {len(scores)} layers")
    out = []
    for layer, (s, r) in enumerate(zip(scores, rates, strict=False)):
        s = np.asarray(torch.as_tensor(s).float().flatten(), dtype=np.float64)
        if s.size == 0:
            raise ValueError(f"no recorded scores for layer {layer}: decode at least two frames")
        if not np.isfinite(s).all() and not np.isposinf(s).all():
            raise ValueError(f"recorded scores of layer {layer} are not finite")
        k = round(r * s.size)
        if k == 0:
            out.append(math.inf)
        elif k >= s.size:
            out.append(-math.inf)
        else:
            out.append(_midpoint_threshold(s, k))
    return out


def decode(model, prefix: torch.Tensor, num_tokens: int, *, allowed_vocab: int | None = None,
           keep_logits: bool = False, noise_seed: int | None = None,
           ) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """Greedy decoding with a native :class:`TinyARVideoLM` or a HF model's ``generate``.

    Returns ``(tokens (B, P + num_tokens), logits (B, num_tokens, V) or None)``.
    """
    from iclr26.fastcar.models import TinyARVideoLM

    if isinstance(model, TinyARVideoLM):
        r = model.decode(prefix, num_tokens, allowed_vocab=allowed_vocab, keep_logits=keep_logits,
                         noise_seed=noise_seed)  # fmt: skip
        return r.tokens, r.logits
    from iclr26.fastcar.hf import generate_video

    return generate_video(model, prefix, num_tokens, allowed_vocab=allowed_vocab,
                          keep_logits=keep_logits, noise_seed=noise_seed)  # fmt: skip


def record(
    model, prefix: torch.Tensor, num_tokens: int, cfg: ReplayConfig, *,
    allowed_vocab: int | None = None, noise_seed: int | None = None,
) -> ReplayState:  # fmt: skip
    """Decode densely and record, per layer, the score of ``cfg.decision`` and the true relative
    MLP-output change ``||y_i - y_{i-N}|| / ||y_{i-N}||`` (plus both for a random earlier token
    of the last frame, under ``alt_*``). Returns the state with ``records``."""
    from iclr26.fastcar.models import TinyARVideoLM

    dense = ReplayConfig(**{**cfg.__dict__, "thresholds": math.inf})
    if isinstance(model, TinyARVideoLM):
        state = ReplayState(dense, model.num_layers)
        state.recording = True
        model.decode(prefix, num_tokens, replay=state, allowed_vocab=allowed_vocab,
                     noise_seed=noise_seed)  # fmt: skip
        state.recording = False
        return state
    from iclr26.fastcar.hf import enable_fastcar, generate_video

    with enable_fastcar(model, dense) as h, h.recording():
        generate_video(
            model, prefix, num_tokens, allowed_vocab=allowed_vocab, noise_seed=noise_seed
        )
    return h.state


def calibrate(
    model, prefix: torch.Tensor, num_tokens: int, cfg: ReplayConfig,
    target_rate: float | Sequence[float], *, allowed_vocab: int | None = None,
    noise_seed: int | None = None,
) -> list[float]:  # fmt: skip
    """Thresholds for ``cfg.decision`` reaching ``target_rate`` on calibration prompts ``prefix``."""
    if isinstance(target_rate, int | float):
        _check_rate(target_rate)
    if cfg.decision == "always":
        raise ValueError("decision='always' has no threshold to calibrate")
    state = record(
        model, prefix, num_tokens, cfg, allowed_vocab=allowed_vocab, noise_seed=noise_seed
    )
    scores = [torch.cat(r["score"]) if r["score"] else torch.empty(0) for r in state.records]
    return calibrate_thresholds(scores, target_rate)
