"""Forward warping by softmax splatting (Niklaus & Liu, CVPR 2020) in pure PyTorch, and backward
warping with ``grid_sample``.

LiFR-Seg's uncertainty-guided propagation is ``F_{t+δt} = Σ→(exp(S) ⊙ F_t, M) / Σ→(exp(S), M)``
where the summation splat is ``Σ→(X, M)(q) = Σ_p b(q − (p + M(p))) X(p)`` with the bilinear
kernel ``b(u) = max(0, 1 − |u_x|) max(0, 1 − |u_y|)``. Flow channel 0 is horizontal (x), as in
the reference ``softsplat``; the metric is a log-weight: higher wins at collisions.
"""

from __future__ import annotations

import functools
import warnings
from typing import Literal

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

__all__ = [
    "backward_warp",
    "resize_flow",
    "softmax_splat",
    "softmax_splat_with_coverage",
    "splat_sum",
    "splat_sum_reference",
]

MODES = ("sum", "avg", "linear", "soft")
_GROUP = 8  # channels per scatter call in splat_sum (at least)
_CACHE_CELLS = 1 << 16  # canvas cells per scatter call below which channels are not split


def _check_pair(x: torch.Tensor, flow: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not isinstance(flow, torch.Tensor):
        raise TypeError(f"flow must be a torch.Tensor, got {type(flow).__name__}")
    if x.ndim != 4:
        raise ValueError(f"x must be [N, C, H, W], got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating tensor, got {x.dtype}")
    n, _, h, w = x.shape
    if tuple(flow.shape) != (n, 2, h, w):
        raise ValueError(f"flow must be [N, 2, H, W] = {[n, 2, h, w]}, got {list(flow.shape)}")
    if not flow.is_floating_point():
        raise TypeError(f"flow must be a floating tensor, got {flow.dtype}")
    if not torch.isfinite(flow).all():
        raise ValueError("flow must be finite (no NaN or inf)")


def _canvas(n: int) -> int:
    """The smallest ``2**k + 1 >= n``: a splat canvas whose ``align_corners`` normalisation
    ``2 t / (n' - 1) - 1`` is a power-of-two scaling, so integer targets stay exact."""
    return (1 << max(int(n) - 2, 0).bit_length()) + 1  # int(): a traced size is a tensor


def _scatter_plane(x: torch.Tensor, grid: torch.Tensor, hc: int, wc: int) -> torch.Tensor:
    """``grid_sample``'s input gradient for ``x`` on an ``(hc, wc)`` canvas: the native kernel
    that scatters all four bilinear corners of every source pixel."""
    canvas = x.new_zeros(()).expand(x.shape[0], x.shape[1], hc, wc)  # only its shape is read
    out, _ = torch.ops.aten.grid_sampler_2d_backward(x, canvas, grid, 0, 0, True, [True, False])
    return out


@functools.cache
def _scatter_plane_scripted():
    """:func:`_scatter_plane` as a TorchScript function, for ``torch.jit.trace``: the tracer
    cannot record the kernel's boolean output mask, but it records a call to a scripted
    function that passes it (scripted on first use)."""
    with warnings.catch_warnings():  # TorchScript's deprecation notice
        warnings.simplefilter("ignore")
        return torch.jit.script(_scatter_plane)


def _scatter(x: torch.Tensor, grid: torch.Tensor, hc: int, wc: int) -> torch.Tensor:
    """``Σ→(x)`` on the canvas, channel group by channel group: the kernel scatters every
    channel of a point before the next point, so in groups of ``_GROUP`` channels the target
    planes stay in cache (about 2x faster at 256², C = 64); small canvases (the 1/4 … 1/32
    feature maps of a 64² query) take every channel in one call, as their planes fit in cache
    anyway and each call has a fixed cost."""
    c = x.shape[1]
    group = max(_GROUP, _CACHE_CELLS // (hc * wc))
    plane = _scatter_plane_scripted() if torch.jit.is_tracing() else _scatter_plane
    if c <= group:
        return plane(x.contiguous(), grid, hc, wc)
    outs = [plane(x[:, i : i + group].contiguous(), grid, hc, wc) for i in range(0, c, group)]
    return torch.cat(outs, 1)


class _AdjointWarp(torch.autograd.Function):
    """``Σ→(x)`` on a canvas as the adjoint of bilinear ``grid_sample`` (zeros padding,
    ``align_corners=True``): ``<Σ→(x), g> = <x, grid_sample(g, grid)>``, so the forward is
    ``grid_sample``'s input gradient and the backward is ``grid_sample`` itself (for ``x``) and
    its grid gradient (for the target positions)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, grid: torch.Tensor, hc: int, wc: int) -> torch.Tensor:
        ctx.save_for_backward(x, grid)
        return _scatter(x, grid, hc, wc)

    @staticmethod
    @once_differentiable
    def backward(ctx, g: torch.Tensor):
        x, grid = ctx.saved_tensors
        g = g.contiguous()
        gx = ggrid = None
        if ctx.needs_input_grad[0]:
            gx = F.grid_sample(g, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        if ctx.needs_input_grad[1]:
            _, ggrid = torch.ops.aten.grid_sampler_2d_backward(
                x.contiguous(), g, grid, 0, 0, True, [False, True]
            )
        return gx, ggrid, None, None


def _pixels(flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel coordinates ``ys`` ``[H, 1]`` and ``xs`` ``[1, W]`` of ``flow``'s grid (broadcast
    against ``flow[:, 1]`` and ``flow[:, 0]``)."""
    h, w = flow.shape[-2:]
    ys = torch.arange(h, device=flow.device, dtype=flow.dtype).view(h, 1)
    xs = torch.arange(w, device=flow.device, dtype=flow.dtype).view(1, w)
    return ys, xs


def _splat_grid(flow: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, int, int]:
    """Target positions ``p + flow(p)`` normalised for a ``(2**a + 1, 2**b + 1)`` canvas."""
    _, _, h, w = flow.shape
    hc, wc = _canvas(h), _canvas(w)
    ys, xs = _pixels(flow)
    gx = (xs + flow[:, 0]) * (2.0 / (wc - 1)) - 1
    gy = (ys + flow[:, 1]) * (2.0 / (hc - 1)) - 1
    return torch.stack([gx, gy], dim=-1).to(dtype), hc, wc


def _splat_many(xs: list[torch.Tensor], flow: torch.Tensor) -> list[torch.Tensor]:
    """``Σ→`` of several maps along one flow (the target positions are computed once)."""
    h, w = flow.shape[-2:]
    grid, hc, wc = _splat_grid(flow, xs[0].dtype)
    # one scatter for all maps (numerator, normaliser, coverage): each channel is summed on
    # its own, so this is the same as one call per map, with one fixed cost instead of three
    sizes = [x.shape[1] for x in xs]
    stacked = xs[0] if len(xs) == 1 else torch.cat(xs, 1)
    if stacked.numel() == 0:
        return [torch.zeros_like(x) for x in xs]
    if torch.is_grad_enabled() and (stacked.requires_grad or grid.requires_grad):
        full = _AdjointWarp.apply(stacked, grid, hc, wc)
    else:  # no gradient to track: the kernel itself (which a traced graph can record)
        full = _scatter(stacked, grid, hc, wc)
    if (hc, wc) != (h, w):
        full = full[..., :h, :w]
    return list(full.split(sizes, 1)) if len(xs) > 1 else [full]


def splat_sum(x: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """The summation splat ``Σ→(x, flow)``: each source pixel ``p`` adds ``x(p)`` to the four
    pixels around ``p + flow(p)`` with bilinear weights; targets outside the image are dropped.

    Computed as the adjoint of bilinear backward warping: ``Σ→`` is exactly the input gradient of
    ``grid_sample`` (zeros padding, ``align_corners=True``), whose native kernel scatters all four
    corners of every source pixel in one pass; its backward is ``grid_sample`` itself (for ``x``)
    and ``grid_sample``'s grid gradient (for ``flow``). Equal to :func:`splat_sum_reference` up to
    float rounding (the sum order differs). Differentiable once in ``x`` and ``flow`` (except
    where a target coordinate is an integer); no double backward."""
    _check_pair(x, flow)
    return _splat_many([x], flow)[0]


def splat_sum_reference(x: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """The summation splat written out literally (four bilinear corners, masked, one
    ``index_add_`` over flattened indices): the slow reference :func:`splat_sum` is tested
    against and benchmarked with."""
    _check_pair(x, flow)
    n, c, h, w = x.shape
    ys, xs = _pixels(flow)
    tx = xs + flow[:, 0]  # [N, H, W]
    ty = ys + flow[:, 1]
    x0, y0 = torch.floor(tx), torch.floor(ty)
    fx, fy = tx - x0, ty - y0
    cx = torch.stack([x0, x0 + 1, x0, x0 + 1])  # the four target corners, [4, N, H, W]
    cy = torch.stack([y0, y0, y0 + 1, y0 + 1])
    weight = torch.stack([(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy])
    valid = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
    weight = torch.where(valid, weight, torch.zeros((), dtype=weight.dtype, device=weight.device))
    base = (torch.arange(n, device=x.device) * (h * w)).view(1, n, 1, 1)
    index = base + cy.clamp(0, h - 1).long() * w + cx.clamp(0, w - 1).long()
    src = x.permute(0, 2, 3, 1).reshape(1, n * h * w, c)
    contrib = (src * weight.reshape(4, n * h * w, 1).to(x.dtype)).reshape(4 * n * h * w, c)
    out = torch.zeros(n * h * w, c, dtype=x.dtype, device=x.device)
    out.index_add_(0, index.reshape(-1), contrib)
    return out.view(n, h, w, c).permute(0, 3, 1, 2)


def _soft_weight(
    x: torch.Tensor, metric: torch.Tensor | None, mode: str, clamp: float | None
) -> torch.Tensor | None:
    """The per-pixel splatting weight of ``mode`` (``None`` for ``sum`` and ``avg``)."""
    n, _, h, w = x.shape
    if mode not in ("linear", "soft"):
        return None
    if metric is None:
        raise ValueError(f"metric is required for mode {mode!r}")
    if not isinstance(metric, torch.Tensor):
        raise TypeError(f"metric must be a torch.Tensor, got {type(metric).__name__}")
    if tuple(metric.shape) != (n, 1, h, w):
        raise ValueError(f"metric must be [N, 1, H, W] = {[n, 1, h, w]}, got {list(metric.shape)}")
    if not metric.is_floating_point():
        raise TypeError(f"metric must be a floating tensor, got {metric.dtype}")
    if not torch.isfinite(metric).all():
        raise ValueError("metric must be finite (no NaN or inf)")
    m = metric.to(x.dtype)
    if mode == "soft":
        if clamp is not None:
            m = m.clamp(-clamp, clamp)
        if m.numel():
            m = m - m.amax(dim=(1, 2, 3), keepdim=True)
        m = torch.exp(m)
    return m


def _splat_normalised(
    x: torch.Tensor,
    flow: torch.Tensor,
    metric: torch.Tensor | None,
    mode: str,
    eps: float,
    clamp: float | None,
    *,
    coverage: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The shared body of :func:`softmax_splat` and :func:`softmax_splat_with_coverage`: checks
    the arguments, splats the numerator, the normaliser and (if ``coverage``) ``Σ→(1)`` along
    one set of target positions, and returns ``(output, coverage or None)``."""
    _check_pair(x, flow)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not (isinstance(eps, float | int) and not isinstance(eps, bool) and eps >= 0):
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    m = _soft_weight(x, metric, mode, clamp)
    ones = torch.ones_like(x[:, :1])
    if mode == "sum":
        maps = _splat_many([x, ones] if coverage else [x], flow)
        return maps[0], (maps[1] if coverage else None)
    if mode == "avg":  # the normaliser is the coverage
        num, den = _splat_many([x, ones], flow)
        return num / (den + eps), (den if coverage else None)
    maps = _splat_many([x * m, m, ones] if coverage else [x * m, m], flow)
    return maps[0] / (maps[1] + eps), (maps[2] if coverage else None)


def softmax_splat_with_coverage(
    x: torch.Tensor,
    flow: torch.Tensor,
    metric: torch.Tensor | None = None,
    mode: Literal["sum", "avg", "linear", "soft"] = "soft",
    *,
    eps: float = 1e-7,
    clamp: float | None = 20.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`softmax_splat` and the coverage ``Σ→(1)`` ``[N, 1, H, W]`` (how much source mass
    landed on each target pixel; ``< 1e-3`` marks a hole), from the same target positions."""
    out, cover = _splat_normalised(x, flow, metric, mode, eps, clamp, coverage=True)
    assert cover is not None
    return out, cover


def softmax_splat(
    x: torch.Tensor,
    flow: torch.Tensor,
    metric: torch.Tensor | None = None,
    mode: Literal["sum", "avg", "linear", "soft"] = "soft",
    *,
    eps: float = 1e-7,
    clamp: float | None = 20.0,
) -> torch.Tensor:
    """Forward-warp ``x`` ``[N, C, H, W]`` along ``flow`` ``[N, 2, H, W]`` (x first, pixels).

    Modes (as the reference ``softsplat``): ``"sum"`` ``Σ→(x)``; ``"avg"``
    ``Σ→(x) / (Σ→(1) + eps)``; ``"linear"`` ``Σ→(m x) / (Σ→(m) + eps)``; ``"soft"``
    ``Σ→(exp(m) x) / (Σ→(exp(m)) + eps)`` — LiFR-Seg's Eq. with ``m = S`` the log-precision.
    For ``"soft"`` the metric is clamped to ``[-clamp, clamp]`` (softsplat README) and then its
    per-image maximum is subtracted before ``exp`` (numerical stability; the output is invariant
    to adding a constant to the metric up to the ``eps`` term). Holes (nothing lands) are 0.
    Each ``Σ→`` is :func:`splat_sum` (one native scatter of all four bilinear corners).

    Args:
        x: features or images.
        flow: forward flow from the source frame.
        metric: ``[N, 1, H, W]``, required by ``"linear"`` and ``"soft"``.
        mode: one of ``sum, avg, linear, soft``.
        eps: added to the normaliser (reference: 1e-7).
        clamp: clamp of the soft metric (``None``: no clamp).
    """
    return _splat_normalised(x, flow, metric, mode, eps, clamp, coverage=False)[0]


def backward_warp(
    x: torch.Tensor,
    flow: torch.Tensor,
    padding_mode: Literal["zeros", "border", "reflection"] = "zeros",
) -> torch.Tensor:
    """Backward warping ``out(p) = x(p + flow(p))`` with bilinear ``grid_sample``
    (``align_corners=True``: pixel centres at integer coordinates, as :func:`softmax_splat`)."""
    _check_pair(x, flow)
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"padding_mode must be zeros, border or reflection, got {padding_mode!r}")
    _n, _, h, w = x.shape
    ys, xs = _pixels(flow)
    gx = 2 * (xs + flow[:, 0]) / max(w - 1, 1) - 1
    gy = 2 * (ys + flow[:, 1]) / max(h - 1, 1) - 1
    grid = torch.stack([gx, gy], dim=-1).to(x.dtype)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode=padding_mode, align_corners=True)


def resize_flow(flow: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Resize a flow field ``[N, 2, H, W]`` to ``size = (h, w)`` and rescale its vectors (x by
    ``w/W``, y by ``h/H``), e.g. to splat features of stride ``s`` with the full-resolution flow."""
    if not isinstance(flow, torch.Tensor) or flow.ndim != 4 or flow.shape[1] != 2:
        raise ValueError(f"flow must be a [N, 2, H, W] tensor, got {getattr(flow, 'shape', flow)}")
    h, w = int(size[0]), int(size[1])
    if h < 1 or w < 1:
        raise ValueError(f"size must be positive, got {size}")
    H, W = flow.shape[-2:]
    if (h, w) == (H, W):
        return flow
    mode = "area" if h < H and w < W else "bilinear"
    out = F.interpolate(
        flow, size=(h, w), mode=mode, **({} if mode == "area" else {"align_corners": False})
    )
    scale = torch.tensor([w / W, h / H], dtype=flow.dtype, device=flow.device).view(1, 2, 1, 1)
    return out * scale
