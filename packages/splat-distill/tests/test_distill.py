"""Spec §12 tests 8 and 11: loss and EMA, checkpoint export and resume, and one real SnD step."""

import copy

import pytest
import torch

from iclr26.splat_distill import (
    DINOHead,
    SnDConfig,
    SplatAndDistill,
    TinyViT,
    dino_ce_loss,
    ema_update,
    load_pretrained_vfm,
    make_dataset,
    triplet_batch,
)  # fmt: skip
from iclr26.splat_distill.models import save_vfm


def _vit():
    torch.manual_seed(0)
    return TinyViT(img_size=32, patch=4, dim=24, depth=1, heads=2)


@pytest.fixture(scope="module")
def data():
    return make_dataset(3, n_views=4, size=32, seed=3)


def test_loss_is_minimised_by_the_teacher_distribution():
    torch.manual_seed(0)
    t = torch.randn(10, 7)
    p = torch.softmax(t, -1)
    entropy = -(p * p.log()).sum(-1).mean()
    torch.testing.assert_close(dino_ce_loss(t.clone(), t), entropy)
    for _ in range(5):  # any other student distribution costs more (Gibbs' inequality)
        assert dino_ce_loss(t + torch.randn(10, 7), t) > entropy
    # teacher side is detached; weights pick tokens; zero weights give 0, not NaN
    s = torch.randn(10, 7, requires_grad=True)
    tt = torch.randn(10, 7, requires_grad=True)
    dino_ce_loss(s, tt).backward()
    assert tt.grad is None
    assert s.grad is not None
    w = torch.zeros(10)
    w[3] = 1
    torch.testing.assert_close(dino_ce_loss(t, t, weights=w), -(p[3] * p[3].log()).sum())
    assert dino_ce_loss(s, tt, weights=torch.zeros(10)) == 0


def test_ema_extremes():
    a, b = DINOHead(4, 8, 4, 16), DINOHead(4, 8, 4, 16)
    before = copy.deepcopy(a.state_dict())
    ema_update(a, b, 1.0)
    for k, v in a.state_dict().items():
        torch.testing.assert_close(v, before[k])
    ema_update(a, b, 0.0)
    for k, v in a.state_dict().items():
        torch.testing.assert_close(v, b.state_dict()[k])
    with pytest.raises(ValueError, match="momentum"):
        ema_update(a, b, 1.5)


def test_snd_step_trains_student_only_and_ema_every_k(data):
    cfg = SnDConfig(
        render_size=16,
        lift_stride=2,
        ema_every=2,
        ema_momentum=0.5,
        n_prototypes=64,
        head_hidden=32,
        head_bottleneck=16,
    )
    snd = SplatAndDistill(_vit(), cfg)
    assert all(not p.requires_grad for p in snd.teacher.parameters())
    t0 = copy.deepcopy(snd.teacher.state_dict())
    s0 = copy.deepcopy(snd.student.state_dict())
    g = torch.Generator().manual_seed(0)
    batch = triplet_batch(data, 2, generator=g)
    tg = snd.splat_targets(batch)
    assert tg["target"].shape == (2, 24, 8, 8)
    assert tg["valid"].float().mean() > 0.8
    loss, _logs = snd.training_step(batch)
    assert torch.isfinite(loss)
    assert any(not torch.equal(v, s0[k]) for k, v in snd.student.state_dict().items())
    assert all(torch.equal(v, t0[k]) for k, v in snd.teacher.state_dict().items())  # no EMA yet
    snd.training_step(batch)  # step 2: EMA with m = 0.5
    for k, v in snd.teacher.state_dict().items():
        if v.is_floating_point():
            torch.testing.assert_close(v, 0.5 * t0[k] + 0.5 * snd.student.state_dict()[k])


def test_repeated_step_reduces_the_loss_on_a_fixed_batch(data):
    cfg = SnDConfig(render_size=16, lift_stride=2, lr=1e-3, ema_momentum=1.0, n_prototypes=64,
                    head_hidden=32, head_bottleneck=16, tau_t=0.1, tau_s=0.1)  # fmt: skip
    snd = SplatAndDistill(_vit(), cfg)
    batch = triplet_batch(data, 2, generator=torch.Generator().manual_seed(1))
    first = float(snd.training_step(batch)[0])
    for _ in range(15):
        last = float(snd.training_step(batch)[0])
    assert last < first - 0.05


def test_export_loads_strictly_and_checkpoint_resumes(tmp_path, data):
    cfg = SnDConfig(
        render_size=16, lift_stride=2, n_prototypes=32, head_hidden=16, head_bottleneck=8
    )
    snd = SplatAndDistill(_vit(), cfg)
    g = torch.Generator().manual_seed(0)
    snd.training_step(triplet_batch(data, 1, generator=g))
    sd = snd.export_backbone()
    fresh = TinyViT(img_size=32, patch=4, dim=24, depth=1, heads=2)
    fresh.load_state_dict(sd, strict=True)
    x = data.rgb[0, :2]
    torch.testing.assert_close(fresh.eval()(x), snd.student.eval()(x))
    # safetensors round trip through the public loader
    save_vfm(snd.student, tmp_path / "s.safetensors")
    torch.testing.assert_close(
        load_pretrained_vfm(str(tmp_path / "s.safetensors"))(x), snd.student(x)
    )
    # resume: continuing from a checkpoint equals continuing in memory
    ck = copy.deepcopy(snd.checkpoint())
    b = triplet_batch(data, 1, generator=g)
    snd.training_step(b)
    other = SplatAndDistill(_vit(), cfg)
    other.load_checkpoint(ck)
    other.training_step(b)
    for k, v in other.student.state_dict().items():
        torch.testing.assert_close(v, snd.student.state_dict()[k])
    assert other.steps == snd.steps == 2
    with pytest.raises(ValueError, match="SnDConfig"):
        SplatAndDistill(_vit(), SnDConfig(render_size=8)).load_checkpoint(ck)


def test_shipped_vfm_loads():
    m = load_pretrained_vfm()
    assert m.config["img_size"] == 32
    out = m(torch.rand(1, 3, 32, 32))
    assert out.shape == (1, m.embed_dim, 8, 8)
    assert torch.isfinite(out).all()
