"""Procedural ray-cast multi-view scenes with exact depth, normals and instance/semantic masks.

A closed room (floor, ceiling, four walls) holding random spheres and yaw-rotated boxes, each
surface with its own procedural texture (checker, stripes, dots or a sum of sinusoids, two random
colours) in surface coordinates, Lambertian shading from one directional light plus an ambient
term (view-independent, so colours are multi-view consistent). Everything is analytic ray casting
in torch, so depth (camera z), normals (world) and masks are exact. Stands in for ScanNet++ (no
datasets here).

Semantic classes: 0 floor, 1 wall/ceiling, 2 sphere, 3 box. Instance ids are unique per surface.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from iclr26.splat_distill.geometry import Camera, camera_dirs, intrinsics, look_at

__all__ = ["N_CLASSES", "Scene", "View", "orbit_cameras", "random_scene", "render_view"]

N_CLASSES = 4
ROOM = 3.0  # half side of the room
ROOM_H = 2.6
_LIGHT = torch.tensor([0.4, -0.3, 0.87])


@dataclass(frozen=True)
class Scene:
    """Primitive parameters of one scene (see :func:`random_scene`)."""

    spheres: Tensor  # [S, 4]: centre xyz, radius
    boxes: Tensor  # [B, 7]: centre xyz, half sizes xyz, yaw
    textures: Tensor  # [6 + S + B, 8]: pattern id, frequency, phase, colour a (3), …
    colours: Tensor  # [6 + S + B, 2, 3]


@dataclass(frozen=True)
class View:
    """One rendered view: ``rgb`` [3,H,W] in [0,1], camera-z ``depth`` [H,W], world ``normals``
    [H,W,3], ``instance`` and ``semantic`` labels [H,W] (int64), and its ``cam``."""

    rgb: Tensor
    depth: Tensor
    normals: Tensor
    instance: Tensor
    semantic: Tensor
    cam: Camera


def random_scene(seed: int, *, n_objects: tuple[int, int] = (3, 6)) -> Scene:
    """A random room with ``n_objects`` (inclusive range) spheres and boxes near its centre."""
    g = torch.Generator().manual_seed(int(seed))
    n = int(torch.randint(n_objects[0], n_objects[1] + 1, (1,), generator=g))
    n_sph = int(torch.randint(1, n, (1,), generator=g)) if n > 1 else 1
    n_box = n - n_sph

    def u(*shape, lo=0.0, hi=1.0):
        return lo + (hi - lo) * torch.rand(*shape, generator=g)

    ang = u(n, hi=2 * math.pi)
    rad = u(n, lo=0.2, hi=1.3)
    xy = torch.stack([rad * torch.cos(ang), rad * torch.sin(ang)], -1)
    r = u(n_sph, lo=0.25, hi=0.55)
    spheres = torch.cat([xy[:n_sph], r[:, None], r[:, None]], -1)
    half = u(n_box, 3, lo=0.15, hi=0.5)
    boxes = torch.cat([xy[n_sph:], half[:, 2:3], half, u(n_box, 1, hi=math.pi)], -1)
    n_surf = 6 + n
    textures = torch.stack(
        [
            torch.randint(0, 4, (n_surf,), generator=g).float(),
            u(n_surf, lo=1.5, hi=5.0),
            u(n_surf, hi=2 * math.pi),
            u(n_surf, hi=2 * math.pi),
        ],
        -1,
    )
    colours = u(n_surf, 2, 3, lo=0.05, hi=0.95)
    return Scene(spheres, boxes, textures, colours)


def _pattern(kind: Tensor, freq: Tensor, ph1: Tensor, ph2: Tensor, s: Tensor, t: Tensor) -> Tensor:
    """Texture mix value in [0, 1] of surface coordinates (s, t) for each ray."""
    a, b = freq * s + ph1, freq * t + ph2
    checker = ((torch.floor(a) + torch.floor(b)) % 2).float()
    stripes = 0.5 + 0.5 * torch.sin(2 * math.pi * a * 0.7 + 0.3 * b)
    dots = ((torch.frac(a) - 0.5) ** 2 + (torch.frac(b) - 0.5) ** 2 < 0.09).float()
    waves = (
        0.5
        + 0.25 * torch.sin(3.1 * a + 1.7 * torch.sin(2.3 * b))
        + 0.25 * torch.sin(1.3 * b - 2.1 * a)
    )
    out = torch.stack([checker, stripes, dots, waves], 0)
    return out.gather(0, kind.long()[None]).squeeze(0)


def render_view(scene: Scene, cam: Camera) -> View:
    """Ray-cast ``scene`` from ``cam``: exact RGB, depth, normals, instance and semantic maps."""
    if not isinstance(scene, Scene):
        raise TypeError(f"scene must be a Scene, got {type(scene).__name__}")
    if not isinstance(cam, Camera):
        raise TypeError(f"cam must be a Camera, got {type(cam).__name__}")
    cam = cam.to(dtype=torch.float32, device="cpu")
    H, W = cam.height, cam.width
    d_cam = camera_dirs(cam).reshape(-1, 3)  # z = 1: the ray parameter t is camera-z depth
    R = cam.c2w[:3, :3]
    o = cam.c2w[:3, 3]
    d = d_cam @ R.T
    P = d.shape[0]
    inf = torch.full((P,), float("inf"))
    best_t = inf.clone()
    best_id = torch.full((P,), -1, dtype=torch.long)
    best_n = torch.zeros(P, 3)
    best_st = torch.zeros(P, 2)

    def take(t, sid, normal, st):
        nonlocal best_t, best_id, best_n, best_st
        better = (t > 1e-4) & (t < best_t)
        best_t = torch.where(better, t, best_t)
        best_id = torch.where(
            better, torch.full_like(best_id, sid) if isinstance(sid, int) else sid, best_id
        )
        best_n = torch.where(better[:, None], normal, best_n)
        best_st = torch.where(better[:, None], st, best_st)

    # room: 0 floor, 1 ceiling, 2..5 walls (inward normals)
    planes = [
        (2, 0.0, 1.0), (2, ROOM_H, -1.0), (0, -ROOM, 1.0), (0, ROOM, -1.0), (1, -ROOM, 1.0),
        (1, ROOM, -1.0),
    ]  # fmt: skip
    for sid, (axis, pos, sign) in enumerate(planes):
        with torch.no_grad():
            dn = d[:, axis]
            t = torch.where(dn.abs() > 1e-9, (pos - o[axis]) / dn, inf)
        X = o + t[:, None] * d
        normal = torch.zeros(P, 3)
        normal[:, axis] = sign
        other = [a for a in range(3) if a != axis]
        take(t, sid, normal, X[:, other])
    n_sph = scene.spheres.shape[0]
    for k in range(n_sph):
        c, r = scene.spheres[k, :3], scene.spheres[k, 3]
        oc = o - c
        b = (d * oc).sum(-1)
        a = (d * d).sum(-1)
        disc = b * b - a * ((oc * oc).sum() - r * r)
        t = torch.where(disc > 0, (-b - torch.sqrt(disc.clamp_min(0))) / a, inf)
        X = o + t[:, None] * d
        nrm = (X - c) / r
        st = torch.stack(
            [
                torch.atan2(nrm[:, 1], nrm[:, 0]) * r * 1.5,
                torch.acos(nrm[:, 2].clamp(-1, 1)) * r * 1.5,
            ],
            -1,
        )
        take(t, 6 + k, nrm, st)
    for k in range(scene.boxes.shape[0]):
        c, half, yaw = scene.boxes[k, :3], scene.boxes[k, 3:6], scene.boxes[k, 6]
        cy_, sy_ = torch.cos(yaw), torch.sin(yaw)
        Rb = torch.stack(
            [
                torch.stack([cy_, -sy_, 0 * cy_]),
                torch.stack([sy_, cy_, 0 * cy_]),
                torch.tensor([0.0, 0, 1]),
            ]
        )
        ol = (o - c) @ Rb  # world → box frame (Rb is box → world)
        dl = d @ Rb
        safe = torch.where(dl.abs() < 1e-9, torch.full_like(dl, 1e-9), dl)
        t1 = (-half - ol) / safe
        t2 = (half - ol) / safe
        tmin = torch.minimum(t1, t2)
        tmax = torch.maximum(t1, t2)
        t_near, axis = tmin.max(-1)
        t_far = tmax.min(-1).values
        hit = (t_near <= t_far) & (t_near > 0)
        t = torch.where(hit, t_near, inf)
        nl = torch.zeros(P, 3).scatter(1, axis[:, None], 1.0) * -torch.sign(
            dl.gather(1, axis[:, None])
        )
        nrm = nl @ Rb.T
        Xl = ol + t_near[:, None] * dl
        idx = torch.tensor([[1, 2], [0, 2], [0, 1]])[axis]
        st = Xl.gather(1, idx)
        take(t, 6 + n_sph + k, nrm, st)
    inst = best_id.clamp_min(0)
    tex = scene.textures[inst]
    mix = _pattern(tex[:, 0], tex[:, 1], tex[:, 2], tex[:, 3], best_st[:, 0], best_st[:, 1])
    col = scene.colours[inst]
    albedo = col[:, 0] * (1 - mix[:, None]) + col[:, 1] * mix[:, None]
    light = _LIGHT / _LIGHT.norm()
    shade = 0.4 + 0.6 * (best_n @ light).clamp_min(0)
    rgb = (albedo * shade[:, None]).clamp(0, 1)
    sem = torch.where(inst == 0, 0, torch.where(inst < 6, 1, torch.where(inst < 6 + n_sph, 2, 3)))
    return View(
        rgb.T.reshape(3, H, W).contiguous(),
        best_t.reshape(H, W),
        best_n.reshape(H, W, 3),
        inst.reshape(H, W),
        sem.reshape(H, W),
        cam,
    )


def orbit_cameras(
    n_views: int,
    size: int = 64,
    *,
    seed: int = 0,
    arc_deg: float = 100.0,
    radius: float = 2.3,
    fov_deg: float = 60.0,
) -> list[Camera]:
    """``n_views`` cameras on an arc of ``arc_deg`` degrees around the room centre, looking inwards.

    Heights and look-at points are jittered per view (seeded) so poses are not on a perfect circle.
    """
    if isinstance(n_views, bool) or not isinstance(n_views, int) or n_views < 1:
        raise ValueError(f"n_views must be an int ≥ 1, got {n_views!r}")
    g = torch.Generator().manual_seed(int(seed) + 7919)
    start = float(torch.rand(1, generator=g)) * 2 * math.pi
    K = intrinsics(size, size, fov_deg)
    cams = []
    for i in range(n_views):
        a = start + math.radians(arc_deg) * (i / max(n_views - 1, 1))
        r = radius + 0.2 * (float(torch.rand(1, generator=g)) - 0.5)
        h = 1.3 + 0.3 * (float(torch.rand(1, generator=g)) - 0.5)
        eye = torch.tensor([r * math.cos(a), r * math.sin(a), h])
        tgt = torch.cat([0.3 * (torch.rand(2, generator=g) - 0.5), torch.tensor([0.4])])
        cams.append(Camera(K.clone(), look_at(eye, tgt), size, size))
    return cams
