import numpy as np
import pytest

from iclr26.cognimap3d.data import RevisitWorld, load_tum, make_visits, save_tum
from iclr26.cognimap3d.metrics import ghost_ratio
from iclr26.cognimap3d.pipeline import CogniMap3D, CogniMap3DConfig
from iclr26.cognimap3d.priors import NoisyOraclePrior


def test_synthetic_world_is_deterministic():
    a = make_visits(RevisitWorld(seed=4), 1, 5)[0]
    b = make_visits(RevisitWorld(seed=4), 1, 5)[0]
    np.testing.assert_array_equal(a.rgb, b.rgb)
    np.testing.assert_array_equal(a.depth, b.depth)
    c = make_visits(RevisitWorld(seed=5), 1, 5)[0]
    assert not np.array_equal(a.rgb, c.rgb)


def test_masked_points_never_enter_memory(visits):
    seq = visits[0]
    system = CogniMap3D(
        CogniMap3DConfig(masking="gt", keyframe_stride=1), NoisyOraclePrior(noise=0.0)
    )
    r = system.process_visit(seq, 0)
    unmasked = CogniMap3D(
        CogniMap3DConfig(masking="none", keyframe_stride=1), NoisyOraclePrior(noise=0.0)
    ).process_visit(seq, 0)
    boxes = seq.actor_boxes.reshape(-1, 2, 3).copy()
    boxes[:, 0, 2] = 0.05
    T0 = seq.poses[0]  # the noiseless prior's frame is the first camera's

    def world(p):
        return p @ T0[:3, :3].T + T0[:3, 3]

    assert unmasked.dyn_masks.sum() == 0
    ghosts_unmasked = ghost_ratio(world(unmasked.static_map), boxes, 0.02)
    assert ghosts_unmasked > 0.004
    assert ghost_ratio(world(r.static_map), boxes, 0.02) < 0.1 * ghosts_unmasked


def test_pipeline_is_deterministic(visits):
    def run():
        s = CogniMap3D(CogniMap3DConfig(masking="gt"), NoisyOraclePrior(seed=1))
        s.process_visit(visits[0], 0)
        return s.process_visit(visits[1], 1)

    a, b = run(), run()
    np.testing.assert_array_equal(a.poses, b.poses)
    np.testing.assert_array_equal(a.static_map, b.static_map)


def test_tum_roundtrip(tmp_path, visits):
    seq = visits[0]
    save_tum(seq, tmp_path / "v0")
    back = load_tum(tmp_path / "v0")
    assert len(back) == len(seq)
    np.testing.assert_allclose(back.depth, seq.depth, atol=1 / 5000)
    np.testing.assert_allclose(back.poses, seq.poses, atol=1e-6)
    np.testing.assert_allclose(back.K, seq.K)


def test_tum_bad_folders(tmp_path, visits):
    save_tum(visits[0], tmp_path / "v0")
    (tmp_path / "v0" / "rgb" / f"{visits[0].times[3]:.6f}.png").unlink()
    with pytest.raises(OSError, match="missing frame"):
        load_tum(tmp_path / "v0")
    save_tum(visits[0], tmp_path / "v1")
    lines = (tmp_path / "v1" / "rgb.txt").read_text().splitlines()
    (tmp_path / "v1" / "rgb.txt").write_text("\n".join([lines[0], lines[3], lines[2], *lines[4:]]))
    with pytest.raises(ValueError, match="not strictly increasing"):
        load_tum(tmp_path / "v1")
    with pytest.raises(ValueError, match=r"rgb\.txt is missing"):
        load_tum(tmp_path)


@pytest.mark.slow
def test_two_visits_of_60_frames_under_60_s():
    import time

    vs = make_visits(RevisitWorld(seed=0), 2, 60)
    s = CogniMap3D(CogniMap3DConfig(), NoisyOraclePrior())
    t0 = time.perf_counter()
    s.process_visit(vs[0], 0)
    r = s.process_visit(vs[1], 1)
    assert time.perf_counter() - t0 < 60
    assert r.scene_id == 0


def test_landmark_terms_enter_the_graph_after_a_recall(monkeypatch):
    from iclr26.cognimap3d.graph import PoseGraph

    added = []
    original = PoseGraph.add_landmarks

    def spy(self, i, p_world, q_cam, sigma, robust="huber", k=1.345):
        added.append((i, len(p_world)))
        return original(self, i, p_world, q_cam, sigma, robust, k)

    monkeypatch.setattr(PoseGraph, "add_landmarks", spy)
    vs = make_visits(RevisitWorld(seed=0), 2, 48)
    s = CogniMap3D(CogniMap3DConfig(masking="gt", landmarks=50), NoisyOraclePrior(seed=1))
    s.process_visit(vs[0], 0)
    r = s.process_visit(vs[1], 1)
    assert r.anchors
    assert [i for i, _ in added] == r.anchors
    assert all(0 < m <= 50 for _, m in added)
