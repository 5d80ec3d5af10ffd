"""LiFR-Seg: event-guided, confidence-weighted feature propagation for anytime segmentation.

From one RGB frame ``I_t`` and the events up to ``t + δt``: (1) the encoder gives multi-scale
features ``F_t``; (2) E-RAFT-lite gives the motion field ``M̂`` from the past voxel grid
``E_{t−Δt→t}`` and the query grid ``E_{t→t+δt}``, and the ScoreNet the log-precision ``S``;
(3) every scale is forward-warped by softmax splatting with weight ``exp(S)``; (4) RefineNet
patches holes; (5) temporal memory cross-attention on the deepest level; (6) the all-MLP decoder.
"""

from __future__ import annotations

import hashlib
import itertools
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr26.lifrseg.events import EventStream, voxel_grid
from iclr26.lifrseg.models import (
    ERaftLite,
    MemoryBank,
    RefineNet,
    ScoreNet,
    Segmenter,
    TemporalMemoryAttention,
)
from iclr26.lifrseg.splat import resize_flow, softmax_splat_with_coverage

__all__ = ["FlowCache", "FrameEncoding", "LiFRSeg", "LiFRSegConfig"]


class FrameEncoding(NamedTuple):
    """What every query of one RGB frame shares (:meth:`LiFRSeg.encode_frame`): the segmenter's
    multi-scale features of ``I_t`` (``None`` for ``propagate="image"``, which segments the
    warped image instead) and the flow network's features of the past voxel grid."""

    image: torch.Tensor
    ev_past: torch.Tensor
    features: tuple[torch.Tensor, ...] | None
    past_features: torch.Tensor | None


class FlowCache:
    """Memoised outputs of one fixed E-RAFT-lite, per (past grid, query grid) pair.

    The flow network's output for a query is a function of its weights and the two voxel grids
    only. When the network is fixed (pretrained and frozen, as in ``fit_lifrseg``'s default
    ``freeze_flow=True``), every model and variant that shares those weights computes the same
    flow and flow features for the same sample: the end-to-end stage revisits each training
    sample several times, and the evaluation runs many methods on the same test samples. A
    ``FlowCache`` computes each pair once (in eval mode, RAFT's test mode: only the last iteration
    is upsampled) and returns the stored result afterwards (keyed by the bytes of both grids, so
    a changed grid is a new entry). The values equal a direct call up to float rounding (a sample
    is computed inside whichever batch first needs it).

    The weights are snapshotted at construction; :meth:`check` (called on every use by
    ``LiFRSeg.forward(..., flow_cache=)``) raises if a model's flow network differs from them, so
    a cache is never applied to a network that was trained or swapped since.
    """

    def __init__(self, flownet: ERaftLite) -> None:
        if not isinstance(flownet, ERaftLite):
            raise TypeError(f"flownet must be an ERaftLite, got {type(flownet).__name__}")
        self.flownet = flownet
        self._weights = {k: v.detach().clone() for k, v in flownet.state_dict().items()}
        self._checked: dict[int, tuple[weakref.ref, tuple[int, ...]]] = {}
        self._store: dict[bytes, tuple[torch.Tensor, torch.Tensor]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._store)

    def check(self, flownet: ERaftLite) -> None:
        """Raise ``ValueError`` unless ``flownet`` has the snapshotted weights (a deep copy with
        equal weights passes). Equality is re-checked only when a parameter was modified in place
        since the last check (tensor version counters)."""
        if not isinstance(flownet, ERaftLite):
            raise TypeError(f"flownet must be an ERaftLite, got {type(flownet).__name__}")
        state = flownet.state_dict()
        versions = tuple(v._version for v in state.values())
        seen = self._checked.get(id(flownet))
        if seen is not None and seen[0]() is flownet and seen[1] == versions:
            return
        same = state.keys() == self._weights.keys() and all(
            v.shape == self._weights[k].shape
            and torch.equal(v.detach().cpu(), self._weights[k].cpu())
            for k, v in state.items()
        )
        if not same:
            raise ValueError(
                "flow_cache was built for other flow-network weights (trained or replaced since); "
                "build a new FlowCache"
            )
        self._checked[id(flownet)] = (weakref.ref(flownet), versions)

    @staticmethod
    def _key(ev_past: torch.Tensor, ev_query: torch.Tensor) -> bytes:
        h = hashlib.blake2b(digest_size=20)
        for t in (ev_past, ev_query):
            a = t.detach().to("cpu", torch.float32).contiguous()
            h.update(str(tuple(a.shape)).encode())
            h.update(a.numpy().tobytes())
        return h.digest()

    @torch.no_grad()
    def __call__(
        self, ev_past: torch.Tensor, ev_query: torch.Tensor
    ) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """The flow network's eval-mode output for the batch ``ev_past``, ``ev_query``
        ``[N, B, H, W]``: ``flow`` ``[N, 2, H, W]``, ``flows`` (``[flow]``) and ``features``."""
        if not isinstance(ev_past, torch.Tensor) or not isinstance(ev_query, torch.Tensor):
            raise TypeError("ev_past and ev_query must be tensors")
        if ev_past.ndim != 4 or ev_past.shape != ev_query.shape:
            raise ValueError(
                f"ev_past and ev_query must be [N, B, H, W] of one shape, got "
                f"{tuple(ev_past.shape)} and {tuple(ev_query.shape)}"
            )
        keys = [self._key(p, q) for p, q in zip(ev_past, ev_query, strict=True)]
        todo, seen = [], set()
        for i, k in enumerate(keys):
            if k not in self._store and k not in seen:
                seen.add(k)
                todo.append(i)
        if todo:
            was = self.flownet.training
            self.flownet.eval()
            try:
                out = self.flownet(ev_past[todo], ev_query[todo], all_iterations=False)
            finally:
                self.flownet.train(was)
            for j, i in enumerate(todo):
                self._store[keys[i]] = (out["flow"][j].clone(), out["features"][j].clone())
        self.misses += len(todo)
        self.hits += len(keys) - len(todo)
        dev = ev_query.device
        flow = torch.stack([self._store[k][0] for k in keys]).to(dev)
        feats = torch.stack([self._store[k][1] for k in keys]).to(dev)
        return {"flow": flow, "flows": [flow], "features": feats}


class _FrameCore(nn.Module):
    """Traced half of :meth:`LiFRSeg.encode_frame`: ``(image, ev_past)`` → the segmenter's four
    feature maps and the flow network's past features."""

    def __init__(self, model: LiFRSeg) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor, ev_past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        m = self.model
        return (*m.segmenter.features(image), m.flownet.encode(ev_past))


class _QueryCore(nn.Module):
    """Traced half of a query up to the memory: the flow network (past features given), the
    ScoreNet, and the softmax splatting and RefineNet of every propagated scale →
    ``(flow, score, *features)``."""

    def __init__(self, model: LiFRSeg) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        image: torch.Tensor,
        ev_past: torch.Tensor,
        ev_query: torch.Tensor,
        past_features: torch.Tensor,
        *feats: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        m = self.model
        moving = (ev_query.abs().flatten(1).sum(1) > 0).view(-1, 1, 1, 1)
        fl_out = m.flownet(ev_past, ev_query, all_iterations=False, past_features=past_features)
        flow, score, metric = m._flow_and_score(fl_out, moving, image)
        return (flow, score, *m._propagate_features(feats, flow, metric, moving))


class _DecodeCore(nn.Module):
    """Traced all-MLP decoder at a fixed output size."""

    def __init__(self, model: LiFRSeg, size: tuple[int, int]) -> None:
        super().__init__()
        self.model, self.size = model, size

    def forward(self, *feats: torch.Tensor) -> torch.Tensor:
        return self.model.segmenter.decode(list(feats), self.size)


# traced graphs per model, built lazily per input shape; they reference the model's own
# parameters (tracing without freezing), so training or loading weights updates them too
_TRACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class LiFRSegConfig:
    """Settings of :class:`LiFRSeg` (paper values in brackets where they differ).

    Attributes:
        num_classes: segmentation classes.
        enc_dims: TinyMiT widths [SegFormer-B2: 64, 128, 320, 512].
        num_bins: voxel bins per window [E-RAFT: 15].
        flow_iters, corr_radius, corr_levels: E-RAFT-lite [12, 4, 4].
        use_score: ScoreNet log-precision as the splatting metric; ``False`` = average splatting
            (the "w/o ScoreNet" ablation, DFF-style feature warping).
        splat_mode: ``"soft"`` (paper) or ``"avg"``/``"linear"``/``"sum"``.
        propagate: ``"features"`` (paper), ``"image"`` (warp the RGB frame, then segment) or
            ``"logits"`` (warp the frame's prediction) — the paper's Table-5 ablation.
        splat_scales: which encoder scales are propagated (others are kept as at ``t``).
        use_refine: RefineNet after splatting.
        use_memory, memory_len, memory_level, memory_heads, age_embedding: temporal memory.
    """

    num_classes: int = 4
    enc_dims: tuple[int, ...] = (16, 32, 64, 128)
    num_bins: int = 5
    flow_iters: int = 4
    corr_radius: int = 3
    corr_levels: int = 2
    use_score: bool = True
    splat_mode: Literal["soft", "avg", "linear", "sum"] = "soft"
    propagate: Literal["features", "image", "logits"] = "features"
    splat_scales: tuple[int, ...] = (0, 1, 2, 3)
    use_refine: bool = True
    use_memory: bool = True
    memory_len: int = 4
    memory_level: int = 3
    memory_heads: int = 4
    age_embedding: bool = False

    def __post_init__(self) -> None:
        if self.splat_mode not in ("soft", "avg", "linear", "sum"):
            raise ValueError(
                f"splat_mode must be soft, avg, linear or sum, got {self.splat_mode!r}"
            )
        if self.propagate not in ("features", "image", "logits"):
            raise ValueError(f"propagate must be features, image or logits, got {self.propagate!r}")
        if len(self.enc_dims) != 4:
            raise ValueError(f"enc_dims needs 4 entries, got {self.enc_dims}")
        if any(s not in range(4) for s in self.splat_scales):
            raise ValueError(f"splat_scales must be in 0..3, got {self.splat_scales}")
        if self.memory_level not in range(4):
            raise ValueError(f"memory_level must be in 0..3, got {self.memory_level}")
        if self.splat_mode in ("soft", "linear") and not self.use_score:
            self.splat_mode = "avg"  # no metric without the ScoreNet
        self.enc_dims = tuple(self.enc_dims)
        self.splat_scales = tuple(self.splat_scales)

    def to_dict(self) -> dict:
        return asdict(self)


class LiFRSeg(nn.Module):
    """The LiFR-Seg model (see the module docstring). ``segmenter`` may be a trained
    :class:`~iclr26.lifrseg.models.Segmenter` to start from (the paper initialises from
    SegFormer); it is used, not copied."""

    def __init__(
        self, config: LiFRSegConfig | None = None, segmenter: Segmenter | None = None
    ) -> None:
        super().__init__()
        cfg = config or LiFRSegConfig()
        if not isinstance(cfg, LiFRSegConfig):
            raise TypeError(f"config must be a LiFRSegConfig, got {type(cfg).__name__}")
        self.config = cfg
        if segmenter is None:
            segmenter = Segmenter(cfg.num_classes, cfg.enc_dims)
        elif not isinstance(segmenter, Segmenter):
            raise TypeError(f"segmenter must be a Segmenter, got {type(segmenter).__name__}")
        self.segmenter = segmenter
        self.flownet = ERaftLite(
            cfg.num_bins,
            iters=cfg.flow_iters,
            corr_radius=cfg.corr_radius,
            corr_levels=cfg.corr_levels,
        )
        feat_ch = self.flownet.feat_dim + self.flownet.hidden + 2
        self.scorenet = ScoreNet(feat_ch) if cfg.use_score else None
        self.refine = (
            nn.ModuleList([RefineNet(d) for d in cfg.enc_dims]) if cfg.use_refine else None
        )
        deep = cfg.enc_dims[cfg.memory_level]
        self.memory_attn = (
            TemporalMemoryAttention(
                deep, cfg.memory_heads, cfg.age_embedding, max(cfg.memory_len, 1)
            )
            if cfg.use_memory
            else None
        )

    def _splat(
        self, x: torch.Tensor, flow: torch.Tensor, score: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        size = x.shape[-2:]
        fl = resize_flow(flow, size)
        metric = None
        if score is not None:
            metric = (
                F.interpolate(score, size=size, mode="area") if score.shape[-2:] != size else score
            )
        out, cover = softmax_splat_with_coverage(x, fl, metric, self.config.splat_mode)
        return out, (cover < 1e-3).to(x.dtype)

    def _traced(self, part: str, *example: torch.Tensor):
        """The traced ``part`` (``frame`` / ``query`` / ``decode``) for these input shapes,
        built on first use (``torch.jit.trace`` of the eager modules, parameters shared)."""
        mods = (self.segmenter, self.flownet, self.scorenet, self.refine, self.memory_attn)
        key = (
            part, tuple((tuple(t.shape), t.dtype, t.device) for t in example),
            repr(self.config), tuple(id(x) for x in mods),
        )  # fmt: skip
        cache = _TRACES.setdefault(self, {})
        fn = cache.get(key)
        if fn is None:
            if part == "frame":
                core = _FrameCore(self)
            elif part == "query":
                core = _QueryCore(self)
            else:  # the output size: 4x the stride-4 features
                core = _DecodeCore(self, (4 * example[0].shape[-2], 4 * example[0].shape[-1]))
            with warnings.catch_warnings():  # shape-dependent Python branches are constants here
                warnings.simplefilter("ignore")
                fn = torch.jit.trace(core, example, check_trace=False)
            cache[key] = fn
        return fn

    def _use_trace(self, traced: bool) -> bool:
        if not isinstance(traced, bool):
            raise TypeError(f"traced must be a bool, got {type(traced).__name__}")
        return (
            traced
            and not self.training
            and not torch.is_grad_enabled()
            and self.config.propagate == "features"
        )

    def _flow_and_score(
        self, fl_out: dict, moving: torch.Tensor, image: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The motion field (zero where the query window is empty), the ScoreNet's ``S`` and
        the splatting metric (``None`` without the ScoreNet)."""
        n, _, h, w = image.shape
        flow = torch.where(moving, fl_out["flow"], torch.zeros_like(fl_out["flow"]))
        if self.scorenet is None:
            return flow, torch.zeros(n, 1, h, w, dtype=image.dtype, device=image.device), None
        score = self.scorenet(fl_out["features"], (h, w))
        return flow, score, score

    def _propagate_features(
        self,
        feats: Sequence[torch.Tensor],
        flow: torch.Tensor,
        metric: torch.Tensor | None,
        moving: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Softmax-splat the chosen scales along ``flow`` (weight ``exp(metric)``), patch holes
        with RefineNet; samples with an empty query window keep the frame's features."""
        new = []
        for i, f in enumerate(feats):
            if i in self.config.splat_scales:
                g, holes = self._splat(f, flow, metric)
                if self.refine is not None:
                    g = self.refine[i](g, holes)
                f = torch.where(moving, g, f)
            new.append(f)
        return new

    def _read_write_memory(
        self, feats: list[torch.Tensor], memory: MemoryBank | None
    ) -> list[torch.Tensor]:
        """Temporal memory attention on the deepest level, then write that level to the bank."""
        lvl = self.config.memory_level
        if self.memory_attn is not None and memory is not None:
            feats[lvl] = self.memory_attn(feats[lvl], memory.items())
        if memory is not None:
            memory.write(feats[lvl])
        return feats

    def forward(
        self,
        image: torch.Tensor,
        ev_past: torch.Tensor,
        ev_query: torch.Tensor,
        memory: MemoryBank | None = None,
        *,
        flow: torch.Tensor | None = None,
        frame: FrameEncoding | None = None,
        flow_cache: FlowCache | None = None,
        traced: bool = False,
    ) -> dict[str, torch.Tensor]:
        """One anytime query.

        Args:
            image: ``I_t`` ``[N, 3, H, W]`` in [0, 1] (H, W multiples of 32).
            ev_past: voxel grid of ``E_{t−Δt→t}`` ``[N, B, H, W]``.
            ev_query: voxel grid of ``E_{t→t+δt}`` ``[N, B, H, W]``; a sample whose query grid is
                all zero (δt = 0, or no events) is not propagated: its output is the segmenter's
                on ``I_t`` (anytime identity).
            memory: a :class:`MemoryBank` of earlier queries (``None`` or empty: no memory); this
                call reads it and then writes the new deepest features into it.
            flow: replaces the estimated motion field ``[N, 2, H, W]`` (e.g. ground-truth flow, to
                separate flow quality from propagation); the ScoreNet still sees the event features.
            frame: :meth:`encode_frame` of this ``image`` and ``ev_past``, computed once for all
                queries of the frame (the frame's features and the past grid's flow features are
                then reused, not recomputed; the output is the same up to float rounding).
            flow_cache: a :class:`FlowCache` of this model's (fixed) flow network: the flow and
                flow features of this query are taken from it (computed once per pair of grids);
                the flow network must not be training (no gradient can reach it through a
                cache). ``flows`` then holds only the final flow.
            traced: run the optimised inference path: the frame encoding, the query's flow /
                ScoreNet / splatting / RefineNet and the decoder as ``torch.jit.trace`` graphs
                (one per input shape, built on first use, sharing this model's parameters; the
                memory attention stays eager). The same operations, so the same outputs up to
                float rounding; used only where it applies (eval mode, gradients off, feature
                propagation, estimated flow without ``flow`` or ``flow_cache``), otherwise the
                eager path runs.

        Returns:
            ``logits`` [N, K, H, W], ``flow`` [N, 2, H, W], ``flows`` (per GRU iteration, stacked
            [I, N, 2, H, W], in training mode; in eval mode only the last, [1, N, 2, H, W]),
            ``score`` [N, 1, H, W] (zeros without ScoreNet).
        """
        cfg = self.config
        if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[1] != 3:
            raise ValueError(
                f"image must be [N, 3, H, W], got {getattr(image, 'shape', type(image))}"
            )
        n, _, h, w = image.shape
        for name, ev in (("ev_past", ev_past), ("ev_query", ev_query)):
            if not isinstance(ev, torch.Tensor) or tuple(ev.shape) != (n, cfg.num_bins, h, w):
                raise ValueError(
                    f"{name} must be [N, B, H, W] = {[n, cfg.num_bins, h, w]}, got {list(getattr(ev, 'shape', []))}"
                )
        if h % 32 or w % 32:
            raise ValueError(f"image height and width must be multiples of 32, got {h}x{w}")
        if memory is not None and not isinstance(memory, MemoryBank):
            raise TypeError(f"memory must be a MemoryBank or None, got {type(memory).__name__}")
        if frame is not None:
            if not isinstance(frame, FrameEncoding):
                raise TypeError(
                    f"frame must be a FrameEncoding (encode_frame), got {type(frame).__name__}"
                )
            if frame.image is not image or frame.ev_past is not ev_past:
                raise ValueError(
                    "frame must be encode_frame(image, ev_past) of this call's image and ev_past"
                )
        if self._use_trace(traced) and flow is None and flow_cache is None:
            # the traced graphs hold no value checks: the inputs are checked here
            if not torch.isfinite(ev_query).all():
                raise ValueError("ev_query must be finite (no NaN or inf)")
            if frame is None:
                frame = self.encode_frame(image, ev_past, traced=True)
            past = frame.past_features
            if past is None:
                past = self._traced("frame", image, ev_past)(image, ev_past)[-1]
            assert frame.features is not None
            args = (image, ev_past, ev_query, past, *frame.features)
            flow_t, score_t, *feats_t = self._traced("query", *args)(*args)
            feats_t = self._read_write_memory(feats_t, memory)
            logits = self._traced("decode", *feats_t)(*feats_t)
            return {"logits": logits, "flow": flow_t, "flows": flow_t[None], "score": score_t}
        moving = (ev_query.abs().flatten(1).sum(1) > 0).view(n, 1, 1, 1)
        if flow_cache is not None:
            if not isinstance(flow_cache, FlowCache):
                raise TypeError(f"flow_cache must be a FlowCache, got {type(flow_cache).__name__}")
            if self.flownet.training or (
                torch.is_grad_enabled() and any(p.requires_grad for p in self.flownet.parameters())
            ):
                raise ValueError(
                    "flow_cache needs a fixed flow network (eval mode, no parameter requiring "
                    "grad while grad is enabled)"
                )
            flow_cache.check(self.flownet)
            fl_out = flow_cache(ev_past, ev_query)
        else:
            # the per-iteration flows only matter for a sequence loss: in eval mode only the
            # last one is upsampled
            fl_out = self.flownet(
                ev_past, ev_query, all_iterations=self.training,
                past_features=None if frame is None else frame.past_features,
            )  # fmt: skip
        if flow is not None:
            if not isinstance(flow, torch.Tensor) or tuple(flow.shape) != (n, 2, h, w):
                raise ValueError(f"flow must be [N, 2, H, W] = {[n, 2, h, w]}")
            fl_out = {**fl_out, "flow": flow.to(image.dtype)}
        flow, score, metric = self._flow_and_score(fl_out, moving, image)
        seg = self.segmenter
        if cfg.propagate == "image":
            warped, _ = self._splat(image, flow, metric)
            feats = seg.features(torch.where(moving, warped, image))
        elif frame is not None and frame.features is not None:
            feats = list(frame.features)
        else:
            feats = seg.features(image)
        if cfg.propagate == "features":
            feats = self._propagate_features(feats, flow, metric, moving)
        feats = self._read_write_memory(feats, memory)
        logits = seg.decode(feats, (h, w))
        if cfg.propagate == "logits":
            warped, _ = self._splat(torch.softmax(logits, 1), flow, metric)
            logits = torch.where(moving, torch.log(warped.clamp_min(1e-6)), logits)
        return {
            "logits": logits,
            "flow": flow,
            "flows": torch.stack(fl_out["flows"]),
            "score": score,
        }

    def encode_frame(
        self,
        image: torch.Tensor,
        ev_past: torch.Tensor,
        *,
        flow_features: bool = True,
        traced: bool = False,
    ) -> FrameEncoding:
        """The per-frame half of a query, computed once for all queries of the frame ``image``
        ``[N, 3, H, W]`` with the past voxel grid ``ev_past`` ``[N, B, H, W]``: the segmenter's
        features of ``I_t`` and the flow network's encoding of ``E_{t−Δt→t}``. Pass it to
        :meth:`forward` as ``frame=`` (with the same ``image`` and ``ev_past`` tensors).
        ``flow_features=False`` skips the flow encoding (``past_features`` is ``None``; for
        queries served by a :class:`FlowCache`, or the flow network encodes the grid itself).
        In training mode the features keep their graph: the gradient of every query of the frame
        flows back through one encoder pass (the same sum as one pass per query). ``traced``:
        the optimised path of :meth:`forward` (where it applies)."""
        n = image.shape[0] if isinstance(image, torch.Tensor) and image.ndim == 4 else None
        if n is None or image.shape[1] != 3:
            raise ValueError(
                f"image must be [N, 3, H, W], got {getattr(image, 'shape', type(image))}"
            )
        h, w = image.shape[-2:]
        if h % 32 or w % 32:
            raise ValueError(f"image height and width must be multiples of 32, got {h}x{w}")
        want = (n, self.config.num_bins, h, w)
        if not isinstance(ev_past, torch.Tensor) or tuple(ev_past.shape) != want:
            raise ValueError(
                f"ev_past must be [N, B, H, W] = {list(want)}, got {list(getattr(ev_past, 'shape', []))}"
            )
        if self._use_trace(traced):
            if not torch.isfinite(image).all() or not torch.isfinite(ev_past).all():
                raise ValueError("image and ev_past must be finite (no NaN or inf)")
            out = self._traced("frame", image, ev_past)(image, ev_past)
            return FrameEncoding(image, ev_past, tuple(out[:-1]), out[-1])
        feats = None if self.config.propagate == "image" else tuple(self.segmenter.features(image))
        past = self.flownet.encode(ev_past) if flow_features else None
        return FrameEncoding(image, ev_past, feats, past)

    @torch.no_grad()
    def predict_anytime(
        self,
        image: torch.Tensor,
        events: EventStream,
        t_frame: float,
        query_times: Sequence[float],
        *,
        past_window_s: float = 0.05,
        use_memory: bool | None = None,
        traced: bool = True,
    ) -> list[torch.Tensor]:
        """Causal anytime inference: logits ``[K, H, W]`` at each query time, in order, from the
        frame ``image`` ``[3, H, W]`` at ``t_frame`` and only the events before each query time
        (``E_{t−Δt→t}`` and ``E_{t→t_q}``, half-open). Query times must be ``>= t_frame`` and
        non-decreasing; the memory (if any) is written after every query. ``traced``: the
        optimised path of :meth:`forward` (default; ``False``: the eager reference path)."""
        if not isinstance(events, EventStream):
            raise TypeError(f"events must be an EventStream, got {type(events).__name__}")
        if not isinstance(image, torch.Tensor) or image.ndim != 3 or image.shape[0] != 3:
            raise ValueError(f"image must be [3, H, W], got {getattr(image, 'shape', type(image))}")
        if not np.isfinite(t_frame) or t_frame < 0:
            raise ValueError(f"t_frame must be a non-negative time, got {t_frame}")
        qs = [float(q) for q in query_times]
        if not qs:
            raise ValueError("query_times must not be empty")
        if any(not np.isfinite(q) for q in qs):
            raise ValueError("query_times must be finite")
        if min(qs) < t_frame:
            raise ValueError(
                f"query time {min(qs)} is before the RGB frame at {t_frame} (causal anytime: δt >= 0)"
            )
        if any(b < a for a, b in itertools.pairwise(qs)):
            raise ValueError("query_times must be non-decreasing")
        if not np.isfinite(past_window_s) or past_window_s <= 0:
            raise ValueError(f"past_window_s must be positive, got {past_window_s}")
        _, h, w = image.shape
        dev = next(self.parameters()).device
        memory = (
            MemoryBank(self.config.memory_len)
            if (self.config.use_memory if use_memory is None else use_memory)
            else None
        )
        t0 = max(t_frame - past_window_s, 0.0)
        past = voxel_grid(
            events.slice(t0, t_frame), self.config.num_bins, h, w, t_start=t0, t_end=t_frame
        )
        past = past.unsqueeze(0).to(dev)
        img = image.unsqueeze(0).to(dev, torch.float32)
        frame = self.encode_frame(img, past, traced=traced)  # shared by the frame's queries
        outs = []
        for q in qs:
            query = voxel_grid(
                events.slice(t_frame, q), self.config.num_bins, h, w, t_start=t_frame, t_end=q
            )
            out = self(img, past, query.unsqueeze(0).to(dev), memory, frame=frame, traced=traced)
            outs.append(out["logits"][0])
        return outs

    def variant(self, *, segmenter: Segmenter | None = None, **changes: object) -> LiFRSeg:
        """A model with a changed config that shares this model's modules (weights), e.g.
        ``variant(propagate="image")`` or ``variant(use_score=False)`` for the ablations;
        ``segmenter`` swaps in another segmenter (e.g. the frame segmenter for image warping)."""
        cfg = LiFRSegConfig(**{**self.config.to_dict(), **changes})
        out = LiFRSeg.__new__(LiFRSeg)
        nn.Module.__init__(out)
        out.config = cfg
        if segmenter is not None and not isinstance(segmenter, Segmenter):
            raise TypeError(f"segmenter must be a Segmenter, got {type(segmenter).__name__}")
        out.segmenter, out.flownet = segmenter or self.segmenter, self.flownet
        out.scorenet = self.scorenet if cfg.use_score else None
        out.refine = self.refine if cfg.use_refine else None
        out.memory_attn = self.memory_attn if cfg.use_memory else None
        if cfg.use_score and self.scorenet is None:
            raise ValueError("this model has no ScoreNet; use_score=True is not available")
        if cfg.use_refine and self.refine is None:
            raise ValueError("this model has no RefineNet; use_refine=True is not available")
        if cfg.use_memory and self.memory_attn is None:
            raise ValueError("this model has no memory attention; use_memory=True is not available")
        if cfg.enc_dims != self.config.enc_dims or cfg.num_bins != self.config.num_bins:
            raise ValueError("enc_dims and num_bins cannot change in a variant")
        return out
