import numpy as np
import pytest

from iclr26.cognimap3d.data import RevisitWorld, Sequence, look_at, make_visits
from iclr26.cognimap3d.flow import ego_flow, observed_flow
from iclr26.cognimap3d.metrics import mask_iou
from iclr26.cognimap3d.motion import FlowCache, MotionCueConfig, MotionCueDetector
from iclr26.cognimap3d.priors import NoisyOraclePrior, Priors


def test_ego_flow_matches_renderer_on_static_scene():
    w = RevisitWorld(seed=1, n_actors=0)
    seq = make_visits(w, 1, 6)[0]
    flow, valid = seq.gt_flow(1, 3)
    fe = ego_flow(seq.depth[1], seq.K, seq.poses[1], seq.poses[3])
    assert valid.mean() > 0.5
    assert np.abs(flow - fe)[:, valid].max() < 0.05


def test_pure_rotation_flow_independent_of_depth(visits):
    seq = visits[0]
    T0 = seq.poses[0]
    T1 = T0.copy()
    T1[:3, :3] = T0[:3, :3] @ np.array([[0.995, -0.0998, 0], [0.0998, 0.995, 0], [0, 0, 1.0]])
    T1[:3, :3] /= np.cbrt(np.linalg.det(T1[:3, :3]))
    u, _, vt = np.linalg.svd(T1[:3, :3])
    T1[:3, :3] = u @ vt
    a = ego_flow(seq.depth[0], seq.K, T0, T1)
    b = ego_flow(2 * seq.depth[0], seq.K, T0, T1)
    np.testing.assert_allclose(a, b, atol=1e-9)


def _oracle(seq):
    return NoisyOraclePrior(noise=0.0)(seq)


def test_static_scene_few_false_positives():
    w = RevisitWorld(seed=2, n_actors=0)
    seq = make_visits(w, 1, 6)[0]
    det = MotionCueDetector(MotionCueConfig(flow_method="gt_noise", flow_noise_px=0.1))
    masks = det.detect_sequence(seq, _oracle(seq))["final"]
    assert masks.mean() < 0.005


def _actor_sequence(direction, n=9, speed=1.2, size=(0.4, 0.4, 1.3), z0=0.0):
    """A static camera watching one actor that moves `direction` (world) at `speed` m/s."""
    w = RevisitWorld(seed=3, n_static=0, n_actors=1)
    centre = np.r_[w.room[:2] / 2, 1.4]
    eye = centre - np.array([1.5, 0, 0])
    pose = look_at(eye, centre + np.array([0, 0, -0.4 if z0 == 0 else 0.0]))
    actor = w.actors(0)[0]
    from dataclasses import replace

    start = np.r_[centre[:2] + np.array([0.6, 0.0]) - np.array(size[:2]) / 2, z0]
    actor = replace(
        actor,
        lo=start,
        hi=start + np.array(size),
        velocity=np.asarray(direction, float) * speed,
        bounds=(0.0, 5.0),
    )
    w.actors = lambda visit: [actor]
    K = np.array([[60.0, 0, 39.5], [0, 60.0, 31.5], [0, 0, 1]])
    times = np.arange(n) / 10.0
    frames = [w.render(pose, K, t) for t in times]
    return Sequence(
        rgb=np.stack([f["rgb"] for f in frames]),
        depth=np.stack([f["depth"] for f in frames]),
        K=K,
        times=times,
        poses=np.stack([pose] * n),
        dyn_mask=np.stack([f["dyn_mask"] for f in frames]),
        world=w,
    )


def test_translating_actor_detected():
    seq = _actor_sequence([0, 1, 0])
    det = MotionCueDetector(MotionCueConfig(flow_method="gt_noise", flow_noise_px=0.1))
    m = det.detect_sequence(seq, _oracle(seq))["final"]
    assert mask_iou(m[2:-2], seq.dyn_mask[2:-2]) > 0.8


def test_global_mean_move_cancels_constant_bias():
    seq = _actor_sequence([0, 1, 0])
    pri = _oracle(seq)

    class Biased(FlowCache):
        def __call__(self, i, j):
            return super().__call__(i, j) + np.array([2.5, -1.5])[:, None, None] * np.sign(j - i)

    outs = {}
    for gmm in (True, False):
        det = MotionCueDetector(
            MotionCueConfig(flow_method="gt_noise", flow_noise_px=0.1, global_mean_move=gmm)
        )
        clean = det.stages(seq, pri, 4, FlowCache(seq, "gt_noise", 0.1))["vote"]
        biased = det.stages(seq, pri, 4, Biased(seq, "gt_noise", 0.1))["vote"]
        outs[gmm] = mask_iou(clean, biased)
    assert outs[True] > 0.95
    assert outs[False] < 0.5


def test_colinear_actor_needs_depth_cue():
    # a small cube walking straight at the camera, along its optical axis
    seq = _actor_sequence([-1, 0, 0], speed=0.8, size=(0.4, 0.4, 0.4), z0=1.2)
    pri = _oracle(seq)
    cfg = MotionCueConfig(
        flow_method="gt_noise", flow_noise_px=0.1, refine="none", vote_min=2, depth_rel_tol=0.03
    )
    det = MotionCueDetector(cfg)
    st = det.stages(seq, pri, 4, det.flows(seq))
    gt = seq.dyn_mask[4]
    flow_recall = (st["vote"] & gt).sum() / gt.sum()
    depth_recall = (st["depth"] & gt).sum() / gt.sum()
    assert flow_recall < 0.5
    assert depth_recall > 0.8


def test_dis_flow_accurate_on_static_pixels(visits):
    seq = visits[0]
    f, valid = seq.gt_flow(3, 4)
    fo = observed_flow(seq.rgb[3], seq.rgb[4], "dis")
    st = valid & ~seq.dyn_mask[3]
    assert np.median(np.linalg.norm(fo - f, axis=0)[st]) < 0.5


def test_priors_validate_length(visits):
    p = NoisyOraclePrior()(visits[0])
    with pytest.raises(ValueError, match="frames"):
        Priors(p.depth[:3], p.poses[:3], p.K, p.conf[:3]).validate(len(visits[0]))
