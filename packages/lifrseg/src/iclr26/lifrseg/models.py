"""The networks of LiFR-Seg at CPU scale: a tiny MiT (SegFormer) encoder with the all-MLP decoder,
an E-RAFT-lite event flow network, the ScoreNet, the RefineNet and the temporal memory attention.

The paper uses SegFormer-B2 and E-RAFT (15 bins, 256-d features, 12 GRU iterations, 8× convex
upsampling); these keep the same structure with small widths (1/4-resolution flow, 4× convex
upsampling) so they train from scratch in minutes on a CPU.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "AllMLPDecoder",
    "ERaftLite",
    "MemoryBank",
    "RefineNet",
    "ScoreNet",
    "Segmenter",
    "TemporalMemoryAttention",
    "TinyMiT",
]


def _check_image(x: torch.Tensor, name: str, channels: int | None = None) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 4 or not x.is_floating_point():
        raise ValueError(
            f"{name} must be a floating [N, C, H, W] tensor, got {x.dtype} {tuple(x.shape)}"
        )
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"{name} must have {channels} channels, got {x.shape[1]}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")


# --- SegFormer-style encoder / decoder ------------------------------------------------------


class _EfficientAttention(nn.Module):
    def __init__(self, dim: int, heads: int, sr: int) -> None:
        super().__init__()
        self.heads, self.sr = heads, sr
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)
        if sr > 1:
            self.reduce = nn.Conv2d(dim, dim, sr, stride=sr)
            self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        n, t, c = x.shape
        q = self.q(x).view(n, t, self.heads, c // self.heads).transpose(1, 2)
        kv = x
        if self.sr > 1:
            kv = self.reduce(x.transpose(1, 2).reshape(n, c, h, w)).flatten(2).transpose(1, 2)
            kv = self.norm(kv)
        k, v = self.kv(kv).view(n, -1, 2, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(n, t, c))


class _MixFFN(nn.Module):
    def __init__(self, dim: int, ratio: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * ratio)
        self.dw = nn.Conv2d(dim * ratio, dim * ratio, 3, padding=1, groups=dim * ratio)
        self.fc2 = nn.Linear(dim * ratio, dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        n, _t, _ = x.shape
        y = self.fc1(x)
        y = self.dw(y.transpose(1, 2).reshape(n, -1, h, w)).flatten(2).transpose(1, 2)
        return self.fc2(F.gelu(y))


class _MiTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, sr: int) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = _EfficientAttention(dim, heads, sr)
        self.ffn = _MixFFN(dim)

    def forward(self, x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        x = x + self.attn(self.n1(x), h, w)
        return x + self.ffn(self.n2(x), h, w)


class TinyMiT(nn.Module):
    """A four-stage Mix Transformer (SegFormer's encoder) with strides 4/8/16/32: overlapping patch
    embeddings, efficient (spatially reduced) self-attention and Mix-FFN blocks.

    Args:
        in_chans: input channels (3 for RGB; more for the early-fusion baseline).
        dims: channels per stage (SegFormer-B2: 64, 128, 320, 512).
        heads, sr_ratios, depths: per stage (B2: 1/2/5/8 heads, 8/4/2/1, 3/4/6/3 blocks).
    """

    def __init__(
        self,
        in_chans: int = 3,
        dims: Sequence[int] = (16, 32, 64, 128),
        heads: Sequence[int] = (1, 2, 4, 4),
        sr_ratios: Sequence[int] = (8, 4, 2, 1),
        depths: Sequence[int] = (1, 1, 1, 1),
    ) -> None:
        super().__init__()
        if len(dims) != 4 or len(heads) != 4 or len(sr_ratios) != 4 or len(depths) != 4:
            raise ValueError("dims, heads, sr_ratios and depths need one entry per stage (4)")
        if any(d % h for d, h in zip(dims, heads, strict=True)):
            raise ValueError(f"each dim must be divisible by its heads, got {dims} / {heads}")
        self.in_chans, self.dims = in_chans, tuple(dims)
        self.embeds, self.stages, self.norms = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        prev = in_chans
        for i, (d, hd, sr, depth) in enumerate(zip(dims, heads, sr_ratios, depths, strict=True)):
            k, s = (7, 4) if i == 0 else (3, 2)
            self.embeds.append(nn.Conv2d(prev, d, k, stride=s, padding=k // 2))
            self.stages.append(nn.ModuleList([_MiTBlock(d, hd, sr) for _ in range(depth)]))
            self.norms.append(nn.LayerNorm(d))
            prev = d

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Multi-scale features ``[N, dims[i], H / 2^(i+2), W / 2^(i+2)]``."""
        _check_image(x, "image", self.in_chans)
        feats = []
        for embed, blocks, norm in zip(self.embeds, self.stages, self.norms, strict=True):
            x = embed(x)
            n, c, h, w = x.shape
            t = x.flatten(2).transpose(1, 2)
            for blk in blocks:
                t = blk(t, h, w)
            x = norm(t).transpose(1, 2).reshape(n, c, h, w)
            feats.append(x)
        return feats


class AllMLPDecoder(nn.Module):
    """SegFormer's all-MLP decoder: per-scale linear projection, upsampling to stride 4, fusion,
    classification, bilinear upsampling to the output size."""

    def __init__(self, dims: Sequence[int], num_classes: int, embed: int = 64) -> None:
        super().__init__()
        self.proj = nn.ModuleList([nn.Conv2d(d, embed, 1) for d in dims])
        self.fuse = nn.Sequential(
            nn.Conv2d(embed * len(dims), embed, 1), nn.BatchNorm2d(embed), nn.ReLU()
        )
        self.cls = nn.Conv2d(embed, num_classes, 1)

    def forward(self, feats: Sequence[torch.Tensor], out_size: tuple[int, int]) -> torch.Tensor:
        size = feats[0].shape[-2:]
        up = [
            F.interpolate(p(f), size=size, mode="bilinear", align_corners=False)
            for p, f in zip(self.proj, feats, strict=True)
        ]
        logits = self.cls(self.fuse(torch.cat(up, dim=1)))
        return F.interpolate(logits, size=out_size, mode="bilinear", align_corners=False)


class Segmenter(nn.Module):
    """TinyMiT + all-MLP decoder: the frame segmenter (also the HFR oracle and hold-last baseline,
    and LiFR-Seg's feature extractor and decoder)."""

    def __init__(
        self, num_classes: int, dims: Sequence[int] = (16, 32, 64, 128), in_chans: int = 3
    ) -> None:
        super().__init__()
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
        self.num_classes = num_classes
        self.encoder = TinyMiT(in_chans, dims)
        self.decoder = AllMLPDecoder(dims, num_classes)

    def features(self, image: torch.Tensor) -> list[torch.Tensor]:
        return self.encoder(image)

    def decode(self, feats: Sequence[torch.Tensor], out_size: tuple[int, int]) -> torch.Tensor:
        return self.decoder(feats, out_size)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        """Logits ``[N, num_classes, H, W]`` of ``image`` ``[N, in_chans, H, W]``."""
        return self.decode(self.features(image), tuple(image.shape[-2:]))


# --- E-RAFT-lite ----------------------------------------------------------------------------


def _conv(cin: int, cout: int, k: int = 3, s: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride=s, padding=k // 2), nn.GroupNorm(4, cout), nn.ReLU()
    )


class _EventEncoder(nn.Module):
    def __init__(self, num_bins: int, dim: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            _conv(num_bins, 32, 7, 2), _conv(32, 48, 3, 2), _conv(48, 48), nn.Conv2d(48, dim, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _encode_pair(a: _EventEncoder, b: _EventEncoder, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``(a(x), b(x))`` for two encoders of the same structure on the same input, as one network
    of twice the width: the first convolution with both weight sets stacked, the next two as
    grouped convolutions (groups=2), each GroupNorm as one with both encoders' groups (the groups
    never mix channels of the two halves), then each encoder's own 1x1 projection. The same sums
    as two separate passes, in half the kernel calls."""
    y = x
    for i, (la, lb) in enumerate(zip(a.net[:3], b.net[:3], strict=True)):
        ca, cb, na, nb = la[0], lb[0], la[1], lb[1]
        y = F.conv2d(
            y, torch.cat([ca.weight, cb.weight]), torch.cat([ca.bias, cb.bias]),
            stride=ca.stride, padding=ca.padding, groups=1 if i == 0 else 2,
        )  # fmt: skip
        y = F.group_norm(
            y, na.num_groups + nb.num_groups, torch.cat([na.weight, nb.weight]),
            torch.cat([na.bias, nb.bias]), na.eps,
        )  # fmt: skip
        y = F.relu(y)
    ya, yb = y.chunk(2, 1)
    return a.net[3](ya), b.net[3](yb)


def _bilinear_sample(img: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    h, w = img.shape[-2:]
    scale = torch.tensor(
        [2 / max(w - 1, 1), 2 / max(h - 1, 1)], dtype=coords.dtype, device=coords.device
    )
    return F.grid_sample(
        img, torch.addcmul(coords.new_tensor(-1.0), coords, scale), align_corners=True
    )


class _CorrPyramid:
    """RAFT's all-pairs correlation volume with an average-pooled pyramid and windowed lookup."""

    def __init__(self, f1: torch.Tensor, f2: torch.Tensor, levels: int, radius: int) -> None:
        n, c, h, w = f1.shape
        corr = torch.einsum("nchw,ncij->nhwij", f1, f2) / math.sqrt(c)
        corr = corr.reshape(n * h * w, 1, h, w)
        self.pyramid = [corr]
        for _ in range(levels - 1):
            corr = F.avg_pool2d(corr, 2, stride=2)
            self.pyramid.append(corr)
        self.radius = radius
        r = torch.arange(-radius, radius + 1, dtype=f1.dtype, device=f1.device)
        dy, dx = torch.meshgrid(r, r, indexing="ij")
        self.delta = torch.stack([dx, dy], -1).view(1, 2 * radius + 1, 2 * radius + 1, 2)

    def __call__(self, coords: torch.Tensor) -> torch.Tensor:
        n, _, h, w = coords.shape
        centre = coords.permute(0, 2, 3, 1).reshape(n * h * w, 1, 1, 2)
        out = []
        for i, corr in enumerate(self.pyramid):
            sampled = _bilinear_sample(corr, centre / 2**i + self.delta)
            out.append(sampled.view(n, h, w, -1))
        return torch.cat(out, dim=-1).permute(0, 3, 1, 2)


class _ConvGRU(nn.Module):
    """RAFT's ConvGRU ``z = σ(W_z[h, x]), r = σ(W_r[h, x]), q = tanh(W_q[r h, x]),
    h' = (1 − z) h + z q``, with the input ``x = [motion, context]`` split in two: the context
    part of the three convolutions is the same at every iteration, so :meth:`context` computes
    it once per query and :meth:`forward` adds it (the same sums, a quarter fewer per-iteration
    FLOPs at E-RAFT-lite's widths)."""

    def __init__(self, hidden: int, inp: int, context: int) -> None:
        super().__init__()
        self.hidden, self.ctx_dim = hidden, context
        self.z = nn.Conv2d(hidden + inp, hidden, 3, padding=1)
        self.r = nn.Conv2d(hidden + inp, hidden, 3, padding=1)
        self.q = nn.Conv2d(hidden + inp, hidden, 3, padding=1)

    def context(self, ctx: torch.Tensor) -> torch.Tensor:
        """The context's share of the z, r and q pre-activations (biases included), stacked:
        ``[N, 3 * hidden, h, w]``."""
        k = self.ctx_dim
        w = torch.cat([self.z.weight[:, -k:], self.r.weight[:, -k:], self.q.weight[:, -k:]])
        return F.conv2d(ctx, w, torch.cat([self.z.bias, self.r.bias, self.q.bias]), padding=1)

    def forward(self, h: torch.Tensor, motion: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """One update of ``h`` from the motion features and :meth:`context` of the context."""
        k, hd = self.ctx_dim, self.hidden
        # the update and reset gates read the same input: one convolution with both weight sets
        # stacked (the same sums as two; one GEMM of twice the width is cheaper at these sizes)
        w_zr = torch.cat([self.z.weight[:, :-k], self.r.weight[:, :-k]])
        zr = F.conv2d(torch.cat([h, motion], 1), w_zr, padding=1) + context[:, : 2 * hd]
        z, r = torch.sigmoid(zr).chunk(2, 1)
        q = F.conv2d(torch.cat([r * h, motion], 1), self.q.weight[:, :-k], padding=1)
        q = torch.tanh(q + context[:, 2 * hd :])
        return torch.lerp(h, q, z)  # (1 - z) h + z q


class ERaftLite(nn.Module):
    """E-RAFT (Gehrig et al., 3DV 2021) at small scale: a shared feature encoder on the past and the
    query voxel grids, an all-pairs correlation pyramid, a context encoder on the query grid, ConvGRU
    updates from zero flow and convex upsampling. Features and flow live at 1/4 resolution.

    Args:
        num_bins: voxel-grid bins of each input (E-RAFT: 15).
        feat_dim, hidden, context: widths (E-RAFT: 256, 128, 128).
        corr_levels, corr_radius: correlation pyramid (E-RAFT: 4 levels, radius 4).
        iters: GRU iterations (E-RAFT: 12).
    """

    stride = 4

    def __init__(
        self,
        num_bins: int = 5,
        feat_dim: int = 48,
        hidden: int = 32,
        context: int = 32,
        corr_levels: int = 2,
        corr_radius: int = 3,
        iters: int = 4,
    ) -> None:
        super().__init__()
        for name, v in (
            ("num_bins", num_bins),
            ("iters", iters),
            ("corr_levels", corr_levels),
            ("corr_radius", corr_radius),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.num_bins, self.iters, self.hidden = num_bins, iters, hidden
        self.levels, self.radius = corr_levels, corr_radius
        self.fnet = _EventEncoder(num_bins, feat_dim)
        self.cnet = _EventEncoder(num_bins, hidden + context)
        cor_planes = corr_levels * (2 * corr_radius + 1) ** 2
        self.enc_corr = nn.Sequential(nn.Conv2d(cor_planes, 64, 1), nn.ReLU())
        self.enc_flow = nn.Sequential(nn.Conv2d(2, 32, 7, padding=3), nn.ReLU())
        self.enc_out = nn.Sequential(nn.Conv2d(96, 62, 3, padding=1), nn.ReLU())
        self.gru = _ConvGRU(hidden, 64 + context, context)
        self.flow_head = nn.Sequential(
            nn.Conv2d(hidden, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 2, 3, padding=1)
        )
        self.mask_head = nn.Sequential(
            nn.Conv2d(hidden, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 9 * 16, 1)
        )
        self.feat_dim = feat_dim

    def _upsample(self, flow: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, _, h, w = flow.shape
        mask = torch.softmax(mask.view(n, 1, 9, 4, 4, h, w), dim=2)
        up = F.unfold(4 * flow, 3, padding=1).view(n, 2, 9, 1, 1, h, w)
        up = (mask * up).sum(dim=2).permute(0, 1, 4, 2, 5, 3)
        return up.reshape(n, 2, 4 * h, 4 * w)

    def encode(self, ev: torch.Tensor) -> torch.Tensor:
        """The feature encoder on a voxel grid ``[N, B, H, W]`` → ``[N, feat_dim, H/4, W/4]``:
        what :meth:`forward` computes for the past grid, so a caller with several query windows
        after the same past window encodes it once and passes it as ``past_features``."""
        _check_image(ev, "ev", self.num_bins)
        if ev.shape[-1] % 4 or ev.shape[-2] % 4:
            raise ValueError("the voxel grid's height and width must be multiples of 4")
        return self.fnet(ev)

    def forward(
        self,
        ev_past: torch.Tensor,
        ev_query: torch.Tensor,
        *,
        all_iterations: bool = True,
        past_features: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor | list[torch.Tensor]]:
        """Flow of the scene from the start to the end of the query window, at full resolution
        (pixels, x first). Returns ``flows`` (one per iteration, for RAFT's sequence loss; with
        ``all_iterations=False`` only the last, which skips the convex upsampling of the others,
        as RAFT's test mode), ``flow`` (the last), and the 1/4-resolution ``features``
        (query-grid features, GRU state, flow) for the ScoreNet. ``past_features``:
        ``encode(ev_past)`` computed earlier (the same past window for every query of a frame);
        the result is the same up to float rounding."""
        _check_image(ev_past, "ev_past", self.num_bins)
        _check_image(ev_query, "ev_query", self.num_bins)
        if ev_past.shape != ev_query.shape:
            raise ValueError(
                f"ev_past {tuple(ev_past.shape)} and ev_query {tuple(ev_query.shape)} differ"
            )
        if ev_past.shape[-1] % 4 or ev_past.shape[-2] % 4:
            raise ValueError("the voxel grids' height and width must be multiples of 4")
        if past_features is None:
            f1 = self.fnet(ev_past)
        else:
            n, _, h, w = ev_past.shape
            want = (n, self.feat_dim, h // 4, w // 4)
            if not isinstance(past_features, torch.Tensor) or tuple(past_features.shape) != want:
                raise ValueError(
                    f"past_features must be a tensor of shape {list(want)} (encode(ev_past)), got "
                    f"{list(getattr(past_features, 'shape', [])) or type(past_features).__name__}"
                )
            f1 = past_features
        # the feature and context encoders both read the query grid: one pass of both
        f2, hc = _encode_pair(self.fnet, self.cnet, ev_query)
        corr = _CorrPyramid(f1, f2, self.levels, self.radius)
        h_ctx, ctx = torch.split(hc, [self.hidden, hc.shape[1] - self.hidden], 1)
        net, ctx = torch.tanh(h_ctx), self.gru.context(torch.relu(ctx))
        fh, mh = self.flow_head, self.mask_head
        n, _, h, w = f1.shape
        ys, xs = torch.meshgrid(
            torch.arange(h, dtype=f1.dtype), torch.arange(w, dtype=f1.dtype), indexing="ij"
        )
        coords0 = torch.stack([xs, ys]).to(f1.device).unsqueeze(0).expand(n, -1, -1, -1)
        flow = torch.zeros(n, 2, h, w, dtype=f1.dtype, device=f1.device)
        flows = []
        for i in range(self.iters):
            c = self.enc_corr(corr(coords0 + flow))
            if i == 0:  # the flow starts at zero: its encoding is relu(bias), no 7x7 convolution
                conv = self.enc_flow[0]
                fl = torch.relu(conv.bias).view(1, -1, 1, 1).expand(n, -1, h, w)
            else:
                fl = self.enc_flow(flow)
            motion = torch.cat([self.enc_out(torch.cat([c, fl], 1)), flow], 1)
            net = self.gru(net, motion, ctx)
            if all_iterations or i == self.iters - 1:
                # the flow and mask heads both open with a 3x3 convolution of the GRU state:
                # one convolution with both weight sets stacked
                hid = F.relu(
                    F.conv2d(
                        net, torch.cat([fh[0].weight, mh[0].weight]),
                        torch.cat([fh[0].bias, mh[0].bias]), padding=1,
                    )
                )  # fmt: skip
                hf, hm = torch.split(hid, [fh[0].out_channels, mh[0].out_channels], 1)
                flow = flow + fh[2](hf)
                flows.append(self._upsample(flow, 0.25 * mh[2](hm)))
            else:
                flow = flow + fh(net)
        return {"flows": flows, "flow": flows[-1], "features": torch.cat([f2, net, flow], 1)}


class ScoreNet(nn.Module):
    """ScoreNet: a small CNN on ``concat(event features, flow features)`` giving the per-pixel
    log-precision ``S`` (higher = more reliable), clamped to ``[-clamp, clamp]``. The paper's
    internal structure (Eq. 3, φ_out(F_SED(φ_joint(·)))) is not published; ours is 3 convs, GELU,
    32 channels (our choice)."""

    def __init__(self, in_channels: int, width: int = 32, clamp: float = 20.0) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.GELU(),
            nn.Conv2d(width, width, 3, padding=1), nn.GELU(),
            nn.Conv2d(width, 1, 3, padding=1),
        )  # fmt: skip
        self.clamp = clamp

    def forward(self, features: torch.Tensor, out_size: tuple[int, int]) -> torch.Tensor:
        s = self.net(features)
        s = F.interpolate(s, size=out_size, mode="bilinear", align_corners=False)
        return s.clamp(-self.clamp, self.clamp)


class RefineNet(nn.Module):
    """Two 3×3 convs with a residual that patch the holes left by splatting; the hole map
    (normaliser ≈ 0) is an extra input."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(dim + 1, dim, 3, padding=1)
        self.c2 = nn.Conv2d(dim, dim, 3, padding=1)
        nn.init.zeros_(self.c2.weight)
        nn.init.zeros_(self.c2.bias)

    def forward(self, x: torch.Tensor, holes: torch.Tensor) -> torch.Tensor:
        return x + self.c2(F.gelu(self.c1(torch.cat([x, holes], 1))))


# --- temporal memory --------------------------------------------------------------------------


class MemoryBank:
    """FIFO of the deepest propagated feature maps of earlier queries (write/evict policy not
    published; FIFO of length ``length`` written after every query is our choice)."""

    def __init__(self, length: int = 4) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(f"length must be a positive integer, got {length!r}")
        self.length = length
        self._items: deque[torch.Tensor] = deque(maxlen=length)

    def __len__(self) -> int:
        return len(self._items)

    def write(self, feat: torch.Tensor) -> None:
        """Append ``feat`` ``[N, C, h, w]`` (the oldest entry is evicted when full)."""
        if not isinstance(feat, torch.Tensor) or feat.ndim != 4:
            raise ValueError("feat must be a [N, C, h, w] tensor")
        if self._items and self._items[-1].shape != feat.shape:
            raise ValueError(
                f"feat shape {tuple(feat.shape)} differs from the bank's {tuple(self._items[-1].shape)}"
            )
        self._items.append(feat)

    def items(self) -> list[torch.Tensor]:
        """Stored maps, oldest first."""
        return list(self._items)

    def clear(self) -> None:
        self._items.clear()


class TemporalMemoryAttention(nn.Module):
    """``F' = F + W_o softmax(Q Kᵀ/√d) V``: queries from the current deepest features, keys and
    values from the memory tokens (optionally with a learned age embedding). An empty memory is
    the identity; ``W_o`` starts at zero so training starts from the identity too."""

    def __init__(
        self, dim: int, heads: int = 4, age_embedding: bool = False, max_len: int = 16
    ) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.norm_q, self.norm_kv = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.kv, self.out = (
            nn.Linear(dim, dim),
            nn.Linear(dim, 2 * dim),
            nn.Linear(dim, dim),
        )
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.age = nn.Embedding(max_len, dim) if age_embedding else None

    def forward(self, feat: torch.Tensor, memory: Sequence[torch.Tensor]) -> torch.Tensor:
        if not memory:
            return feat
        n, c, h, w = feat.shape
        q = self.q(self.norm_q(feat.flatten(2).transpose(1, 2)))
        toks = []
        for age, m in enumerate(reversed(list(memory))):  # age 0 = newest
            t = m.flatten(2).transpose(1, 2)
            if self.age is not None:
                t = t + self.age.weight[min(age, self.age.num_embeddings - 1)]
            toks.append(t)
        kv = self.kv(self.norm_kv(torch.cat(toks, 1)))
        k, v = kv.chunk(2, -1)
        split = lambda x: x.view(n, -1, self.heads, c // self.heads).transpose(1, 2)  # noqa: E731
        att = F.scaled_dot_product_attention(split(q), split(k), split(v))
        att = att.transpose(1, 2).reshape(n, h * w, c)
        return feat + self.out(att).transpose(1, 2).reshape(n, c, h, w)
