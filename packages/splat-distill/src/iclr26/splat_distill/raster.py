"""Differentiable EWA Gaussian feature rasterisation in pure torch (CPU or GPU), any channel count.

Standard 3DGS maths (Kerbl et al. 2023; the LUDVIG feature rasteriser the paper uses, Sec. 3.2):

    t = R_w μ + t_w,   J = [[f_x/t_z, 0, −f_x t_x/t_z²], [0, f_y/t_z, −f_y t_y/t_z²]]
    Σ' = J R_w Σ R_wᵀ Jᵀ + eps2d·I
    α_i(u) = min(α_max, o_i exp(−½ (u − μ'_i)ᵀ Σ'^{-1} (u − μ'_i))),  0 if α_i < α_min
    F(u) = Σ_i f_i α_i(u) T_i(u),   T_i = Π_{j<i} (1 − α_j)   (front to back by t_z)

All channels are composited in one pass (features are linear in the compositing weights), unlike
the official code's loop over 3-channel chunks. Choices (documented in the README):

* pixel centres at ``(j + 0.5, i + 0.5)`` (:data:`~iclr26.splat_distill.geometry.PIXEL_CENTER`);
* 3DGS's frustum clamp of ``t_x/t_z, t_y/t_z`` to 1.3× the image half-extent inside ``J``;
* early stop: Gaussian i (and every one behind it) is dropped where ``T_i (1 − α_i) < t_min``;
* ``cutoff_sigma``: α = 0 beyond that Mahalanobis distance (3 by default, so the tiled backend
  that only visits Gaussians whose 3σ box touches a tile is exact); ``None`` disables it
  (dense backend only);
* Gaussians with ``t_z`` outside ``(near, far)`` (behind the camera included) are culled;
* the returned ``depth`` is ``Σ w_i t_z,i / Σ w_i`` where ``alpha = Σ w_i > 0``, else 0.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from iclr26.splat_distill.gaussians import Gaussians
from iclr26.splat_distill.geometry import Camera, pixel_grid

__all__ = ["compositing_weights", "rasterize_features"]

Backend = Literal["torch-dense", "torch-tiled", "gsplat"]

#: Weight entries (tiles × tile² × Gaussians per tile) the tiled backend computes per batch.
TILED_BLOCK_ENTRIES = 1 << 17
#: Gaussians per tile list composited at once before the tiled backend checks for early stop.
TILED_DEPTH_CHUNK = 64


def _project(g: Gaussians, cam: Camera, near: float, far: float, eps2d: float):
    """Screen-space means [M,2], conics [M,3], opacities, depths, features, 1σ box half-extents
    [M,2] and the kept index, all sorted front to back."""
    dtype = g.means.dtype
    w2c = cam.w2c.to(device=g.means.device, dtype=dtype)
    R, t = w2c[:3, :3], w2c[:3, 3]
    Xc = g.means @ R.T + t
    z = Xc[:, 2]
    keep = ((z > near) & (z < far)).nonzero().squeeze(1)
    Xc, z = Xc[keep], z[keep]
    K = cam.K.to(device=g.means.device, dtype=dtype)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    # 3DGS frustum clamp: keeps J sane for Gaussians far outside the image
    lim_x0, lim_x1 = -1.3 * cx / fx, 1.3 * (cam.width - cx) / fx
    lim_y0, lim_y1 = -1.3 * cy / fy, 1.3 * (cam.height - cy) / fy
    tx = torch.minimum(torch.maximum(Xc[:, 0] / z, lim_x0), lim_x1) * z
    ty = torch.minimum(torch.maximum(Xc[:, 1] / z, lim_y0), lim_y1) * z
    zero = torch.zeros_like(z)
    J = torch.stack([fx / z, zero, -fx * tx / z**2, zero, fy / z, -fy * ty / z**2], dim=-1).reshape(
        -1, 2, 3
    )
    JR = J @ R
    cov2 = JR @ g.covs[keep] @ JR.transpose(1, 2)
    a = cov2[:, 0, 0] + eps2d
    b = cov2[:, 0, 1]
    c = cov2[:, 1, 1] + eps2d
    det = a * c - b * b
    conic = torch.stack([c / det, -b / det, a / det], dim=-1)
    mean2d = torch.stack([fx * Xc[:, 0] / z + cx, fy * Xc[:, 1] / z + cy], dim=-1)
    # the ellipse {d : dᵀ Σ'^{-1} d ≤ s²} spans ± s·sqrt(Σ'_xx) in x and ± s·sqrt(Σ'_yy) in y:
    # per-axis 1σ half-extents of the screen-space bounding box used for culling and tiling
    extent = torch.sqrt(torch.stack([a, c], dim=-1))
    order = torch.argsort(z.detach(), stable=True)
    src = keep[order]
    # index_select gathers whole rows (``x[idx]`` is several times slower for wide rows on CPU)
    return (
        mean2d[order], conic[order], g.opacities.index_select(0, src), z[order],
        g.features.index_select(0, src), extent[order], src,
    )  # fmt: skip


def _weights(
    uv: Tensor, mean2d: Tensor, conic: Tensor, opac: Tensor, valid: Tensor | None,
    alpha_min: float, alpha_max: float, t_min: float, cutoff_sigma: float | None,
    log_t0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Compositing weights ``w = α T`` [..., P, N] of pixels ``uv`` [..., P, 2], sorted Gaussians.

    The Mahalanobis form is expanded as a quadratic in the pixel coordinates, so all P × N values
    come from one (P × 6)·(6 × N) matmul; coordinates are centred on the block first to keep the
    float32 cancellation small. ``log_t0`` [..., P] is the log transmittance in front of the first
    Gaussian (0 when omitted), so a depth-sorted list can be composited in consecutive chunks.
    Also returns the log transmittance behind the last Gaussian, [..., P].
    """
    centre = uv.detach().mean(dim=-2, keepdim=True)
    u = uv - centre
    m = mean2d - centre
    A, B, C = conic.unbind(-1)
    mx, my = m.unbind(-1)
    coef = torch.stack(
        [A, 2 * B, C, -2 * (A * mx + B * my), -2 * (B * mx + C * my),
         A * mx * mx + 2 * B * mx * my + C * my * my],
        dim=-1,
    )  # fmt: skip
    ux, uy = u.unbind(-1)
    basis = torch.stack([ux * ux, ux * uy, uy * uy, ux, uy, torch.ones_like(ux)], dim=-1)
    # −½ Mahalanobis distance, clamped to [−75, 0]: exp(−75) is still a normal float32
    # (subnormal exps are ~20× slower)
    nm = (basis @ (-0.5 * coef).transpose(-1, -2)).clamp(-75.0, 0.0)
    # one per-Gaussian threshold on −½ Mahalanobis for all the skips: α = min(α_max, o e^{nm})
    # is below α_min iff nm < log(α_min / o) (α_min < α_max); the cut-off is nm < −s²/2.
    # Masks are float steps 1 − relu(sign(·)) (bool masks and masked_fill are ~10× slower on CPU).
    with torch.no_grad():
        thr = torch.log(alpha_min / opac) if alpha_min > 0 else torch.full_like(opac, -math.inf)
        if cutoff_sigma is not None:
            thr = thr.clamp_min(-0.5 * cutoff_sigma**2)
        if valid is not None:
            thr = thr.masked_fill(~valid, math.inf)
        keep = 1 - torch.relu(torch.sign(thr[..., None, :] - nm))  # 0 where nm < thr
    alpha = (opac[..., None, :] * torch.exp(nm)).clamp(max=alpha_max) * keep
    log1m = torch.log(1 - alpha)  # α ≤ α_max < 1
    log_t_incl = torch.cumsum(log1m, dim=-1)
    if log_t0 is not None:
        log_t_incl = log_t_incl + log_t0[..., None]
    T = torch.exp((log_t_incl - log1m).clamp_min(-80.0))  # exclusive transmittance
    if t_min > 0:  # 3DGS's early stop: drop Gaussian i (and all behind) where T_i (1 − α_i) < t_min
        with torch.no_grad():
            live = 1 - torch.relu(torch.sign(math.log(t_min) - log_t_incl))
        T = T * live
    w = alpha * T
    return w, log_t_incl[..., -1]


def _check_common(g, cam, near, far, eps2d, alpha_min, alpha_max, t_min, background):
    if not isinstance(g, Gaussians):
        raise TypeError(f"g must be Gaussians, got {type(g).__name__}")
    if not isinstance(cam, Camera):
        raise TypeError(f"cam must be a Camera, got {type(cam).__name__}")
    if not 0 < near < far:
        raise ValueError(f"need 0 < near < far, got near={near}, far={far}")
    if eps2d < 0:
        raise ValueError(f"eps2d must be ≥ 0, got {eps2d}")
    if not 0 <= alpha_min < alpha_max < 1:
        raise ValueError(f"need 0 ≤ alpha_min < alpha_max < 1, got {alpha_min}, {alpha_max}")
    if not 0 <= t_min < 1:
        raise ValueError(f"t_min must be in [0, 1), got {t_min}")
    if background is not None:
        C = g.features.shape[1]
        if not isinstance(background, Tensor) or tuple(background.shape) != (C,):
            raise ValueError(f"background must be a tensor of shape [{C}]")


def compositing_weights(
    g: Gaussians,
    cam: Camera,
    *,
    near: float = 0.01,
    far: float = 100.0,
    eps2d: float = 0.3,
    alpha_min: float = 1 / 255,
    alpha_max: float = 0.99,
    t_min: float = 1e-4,
    cutoff_sigma: float | None = 3.0,
) -> Tensor:
    """The dense compositing matrix ``W`` [H·W, N] with ``rendered features = W @ g.features``.

    Rendering is linear in the features, so this is what a per-scene feature optimisation (the
    FiT3D-like baseline) or a least-squares analysis needs. Rows are pixels in row-major order;
    columns follow ``g`` (culled Gaussians have zero columns). Memory is H·W·N floats.
    """
    _check_common(g, cam, near, far, eps2d, alpha_min, alpha_max, t_min, None)
    P = cam.height * cam.width
    out = torch.zeros(P, len(g), dtype=g.means.dtype, device=g.means.device)
    if len(g) == 0:
        return out
    mean2d, conic, opac, _z, _f, _r, idx = _project(g, cam, near, far, eps2d)
    uv = pixel_grid(cam.height, cam.width, device=g.means.device, dtype=g.means.dtype)
    w, _ = _weights(
        uv.reshape(-1, 2), mean2d, conic, opac, None, alpha_min, alpha_max, t_min, cutoff_sigma
    )
    return out.index_copy(1, idx, w)


def rasterize_features(
    g: Gaussians,
    cam: Camera,
    *,
    near: float = 0.01,
    far: float = 100.0,
    background: Tensor | None = None,
    eps2d: float = 0.3,
    alpha_min: float = 1 / 255,
    alpha_max: float = 0.99,
    t_min: float = 1e-4,
    cutoff_sigma: float | None = 3.0,
    backend: Backend = "torch-tiled",
    tile: int = 4,
    chunk: int = 256,
) -> dict[str, Tensor]:
    """Alpha-composite the Gaussians' features into ``cam`` (differentiable w.r.t. every input).

    Args:
        g: the Gaussians (N may be 0: a zero image, alpha 0, depth 0).
        cam: target camera; the image is ``cam.height × cam.width``.
        near, far: Gaussians with camera depth outside ``(near, far)`` are culled.
        background: optional [C] feature added with weight ``1 − alpha`` (default: zero, as in
            the official code).
        eps2d: screen-space low-pass dilation in px² (3DGS: 0.3).
        alpha_min, alpha_max: 3DGS's 1/255 skip and 0.99 cap.
        t_min: early-stop transmittance (3DGS: 1e-4); 0 disables it.
        cutoff_sigma: Mahalanobis cut-off of each footprint (``None``: none; dense only).
        backend: ``"torch-dense"`` (pixel chunks of ``chunk`` × every Gaussian whose cut-off
            box reaches the chunk; every Gaussian when ``cutoff_sigma=None``),
            ``"torch-tiled"`` (gsplat's scheme on CPU: per-tile Gaussian lists from the
            cut-off boxes, sorted by tile id, composited front to back batched across tiles,
            with early termination once a tile's transmittance is below ``t_min``), or
            ``"gsplat"`` (``gsplat.rasterization``; CUDA tensors and gsplat installed).
        tile: tile side in pixels for the tiled backend (4: on a CPU the work is pixels × list
            length, so small tiles beat gsplat's GPU-sized 16; any size gives the same image).
        chunk: pixels per dense block (memory ≈ chunk · N floats per temporary; 256 keeps a
            block's temporaries in cache at N = 4,096).

    Returns:
        ``{"features": [C, H, W], "alpha": [H, W], "depth": [H, W]}``.
    """
    _check_common(g, cam, near, far, eps2d, alpha_min, alpha_max, t_min, background)
    if backend not in ("torch-dense", "torch-tiled", "gsplat"):
        raise ValueError(f"backend must be torch-dense, torch-tiled or gsplat, got {backend!r}")
    if cutoff_sigma is None and backend != "torch-dense":
        raise ValueError("cutoff_sigma=None needs backend='torch-dense'")
    if cutoff_sigma is not None and not cutoff_sigma > 0:
        raise ValueError(f"cutoff_sigma must be positive or None, got {cutoff_sigma}")
    for name, v in (("tile", tile), ("chunk", chunk)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
    H, W = cam.height, cam.width
    C = g.features.shape[1]
    dev, dtype = g.means.device, g.means.dtype
    if backend == "gsplat":
        return _gsplat(g, cam, near, far, eps2d, background)
    proj = _project(g, cam, near, far, eps2d) if len(g) else None
    if proj is None or proj[0].shape[0] == 0:  # nothing in front of the camera
        feats = torch.zeros(H * W, C, dtype=dtype, device=dev) + 0 * g.features.sum()
        alpha = torch.zeros(H * W, dtype=dtype, device=dev)
        depth_sum = alpha
    else:
        mean2d, conic, opac, z, f, extent, _ = proj
        args = (alpha_min, alpha_max, t_min, cutoff_sigma)
        if backend == "torch-dense":
            out = _dense(mean2d, conic, opac, z, f, extent, H, W, chunk, args, cutoff_sigma)
        else:
            out = _tiled(mean2d, conic, opac, z, f, extent, H, W, tile, args, cutoff_sigma)
        feats, alpha, depth_sum = out[:, :C], out[:, C], out[:, C + 1]
    if background is not None:
        feats = feats + (1 - alpha)[:, None] * background.to(dtype)
    depth = torch.where(alpha > 1e-6, depth_sum / alpha.clamp_min(1e-6), torch.zeros_like(alpha))
    return {
        "features": feats.T.reshape(C, H, W),
        "alpha": alpha.reshape(H, W),
        "depth": depth.reshape(H, W),
    }


def _boxes(mean2d: Tensor, extent: Tensor, cutoff_sigma: float) -> tuple[Tensor, Tensor]:
    """Screen-space boxes [M,2] outside which a Gaussian has α = 0 under the cut-off.

    Widened by 0.1 % and 1e-3 px so float rounding of the Mahalanobis distance at a box edge
    can never cull a pixel that the all-pairs computation keeps.
    """
    m = mean2d.detach()
    r = cutoff_sigma * extent.detach() * 1.001 + 1e-3
    return m - r, m + r


def _dense(mean2d, conic, opac, z, f, extent, H, W, chunk, args, cutoff_sigma):
    """Pixel blocks of ``chunk`` × the Gaussians (in depth order) that can reach the block.

    With a cut-off, a Gaussian whose ``cutoff_sigma`` box misses the block's pixel centres has
    α = 0 on all of them, so it adds nothing to the colour and ``log(1 − α) = 0`` to every
    transmittance: dropping it for that block is exact. Features, alpha and depth come from one
    matmul with ``[f | 1 | z]``.
    """
    uv = pixel_grid(H, W, device=mean2d.device, dtype=mean2d.dtype).reshape(-1, 2)
    fz = torch.cat([f, torch.ones_like(z)[:, None], z[:, None]], dim=1)
    if cutoff_sigma is not None:
        box_lo, box_hi = _boxes(mean2d, extent, cutoff_sigma)
    parts = []
    for s in range(0, H * W, chunk):
        u = uv[s : s + chunk]
        if cutoff_sigma is None:
            w, _ = _weights(u, mean2d, conic, opac, None, *args)
            parts.append(w @ fz)
            continue
        reach = ((box_hi >= u.min(0).values) & (box_lo <= u.max(0).values)).all(1)
        sel = reach.nonzero().squeeze(1)  # increasing, so the depth order is kept
        w, _ = _weights(u, mean2d[sel], conic[sel], opac[sel], None, *args)
        parts.append(w @ fz[sel])
    return torch.cat(parts)


def _tile_intersections(
    box_lo: Tensor, box_hi: Tensor, height: int, width: int, tile: int
) -> tuple[Tensor, Tensor]:
    """Per-tile Gaussian lists from screen-space boxes, as gsplat builds them (no [tiles, N] mask).

    Gaussian ``n`` (rows already in depth order) is listed in tile ``(i, j)`` of the
    ``tile × tile`` grid over ``height × width`` iff its box ``[box_lo, box_hi]`` meets the tile
    ``[j·tile, (j+1)·tile) × [i·tile, (i+1)·tile)``. Each Gaussian emits one ``(tile id, n)`` pair
    per tile its box covers (vectorised: repeat, then row-major offsets inside the box), and a
    stable sort by tile id groups the pairs by tile while keeping the depth order inside each one.

    Args:
        box_lo, box_hi: [M, 2] box corners in pixels (x, y).
        height, width, tile: image size and tile side in pixels.

    Returns:
        ``(gaussian ids [I] grouped by tile, front to back within a tile; counts [tiles])``; the
        list of tile ``t`` (row-major, ``t = i·⌈width/tile⌉ + j``) starts at
        ``cumsum(counts)[t] − counts[t]``.
    """
    dev = box_lo.device
    ntx, nty = -(-width // tile), -(-height // tile)
    n_tiles = ntx * nty
    hi_lim = torch.tensor([ntx - 1, nty - 1], device=dev)
    # floor((x − r)/tile) ≤ j ≤ floor((x + r)/tile); clamped as floats first (boxes can be huge)
    t0 = torch.floor((box_lo / tile).clamp(-1.0, float(max(ntx, nty)))).long().clamp_min(0)
    t1 = torch.minimum(
        torch.floor((box_hi / tile).clamp(-1.0, float(max(ntx, nty)))).long(), hi_lim
    )
    span = (t1 - t0 + 1).clamp_min(0)  # [M, 2] tiles covered in x and y (0: off screen)
    n_per = span[:, 0] * span[:, 1]
    gid = torch.repeat_interleave(torch.arange(len(n_per), device=dev), n_per)
    if gid.numel() == 0:
        return gid, torch.zeros(n_tiles, dtype=torch.long, device=dev)
    first = torch.cumsum(n_per, 0) - n_per
    local = torch.arange(gid.numel(), device=dev) - first[gid]
    nx = span[gid, 0]
    tid = (t0[gid, 1] + local // nx) * ntx + t0[gid, 0] + local % nx
    tid_sorted, perm = torch.sort(tid, stable=True)
    counts = torch.bincount(tid_sorted, minlength=n_tiles)
    return gid[perm], counts


def _tiled(mean2d, conic, opac, z, f, extent, H, W, tile, args, cutoff_sigma):
    """Per-tile front-to-back compositing over each tile's Gaussian list, batched across tiles.

    Tiles are taken in decreasing order of list length and batched so that a batch pads its
    lists only to its own longest one (:data:`TILED_BLOCK_ENTRIES` weights per batch). A batch
    walks its lists in depth chunks of :data:`TILED_DEPTH_CHUNK` Gaussians carrying each pixel's
    transmittance, and a tile leaves the batch once its list is exhausted or every one of its
    pixels has ``T < t_min`` (gsplat's early termination; what follows adds exactly zero).
    """
    dev, dtype = mean2d.device, mean2d.dtype
    t_min = args[2]
    nty, ntx = -(-H // tile), -(-W // tile)
    n_tiles, tt = nty * ntx, tile * tile
    C = f.shape[1]
    box_lo, box_hi = _boxes(mean2d, extent, cutoff_sigma)
    gids, counts = _tile_intersections(box_lo, box_hi, H, W, tile)
    if gids.numel() > 0:
        starts = torch.cumsum(counts, 0) - counts
        jj, ii = torch.meshgrid(
            torch.arange(tile, device=dev), torch.arange(tile, device=dev), indexing="xy"
        )
        local = torch.stack([jj, ii], -1).reshape(-1, 2).to(dtype) + 0.5
        fz = torch.cat([f, torch.ones_like(z)[:, None], z[:, None]], dim=1)
        geo = torch.cat([mean2d, conic, opac[:, None]], dim=1)  # gathered together: [M, 6]
        log_t_min = math.log(t_min) if t_min > 0 else -math.inf
        by_count = torch.argsort(counts, descending=True, stable=True)
        cnt_sorted = counts[by_count].tolist()
        blocks, block_tiles = [], []
        s = 0
        while s < n_tiles and (k := cnt_sorted[s]) > 0:
            ids = by_count[s : s + max(1, TILED_BLOCK_ENTRIES // (tt * min(k, TILED_DEPTH_CHUNK)))]
            s += ids.numel()
            cnt = counts[ids]
            pos = torch.arange(k, device=dev)
            valid = pos < cnt[:, None]
            lists = gids[(starts[ids, None] + pos).clamp_max(gids.numel() - 1)]
            origin = torch.stack([ids % ntx, ids // ntx], -1).to(dtype) * tile
            uv = origin[:, None, :] + local  # [tiles, tile², 2]
            acc = torch.zeros(ids.numel(), tt, C + 2, dtype=dtype, device=dev)
            log_t = torch.zeros(ids.numel(), tt, dtype=dtype, device=dev)
            act = torch.arange(ids.numel(), device=dev)
            for c0 in range(0, k, TILED_DEPTH_CHUNK):
                full = act.numel() == ids.numel()
                o = (lists if full else lists[act])[:, c0 : c0 + TILED_DEPTH_CHUNK]
                shape = o.shape
                o = o.reshape(-1)
                gm = geo.index_select(0, o).reshape(*shape, 6)
                w, log_t_act = _weights(
                    uv if full else uv[act], gm[..., :2], gm[..., 2:5], gm[..., 5],
                    (valid if full else valid[act])[:, c0 : c0 + TILED_DEPTH_CHUNK],
                    *args, log_t0=log_t if full else log_t[act],
                )  # fmt: skip
                part = torch.bmm(w, fz.index_select(0, o).reshape(*shape, C + 2))
                if full:
                    acc, log_t = acc + part, log_t_act
                else:
                    acc = acc.index_add(0, act, part)
                    log_t = log_t.index_copy(0, act, log_t_act)
                if c0 + TILED_DEPTH_CHUNK >= k:
                    break
                more = cnt[act] > c0 + TILED_DEPTH_CHUNK
                live = (log_t_act.detach() >= log_t_min).any(1)
                act = act[more & live]
                if act.numel() == 0:
                    break
            blocks.append(acc)
            block_tiles.append(ids)
        empty = by_count[s:]
        done = torch.cat([*block_tiles, empty])
        blocks.append(torch.zeros(empty.numel(), tt, C + 2, dtype=dtype, device=dev))
        inv = torch.empty_like(done)
        inv[done] = torch.arange(n_tiles, device=dev)
        out = torch.cat(blocks).index_select(0, inv)
    else:
        out = torch.zeros(n_tiles, tt, C + 2, dtype=dtype, device=dev)
    # tiles → image, dropping the padding beyond H × W
    img = out.reshape(nty, ntx, tile, tile, C + 2).permute(0, 2, 1, 3, 4)
    img = img.reshape(nty * tile, ntx * tile, C + 2)[:H, :W]
    return img.reshape(H * W, C + 2)


def _gsplat(g: Gaussians, cam: Camera, near, far, eps2d, background) -> dict[str, Tensor]:
    try:
        import importlib

        gsplat = importlib.import_module("gsplat")
    except ImportError as err:
        from iclr26.shared import MissingDependencyError

        raise MissingDependencyError(
            f"backend='gsplat' needs gsplat (CUDA only): pip install gsplat ({err})"
        ) from err
    if g.means.device.type != "cuda":
        raise ValueError(
            "backend='gsplat' needs CUDA tensors; use torch-dense or torch-tiled on CPU"
        )
    H, W = cam.height, cam.width
    C = g.features.shape[1]
    dev = g.means.device
    if len(g) == 0:
        z = torch.zeros(H, W, device=dev, dtype=g.means.dtype)
        return {
            "features": torch.zeros(C, H, W, device=dev, dtype=g.means.dtype),
            "alpha": z,
            "depth": z,
        }
    colors, alphas, _ = gsplat.rasterization(
        means=g.means, quats=None, scales=None, covars=g.covs, opacities=g.opacities,
        colors=g.features, viewmats=cam.w2c.to(dev)[None], Ks=cam.K.to(dev)[None],
        width=W, height=H, near_plane=near, far_plane=far, eps2d=eps2d,
        backgrounds=None if background is None else background[None], render_mode="RGB+ED",
    )  # fmt: skip
    return {
        "features": colors[0, ..., :C].permute(2, 0, 1),
        "alpha": alphas[0, ..., 0],
        "depth": colors[0, ..., C],
    }
