"""Frame geometry of a flattened token video: prefix, frames, slots and temporal predecessors.

FastCar (ICLR 2026) replays the MLP output of the token at the same spatial position in the
previous frame. After a prefix of ``P`` tokens (the prompt), generated token ``i >= P`` sits in
frame ``f = (i - P) // N`` and slot ``p = (i - P) % N``; its temporal predecessor is ``j = i - N``.
Frames are numbered from 0 here: replay is possible from frame 1 on.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

__all__ = ["FrameLayout"]


def _as_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = operator.index(value)
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


@dataclass(frozen=True)
class FrameLayout:
    """Where frames start in a decoded sequence (spec §2.1).

    Args:
        tokens_per_frame: ``N``, tokens of one frame (256 for VILA-U's 16x16 RQ-VAE grid).
        prefix_len: ``P``, tokens before the first frame token; ``None`` means "the prefill
            length", fixed at the first forward of a generation.
    """

    tokens_per_frame: int
    prefix_len: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "tokens_per_frame", _as_int(self.tokens_per_frame, "tokens_per_frame", 1)
        )
        if self.prefix_len is not None:
            object.__setattr__(self, "prefix_len", _as_int(self.prefix_len, "prefix_len", 0))

    def _prefix(self, prefix_len: int | None) -> int:
        p = self.prefix_len if prefix_len is None else _as_int(prefix_len, "prefix_len", 0)
        if p is None:
            raise ValueError("prefix_len is unknown: give it to FrameLayout or to this call")
        return p

    def frame(self, position: int, prefix_len: int | None = None) -> int:
        """Frame index (0-based) of absolute position ``position``; -1 inside the prefix."""
        position = _as_int(position, "position", 0)
        p = self._prefix(prefix_len)
        return -1 if position < p else (position - p) // self.tokens_per_frame

    def slot(self, position: int, prefix_len: int | None = None) -> int:
        """Spatial slot ``(i - P) % N`` of a frame token; -1 inside the prefix."""
        position = _as_int(position, "position", 0)
        p = self._prefix(prefix_len)
        return -1 if position < p else (position - p) % self.tokens_per_frame

    def predecessor(self, position: int, prefix_len: int | None = None) -> int | None:
        """``i - N`` for a token of frame >= 1, else ``None`` (no temporal predecessor)."""
        return position - self.tokens_per_frame if self.frame(position, prefix_len) >= 1 else None

    def num_frames(self, seq_len: int, prefix_len: int | None = None) -> int:
        """Frames in a sequence of ``seq_len`` tokens; refuses partial frames."""
        seq_len = _as_int(seq_len, "seq_len", 0)
        p = self._prefix(prefix_len)
        if seq_len < p or (seq_len - p) % self.tokens_per_frame:
            raise ValueError(
                f"seq_len {seq_len} is not prefix ({p}) + whole frames of "
                f"{self.tokens_per_frame} tokens"
            )
        return (seq_len - p) // self.tokens_per_frame
