"""The memory bank (spec §4.3): static scenes stored as voxel-hashed point clouds with
observation counts, keyframes indexed by 2D and 3D global descriptors, retrieval by cosine
similarity with temporal voting, ICP verification, relocalisation and update; saved as ``.npz``
without pickle.

The paper's descriptors are DINOv2 (2D) and PointNet++ (3D); without their weights we use
hand-crafted stand-ins: gain-invariant gradient-orientation and chromaticity histograms on a 3×3
grid (2D) and a scale-normalised D2 shape distribution with covariance eigenvalue ratios (3D).
"""

from __future__ import annotations

import collections
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pykdtree.kdtree import KDTree

from iclr26.cognimap3d.icp import icp, kdtree
from iclr26.cognimap3d.se3 import check_poses
from iclr26.shared.validation import check_array, check_int, check_range

__all__ = [
    "FORMAT_VERSION",
    "Keyframe",
    "MemoryBank",
    "RelocResult",
    "SceneMemory",
    "descriptor_2d",
    "descriptor_3d",
]

FORMAT_VERSION = 1


def _l2(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x) + 1e-12)


def descriptor_2d(rgb: np.ndarray, grid: int = 3, bins: int = 8) -> np.ndarray:
    """Global image descriptor (DINOv2 stand-in), invariant to a global brightness gain.

    Per cell of a ``grid × grid`` layout: a magnitude-weighted histogram of gradient orientations
    of the mean-normalised gray image, and a 4×4 histogram of chromaticity (r, g)/(r+g+b);
    square-rooted (Hellinger) and L2-normalised.
    """
    check_array(rgb, "rgb", ndim=3)
    img = np.asarray(rgb, dtype=float)
    if img.shape[2] != 3:
        raise ValueError(f"rgb must be (H, W, 3), got {img.shape}")
    gray = img.mean(axis=2)
    gray = gray / (gray.mean() + 1e-9)
    gy, gx = np.gradient(gray)
    mag = np.hypot(gx, gy)
    ang = np.mod(np.arctan2(gy, gx), np.pi)
    obin = np.minimum((ang / np.pi * bins).astype(int), bins - 1)
    s = img.sum(axis=2) + 1e-9
    cr = np.minimum((img[..., 0] / s * 4 / 0.67).astype(int), 3)
    cg = np.minimum((img[..., 1] / s * 4 / 0.67).astype(int), 3)
    cbin = cr * 4 + cg
    h, w = gray.shape
    parts = []
    for a in range(grid):
        for b in range(grid):
            sl = (
                slice(a * h // grid, (a + 1) * h // grid),
                slice(b * w // grid, (b + 1) * w // grid),
            )
            ho = np.bincount(obin[sl].ravel(), weights=mag[sl].ravel(), minlength=bins)
            hc = np.bincount(cbin[sl].ravel(), minlength=16).astype(float)
            parts += [_l2(np.sqrt(ho)), _l2(np.sqrt(hc))]
    return _l2(np.concatenate(parts))


def descriptor_3d(
    points: np.ndarray, bins: int = 16, n_pairs: int = 4000, seed: int = 0
) -> np.ndarray:
    """Global shape descriptor (PointNet++ stand-in) of a static cloud ``(N, 3)``: a D2
    pair-distance histogram normalised by the median distance (scale and rigid-motion
    invariant) and the sorted covariance eigenvalue ratios."""
    check_array(points, "points", shape=(None, 3))
    p = np.asarray(points, dtype=float)
    if len(p) < 4:
        raise ValueError(f"points must hold at least 4 points, got {len(p)}")
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(p), (2, n_pairs))
    d = np.linalg.norm(p[i] - p[j], axis=1)
    d = d / (np.median(d) + 1e-12)
    hist = np.histogram(d, bins=bins, range=(0, 3))[0].astype(float)
    ev = np.sort(np.linalg.eigvalsh(np.cov(p.T)))[::-1]
    ratios = ev / (ev.sum() + 1e-12)
    return _l2(np.concatenate([_l2(np.sqrt(hist)), ratios]))


@dataclass
class Keyframe:
    """A stored keyframe: camera-to-world ``pose`` in the scene frame, descriptors, median
    static depth (for the scale guess of a recall) and the visit that saw it."""

    pose: np.ndarray
    desc2d: np.ndarray
    desc3d: np.ndarray
    median_depth: float
    visit: int = 0


@dataclass
class SceneMemory:
    """One stored static scene: voxel-averaged ``points`` ``(N, 3)``, ``colors`` ``(N, 3)``,
    observation ``counts`` ``(N,)``, ``last_seen`` visit per point and its keyframes."""

    points: np.ndarray
    colors: np.ndarray
    counts: np.ndarray
    last_seen: np.ndarray
    keyframes: list[Keyframe] = field(default_factory=list)
    _tree: KDTree | None = None

    @property
    def tree(self) -> KDTree:
        """KD-tree of the points (rebuilt after updates)."""
        if self._tree is None:
            self._tree = kdtree(self.points)
        return self._tree


@dataclass(frozen=True)
class RelocResult:
    """Outcome of verifying a recall by ICP: ``accepted``, the similarity ``T`` (visit/camera
    frame → scene frame, scale in the rotation block), ``scale``, ``fitness`` and ``rmse``."""

    accepted: bool
    T: np.ndarray
    scale: float
    fitness: float
    rmse: float
    scene_id: int


def _voxel_keys(p: np.ndarray, voxel: float) -> np.ndarray:
    q = np.floor(p / voxel).astype(np.int64) + (1 << 20)
    return (q[:, 0] << 42) | (q[:, 1] << 21) | q[:, 2]


def _fuse(points, colors, counts, last, new_p, new_c, visit, voxel):
    """Voxel-hash fusion: points in one voxel average (weighted by counts), counts add."""
    P = np.concatenate([points * counts[:, None], new_p])
    C = np.concatenate([colors * counts[:, None], new_c])
    N = np.concatenate([counts, np.ones(len(new_p))])
    L = np.concatenate([last, np.full(len(new_p), visit)])
    # existing points keep their voxel (their mean may sit near a voxel border)
    keys = np.concatenate([_voxel_keys(points, voxel), _voxel_keys(new_p, voxel)])
    uniq, inv = np.unique(keys, return_inverse=True)
    m = len(uniq)
    cnt = np.bincount(inv, weights=N, minlength=m)
    pts = (
        np.stack([np.bincount(inv, weights=P[:, a], minlength=m) for a in range(3)], 1)
        / cnt[:, None]
    )
    col = (
        np.stack([np.bincount(inv, weights=C[:, a], minlength=m) for a in range(3)], 1)
        / cnt[:, None]
    )
    lst = np.zeros(m)
    np.maximum.at(lst, inv, L)
    return pts, col, cnt, lst


class MemoryBank:
    """Static-scene memory with descriptor retrieval, voting and ICP verification (spec §4.3).

    Args:
        voxel: voxel size of the stored clouds.
        top_k: keyframes returned by :meth:`query`.
        sim_min: minimum 2D cosine similarity of a candidate.
        w3d: weight of the 3D similarity in the re-ranking score.
        vote_window, vote_min: a scene is proposed only if it is the top-1 of at least
            ``vote_min`` of the last ``vote_window`` queries.
        icp_fitness_min, icp_rmse_max: acceptance of a verification (fitness ≥ 0.6, spec).
        icp_max_corr: ICP correspondence distance.
        capacity_points: per-scene cap; the least-observed points are evicted first.
        verify: run ICP verification (``False`` accepts every proposal: the unsafe ablation).
    """

    def __init__(
        self,
        voxel: float = 0.05,
        top_k: int = 3,
        sim_min: float = 0.75,
        w3d: float = 0.5,
        vote_window: int = 5,
        vote_min: int = 3,
        icp_fitness_min: float = 0.6,
        icp_rmse_max: float = 0.08,
        icp_max_corr: float = 0.25,
        capacity_points: int = 200_000,
        verify: bool = True,
    ) -> None:
        self.voxel = check_range(voxel, "voxel", low=0, low_inclusive=False)
        self.top_k = check_int(top_k, "top_k", low=1)
        self.sim_min = check_range(sim_min, "sim_min", low=-1, high=1)
        self.w3d = check_range(w3d, "w3d", low=0)
        self.vote_window = check_int(vote_window, "vote_window", low=1)
        self.vote_min = check_int(vote_min, "vote_min", low=1, high=vote_window)
        self.icp_fitness_min = check_range(icp_fitness_min, "icp_fitness_min", low=0, high=1)
        self.icp_rmse_max = check_range(icp_rmse_max, "icp_rmse_max", low=0, low_inclusive=False)
        self.icp_max_corr = check_range(icp_max_corr, "icp_max_corr", low=0, low_inclusive=False)
        self.capacity_points = check_int(capacity_points, "capacity_points", low=1)
        self.verify_recalls = bool(verify)
        self.scenes: dict[int, SceneMemory] = {}
        self._votes: collections.deque[int | None] = collections.deque(maxlen=vote_window)

    # --- storage
    def store(
        self,
        points: np.ndarray,
        colors: np.ndarray | None,
        keyframes: list[Keyframe],
        visit: int = 0,
    ) -> int:
        """Add a new scene from static points ``(N, 3)`` in its own frame; returns its id."""
        check_array(points, "points", shape=(None, 3))
        p = np.asarray(points, dtype=float)
        c = (
            np.zeros_like(p)
            if colors is None
            else np.asarray(check_array(colors, "colors", shape=p.shape), dtype=float)
        )
        pts, col, cnt, lst = _fuse(
            np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros(0), p, c, visit, self.voxel
        )
        sid = max(self.scenes, default=-1) + 1
        self.scenes[sid] = SceneMemory(pts, col, cnt, lst, list(keyframes))
        self._evict(sid)
        return sid

    def update(
        self,
        scene_id: int,
        points: np.ndarray,
        colors: np.ndarray | None,
        keyframes: list[Keyframe],
        visit: int = 0,
    ) -> None:
        """Fuse new static points (already in the scene frame) and append keyframes."""
        sc = self._scene(scene_id)
        check_array(points, "points", shape=(None, 3))
        p = np.asarray(points, dtype=float)
        c = (
            np.zeros_like(p)
            if colors is None
            else np.asarray(check_array(colors, "colors", shape=p.shape), dtype=float)
        )
        sc.points, sc.colors, sc.counts, sc.last_seen = _fuse(
            sc.points, sc.colors, sc.counts, sc.last_seen, p, c, visit, self.voxel
        )
        sc.keyframes.extend(keyframes)
        sc._tree = None
        self._evict(scene_id)

    def _evict(self, sid: int) -> None:
        sc = self.scenes[sid]
        if len(sc.points) > self.capacity_points:
            keep = np.lexsort((sc.last_seen, sc.counts))[-self.capacity_points :]
            keep.sort()
            sc.points, sc.colors, sc.counts, sc.last_seen = (
                sc.points[keep],
                sc.colors[keep],
                sc.counts[keep],
                sc.last_seen[keep],
            )
            sc._tree = None

    def _scene(self, scene_id: int) -> SceneMemory:
        if scene_id not in self.scenes:
            raise ValueError(
                f"scene_id {scene_id} is not in the memory (have {sorted(self.scenes)})"
            )
        return self.scenes[scene_id]

    @property
    def size_bytes(self) -> int:
        """Memory footprint of points, colours, counts and descriptors."""
        total = 0
        for sc in self.scenes.values():
            total += sc.points.nbytes + sc.colors.nbytes + sc.counts.nbytes + sc.last_seen.nbytes
            total += sum(k.desc2d.nbytes + k.desc3d.nbytes + k.pose.nbytes for k in sc.keyframes)
        return total

    # --- retrieval
    def query(self, desc2d: np.ndarray, desc3d: np.ndarray) -> list[tuple[int, int, float]]:
        """Top-k keyframes ``(scene_id, keyframe_index, score)`` by 2D cosine similarity (≥
        ``sim_min``), re-ranked by ``sim2d + w3d·sim3d``."""
        check_array(desc2d, "desc2d", ndim=1)
        check_array(desc3d, "desc3d", ndim=1)
        entries = [
            (sid, k, kf) for sid, sc in self.scenes.items() for k, kf in enumerate(sc.keyframes)
        ]
        if not entries:
            return []
        D2 = np.stack([kf.desc2d for _, _, kf in entries])
        D3 = np.stack([kf.desc3d for _, _, kf in entries])
        if D2.shape[1] != len(desc2d) or D3.shape[1] != len(desc3d):
            raise ValueError("descriptor length differs from the stored keyframes'")
        s2 = D2 @ _l2(np.asarray(desc2d, dtype=float))
        s3 = D3 @ _l2(np.asarray(desc3d, dtype=float))
        cand = np.flatnonzero(s2 >= self.sim_min)
        cand = cand[np.argsort(-s2[cand])][: 4 * self.top_k]
        score = s2[cand] + self.w3d * s3[cand]
        order = cand[np.argsort(-score)][: self.top_k]
        return [(entries[i][0], entries[i][1], float(s2[i] + self.w3d * s3[i])) for i in order]

    def reset_votes(self) -> None:
        """Forget the voting window (call at the start of a visit)."""
        self._votes.clear()

    def propose(
        self, desc2d: np.ndarray, desc3d: np.ndarray
    ) -> tuple[int | None, list[tuple[int, int, float]]]:
        """Query, push the top-1 scene into the voting window, and return the scene that has
        ``vote_min`` votes in the window (or ``None``) with the query's hits."""
        hits = self.query(desc2d, desc3d)
        self._votes.append(hits[0][0] if hits else None)
        counts = collections.Counter(v for v in self._votes if v is not None)
        if counts:
            sid, c = counts.most_common(1)[0]
            if c >= self.vote_min:
                return sid, hits
        return None, hits

    def verify(
        self,
        points: np.ndarray,
        scene_id: int,
        T_init: np.ndarray,
        with_scale: bool = False,
        max_iter: int = 30,
    ) -> RelocResult:
        """ICP of ``points`` ``(N, 3)`` onto the scene's cloud from ``T_init`` (similarity if
        ``with_scale``); accepted when fitness ≥ ``icp_fitness_min`` and RMSE ≤ ``icp_rmse_max``
        (or always, when the bank was built with ``verify=False``)."""
        sc = self._scene(scene_id)
        res = icp(
            points,
            sc.tree,
            T_init,
            max_iter=max_iter,
            max_corr=self.icp_max_corr,
            with_scale=with_scale,
        )
        ok = res.fitness >= self.icp_fitness_min and res.rmse <= self.icp_rmse_max
        return RelocResult(
            bool(ok or not self.verify_recalls), res.T, res.scale, res.fitness, res.rmse, scene_id
        )

    def correspondences(
        self, points: np.ndarray, scene_id: int, T: np.ndarray, limit: int = 200
    ) -> tuple[np.ndarray, np.ndarray]:
        """Static-landmark pairs of a verified recall: scene points ``p`` ``(M, 3)`` (scene
        frame) nearest to ``points`` ``(N, 3)`` (camera frame) moved by ``T``, within the ICP
        correspondence distance, and the matching camera-frame points ``q``; at most ``limit``
        pairs, evenly spaced over the inliers (deterministic). Feed them to
        :meth:`~iclr26.cognimap3d.graph.PoseGraph.add_landmarks`."""
        sc = self._scene(scene_id)
        check_array(points, "points", shape=(None, 3))
        check_array(T, "T", shape=(4, 4))
        check_int(limit, "limit", low=1)
        q = np.asarray(points, dtype=float)
        moved = q @ np.asarray(T, float)[:3, :3].T + np.asarray(T, float)[:3, 3]
        d, idx = sc.tree.query(moved, distance_upper_bound=self.icp_max_corr)
        ok = np.flatnonzero(np.isfinite(d))
        if len(ok) > limit:
            ok = ok[np.linspace(0, len(ok) - 1, limit).round().astype(int)]
        return sc.points[idx[ok]].copy(), q[ok].copy()

    # --- persistence
    def save(self, path: str | Path) -> Path:
        """Write the bank to ``path`` (``.npz``, no pickle, with a format version)."""
        path = Path(path)
        arrays: dict[str, np.ndarray] = {
            "format_version": np.array(FORMAT_VERSION),
            "config": np.array(
                [
                    self.voxel,
                    self.top_k,
                    self.sim_min,
                    self.w3d,
                    self.vote_window,
                    self.vote_min,
                    self.icp_fitness_min,
                    self.icp_rmse_max,
                    self.icp_max_corr,
                    self.capacity_points,
                    float(self.verify_recalls),
                ]
            ),
            "scene_ids": np.array(sorted(self.scenes), dtype=np.int64),
        }
        for sid, sc in self.scenes.items():
            pre = f"s{sid}_"
            arrays[pre + "points"], arrays[pre + "colors"] = sc.points, sc.colors
            arrays[pre + "counts"], arrays[pre + "last_seen"] = sc.counts, sc.last_seen
            kfs = sc.keyframes
            arrays[pre + "kf_pose"] = (
                np.stack([k.pose for k in kfs]) if kfs else np.zeros((0, 4, 4))
            )
            arrays[pre + "kf_d2"] = np.stack([k.desc2d for k in kfs]) if kfs else np.zeros((0, 0))
            arrays[pre + "kf_d3"] = np.stack([k.desc3d for k in kfs]) if kfs else np.zeros((0, 0))
            arrays[pre + "kf_meta"] = np.array([[k.median_depth, k.visit] for k in kfs]).reshape(
                -1, 2
            )
        with path.open("wb") as fh:
            np.savez_compressed(fh, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> MemoryBank:
        """Read a bank written by :meth:`save`; a truncated, corrupted or incompatible file is
        refused with ``ValueError`` (nothing is half-loaded)."""
        path = Path(path)
        if not path.is_file():
            raise OSError(f"memory file {path} does not exist")
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, ValueError, EOFError, OSError) as err:
            raise ValueError(
                f"memory file {path} is corrupted or not a memory bank ({err})"
            ) from None
        try:
            version = int(data["format_version"])
            if version != FORMAT_VERSION:
                raise ValueError(
                    f"memory file {path} has format version {version}; this release reads {FORMAT_VERSION}"
                )
            c = data["config"]
            bank = cls(
                voxel=float(c[0]),
                top_k=int(c[1]),
                sim_min=float(c[2]),
                w3d=float(c[3]),
                vote_window=int(c[4]),
                vote_min=int(c[5]),
                icp_fitness_min=float(c[6]),
                icp_rmse_max=float(c[7]),
                icp_max_corr=float(c[8]),
                capacity_points=int(c[9]),
                verify=bool(c[10]),
            )
            scenes = {}
            for sid in data["scene_ids"].tolist():
                pre = f"s{sid}_"
                pts = check_array(data[pre + "points"], "points", shape=(None, 3), nonempty=False)
                n = len(pts)
                cols = check_array(data[pre + "colors"], "colors", shape=(n, 3), nonempty=False)
                cnt = check_array(data[pre + "counts"], "counts", shape=(n,), nonempty=False)
                last = check_array(data[pre + "last_seen"], "last_seen", shape=(n,), nonempty=False)
                poses = data[pre + "kf_pose"]
                m = len(poses)
                d2, d3, meta = data[pre + "kf_d2"], data[pre + "kf_d3"], data[pre + "kf_meta"]
                if len(d2) != m or len(d3) != m or meta.shape != (m, 2):
                    raise ValueError("keyframe arrays disagree in length")
                if m:
                    check_poses(poses, "keyframe poses", batch=True)
                kfs = [
                    Keyframe(poses[i], d2[i], d3[i], float(meta[i, 0]), int(meta[i, 1]))
                    for i in range(m)
                ]
                scenes[sid] = SceneMemory(pts, cols, cnt, last, kfs)
        except KeyError as err:
            raise ValueError(f"memory file {path} is incomplete: missing {err}") from None
        except (TypeError, IndexError) as err:
            raise ValueError(f"memory file {path} is corrupted ({err})") from None
        bank.scenes = scenes
        return bank
