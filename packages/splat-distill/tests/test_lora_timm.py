"""LoRA fine-tuning through peft, the EMA teacher of a LoRA student, exact resume, merged export,
and timm ViTs (built from a config, no download) as student/teacher."""

import copy

import pytest
import torch

from iclr26.splat_distill import SnDConfig, SplatAndDistill, TinyViT, make_dataset, triplet_batch
from iclr26.splat_distill.models import add_lora, is_lora, merge_lora

pytest.importorskip("peft")

HEAD = {"n_prototypes": 32, "head_hidden": 16, "head_bottleneck": 8}


def _vit():
    torch.manual_seed(0)
    return TinyViT(img_size=32, patch=4, dim=24, depth=1, heads=2)


@pytest.fixture(scope="module")
def data():
    return make_dataset(2, n_views=4, size=32, seed=3)


def _split(mod):
    sd = mod.state_dict()
    lora = {k: v.clone() for k, v in sd.items() if "lora_" in k}
    base = {k: v.clone() for k, v in sd.items() if "lora_" not in k}
    return lora, base


def test_lora_at_init_equals_the_full_model():
    m = _vit()
    x = torch.rand(2, 3, 32, 32)
    ref_train, ref_eval = m.train()(x), m.eval()(x)
    snd = SplatAndDistill(m, SnDConfig(lora_rank=8, **HEAD))
    assert is_lora(snd.student)
    assert is_lora(snd.teacher)
    torch.testing.assert_close(snd.student.train()(x), ref_train, rtol=0, atol=0)  # B = 0
    torch.testing.assert_close(snd.student.eval()(x), ref_eval, rtol=0, atol=0)
    torch.testing.assert_close(snd.teacher(x), ref_eval, rtol=0, atol=0)
    trainable = {n for n, p in snd.student.named_parameters() if p.requires_grad}
    assert trainable
    assert all("lora_" in n for n in trainable)
    assert {n.split(".lora_")[0].split(".")[-1] for n in trainable} == {"qkv", "proj"}
    # the optimiser holds the adapters and the student head only
    opt = {id(p) for g in snd.optimizer.param_groups for p in g["params"]}
    want = {id(p) for p in snd.student.parameters() if p.requires_grad}
    want |= {id(p) for p in snd.head_s.parameters() if p.requires_grad}
    assert opt == want


def test_only_adapters_change_and_the_teacher_is_their_ema(data):
    cfg = SnDConfig(
        render_size=16, lift_stride=2, lora_rank=4, lr=1e-2, ema_every=2, ema_momentum=0.5, **HEAD
    )
    snd = SplatAndDistill(_vit(), cfg)
    lora0, base0 = _split(snd.student)
    t_lora0, t_base0 = _split(snd.teacher)
    g = torch.Generator().manual_seed(0)
    snd.training_step(triplet_batch(data, 2, generator=g))
    lora1, base1 = _split(snd.student)
    for k, v in base1.items():
        assert torch.equal(v, base0[k]), k  # frozen base weights untouched
    assert any(not torch.equal(v, lora0[k]) for k, v in lora1.items() if "lora_B" in k)
    for k, v in _split(snd.teacher)[0].items():
        assert torch.equal(v, t_lora0[k])  # no EMA before step 2
    snd.training_step(triplet_batch(data, 2, generator=g))
    s_lora, _ = _split(snd.student)
    t_lora, t_base = _split(snd.teacher)
    for k, v in t_lora.items():
        torch.testing.assert_close(v, 0.5 * t_lora0[k] + 0.5 * s_lora[k])
    for k, v in t_base.items():
        assert torch.equal(v, t_base0[k])


def test_lora_resume_is_exact_with_dropout(tmp_path, data):
    cfg = SnDConfig(render_size=16, lift_stride=2, lora_rank=4, lora_dropout=0.1, lr=1e-2, ema_every=1,
                    ema_momentum=0.9, depth="noisy", **HEAD)  # fmt: skip
    g = torch.Generator().manual_seed(0)
    batches = [triplet_batch(data, 1, generator=g) for _ in range(3)]
    torch.manual_seed(5)
    snd = SplatAndDistill(_vit(), cfg, seed=1)
    snd.training_step(batches[0])
    torch.save(snd.checkpoint(), tmp_path / "c.pt")
    for b in batches[1:]:
        snd.training_step(b)
    torch.manual_seed(123)  # a different global RNG state: the checkpoint restores it
    other = SplatAndDistill(_vit(), cfg, seed=1)
    other.load_checkpoint(torch.load(tmp_path / "c.pt", weights_only=False))
    for b in batches[1:]:
        other.training_step(b)
    for mod in ("student", "teacher", "head_s"):
        a, b = getattr(snd, mod).state_dict(), getattr(other, mod).state_dict()
        for k in a:  # same dropout masks and noise: equal up to float rounding (measured ≤ 1.5e-8)
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=f"{mod} {k}")
    assert other.steps == snd.steps == 3


def test_merged_export_loads_strictly_and_matches_the_lora_student(data):
    cfg = SnDConfig(render_size=16, lift_stride=2, lora_rank=4, lr=1e-2, **HEAD)
    snd = SplatAndDistill(_vit(), cfg)
    g = torch.Generator().manual_seed(0)
    for _ in range(2):
        snd.training_step(triplet_batch(data, 1, generator=g))
    sd = snd.export_backbone()
    assert not any("lora" in k or "base_layer" in k for k in sd)
    fresh = TinyViT(img_size=32, patch=4, dim=24, depth=1, heads=2)
    fresh.load_state_dict(sd, strict=True)
    x = data.rgb[0, :2]
    torch.testing.assert_close(fresh.eval()(x), snd.student.eval()(x), rtol=1e-4, atol=1e-5)
    assert not torch.allclose(fresh(x), _vit().eval()(x))  # the adapters did change the model
    assert is_lora(snd.student)  # merging works on a copy


def test_add_lora_and_merge_lora_directly():
    m = _vit()
    x = torch.rand(1, 3, 32, 32)
    w = add_lora(copy.deepcopy(m), rank=2, alpha=4, dropout=0.0)
    with torch.no_grad():
        for n, p in w.named_parameters():
            if "lora_B" in n:
                p.normal_()
    # merged weight = W + (α/r) B A
    merged = merge_lora(w)
    Wq = m.blocks[0].qkv.weight
    A = dict(w.named_parameters())["base_model.model.blocks.0.qkv.lora_A.default.weight"]
    B = dict(w.named_parameters())["base_model.model.blocks.0.qkv.lora_B.default.weight"]
    torch.testing.assert_close(merged.blocks[0].qkv.weight, Wq + 2.0 * B @ A)
    torch.testing.assert_close(merged.eval()(x), w.eval()(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="targets"):
        add_lora(copy.deepcopy(m), targets=("nothing",))


# -- timm -------------------------------------------------------------------------------------


def _timm(**kw):
    pytest.importorskip("timm")
    from iclr26.splat_distill import TimmViT

    torch.manual_seed(0)
    args = {"img_size": 32, "patch_size": 4, "embed_dim": 24, "depth": 1, "num_heads": 2} | kw
    return TimmViT("vit_small_patch14_reg4_dinov2", **args)


def test_timm_vit_returns_patch_tokens_at_any_size():
    m = _timm().eval()
    assert (m.patch, m.embed_dim, m.num_prefix_tokens) == (4, 24, 5)  # class + 4 registers
    x = torch.rand(2, 3, 32, 32)
    f = m(x)
    assert f.shape == (2, 24, 8, 8)
    ref = m.vit.forward_features((x - m.mean) / m.std)[:, 5:]  # prefix tokens dropped
    torch.testing.assert_close(f.flatten(2).transpose(1, 2), ref)
    # position embeddings are interpolated to another grid
    assert m(torch.rand(1, 3, 16, 24)).shape == (1, 24, 4, 6)
    with pytest.raises(ValueError, match="multiple of patch"):
        m(torch.rand(1, 3, 30, 32))
    import timm

    from iclr26.splat_distill import TimmViT

    fixed = TimmViT(timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8,
                                      embed_dim=16, depth=1, num_heads=2, num_classes=0))  # fmt: skip
    assert fixed(torch.rand(1, 3, 32, 32)).shape == (1, 16, 4, 4)
    with pytest.raises(ValueError, match="dynamic_img_size"):
        fixed(torch.rand(1, 3, 64, 64))


def test_timm_vit_trains_as_a_lora_student(data):
    m = _timm(class_token=True, reg_tokens=0)
    cfg = SnDConfig(render_size=16, lift_stride=2, lora_rank=4, lr=1e-2, **HEAD)
    snd = SplatAndDistill(m, cfg)
    _, base0 = _split(snd.student)
    loss, logs = snd.training_step(
        triplet_batch(data, 1, generator=torch.Generator().manual_seed(0))
    )
    assert torch.isfinite(loss)
    assert logs["valid_frac"] > 0.5
    _, base1 = _split(snd.student)
    assert all(torch.equal(v, base0[k]) for k, v in base1.items())
    sd = snd.export_backbone()
    fresh = _timm(class_token=True, reg_tokens=0)
    fresh.load_state_dict(sd, strict=True)
    x = data.rgb[0, :1]
    torch.testing.assert_close(fresh.eval()(x), snd.student.eval()(x), rtol=1e-4, atol=1e-5)
