"""Spec §12 test 9: correspondence evaluation; the probes and the scene generator."""

import torch

from iclr26.splat_distill import (
    correspondence_recall,
    gt_correspondences,
    linear_probes,
    make_dataset,
    project_points,
    unproject_depth,
)  # fmt: skip


def test_gt_correspondences_round_trip_and_recall_extremes():
    d = make_dataset(1, n_views=3, size=32, seed=4)
    c0, c1 = d.cam(0, 0), d.cam(0, 1)
    uv0, uv1 = gt_correspondences(d.depth[0, 0], c0, d.depth[0, 1], c1, num_corr=200, seed=0)
    assert len(uv0) > 100
    # round trip: unproject view-1 pixels hit by uv1 back to view 0 lands near uv0
    X1 = unproject_depth(d.depth[0, 1], c1)
    j, i = uv1[:, 0].long(), uv1[:, 1].long()
    back, _ = project_points(X1[i, j], c0)
    assert (back - uv0).norm(dim=-1).median() < 1.0
    # a feature map that encodes the 3D point is matched perfectly across views
    f0 = unproject_depth(d.depth[0, 0], c0).permute(2, 0, 1)
    f1 = unproject_depth(d.depth[0, 1], c1).permute(2, 0, 1)
    r = correspondence_recall(
        torch.cat([f0, 1 - f0]), torch.cat([f1, 1 - f1]), uv0, uv1, (32, 32), px_thresholds=(1, 2)
    )
    assert r["recall@2"] > 0.9
    # identical features, identity correspondences: 100 %
    same = correspondence_recall(
        torch.randn(8, 32, 32), torch.randn(8, 32, 32) * 0 + 1, uv0, uv0, (32, 32)
    )
    f = torch.randn(16, 32, 32)
    ident = correspondence_recall(f, f, uv0, uv0, (32, 32), px_thresholds=(0.5,))
    assert ident["recall@0.5"] == 1.0
    assert abs(ident["consistency"] - 1) < 1e-5
    # shuffled (random) features: near chance
    g = torch.Generator().manual_seed(0)
    rnd = correspondence_recall(
        torch.randn(16, 32, 32, generator=g),
        torch.randn(16, 32, 32, generator=g),
        uv0,
        uv1,
        (32, 32),
        px_thresholds=(2,),
    )
    assert rnd["recall@2"] < 0.1
    assert same["n"] == len(uv0)


def test_empty_correspondences_give_nan_not_error():
    r = correspondence_recall(
        torch.randn(4, 8, 8), torch.randn(4, 8, 8), torch.zeros(0, 2), torch.zeros(0, 2), (8, 8)
    )
    assert r["n"] == 0
    assert r["recall@5"] != r["recall@5"]


def test_linear_probes_rank_informative_features_above_noise():
    d = make_dataset(4, n_views=2, size=16, seed=5)
    flat = lambda x: x.flatten(0, 1)  # noqa: E731
    R = d.c2w[..., :3, :3].flatten(0, 1)
    tgt = {
        "depth": flat(d.depth),
        "normals": torch.einsum("nhwk,nkj->nhwj", flat(d.normals), R),
        "semantic": flat(d.semantic),
    }
    good = torch.cat(
        [
            flat(d.depth).log()[:, None],
            tgt["normals"].permute(0, 3, 1, 2),
            torch.nn.functional.one_hot(tgt["semantic"], 4).permute(0, 3, 1, 2).float(),
        ],
        1,
    )
    noise = torch.randn_like(good)
    tr, te = slice(0, 6), slice(6, 8)
    a, b = {k: v[tr] for k, v in tgt.items()}, {k: v[te] for k, v in tgt.items()}
    mg = linear_probes(good[tr], a, good[te], b, n_classes=4, steps=150)
    mn = linear_probes(noise[tr], a, noise[te], b, n_classes=4, steps=150)
    assert mg["rmse"] < mn["rmse"]
    assert mg["normal_mean_deg"] < mn["normal_mean_deg"]
    assert mg["miou"] > mn["miou"]
    assert mg["miou"] > 0.8
    assert mg["normal_mean_deg"] < 20
