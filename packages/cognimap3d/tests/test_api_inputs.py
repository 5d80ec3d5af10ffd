"""Every function in the README API table refuses bad input with an error naming the argument."""

import numpy as np
import pytest

from iclr26.cognimap3d import (
    CogniMap3D,
    CogniMap3DConfig,
    MemoryBank,
    MotionCueConfig,
    NoisyOraclePrior,
    PoseGraph,
    RevisitWorld,
    adjoint_se3,
    ate,
    backproject,
    depth_metrics,
    descriptor_2d,
    descriptor_3d,
    ego_flow,
    estimate_normals,
    gray_u8,
    icp,
    jr_inv_se3,
    kdtree,
    make_visits,
    mask_iou,
    median_depth,
    observed_flow,
    recon_metrics,
    rpe,
    tree_points,
    umeyama,
    warp_depth,
)

K = np.array([[60.0, 0, 39.5], [0, 60.0, 31.5], [0, 0, 1]])
D = np.full((64, 80), 2.0)
E = np.eye(4)
NOT_ROT = np.diag([1.0, 2.0, 1.0, 1.0])
NAN_D = D.copy()
NAN_D[3, 3] = np.nan
ZERO_D = D.copy()
ZERO_D[0, 0] = 0.0
P3 = np.random.default_rng(0).normal(size=(30, 3))

CASES = [
    (lambda: umeyama(P3, P3[:, :2]), ValueError, "dst"),
    (lambda: umeyama(P3[:2], P3[:2]), ValueError, "at least 3"),
    (lambda: ate(np.stack([E] * 4), np.stack([E] * 3)), ValueError, "same length"),
    (lambda: ate(np.stack([NOT_ROT] * 4), np.stack([E] * 4)), ValueError, "est"),
    (lambda: ate(np.stack([E] * 4), np.stack([E] * 4), align="affine"), ValueError, "align"),
    (lambda: rpe(np.stack([E] * 4), np.stack([E] * 4), delta=0), ValueError, "delta"),
    (lambda: depth_metrics(D, D[:3]), ValueError, "gt"),
    (lambda: depth_metrics(D, D, mask=np.ones_like(D)), TypeError, "mask"),
    (lambda: recon_metrics(P3, P3, thresh=0), ValueError, "thresh"),
    (lambda: mask_iou(np.ones((2, 2)), np.ones((2, 2), bool)), TypeError, "boolean"),
    (lambda: backproject(D, np.eye(2)), ValueError, "K"),
    (lambda: backproject(np.full((4, 4), np.inf), K), ValueError, "inf"),
    (lambda: ego_flow(NAN_D, K, E, E), ValueError, "depth"),
    (lambda: ego_flow(ZERO_D, K, E, E), ValueError, "depth"),
    (lambda: ego_flow(D, K, NOT_ROT, E), ValueError, "T_w_src"),
    (lambda: ego_flow(D, K[:2], E, E), ValueError, "K"),
    (lambda: observed_flow(D, D[:10]), ValueError, "same size"),
    (lambda: observed_flow(D, D, method="raft"), ValueError, "method"),
    (lambda: observed_flow(D, D, method="gt_noise"), ValueError, "gt"),
    (lambda: icp(P3, P3, max_corr=-1), ValueError, "max_corr"),
    (lambda: icp(P3[:, :2], P3), ValueError, "src"),
    (lambda: icp(P3, P3, T_init=NOT_ROT), ValueError, "T_init"),
    (lambda: icp(P3, P3, method="gicp"), ValueError, "method"),
    (lambda: icp(P3, P3, backend="pcl"), ValueError, "backend"),
    (lambda: icp(P3, P3, method="point_to_plane", with_scale=True), ValueError, "with_scale"),
    (lambda: icp(P3, P3, backend="small_gicp", trim=0.5), ValueError, "trim"),
    (lambda: icp(P3, P3, tol=-1), ValueError, "tol"),
    (lambda: icp(P3, P3, workers=0), ValueError, "workers"),
    (lambda: kdtree(P3[:, :2]), ValueError, "points"),
    (lambda: tree_points(P3), TypeError, "tree"),
    (lambda: median_depth(ZERO_D), ValueError, "depth"),
    (lambda: gray_u8(np.ones((4, 4, 2))), ValueError, "img"),
    (lambda: warp_depth(D, K, E, np.stack([E, NOT_ROT])), ValueError, "T_w_dst"),
    (lambda: icp(P3, P3, dst_normals=P3), ValueError, "dst_normals"),
    (lambda: icp(P3, P3, method="point_to_plane", dst_normals=P3[:2]), ValueError, "dst_normals"),
    (lambda: estimate_normals(P3, k=2), ValueError, "k"),
    (lambda: estimate_normals(P3, k=len(P3) + 1), ValueError, "k"),
    (lambda: estimate_normals(np.full((5, 3), np.nan)), ValueError, "points"),
    (lambda: descriptor_2d(D), ValueError, "rgb"),
    (lambda: descriptor_3d(P3[:2]), ValueError, "points"),
    (lambda: MemoryBank(voxel=0), ValueError, "voxel"),
    (lambda: MemoryBank(vote_min=9, vote_window=5), ValueError, "vote_min"),
    (lambda: MemoryBank(top_k=1.5), TypeError, "top_k"),
    (lambda: MemoryBank().verify(P3, 3, E), ValueError, "scene_id"),
    (lambda: MemoryBank().update(0, P3, None, []), ValueError, "scene_id"),
    (lambda: MemoryBank().store(np.full((5, 3), np.nan), None, []), ValueError, "points"),
    (lambda: PoseGraph().add_between(0, 0, E, np.ones(6)), ValueError, "two different"),
    (lambda: PoseGraph().add_landmarks(0, P3, P3[:5], 0.1), ValueError, "q_cam"),
    (lambda: PoseGraph().add_landmarks(0, P3[:, :2], P3[:, :2], 0.1), ValueError, "p_world"),
    (lambda: PoseGraph().add_landmarks(0, P3, P3, 0.0), ValueError, "sigma"),
    (lambda: PoseGraph().add_landmarks(0, P3, P3, 0.1, robust="tukey"), ValueError, "robust"),
    (lambda: PoseGraph().add_landmarks(-1, P3, P3, 0.1), ValueError, "i"),
    (
        lambda: PoseGraph().add_landmarks(0, np.full((4, 3), np.nan), P3[:4], 0.1),
        ValueError,
        "p_world",
    ),
    (lambda: PoseGraph().add_landmarks(0, P3[:0], P3[:0], 0.1), ValueError, "empty"),
    (lambda: PoseGraph().add_prior(0, E, -np.ones(6)), ValueError, "sigmas6"),
    (lambda: PoseGraph().add_prior(0, NOT_ROT, np.ones(6)), ValueError, "rotations"),
    (lambda: PoseGraph().add_pose_anchor(0, E, np.ones(6), robust="tukey"), ValueError, "robust"),
    (lambda: _graph_no_prior().optimize({0: E, 1: E}), ValueError, "gauge"),
    (lambda: _graph_with_prior().optimize({0: E}), ValueError, "initial"),
    (
        lambda: _graph_with_prior().optimize({0: E, 1: E}, linear_solver="cg"),
        ValueError,
        "linear_solver",
    ),
    (lambda: jr_inv_se3(np.zeros(3)), ValueError, "xi"),
    (lambda: jr_inv_se3(np.full(6, np.nan)), ValueError, "xi"),
    (lambda: adjoint_se3(np.eye(3)), ValueError, "T"),
    (lambda: MotionCueConfig(vote_min=0), ValueError, "vote_min"),
    (lambda: MotionCueConfig(pair_offsets=(0, 1)), ValueError, "pair_offsets"),
    (lambda: MotionCueConfig(flow_method="raft"), ValueError, "flow_method"),
    (lambda: CogniMap3DConfig(masking="sam2"), ValueError, "masking"),
    (lambda: CogniMap3DConfig(keyframe_stride=0), ValueError, "keyframe_stride"),
    (lambda: CogniMap3D(prior=None), TypeError, "prior"),
    (lambda: CogniMap3D(prior=NoisyOraclePrior()).process_visit("seq"), TypeError, "seq"),
    (lambda: NoisyOraclePrior(depth_scale=(1.3, 0.7)), ValueError, "depth_scale"),
    (lambda: NoisyOraclePrior(noise=-1), ValueError, "noise"),
    (lambda: RevisitWorld(seed=-1), ValueError, "seed"),
    (lambda: RevisitWorld(room=(0.5, 3, 3)), ValueError, "room"),
    (lambda: make_visits(RevisitWorld(), n_visits=0), ValueError, "n_visits"),
    (lambda: make_visits(RevisitWorld(), frames_per_visit=2.0), TypeError, "frames_per_visit"),
]


def _graph_no_prior():
    g = PoseGraph()
    g.add_between(0, 1, E, np.ones(6))
    return g


def _graph_with_prior():
    g = _graph_no_prior()
    g.add_prior(0, E, np.ones(6))
    return g


@pytest.mark.parametrize(("call", "exc", "match"), CASES)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_sequence_validation(visits):
    import copy

    s = copy.copy(visits[0])
    s.times = s.times[::-1].copy()
    with pytest.raises(ValueError, match="strictly increasing"):
        s.validate()
    s = copy.copy(visits[0])
    s.depth = s.depth.copy()
    s.depth[0, 0, 0] = np.inf
    with pytest.raises(ValueError, match="inf"):
        s.validate()
