"""Temporal Attention Score (TAS): the attention logit between a token and its predecessor.

As implemented by the official FastCar code (spec §2.2)::

    TAS_l(i) = (1/H) sum_h < q_{l,h}(i), k_{l,h}(i - N) > * scale

with the predecessor key taken from the KV cache (after RoPE). The official query is captured
*before* RoPE (``score="reference"``); the principled variant uses the post-RoPE query, so TAS is
exactly the logit attention computes for the pair (``score="post_rope"``, our default). The
official scale is a hard-coded ``1/sqrt(128)`` (VILA-U's head dim); ours defaults to
``1/sqrt(head_dim)``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["HEAD_REDUCTIONS", "reference_scale", "temporal_attention_score"]

HEAD_REDUCTIONS = ("mean", "max", "min")


def reference_scale() -> float:
    """The official code's scale ``1/sqrt(128)`` (independent of the model's head dim)."""
    return 1.0 / math.sqrt(128.0)


def temporal_attention_score(
    query: torch.Tensor,
    key: torch.Tensor,
    *,
    scale: float | None = None,
    head_reduce: str = "mean",
) -> torch.Tensor:
    """TAS per batch element.

    Args:
        query: ``(B, H_q, d)`` query of the current token, one row per query head.
        key: ``(B, H_kv, d)`` cached key of its temporal predecessor; ``H_q`` must be a multiple of
            ``H_kv`` (grouped-query attention: query head ``h`` reads key head ``h // (H_q/H_kv)``,
            as ``repeat_kv`` in transformers; the official code assumes ``H_q == H_kv``).
        scale: logit scale; ``None`` = ``1/sqrt(d)``.
        head_reduce: ``"mean"`` (paper/official), ``"max"`` or ``"min"`` over query heads.

    Returns:
        ``(B,)`` float32 scores.
    """
    if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor):
        raise TypeError("query and key must be torch tensors")
    if query.ndim != 3 or key.ndim != 3:
        raise ValueError(
            f"query must be (B, H_q, d) and key (B, H_kv, d), got {tuple(query.shape)} and "
            f"{tuple(key.shape)}"
        )
    b, hq, d = query.shape
    if key.shape[0] != b or key.shape[2] != d:
        raise ValueError(
            f"key {tuple(key.shape)} does not match query {tuple(query.shape)} (batch, head dim)"
        )
    hkv = key.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of key heads ({hkv})")
    if head_reduce not in HEAD_REDUCTIONS:
        raise ValueError(f"head_reduce must be one of {HEAD_REDUCTIONS}, got {head_reduce!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if not math.isfinite(float(scale)):
        raise ValueError(f"scale must be finite, got {scale}")
    # query head h reads key head h // g: group the query heads instead of repeating the keys
    g = hq // hkv
    logits = (query.float().reshape(b, hkv, g, d) * key.float()[:, :, None]).sum(-1).reshape(b, hq)
    logits = logits * float(scale)
    if head_reduce == "mean":
        return logits.mean(1)
    if head_reduce == "max":
        return logits.amax(1)
    return logits.amin(1)
