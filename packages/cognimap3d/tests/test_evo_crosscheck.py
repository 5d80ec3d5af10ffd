"""Our ATE and RPE agree with evo's APE and RPE (spec §10.1: to 1e-9) on noisy trajectories.

Runs where the ``[evo]`` extra is installed; skips otherwise."""

import copy

import numpy as np
import pytest

from iclr26.cognimap3d.metrics import ate, rpe
from iclr26.cognimap3d.se3 import exp_se3

evo_metrics = pytest.importorskip("evo.core.metrics")
evo_traj = pytest.importorskip("evo.core.trajectory")


def _trajectories(seed: int, n: int = 40):
    rng = np.random.default_rng(seed)
    gt = [np.eye(4)]
    for _ in range(n - 1):
        gt.append(gt[-1] @ exp_se3(np.r_[rng.normal(0, 0.08, 3), rng.normal(0, 0.25, 3)]))
    gt = np.stack(gt)
    # an estimate in another frame and scale, with per-pose noise and drift
    S = exp_se3(np.array([0.4, -0.2, 0.3, 2.0, -1.0, 0.5]))
    est = S @ gt @ np.stack([exp_se3(rng.normal(0, 0.02, 6)) for _ in range(n)])
    est[:, :3, 3] *= 0.6
    return est, gt


def _evo(poses):
    return evo_traj.PoseTrajectory3D(poses_se3=list(poses), timestamps=np.arange(len(poses)))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("align", "scale"), [("sim3", True), ("se3", False), ("none", None)])
def test_ate_equals_evo_ape(seed, align, scale):
    est, gt = _trajectories(seed)
    t_est, t_ref = _evo(est), _evo(gt)
    if scale is not None:
        t_est = copy.deepcopy(t_est)
        t_est.align(t_ref, correct_scale=scale)
    ape = evo_metrics.APE(evo_metrics.PoseRelation.translation_part)
    ape.process_data((t_ref, t_est))
    want = ape.get_statistic(evo_metrics.StatisticsType.rmse)
    assert abs(ate(est, gt, align) - want) < 1e-9


@pytest.mark.parametrize("delta", [1, 3])
def test_rpe_equals_evo_rpe(delta):
    est, gt = _trajectories(4)
    got_t, got_r = rpe(est, gt, delta)
    want = []
    for rel in (
        evo_metrics.PoseRelation.translation_part,
        evo_metrics.PoseRelation.rotation_angle_deg,
    ):
        m = evo_metrics.RPE(rel, delta=delta, delta_unit=evo_metrics.Unit.frames, all_pairs=True)
        m.process_data((_evo(gt), _evo(est)))
        want.append(m.get_statistic(evo_metrics.StatisticsType.rmse))
    assert abs(got_t - want[0]) < 1e-9
    assert abs(got_r - want[1]) < 1e-7
