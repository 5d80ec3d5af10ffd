"""Depth sources of the Gaussian lifting: noisy oracle depth, the learned DepthNet (shipped and
trained from random init), and SnD steps that use them."""

import pytest
import torch

from iclr26.splat_distill import (
    DepthNet,
    SnDConfig,
    SplatAndDistill,
    TinyViT,
    constant_depth_baseline,
    depth_errors,
    load_depth_net,
    make_dataset,
    noisy_depth,
    train_depth_net,
    triplet_batch,
)


@pytest.fixture(scope="module")
def held_out():
    return make_dataset(3, n_views=6, size=32, seed=40_000)  # seeds the depth net never saw


def test_noisy_depth_is_seeded_smooth_and_has_the_requested_log_error():
    d = 1 + torch.rand(4, 32, 32) * 3
    a = noisy_depth(d, 0.2, generator=torch.Generator().manual_seed(0))
    b = noisy_depth(d, 0.2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    assert (a > 0).all()
    e = (a / d).log()
    torch.testing.assert_close(e.std(dim=(1, 2)), torch.full((4,), 0.2), atol=0.01, rtol=0)
    # smooth: neighbouring pixels share most of their error
    corr = torch.corrcoef(torch.stack([e[:, :, :-1].flatten(), e[:, :, 1:].flatten()]))[0, 1]
    assert corr > 0.8
    assert torch.equal(noisy_depth(d, 0.0, generator=torch.Generator()), d)


def test_shipped_depth_net_beats_constant_depth_on_held_out_scenes(held_out):
    net = load_depth_net()
    assert sum(p.numel() for p in net.parameters()) * 4 < 2_000_000
    gt = held_out.depth.flatten(0, 1)
    with torch.no_grad():
        pred = net(held_out.rgb.flatten(0, 1))
    assert pred.shape == gt.shape
    # the constant is the best one in log space from the training distribution's depths
    train_depths = make_dataset(2, n_views=6, size=32, seed=555).depth
    e_net = depth_errors(pred, gt)
    e_const = depth_errors(constant_depth_baseline(train_depths, tuple(gt.shape)), gt)
    assert e_net["log_mae"] < 0.7 * e_const["log_mae"]
    assert e_net["rmse"] < e_const["rmse"]
    assert e_net["delta1"] > e_const["delta1"]


def test_depth_net_trains_from_random_init():
    train = make_dataset(2, n_views=6, size=32, seed=556)
    x, d = train.rgb.flatten(0, 1), train.depth.flatten(0, 1)
    _net, hist = train_depth_net(x, d, steps=40, batch=8, width=4, seed=0)
    _net2, hist2 = train_depth_net(x, d, steps=40, batch=8, width=4, seed=0)
    assert hist["loss"] == hist2["loss"]  # deterministic in the seed
    first, last = sum(hist["loss"][:5]) / 5, sum(hist["loss"][-5:]) / 5
    assert last < 0.9 * first  # 0.43 → 0.35 in 40 steps (deterministic)
    # an untrained net predicts exp(mean log depth) everywhere (zero-initialised output layer)
    fresh = DepthNet(width=4, log_depth_mean=1.0)
    torch.testing.assert_close(fresh(x[:1]), torch.full((1, 32, 32), torch.e))


@pytest.mark.parametrize("source", ["noisy", "learned"])
def test_snd_lifts_with_noisy_or_learned_depth(source, held_out):
    torch.manual_seed(0)
    vit = TinyViT(img_size=32, patch=4, dim=16, depth=1, heads=2)
    cfg = SnDConfig(render_size=16, lift_stride=2, n_prototypes=32, head_hidden=16, head_bottleneck=8,
                    depth=source, depth_noise=0.1)  # fmt: skip
    snd = SplatAndDistill(vit, cfg)
    batch = triplet_batch(held_out, 2, generator=torch.Generator().manual_seed(0))
    d = snd.context_depth(batch)
    assert d.shape == batch["ctx_depth"].shape
    assert (d > 0).all()
    assert not torch.equal(d, batch["ctx_depth"])
    if source == "learned":
        with torch.no_grad():
            torch.testing.assert_close(
                d.flatten(0, 1), load_depth_net()(batch["ctx_rgb"].flatten(0, 1))
            )
    rel = ((d / batch["ctx_depth"]).log()).abs().mean()
    assert rel < 0.3  # close to the true geometry
    loss, logs = snd.training_step(batch)
    assert torch.isfinite(loss)
    assert logs["valid_frac"] > 0.5
