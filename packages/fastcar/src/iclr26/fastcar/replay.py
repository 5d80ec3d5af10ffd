"""MLP-output replay (spec §2.3): configuration, per-layer ring buffers and the skipping MLP.

For decode token ``i`` of frame >= ``protect_frames`` and layer ``l``::

    if score_l(i) > tau_l:  y_l(i) = y_l(i - N)          (replayed, the MLP is not run)
    else:                   y_l(i) = MLP_l(x_l(i))

``score`` is TAS by default (:mod:`iclr26.fastcar.score`); the baselines share the plumbing:
``random`` (a uniform draw, replay when ``u > tau``: ``tau = 1 - rate``), ``input_diff`` (the
TeaCache-like gate, ``-||x_i - x_j|| / ||x_j||``), ``oracle`` (``-||MLP(x_i) - y_j|| / ||y_j||``,
computes the MLP anyway: a quality upper bound, not a speed method) and ``always`` (``+inf``).
``tau = +inf`` (or ``None``) disables a layer. The replayed output is written back, so replays can
chain across frames as in the official code (``max_chain`` limits that).

Unlike the released GPU code, which computes the MLP and selects afterwards, only the rows that
are not replayed enter the MLP (gather → MLP → scatter), and the cache is a ring buffer of
``N`` rows per layer whose memory does not grow with the number of frames.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from iclr26.fastcar.layout import FrameLayout
from iclr26.fastcar.score import HEAD_REDUCTIONS, temporal_attention_score

__all__ = ["DECISIONS", "SCORES", "ReplayConfig", "ReplayMLP", "ReplayState", "ReplayStats"]

DECISIONS = ("tas", "random", "input_diff", "oracle", "always")
SCORES = ("post_rope", "reference")


@dataclass
class ReplayConfig:
    """How FastCar decides to replay.

    Args:
        layout: the token video's :class:`FrameLayout`.
        thresholds: ``tau`` for all layers (a float) or one per layer; ``None``/``+inf`` disables
            a layer. The official scripts use ``-4`` and ``-1`` for VILA-U 7B; TAS is an
            unnormalised logit, so thresholds do not transfer between models: calibrate them
            (:func:`iclr26.fastcar.calibrate_thresholds`).
        score: ``"post_rope"`` (query after RoPE, the exact attention logit) or ``"reference"``
            (query before RoPE, the official code).
        scale: TAS scale; ``None`` = ``1/sqrt(head_dim)``; the official code uses ``1/sqrt(128)``.
        head_reduce: ``"mean"`` (official), ``"max"``, ``"min"`` over query heads.
        protect_frames: frames (0-based count) never replayed; >= 1 since frame 0 has no
            predecessor.
        protect_layers: layer indices never replayed.
        max_chain: at most this many consecutive replays of one slot (``None``: unlimited, as the
            released MLP path).
        decision: ``"tas"`` (FastCar) or a baseline rule: ``"random"``, ``"input_diff"``,
            ``"oracle"``, ``"always"``.
        seed: seed of the ``"random"`` rule's draws (reset by ``reset()``).
        row_padding: ``{k: m}``, compute the MLP on ``m >= k`` rows when ``k`` rows of a batch
            are kept (the extra rows repeat a kept row and are discarded). A CPU GEMM can cost
            more on 15 rows than on 16 (its kernel depends on the row count); the map picks the
            cheaper shape (:func:`iclr26.fastcar.tune_row_padding` measures it). The kept rows'
            outputs are the MLP's on them (up to the GEMM's rounding); ``None``: no padding.
    """

    layout: FrameLayout
    thresholds: float | Sequence[float | None] = math.inf
    score: str = "post_rope"
    scale: float | None = None
    head_reduce: str = "mean"
    protect_frames: int = 1
    protect_layers: Sequence[int] = ()
    max_chain: int | None = None
    decision: str = "tas"
    seed: int = 0
    row_padding: Mapping[int, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.layout, FrameLayout):
            raise TypeError(f"layout must be a FrameLayout, got {type(self.layout).__name__}")
        if self.score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {self.score!r}")
        if self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {self.decision!r}")
        if self.head_reduce not in HEAD_REDUCTIONS:
            raise ValueError(
                f"head_reduce must be one of {HEAD_REDUCTIONS}, got {self.head_reduce!r}"
            )
        if self.scale is not None and not (
            isinstance(self.scale, int | float) and math.isfinite(self.scale) and self.scale > 0
        ):
            raise ValueError(f"scale must be a positive finite number or None, got {self.scale!r}")
        for name, low in (("protect_frames", 1), ("seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        if self.max_chain is not None and (
            isinstance(self.max_chain, bool) or not isinstance(self.max_chain, int)
            or self.max_chain < 1
        ):  # fmt: skip
            raise ValueError(f"max_chain must be an integer >= 1 or None, got {self.max_chain!r}")
        for i in self.protect_layers:
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise ValueError(f"protect_layers must hold layer indices >= 0, got {i!r}")
        _ = self._check_threshold_values()
        if self.row_padding is not None:
            if not isinstance(self.row_padding, Mapping):
                raise TypeError(
                    f"row_padding must be a mapping {{kept rows: rows computed}} or None, got "
                    f"{type(self.row_padding).__name__}"
                )
            for k, m in self.row_padding.items():
                if any(isinstance(v, bool) or not isinstance(v, int) for v in (k, m)):
                    raise TypeError(f"row_padding must map integers to integers, got {k!r}: {m!r}")
                if k < 1 or m < k:
                    raise ValueError(f"row_padding needs 1 <= kept <= computed, got {k}: {m}")

    def _check_threshold_values(self) -> list[float]:
        t = self.thresholds
        values = [t] if t is None or isinstance(t, int | float) else list(t)
        if isinstance(t, str | bytes) or (not values and not isinstance(t, int | float)):
            raise ValueError(f"thresholds must be a float or a non-empty sequence, got {t!r}")
        out = []
        for v in values:
            if v is None:
                out.append(math.inf)
                continue
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise TypeError(f"thresholds must hold floats or None, got {type(v).__name__}")
            if math.isnan(v):
                raise ValueError("thresholds must not be NaN (use None or +inf to disable)")
            out.append(float(v))
        return out

    def layer_thresholds(self, num_layers: int) -> list[float]:
        """Per-layer ``tau`` (``+inf`` = disabled), checked against the model's layer count."""
        values = self._check_threshold_values()
        if self.thresholds is None or isinstance(self.thresholds, int | float):
            values = values * num_layers
        if len(values) != num_layers:
            raise ValueError(
                f"thresholds has {len(values)} values but the model has {num_layers} layers"
            )
        for i in self.protect_layers:
            if i >= num_layers:
                raise ValueError(f"protect_layers: layer {i} >= number of layers {num_layers}")
            values[i] = math.inf
        return values


@dataclass
class ReplayStats:
    """Counters of decode-step MLP calls (batch rows), per layer.

    ``rows_total`` counts every decode row of every layer (frame 0 and disabled layers included,
    as the official "Skipped MLP ratio"); ``rows_eligible`` only rows of frames >=
    ``protect_frames`` in enabled layers (the denominator calibration targets).
    ``rows_padded`` counts the extra rows computed because of ``row_padding`` (not in
    ``rows_computed``).
    """

    rows_total: list[int] = field(default_factory=list)
    rows_eligible: list[int] = field(default_factory=list)
    rows_replayed: list[int] = field(default_factory=list)
    rows_computed: list[int] = field(default_factory=list)
    rows_padded: list[int] = field(default_factory=list)

    def replay_rate(self) -> float:
        """Replayed rows / all decode rows (the official denominator; used by the Amdahl bound)."""
        total = sum(self.rows_total)
        return sum(self.rows_replayed) / total if total else 0.0

    def eligible_replay_rate(self) -> float:
        """Replayed rows / rows that could be replayed (the calibration target's denominator)."""
        total = sum(self.rows_eligible)
        return sum(self.rows_replayed) / total if total else 0.0

    def per_layer(self) -> list[float]:
        """Replayed / eligible rows per layer (NaN where a layer had no eligible rows)."""
        return [
            r / e if e else math.nan
            for r, e in zip(self.rows_replayed, self.rows_eligible, strict=False)
        ]


class ReplayState:
    """Everything FastCar keeps between decode steps: position, scores, ring buffers, counters.

    Buffers are allocated at the first decode step with ``(B, N, d)`` MLP outputs per layer
    (plus ``(B, N, d)`` MLP inputs for ``input_diff``): their size depends on the batch, the
    frame size and the width, never on the number of frames. :meth:`reset` must be called between
    videos (done by ``generate`` hooks at every prefill).
    """

    def __init__(self, cfg: ReplayConfig, num_layers: int) -> None:
        if not isinstance(cfg, ReplayConfig):
            raise TypeError(f"cfg must be a ReplayConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.num_layers = num_layers
        self.thresholds = cfg.layer_thresholds(num_layers)
        self.enabled = True
        self.recording = False
        self.reset()

    # -- lifecycle -------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the previous video: position, buffers, pending scores (counters are kept)."""
        self.prefix_len: int | None = self.cfg.layout.prefix_len
        self.position = 0
        self.step_len = 0
        self.out_buf: list[torch.Tensor | None] = [None] * self.num_layers
        self.in_buf: list[torch.Tensor | None] = [None] * self.num_layers
        self.chain: list[torch.Tensor | None] = [None] * self.num_layers
        self.pending: list[torch.Tensor | None] = [None] * self.num_layers
        self.pending_alt: list[tuple[torch.Tensor, int] | None] = [None] * self.num_layers
        self.alt_generator = torch.Generator().manual_seed(self.cfg.seed + 1)
        self.generator = torch.Generator().manual_seed(self.cfg.seed)
        if not hasattr(self, "stats"):
            self.reset_stats()

    def reset_stats(self) -> None:
        """Zero the counters and drop recorded scores."""
        n = self.num_layers
        self.stats = ReplayStats([0] * n, [0] * n, [0] * n, [0] * n, [0] * n)
        self.records: list[dict[str, list[torch.Tensor]]] = [
            {"score": [], "change": [], "alt_score": [], "alt_change": []} for _ in range(n)
        ]

    def set_thresholds(self, thresholds: float | Sequence[float | None]) -> None:
        """Replace ``tau`` (validated against the layer count)."""
        self.cfg.thresholds = thresholds
        self.thresholds = self.cfg.layer_thresholds(self.num_layers)

    def begin_step(self, start: int, length: int) -> None:
        """Called before each forward: absolute position of its first token and its length."""
        if start == 0:
            self.reset()
        if self.prefix_len is None:
            if length <= 1 and start == 0:
                raise ValueError("prefix_len cannot be inferred from an empty prefill")
            self.prefix_len = length
        self.position = start
        self.step_len = length

    # -- geometry ---------------------------------------------------------------------------
    def frame_of(self, position: int) -> int:
        p = self.prefix_len
        return (
            -1 if p is None or position < p else (position - p) // self.cfg.layout.tokens_per_frame
        )

    def slot_of(self, position: int) -> int:
        return (position - self.prefix_len) % self.cfg.layout.tokens_per_frame

    def needs_score(self, layer: int) -> bool:
        """Whether layer ``layer`` needs the TAS of the current decode token."""
        if not self.enabled or self.step_len != 1:
            return False
        if self.frame_of(self.position) < 1:
            return False
        return self.recording or (
            self.cfg.decision == "tas" and self.thresholds[layer] < math.inf
            and self.frame_of(self.position) >= self.cfg.protect_frames
        )  # fmt: skip

    # -- scores -------------------------------------------------------------------------------
    def attention_score(
        self, layer: int, query: torch.Tensor, keys: torch.Tensor, key_position_offset: int = 0
    ) -> None:
        """Store TAS for the current decode token of ``layer``.

        Args:
            query: ``(B, H_q, d)`` query of the current token (pre- or post-RoPE by config).
            keys: ``(B, H_kv, L, d)`` key cache after this step's update, indexed by absolute
                position minus ``key_position_offset``.
        """
        pred = self.position - self.cfg.layout.tokens_per_frame - key_position_offset
        if pred < 0 or pred >= keys.shape[2]:
            raise ValueError(
                f"predecessor position {pred} is outside the key cache of length {keys.shape[2]}"
            )
        score = temporal_attention_score(
            query, keys[:, :, pred], scale=self.cfg.scale, head_reduce=self.cfg.head_reduce
        )
        self.pending[layer] = score
        if self.recording:
            n = self.cfg.layout.tokens_per_frame
            if n > 1:
                back = int(torch.randint(1, n, (1,), generator=self.alt_generator))
                alt = self.position - back - key_position_offset
                alt_score = temporal_attention_score(
                    query, keys[:, :, alt], scale=self.cfg.scale, head_reduce=self.cfg.head_reduce
                )
                self.pending_alt[layer] = (alt_score, self.position - back)

    # -- the MLP step -----------------------------------------------------------------------------
    def mlp_forward(self, layer: int, inner: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """Run (or replay) ``inner`` on ``x`` of shape ``(B, T, d)`` for layer ``layer``."""
        if not self.enabled or self.prefix_len is None:
            return inner(x)
        if x.ndim != 3:
            raise ValueError(f"MLP input must be (B, T, d), got {tuple(x.shape)}")
        b, t, d = x.shape
        if t != 1:
            y = inner(x)
            self._store_chunk(layer, x, y)
            return y
        cfg = self.cfg
        frame = self.frame_of(self.position)
        if frame < 0:
            return inner(x)
        slot = self.slot_of(self.position)
        self._ensure_buffers(layer, b, d, x)
        st = self.stats
        st.rows_total[layer] += b
        tau = self.thresholds[layer]
        eligible = frame >= cfg.protect_frames and tau < math.inf
        decision = cfg.decision
        max_chain = cfg.max_chain
        recording = self.recording
        out_buf = self.out_buf[layer]
        buf = out_buf[:, slot]  # (B, d) view: the predecessor outputs
        y_full = None
        replay = None  # (B,) bool where some row can replay; None: no row replays
        if frame >= 1 and (eligible or recording):
            if decision == "tas" or recording:
                tas = self.pending[layer]
                if decision == "tas" and tas is None:
                    raise RuntimeError(
                        f"no attention score for layer {layer}: the attention hook did not run"
                    )
            if decision == "tas":
                score = tas
            elif decision == "random":
                score = torch.rand(b, generator=self.generator).to(x.device)
            elif decision == "input_diff":
                xp = self.in_buf[layer][:, slot]
                score = -(x[:, 0].float() - xp.float()).norm(dim=-1) / xp.float().norm(
                    dim=-1
                ).clamp_min(1e-12)
            elif decision == "oracle":
                y_full = inner(x)
                score = -_rel_change(y_full[:, 0], buf)
            else:  # always
                score = torch.full((b,), math.inf, device=x.device)
            if recording:
                if y_full is None:
                    y_full = inner(x)
                rec = self.records[layer]
                rec["score"].append((tas if decision == "tas" else score).detach().float().cpu())
                rec["change"].append(_rel_change(y_full[:, 0], buf).cpu())
                alt = self.pending_alt[layer]
                if alt is not None:
                    rec["alt_score"].append(alt[0].detach().float().cpu())
                    prev_alt = out_buf[:, self.slot_of(alt[1])]
                    rec["alt_change"].append(_rel_change(y_full[:, 0], prev_alt).cpu())
            if eligible:
                st.rows_eligible[layer] += b
                # the step's one host read: the largest score says whether any row can replay
                # (a NaN, which max propagates, takes the elementwise test)
                top = float(score.max())
                if top > tau or top != top:
                    replay = score > tau
                    if max_chain is not None:
                        replay &= self.chain[layer][:, slot] < max_chain
        keep = None if replay is None else (~replay).nonzero().squeeze(1)
        k = b if keep is None else keep.numel()  # rows that run the MLP
        if k == b:
            y = y_full if y_full is not None else inner(x)
            st.rows_computed[layer] += b
            buf.copy_(y[:, 0])
        else:
            st.rows_replayed[layer] += b - k
            if y_full is not None:  # oracle: the MLP already ran on every row
                st.rows_computed[layer] += b
                buf.copy_(torch.where(replay[:, None], buf, y_full[:, 0].to(buf.dtype)))
            elif k:
                st.rows_computed[layer] += k
                # gather -> MLP on the kept rows only -> scatter into the ring buffer, whose
                # replayed rows already hold the predecessor's output
                pad = cfg.row_padding
                m = min(b, pad.get(k, k)) if pad else k
                if m > k:  # a cheaper GEMM shape: repeat the first kept row, drop its outputs
                    st.rows_padded[layer] += m - k
                    idx = torch.cat((keep, keep[:1].expand(m - k)))
                    out = inner(x.index_select(0, idx))[:k, 0]
                else:
                    out = inner(x.index_select(0, keep))[:, 0]
                buf.index_copy_(0, keep, out.to(buf.dtype))
            y = buf.unsqueeze(1).to(x.dtype, copy=True)
        if self.in_buf[layer] is not None:
            self.in_buf[layer][:, slot] = x[:, 0]
        if max_chain is not None:
            chain = self.chain[layer][:, slot]
            if replay is None:
                chain.zero_()
            else:
                chain.copy_(torch.where(replay, chain + 1, torch.zeros_like(chain)))
        self.pending[layer] = None
        self.pending_alt[layer] = None
        return y

    def _ensure_buffers(self, layer: int, b: int, d: int, like: torch.Tensor) -> None:
        n = self.cfg.layout.tokens_per_frame
        buf = self.out_buf[layer]
        if buf is None or buf.shape != (b, n, d) or buf.device != like.device:
            if buf is not None and self.frame_of(self.position) >= 1:
                raise ValueError(
                    f"batch size changed mid-video (buffer {tuple(buf.shape)}, input batch {b}): "
                    "call reset() between videos"
                )
            self.out_buf[layer] = torch.zeros(b, n, d, dtype=like.dtype, device=like.device)
            self.chain[layer] = torch.zeros(b, n, dtype=torch.long, device=like.device)
            if self.cfg.decision == "input_diff":
                self.in_buf[layer] = torch.zeros(b, n, d, dtype=like.dtype, device=like.device)

    def _store_chunk(self, layer: int, x: torch.Tensor, y: torch.Tensor) -> None:
        """A multi-token forward (prefill, or a prompt that already holds frames) seeds buffers."""
        p, n = self.prefix_len, self.cfg.layout.tokens_per_frame
        start = self.position
        b, t, d = x.shape
        first = max(p, start + t - n, start)
        if first >= start + t:
            return
        self._ensure_buffers(layer, b, d, x)
        for pos in range(first, start + t):
            s = (pos - p) % n
            self.out_buf[layer][:, s] = y[:, pos - start]
            if self.in_buf[layer] is not None:
                self.in_buf[layer][:, s] = x[:, pos - start]

    def buffer_bytes(self) -> int:
        """Bytes held by the ring buffers (constant in the number of frames)."""
        total = 0
        for bufs in (self.out_buf, self.in_buf, self.chain):
            total += sum(t.numel() * t.element_size() for t in bufs if t is not None)
        return total


def _rel_change(y: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    y, ref = y.float(), ref.float()
    return (y - ref).norm(dim=-1) / ref.norm(dim=-1).clamp_min(1e-12)


class ReplayMLP(nn.Module):
    """Wraps one decoder layer's MLP so that replayed rows skip it.

    Args:
        inner: the original MLP (``(B, T, d) -> (B, T, d)``).
        layer: the decoder layer index.
        state: the shared :class:`ReplayState`.
    """

    def __init__(self, inner: nn.Module, layer: int, state: ReplayState) -> None:
        super().__init__()
        self.inner = inner
        self.layer = layer
        self.state = state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.state.mlp_forward(self.layer, self.inner, x)
