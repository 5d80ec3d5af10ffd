import numpy as np
import pytest

from iclr26.cognimap3d.memory import Keyframe, MemoryBank, descriptor_2d, descriptor_3d


def _kf(rgb, pts, pose=None):
    return Keyframe(
        np.eye(4) if pose is None else pose,
        descriptor_2d(rgb),
        descriptor_3d(pts),
        float(np.median(pts[:, 2])),
    )


def test_fusing_same_cloud_twice_keeps_points_doubles_counts(rng):
    pts = rng.uniform(0, 2, (3000, 3))
    bank = MemoryBank(voxel=0.1)
    sid = bank.store(pts, None, [])
    n0 = len(bank.scenes[sid].points)
    c0 = bank.scenes[sid].counts.copy()
    bank.update(sid, pts, None, [])
    assert len(bank.scenes[sid].points) == n0
    np.testing.assert_allclose(bank.scenes[sid].counts, 2 * c0)


def test_capacity_evicts_least_observed(rng):
    bank = MemoryBank(voxel=0.05, capacity_points=100)
    sid = bank.store(rng.uniform(0, 5, (1000, 3)), None, [])
    assert len(bank.scenes[sid].points) == 100


def test_retrieval_identical_frame_top1_and_voting(visits):
    seq = visits[0]
    bank = MemoryBank(vote_window=5, vote_min=3)
    kfs = [
        _kf(seq.rgb[t], np.random.default_rng(t).normal(size=(200, 3)) + np.array([0, 0, 3]))
        for t in range(0, 24, 4)
    ]
    bank.store(np.zeros((10, 3)), None, kfs)
    hits = bank.query(kfs[2].desc2d, kfs[2].desc3d)
    assert hits[0][:2] == (0, 2)
    bank.reset_votes()
    sid, _ = bank.propose(kfs[2].desc2d, kfs[2].desc3d)
    assert sid is None  # one lucky frame does not trigger a recall
    bank.propose(kfs[2].desc2d, kfs[2].desc3d)
    sid, _ = bank.propose(kfs[2].desc2d, kfs[2].desc3d)
    assert sid == 0


def test_descriptor_brightness_invariance(visits):
    img = visits[0].rgb[5]
    a, b = descriptor_2d(img), descriptor_2d(img * 0.8)
    other = descriptor_2d(visits[0].rgb[20])
    assert a @ b > 0.98
    assert a @ b > a @ other


def test_descriptor_3d_invariant_to_rigid_motion_and_scale(rng):
    from iclr26.cognimap3d.se3 import exp_so3

    p = rng.uniform(0, 1, (500, 3)) * [1, 2, 0.5]
    q = 2.0 * p @ exp_so3(np.array([0.3, 1.0, -0.2])).T + 5
    assert descriptor_3d(p) @ descriptor_3d(q) > 0.99


def test_save_load_roundtrip_exact(tmp_path, rng, visits):
    bank = MemoryBank()
    pts = rng.uniform(0, 2, (500, 3))
    sid = bank.store(pts, rng.uniform(0, 1, (500, 3)), [_kf(visits[0].rgb[0], pts)])
    path = bank.save(tmp_path / "m.npz")
    back = MemoryBank.load(path)
    a, b = bank.scenes[sid], back.scenes[sid]
    for attr in ("points", "colors", "counts", "last_seen"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    np.testing.assert_array_equal(a.keyframes[0].desc2d, b.keyframes[0].desc2d)
    assert back.icp_fitness_min == bank.icp_fitness_min


def test_corrupted_and_incompatible_files_refused(tmp_path, rng):
    bank = MemoryBank()
    bank.store(rng.uniform(0, 2, (50, 3)), None, [])
    path = bank.save(tmp_path / "m.npz")
    raw = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="corrupted"):
        MemoryBank.load(tmp_path / "trunc.npz")
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    data["format_version"] = np.array(99)
    np.savez(tmp_path / "v99.npz", **data)
    with pytest.raises(ValueError, match="format version 99"):
        MemoryBank.load(tmp_path / "v99.npz")
    del data["s0_points"]
    data["format_version"] = np.array(1)
    np.savez(tmp_path / "missing.npz", **data)
    with pytest.raises(ValueError, match="incomplete"):
        MemoryBank.load(tmp_path / "missing.npz")


def test_correspondences_are_inliers_under_the_recall_transform(rng):
    from iclr26.cognimap3d.se3 import exp_se3, invert

    scene = rng.uniform(0, 3, (4000, 3))
    bank = MemoryBank(voxel=0.05, icp_max_corr=0.1)
    sid = bank.store(scene, None, [])
    T = exp_se3(np.r_[0.1, -0.2, 0.05, 0.5, 0.2, -0.1])
    stored = bank.scenes[sid].points
    q = stored[:500] @ invert(T)[:3, :3].T + invert(T)[:3, 3]  # camera-frame copies
    q = np.vstack((q, rng.uniform(10, 11, (50, 3))))  # points with no scene neighbour
    p, qq = bank.correspondences(q, sid, T, limit=300)
    assert len(p) == 300
    np.testing.assert_allclose(qq @ T[:3, :3].T + T[:3, 3], p, atol=1e-9)
    assert (qq < 5).all()  # the far points never match
    p_all, _ = bank.correspondences(q, sid, T, limit=10_000)
    assert len(p_all) == 500
    with pytest.raises(ValueError, match="limit"):
        bank.correspondences(q, sid, T, limit=0)
    with pytest.raises(ValueError, match="scene_id"):
        bank.correspondences(q, sid + 1, T)
