"""Generated multi-view datasets (procedural scenes, :mod:`~iclr26.splat_distill.scenes`) and
training triplets: two context views and one target view between them (the paper's ScanNet++
view sampler picks context frames 8–12 apart and a target between/near them)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from iclr26.shared import progress as progress_bar
from iclr26.splat_distill.geometry import Camera
from iclr26.splat_distill.scenes import orbit_cameras, random_scene, render_view

__all__ = ["MultiViewData", "make_dataset", "triplet_batch"]


@dataclass(frozen=True)
class MultiViewData:
    """S scenes × V views: ``rgb`` [S,V,3,H,W], ``depth`` [S,V,H,W], ``normals`` [S,V,H,W,3]
    (world), ``instance``/``semantic`` [S,V,H,W] int64, intrinsics ``K`` [3,3], poses ``c2w``
    [S,V,4,4]. Views of one scene are ordered along the camera arc."""

    rgb: Tensor
    depth: Tensor
    normals: Tensor
    instance: Tensor
    semantic: Tensor
    K: Tensor
    c2w: Tensor

    @property
    def n_scenes(self) -> int:
        return self.rgb.shape[0]

    @property
    def n_views(self) -> int:
        return self.rgb.shape[1]

    @property
    def size(self) -> int:
        return self.rgb.shape[-1]

    def cam(self, s: int, v: int) -> Camera:
        """The camera of view ``v`` of scene ``s``."""
        return Camera(self.K, self.c2w[s, v], self.size, self.size)


def make_dataset(
    n_scenes: int,
    *,
    n_views: int = 6,
    size: int = 64,
    seed: int = 0,
    arc_deg: float = 100.0,
    progress: bool = False,
) -> MultiViewData:
    """Render ``n_scenes`` random scenes from ``n_views`` cameras each (deterministic in ``seed``)."""
    for name, v, lo in (("n_scenes", n_scenes, 1), ("n_views", n_views, 1), ("size", size, 8)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int ≥ {lo}, got {v!r}")
    fields: dict[str, list] = {
        k: [] for k in ("rgb", "depth", "normals", "instance", "semantic", "c2w")
    }
    for s in progress_bar(range(n_scenes), enabled=progress, desc="rendering scenes"):
        scene_seed = seed * 100_003 + s
        scene = random_scene(scene_seed)
        views = [
            render_view(scene, c)
            for c in orbit_cameras(n_views, size, seed=scene_seed, arc_deg=arc_deg)
        ]
        for k in ("rgb", "depth", "normals", "instance", "semantic"):
            fields[k].append(torch.stack([getattr(v, k) for v in views]))
        fields["c2w"].append(torch.stack([v.cam.c2w for v in views]))
    K = orbit_cameras(1, size)[0].K
    return MultiViewData(**{k: torch.stack(v) for k, v in fields.items()}, K=K)


def triplet_batch(
    data: MultiViewData, batch: int, *, generator: torch.Generator, gap: int = 2
) -> dict[str, Tensor]:
    """A batch of (context, context, target) triplets: context views ``v`` and ``v + gap`` of a
    random scene, target ``v + gap // 2`` (a novel view between them).

    Returns a dict with ``scene`` [B], ``ctx`` [B,2] and ``tgt`` [B] view indices, and the
    tensors ``ctx_rgb`` [B,2,3,H,W], ``ctx_depth`` [B,2,H,W], ``ctx_instance`` [B,2,H,W],
    ``ctx_c2w`` [B,2,4,4], ``tgt_rgb`` [B,3,H,W], ``tgt_depth``, ``tgt_instance`` [B,H,W],
    ``tgt_c2w`` [B,4,4], ``K`` [3,3].
    """
    if isinstance(gap, bool) or not isinstance(gap, int) or not 1 <= gap < data.n_views:
        raise ValueError(f"gap must be an int in [1, n_views), got {gap!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int ≥ 1, got {batch!r}")
    s = torch.randint(0, data.n_scenes, (batch,), generator=generator)
    v0 = torch.randint(0, data.n_views - gap, (batch,), generator=generator)
    ctx = torch.stack([v0, v0 + gap], 1)
    tgt = v0 + gap // 2
    sc = s[:, None].expand(-1, 2)
    return {
        "scene": s, "ctx": ctx, "tgt": tgt, "K": data.K,
        "ctx_rgb": data.rgb[sc, ctx], "ctx_depth": data.depth[sc, ctx],
        "ctx_instance": data.instance[sc, ctx], "ctx_c2w": data.c2w[sc, ctx],
        "tgt_rgb": data.rgb[s, tgt], "tgt_depth": data.depth[s, tgt],
        "tgt_instance": data.instance[s, tgt], "tgt_c2w": data.c2w[s, tgt],
    }  # fmt: skip
