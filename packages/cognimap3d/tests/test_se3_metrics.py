import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iclr26.cognimap3d.metrics import ate, depth_metrics, mask_iou, recon_metrics, rpe
from iclr26.cognimap3d.se3 import exp_se3, exp_so3, invert, log_se3, log_so3, umeyama

vec = st.lists(st.floats(-3, 3, allow_nan=False), min_size=6, max_size=6)


@settings(max_examples=60, deadline=None)
@given(vec)
def test_exp_log_roundtrip(xi):
    xi = np.array(xi)
    th = np.linalg.norm(xi[:3])
    if th > np.pi - 1e-3:  # keep the rotation's principal branch
        xi[:3] *= (np.pi - 1e-2) / th
    np.testing.assert_allclose(log_se3(exp_se3(xi)), xi, atol=1e-8)


@pytest.mark.parametrize("theta", [0.0, 1e-9, 1e-5, 0.5, np.pi - 1e-6, np.pi - 1e-9])
def test_so3_log_near_zero_and_pi(theta):
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    R = exp_so3(axis * theta)
    w = log_so3(R)
    np.testing.assert_allclose(exp_so3(w), R, atol=1e-8)
    assert abs(np.linalg.norm(w) - theta) < 1e-6


def test_exactly_pi_either_sign():
    R = exp_so3(np.array([0.0, 0.0, np.pi]))
    w = log_so3(R)
    assert np.allclose(np.abs(w), [0, 0, np.pi], atol=1e-9)


def test_umeyama_recovers_sim3_and_no_reflection(rng):
    src = rng.normal(size=(50, 3))
    R = exp_so3(np.array([0.4, -1.0, 2.0]))
    dst = 2.5 * src @ R.T + np.array([1.0, -2.0, 0.5])
    s, Rh, t = umeyama(src, dst)
    assert abs(s - 2.5) < 1e-10
    np.testing.assert_allclose(Rh, R, atol=1e-10)
    np.testing.assert_allclose(t, [1.0, -2.0, 0.5], atol=1e-10)
    mirrored = src * np.array([1, 1, -1])
    _, Rm, _ = umeyama(src, mirrored, with_scale=False)
    assert np.linalg.det(Rm) > 0


def _traj(rng, n=20):
    P = [np.eye(4)]
    for _ in range(n - 1):
        P.append(P[-1] @ exp_se3(np.r_[rng.normal(0, 0.1, 3), rng.normal(0, 0.3, 3)]))
    return np.stack(P)


def test_ate_sim3_invariance(rng):
    gt = _traj(rng)
    S = exp_se3(np.array([0.3, 0.2, -0.1, 1.0, 2.0, 3.0]))
    est = S @ gt
    est[:, :3, 3] *= 1.7
    assert ate(est, gt, "sim3") < 1e-9
    assert ate(est, gt, "none") > 0.5


def test_ate_matches_evo_formula(rng):
    # evo's APE (translation part, Umeyama with scale) on camera centres, written out
    gt, est = _traj(rng), _traj(np.random.default_rng(5))
    s, R, t = umeyama(est[:, :3, 3], gt[:, :3, 3])
    ref = np.sqrt(np.mean(np.sum((s * est[:, :3, 3] @ R.T + t - gt[:, :3, 3]) ** 2, axis=1)))
    assert abs(ate(est, gt) - ref) < 1e-12


def test_rpe_zero_for_rigidly_moved(rng):
    gt = _traj(rng)
    est = exp_se3(np.array([0.1, 0.2, 0.3, 1, 1, 1])) @ gt
    tr, rot = rpe(est, gt)
    assert tr < 1e-9
    assert rot < 1e-6


def test_depth_metrics_scale_invariant(rng):
    gt = rng.uniform(1, 4, (10, 12))
    pred = gt * (1 + 0.05 * rng.normal(size=gt.shape))
    a = depth_metrics(pred, gt)
    b = depth_metrics(3.7 * pred, gt)
    assert abs(a["abs_rel"] - b["abs_rel"]) < 1e-12
    assert depth_metrics(gt, gt)["delta1"] == 1.0
    assert depth_metrics(gt, gt)["abs_rel"] < 1e-12


def test_recon_and_iou(rng):
    p = rng.normal(size=(200, 3))
    m = recon_metrics(p, p, thresh=0.01)
    assert m["chamfer"] == 0
    assert m["fscore"] == 1
    a = np.zeros((4, 4), bool)
    a[:2] = True
    b = np.zeros((4, 4), bool)
    b[1:3] = True
    assert mask_iou(a, b) == pytest.approx(4 / 12)


def test_invert(rng):
    T = exp_se3(rng.normal(size=6))
    np.testing.assert_allclose(invert(T) @ T, np.eye(4), atol=1e-12)
