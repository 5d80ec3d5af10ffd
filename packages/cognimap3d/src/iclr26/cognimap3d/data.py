"""Data: a synthetic multi-visit world with moving actors and exact ground truth, and a loader
(and writer) for TUM-RGBD-format sequence folders so the pipeline runs on real recordings.

The world is a textured room of axis-aligned boxes rendered by an analytic ray caster (slab
test) into RGB, camera-z depth, instance ids and dynamic masks; actors are boxes walking on
straight paths that differ per visit. Ground-truth optical flow moves each back-projected pixel
by the camera and, on actor pixels, by the actor's motion, with a z-test for occlusion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from iclr26.cognimap3d.camera import backproject, check_intrinsics, intrinsics, pixel_grid, project
from iclr26.cognimap3d.se3 import check_poses, invert
from iclr26.shared.validation import check_array, check_int, check_range

__all__ = [
    "Box",
    "RevisitWorld",
    "Sequence",
    "load_tum",
    "look_at",
    "make_visits",
    "save_tum",
]

H, W = 64, 80


@dataclass(frozen=True)
class Box:
    """An axis-aligned textured box: corners ``lo``/``hi`` (world metres), base colour, texture
    grid (``(G, G)`` values in [0, 1]) and texel size; ``velocity`` (m/s) and ``start`` make it
    an actor that moves as ``lo + velocity·t`` bouncing inside ``bounds``."""

    lo: np.ndarray
    hi: np.ndarray
    color: np.ndarray
    texture: np.ndarray
    texel: float = 0.12
    velocity: np.ndarray | None = None
    bounds: tuple[float, float] | None = None  # ping-pong range of the travelled distance

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Corners at time ``t`` (static boxes do not move)."""
        if self.velocity is None:
            return self.lo, self.hi
        speed = float(np.linalg.norm(self.velocity))
        direction = self.velocity / speed
        length = self.bounds[1] if self.bounds else 1.0
        s = (speed * t) % (2 * length)
        s = s if s <= length else 2 * length - s
        shift = direction * s
        return self.lo + shift, self.hi + shift


@dataclass
class Sequence:
    """One visit: frames with ground truth.

    Attributes:
        rgb: ``(T, H, W, 3)`` float32 in [0, 1].
        depth: ``(T, H, W)`` camera-z depth in metres (float64).
        dyn_mask: ``(T, H, W)`` bool, pixels on moving actors (ground truth; ``None`` if unknown).
        poses: ``(T, 4, 4)`` camera-to-world ground-truth poses (``None`` if unknown).
        K: ``(3, 3)`` intrinsics.
        times: ``(T,)`` seconds, strictly increasing.
        actor_boxes: ``(T, A, 2, 3)`` actor corners per frame (ghost-point evaluation).
        world: the synthetic world that rendered it (``None`` for loaded sequences).
        name: label.
    """

    rgb: np.ndarray
    depth: np.ndarray
    K: np.ndarray
    times: np.ndarray
    poses: np.ndarray | None = None
    dyn_mask: np.ndarray | None = None
    actor_boxes: np.ndarray | None = None
    world: RevisitWorld | None = None
    name: str = "sequence"
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rgb)

    def validate(self) -> Sequence:
        """Check shapes, dtypes, finiteness and timestamp order; returns self."""
        check_array(self.rgb, "rgb", ndim=4)
        n, h, w, c = self.rgb.shape
        if c != 3:
            raise ValueError(f"rgb must have 3 channels, got {c}")
        check_array(self.depth, "depth", shape=(n, h, w), finite=False)
        if np.any(np.isinf(self.depth)) or np.any(self.depth[np.isfinite(self.depth)] < 0):
            raise ValueError("depth must not contain inf or negative values")
        check_intrinsics(self.K)
        check_array(self.times, "times", shape=(n,))
        if n > 1 and np.any(np.diff(self.times) <= 0):
            raise ValueError("times must be strictly increasing (unsorted or duplicate timestamps)")
        if self.poses is not None:
            check_poses(self.poses, "poses", batch=True)
            if len(self.poses) != n:
                raise ValueError(f"poses must have {n} entries, got {len(self.poses)}")
        if self.dyn_mask is not None:
            check_array(self.dyn_mask, "dyn_mask", shape=(n, h, w))
        return self

    def gt_flow(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Ground-truth flow ``(2, H, W)`` from frame ``i`` to ``j`` and its validity mask."""
        if self.world is None or self.poses is None:
            raise ValueError("gt_flow needs a synthetic sequence (world and poses)")
        return self.world.gt_flow(
            self.depth[i], self.K, self.poses[i], self.times[i], self.poses[j], self.times[j]
        )


def look_at(eye: np.ndarray, target: np.ndarray, up: np.ndarray = (0.0, 0.0, 1.0)) -> np.ndarray:
    """Camera-to-world pose (OpenCV axes) at ``eye`` looking at ``target`` with world ``up``."""
    eye, target, up = (np.asarray(a, dtype=float) for a in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, up)
    if np.linalg.norm(r) < 1e-9:
        raise ValueError("look_at: viewing direction is parallel to up")
    r /= np.linalg.norm(r)
    d = np.cross(f, r)
    T = np.eye(4)
    T[:3, :3] = np.stack([r, d, f], axis=1)
    T[:3, 3] = eye
    return T


def _texture(rng: np.random.Generator, g: int = 24) -> np.ndarray:
    # Blobby value noise: smooth enough for optical flow at 64×80, varied enough for descriptors.
    base = rng.random((g, g))
    k = np.array([0.25, 0.5, 0.25])
    for _ in range(1):
        base = np.apply_along_axis(
            lambda r: np.convolve(np.r_[r[-1], r, r[0]], k, "valid"), 0, base
        )
        base = np.apply_along_axis(
            lambda r: np.convolve(np.r_[r[-1], r, r[0]], k, "valid"), 1, base
        )
    base = (base - base.min()) / (np.ptp(base) + 1e-9)
    return 0.35 + 0.65 * base


class RevisitWorld:
    """A textured room with static boxes and per-visit moving actors (spec §8).

    Args:
        seed: layout, textures and actor paths.
        room: ``(x, y, z)`` extent in metres.
        n_static: static boxes on the floor.
        n_actors: actors per visit (boxes 0.4 × 0.4 × 1.3 m); actor 0 walks radially, roughly
            along the viewing ray of a camera at the room centre (the co-linear case).
    """

    def __init__(
        self,
        seed: int = 0,
        room: tuple[float, float, float] = (9.0, 7.0, 3.0),
        n_static: int = 20,
        n_actors: int = 3,
    ) -> None:
        check_int(seed, "seed", low=0)
        check_int(n_static, "n_static", low=0, high=64)
        check_int(n_actors, "n_actors", low=0, high=16)
        check_array(room, "room", shape=(3,))
        if min(room) <= 1.0:
            raise ValueError(f"room must be larger than 1 m on every side, got {room}")
        self.seed = seed
        self.room = np.asarray(room, dtype=float)
        self.n_actors = n_actors
        rng = np.random.default_rng(seed)
        X, Y, Z = self.room
        th = 0.2
        shells = [
            ((0, 0, -th), (X, Y, 0)),  # floor
            ((0, 0, Z), (X, Y, Z + th)),  # ceiling
            ((-th, 0, 0), (0, Y, Z)),
            ((X, 0, 0), (X + th, Y, Z)),
            ((0, -th, 0), (X, 0, Z)),
            ((0, Y, 0), (X, Y + th, Z)),
        ]
        self.static: list[Box] = [
            Box(np.array(lo, float), np.array(hi, float), rng.uniform(0.3, 1.0, 3), _texture(rng))
            for lo, hi in shells
        ]
        centre = self.room[:2] / 2
        placed = 0
        while placed < n_static:
            size = rng.uniform([0.3, 0.3, 0.3], [1.0, 1.0, 1.6])
            xy = rng.uniform([0.1, 0.1], [X - 0.1 - size[0], Y - 0.1 - size[1]])
            # keep a free disc of radius 2.3 m around the centre for cameras and actors
            c = xy + size[:2] / 2
            if np.linalg.norm(c - centre) < 2.3 + size[:2].max() / 2:
                continue
            lo = np.array([xy[0], xy[1], 0.0])
            self.static.append(
                Box(
                    lo,
                    lo + size,
                    rng.uniform(0.2, 1.0, 3),
                    _texture(rng),
                    texel=rng.uniform(0.08, 0.16),
                )
            )
            placed += 1

    def lookalike(self, seed: int = 1) -> RevisitWorld:
        """A different room dressed alike: the same wall and box textures and colours, but other
        room proportions and the boxes moved. Image statistics look alike, geometry does not (the
        false-recall test of spec §9 E2)."""
        X, Y, Z = self.room
        other = RevisitWorld(
            seed=self.seed, room=(X - 2.5, Y + 1.5, Z), n_static=0, n_actors=self.n_actors
        )
        rng = np.random.default_rng(10_000 + seed)
        X2, Y2, _ = other.room
        centre = other.room[:2] / 2
        other.static = [
            replace(o, texture=b.texture, color=b.color)
            for o, b in zip(other.static[:6], self.static[:6], strict=True)
        ]
        for b in self.static[6:]:
            size = b.hi - b.lo
            while True:
                xy = rng.uniform([0.1, 0.1], [X2 - 0.1 - size[0], Y2 - 0.1 - size[1]])
                if np.linalg.norm(xy + size[:2] / 2 - centre) >= 2.3 + size[:2].max() / 2:
                    break
            lo = np.array([xy[0], xy[1], 0.0])
            other.static.append(replace(b, lo=lo, hi=lo + size))
        return other

    def actors(self, visit: int) -> list[Box]:
        """The actors of visit ``visit`` (deterministic in seed and visit)."""
        rng = np.random.default_rng([self.seed, 7919, visit])
        centre = np.r_[self.room[:2] / 2, 0.0]
        out = []
        for a in range(self.n_actors):
            ang = rng.uniform(0, 2 * np.pi)
            radial = np.array([math.cos(ang), math.sin(ang), 0.0])
            if a == 0:  # co-linear case: walks radially, towards / away from a central camera
                start, direction, length = centre + 1.3 * radial, radial, 0.7
            else:
                start = centre + rng.uniform(1.4, 1.9) * radial
                direction = np.array([-radial[1], radial[0], 0.0])
                length = 1.4
            size = np.array([0.4, 0.4, 1.3])
            lo = start - np.r_[size[:2] / 2, 0.0]
            out.append(
                Box(
                    lo,
                    lo + size,
                    rng.uniform(0.2, 1.0, 3),
                    _texture(rng),
                    texel=0.1,
                    velocity=direction * rng.uniform(1.0, 1.4),
                    bounds=(0.0, length),
                )
            )
        return out

    def render(
        self,
        pose: np.ndarray,
        K: np.ndarray,
        t: float,
        visit: int = 0,
        shape: tuple[int, int] = (H, W),
    ) -> dict[str, np.ndarray]:
        """Ray-cast one frame: ``rgb (H, W, 3)``, ``depth (H, W)``, ``instance (H, W)`` (box index;
        actors after statics), ``dyn_mask (H, W)``, ``normals (H, W, 3)`` (world frame)."""
        check_poses(pose, "pose", batch=False)
        K = check_intrinsics(K)
        h, w = shape
        rays_c = np.linalg.solve(K, pixel_grid(h, w).reshape(3, -1))  # z = 1 rays
        R, o = pose[:3, :3], pose[:3, 3]
        d = (R @ rays_c).T  # (P, 3), camera z == ray parameter
        boxes = [(*b.at(t), b) for b in self.static] + [(*a.at(t), a) for a in self.actors(visit)]
        lo = np.stack([b[0] for b in boxes])
        hi = np.stack([b[1] for b in boxes])
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / np.where(np.abs(d) < 1e-12, 1e-12, d)
            t0 = (lo[None] - o) * inv[:, None]
            t1 = (hi[None] - o) * inv[:, None]
        tmin, tmax = np.minimum(t0, t1), np.maximum(t0, t1)
        near = tmin.max(axis=2)
        far = tmax.min(axis=2)
        inside = np.all((o >= lo) & (o <= hi), axis=1)
        # a ray hits a box at `near` (outside) — the room shells are thin slabs, never entered
        hit = (far >= near) & (near > 1e-6) & ~inside[None]
        tn = np.where(hit, near, np.inf)
        idx = np.argmin(tn, axis=1)
        z = tn[np.arange(len(tn)), idx]
        if not np.all(np.isfinite(z)):
            raise ValueError("render: some rays escape the room (camera outside it?)")
        pts = o + d * z[:, None]
        axis = np.argmax(tmin[np.arange(len(tn)), idx], axis=1)
        normal = np.zeros_like(pts)
        normal[np.arange(len(pts)), axis] = -np.sign(d[np.arange(len(pts)), axis])
        rgb = np.zeros_like(pts)
        for k in np.unique(idx):
            sel = idx == k
            lo_k, _, box = boxes[k]
            p = pts[sel] - lo_k
            ax = axis[sel]
            # in-plane coordinates: the two axes other than the face normal
            a_idx = np.where(ax == 0, 1, 0)
            b_idx = np.where(ax == 2, 1, 2)
            a = p[np.arange(len(p)), a_idx] / box.texel
            b = p[np.arange(len(p)), b_idx] / box.texel
            g = box.texture.shape[0]
            a0, b0 = np.floor(a), np.floor(b)
            fa, fb = a - a0, b - b0
            ia, ib = a0.astype(int) % g, b0.astype(int) % g
            ja, jb = (ia + 1) % g, (ib + 1) % g
            tex = box.texture
            val = (
                tex[ia, ib] * (1 - fa) * (1 - fb)
                + tex[ja, ib] * fa * (1 - fb)
                + tex[ia, jb] * (1 - fa) * fb
                + tex[ja, jb] * fa * fb
            )
            shade = 0.75 + 0.25 * np.abs(normal[sel] @ np.array([0.3, 0.5, 0.81]))
            rgb[sel] = (val * shade)[:, None] * box.color[None]
        n_static = len(self.static)
        return {
            "rgb": np.clip(rgb, 0, 1).reshape(h, w, 3).astype(np.float32),
            "depth": z.reshape(h, w),
            "instance": idx.reshape(h, w),
            "dyn_mask": (idx >= n_static).reshape(h, w),
            "normals": normal.reshape(h, w, 3),
        }

    def gt_flow(
        self,
        depth0: np.ndarray,
        K: np.ndarray,
        pose0: np.ndarray,
        t0: float,
        pose1: np.ndarray,
        t1: float,
        visit: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ground-truth flow ``(2, H, W)`` from a frame at (pose0, t0) to (pose1, t1) and a
        validity mask (in view and not occluded, by a z-test against the rendered target)."""
        f0 = self.render(pose0, K, t0, visit, depth0.shape)
        pts = backproject(depth0, K).reshape(-1, 3) @ pose0[:3, :3].T + pose0[:3, 3]
        inst = f0["instance"].reshape(-1)
        actors = self.actors(visit)
        n_static = len(self.static)
        for a, actor in enumerate(actors):
            sel = inst == n_static + a
            pts[sel] += actor.at(t1)[0] - actor.at(t0)[0]
        Tinv = invert(pose1)
        pc = pts @ Tinv[:3, :3].T + Tinv[:3, 3]
        uv, z = project(pc, K)
        h, w = depth0.shape
        grid = pixel_grid(h, w)[:2].reshape(2, -1).T
        flow = (uv - grid).T.reshape(2, h, w)
        f1 = self.render(pose1, K, t1, visit, depth0.shape)
        ui, vi = np.round(uv[:, 0]).astype(int), np.round(uv[:, 1]).astype(int)
        inview = (z > 0) & (ui >= 0) & (ui < w) & (vi >= 0) & (vi < h)
        valid = np.zeros(h * w, bool)
        zt = f1["depth"][vi[inview], ui[inview]]
        valid[inview] = z[inview] <= zt * 1.03 + 0.02
        return flow, valid.reshape(h, w)


def _trajectory(
    world: RevisitWorld, visit: int, n: int, overlap: float, deg_per_frame: float
) -> np.ndarray:
    """Camera path of a visit: an arc around the room centre looking outwards, with a gentle
    height and yaw wobble, ``deg_per_frame`` degrees per frame. Later visits start in a part of
    the room visit 0 did not face and sweep into it, ``overlap`` of their frames facing visit 0's
    arc."""
    centre = np.r_[world.room[:2] / 2, 1.4]
    span = np.radians(deg_per_frame) * (n - 1)
    if visit == 0:
        a0, radius = 0.0, 0.5
    else:
        a0, radius = -(1 - overlap) * span - 0.5 * (visit - 1) * span, 0.3
    s = np.linspace(0.0, 1.0, n)
    ang = a0 + span * s
    poses = np.empty((n, 4, 4))
    for i, (a, si) in enumerate(zip(ang, s, strict=True)):
        eye = (
            centre
            + np.r_[radius * math.cos(a), radius * math.sin(a), 0.1 * math.sin(2 * np.pi * si)]
        )
        yaw = a + 0.2 * math.sin(np.pi * si + visit)
        target = eye + np.r_[math.cos(yaw), math.sin(yaw), -0.15]
        poses[i] = look_at(eye, target)
    return poses


def make_visits(
    world: RevisitWorld,
    n_visits: int = 2,
    frames_per_visit: int = 60,
    fps: float = 15.0,
    overlap: float = 0.6,
    deg_per_frame: float = 3.0,
    gains: tuple[float, ...] | None = None,
    K: np.ndarray | None = None,
    shape: tuple[int, int] = (H, W),
) -> list[Sequence]:
    """Render ``n_visits`` visits of ``world`` (spec §8): visit 0 sweeps an arc of the room, later visits
    start elsewhere, re-enter ``overlap`` of it under a different lighting gain, with new actors.

    Returns:
        A list of :class:`Sequence` with ground-truth depth, poses, dynamic masks and actor boxes.
    """
    check_int(n_visits, "n_visits", low=1, high=16)
    check_int(frames_per_visit, "frames_per_visit", low=3)
    check_range(fps, "fps", low=0, low_inclusive=False)
    check_range(overlap, "overlap", low=0, high=1, low_inclusive=False)
    check_range(deg_per_frame, "deg_per_frame", low=0, high=30, low_inclusive=False)
    h, w = shape
    K = (
        intrinsics(0.75 * w, 0.75 * w, (w - 1) / 2, (h - 1) / 2)
        if K is None
        else check_intrinsics(K)
    )
    if gains is None:
        gains = tuple(1.0 if v == 0 else 0.85 + 0.1 * (v % 3) for v in range(n_visits))
    if len(gains) != n_visits:
        raise ValueError(f"gains must have n_visits={n_visits} entries, got {len(gains)}")
    out = []
    for v in range(n_visits):
        poses = _trajectory(world, v, frames_per_visit, overlap, deg_per_frame)
        times = np.arange(frames_per_visit) / fps
        frames = [world.render(p, K, float(t), v, shape) for p, t in zip(poses, times, strict=True)]
        boxes = np.array(
            [[np.stack(a.at(float(t))) for a in world.actors(v)] for t in times]
        ).reshape(frames_per_visit, world.n_actors, 2, 3)
        out.append(
            Sequence(
                rgb=np.clip(np.stack([f["rgb"] for f in frames]) * gains[v], 0, 1).astype(
                    np.float32
                ),
                depth=np.stack([f["depth"] for f in frames]),
                K=K,
                times=times,
                poses=poses,
                dyn_mask=np.stack([f["dyn_mask"] for f in frames]),
                actor_boxes=boxes,
                world=world,
                name=f"visit{v}",
                meta={"visit": v},
            )
        )
    return out


# --- TUM RGB-D folders: rgb.txt, depth.txt, groundtruth.txt (optional), PNG images.

TUM_DEPTH_SCALE = 5000.0


def _read_list(path: Path) -> list[tuple[float, list[str]]]:
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            rows.append((float(parts[0]), parts[1:]))
        except ValueError:
            raise ValueError(f"{path}: bad line {line!r}") from None
    return rows


def _quat_pose(vals: list[str]) -> np.ndarray:
    tx, ty, tz, qx, qy, qz, qw = (float(v) for v in vals[:7])
    q = np.array([qw, qx, qy, qz])
    q /= np.linalg.norm(q)
    w, x, y, z = q
    T = np.eye(4)
    T[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    T[:3, 3] = [tx, ty, tz]
    return T


def load_tum(
    folder: str | Path,
    K: np.ndarray | None = None,
    max_dt: float = 0.02,
    max_frames: int | None = None,
    depth_scale: float = TUM_DEPTH_SCALE,
) -> Sequence:
    """Load a TUM-RGBD-format folder (``rgb.txt``, ``depth.txt``, optional ``groundtruth.txt``
    and ``intrinsics.txt`` with ``fx fy cx cy``), associating depth and poses to RGB timestamps
    within ``max_dt`` seconds. Depth PNGs are 16-bit, metres × ``depth_scale``; 0 = missing.

    Raises:
        OSError: a listed image is missing or unreadable.
        ValueError: lists missing, unsorted timestamps, no associations, bad intrinsics.
    """
    import cv2

    folder = Path(folder)
    if not folder.is_dir():
        raise OSError(f"{folder} is not a folder")
    for name in ("rgb.txt", "depth.txt"):
        if not (folder / name).exists():
            raise ValueError(f"{folder} is not a TUM RGB-D folder: {name} is missing")
    rgb_list = _read_list(folder / "rgb.txt")
    depth_list = _read_list(folder / "depth.txt")
    for name, rows in (("rgb.txt", rgb_list), ("depth.txt", depth_list)):
        ts = np.array([r[0] for r in rows])
        if len(ts) == 0:
            raise ValueError(f"{folder / name} lists no frames")
        if np.any(np.diff(ts) <= 0):
            raise ValueError(f"{folder / name}: timestamps are not strictly increasing")
    if K is None:
        kfile = folder / "intrinsics.txt"
        if kfile.exists():
            vals = [float(v) for v in kfile.read_text().split()]
            if len(vals) != 4:
                raise ValueError(f"{kfile} must hold 4 numbers fx fy cx cy, got {len(vals)}")
            K = intrinsics(*vals)
        else:
            K = intrinsics(525.0, 525.0, 319.5, 239.5)  # TUM freiburg default
    K = check_intrinsics(K)
    gt = _read_list(folder / "groundtruth.txt") if (folder / "groundtruth.txt").exists() else None
    d_ts = np.array([r[0] for r in depth_list])
    g_ts = None if gt is None else np.array([r[0] for r in gt])
    rgbs, depths, times, poses = [], [], [], []
    for t, (rel,) in ((t, p[:1]) for t, p in rgb_list):
        j = int(np.argmin(np.abs(d_ts - t)))
        if abs(d_ts[j] - t) > max_dt:
            continue
        if g_ts is not None:
            k = int(np.argmin(np.abs(g_ts - t)))
            if abs(g_ts[k] - t) > max_dt:
                continue
            poses.append(_quat_pose(gt[k][1]))
        img = cv2.imread(str(folder / rel), cv2.IMREAD_COLOR)
        dep = cv2.imread(str(folder / depth_list[j][1][0]), cv2.IMREAD_UNCHANGED)
        if img is None:
            raise OSError(f"cannot read {folder / rel} (missing frame?)")
        if dep is None:
            raise OSError(f"cannot read {folder / depth_list[j][1][0]} (missing frame?)")
        if dep.shape != img.shape[:2]:
            raise ValueError(f"{rel}: depth shape {dep.shape} differs from rgb {img.shape[:2]}")
        rgbs.append(img[..., ::-1].astype(np.float32) / 255.0)
        depths.append(dep.astype(float) / depth_scale)
        times.append(t)
        if max_frames is not None and len(rgbs) >= max_frames:
            break
    if not rgbs:
        raise ValueError(f"{folder}: no rgb frame has depth (and pose) within {max_dt} s")
    seq = Sequence(
        rgb=np.stack(rgbs),
        depth=np.stack(depths),
        K=K,
        times=np.array(times),
        poses=np.stack(poses) if poses else None,
        name=folder.name,
    )
    return seq.validate()


def save_tum(seq: Sequence, folder: str | Path, depth_scale: float = TUM_DEPTH_SCALE) -> Path:
    """Write ``seq`` as a TUM-RGBD-format folder (readable by :func:`load_tum`)."""
    import cv2

    seq.validate()
    folder = Path(folder)
    (folder / "rgb").mkdir(parents=True, exist_ok=True)
    (folder / "depth").mkdir(parents=True, exist_ok=True)
    rgb_lines, depth_lines, gt_lines = ["# timestamp filename"], ["# timestamp filename"], []
    for i, t in enumerate(seq.times):
        name = f"{t:.6f}.png"
        img = (np.clip(seq.rgb[i], 0, 1) * 255).round().astype(np.uint8)[..., ::-1]
        cv2.imwrite(str(folder / "rgb" / name), img)
        dep = np.nan_to_num(seq.depth[i], nan=0.0) * depth_scale
        cv2.imwrite(str(folder / "depth" / name), np.clip(dep.round(), 0, 65535).astype(np.uint16))
        rgb_lines.append(f"{t:.6f} rgb/{name}")
        depth_lines.append(f"{t:.6f} depth/{name}")
        if seq.poses is not None:
            T = seq.poses[i]
            q = _rot_to_quat(T[:3, :3])
            gt_lines.append(f"{t:.6f} " + " ".join(f"{v:.9f}" for v in [*T[:3, 3], *q]))
    (folder / "rgb.txt").write_text("\n".join(rgb_lines) + "\n")
    (folder / "depth.txt").write_text("\n".join(depth_lines) + "\n")
    if gt_lines:
        (folder / "groundtruth.txt").write_text(
            "# timestamp tx ty tz qx qy qz qw\n" + "\n".join(gt_lines) + "\n"
        )
    K = seq.K
    (folder / "intrinsics.txt").write_text(f"{K[0, 0]} {K[1, 1]} {K[0, 2]} {K[1, 2]}\n")
    return folder


def _rot_to_quat(R: np.ndarray) -> list[float]:
    from scipy.spatial.transform import Rotation

    return list(Rotation.from_matrix(R).as_quat())  # x, y, z, w
