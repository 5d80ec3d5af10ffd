"""The official spiking VGG9 and a Spiking ResNet-20: shapes, spike rates, gradient routing by
phase, threshold regulation, energy counting, and a SAFA run on top of them."""

import numpy as np
import pytest
import torch

from iclr26.safa_snn import (
    SAFA,
    FSCILData,
    FSCILProtocol,
    SparsityAwareLIF,
    SpikingResNet20,
    SpikingVGG9,
    count_sops,
    run_fscil,
    set_phase,
    train_base,
)


def _vgg(**kw):
    return SpikingVGG9(
        3, img_size=16, T=3, feat_dim=24, num_classes=5, width=0.125, mask_seed=0, **kw
    )


def _resnet(**kw):
    return SpikingResNet20(
        3, img_size=16, T=3, feat_dim=24, num_classes=5, widths=(4, 8, 8), mask_seed=0, **kw
    )


BUILDERS = {"vgg9": _vgg, "resnet20": _resnet}


@pytest.mark.parametrize("name", BUILDERS)
def test_shapes_static_and_event_input(name):
    torch.manual_seed(0)
    m = BUILDERS[name]()
    assert m(torch.rand(2, 3, 16, 16)).shape == (2, 3, 5)
    assert m.features(torch.rand(2, 3, 16, 16)).shape == (2, 3, 24)  # direct encoding, T = 3
    assert m.features(torch.rand(2, 7, 3, 16, 16)).shape == (2, 7, 24)  # frames [B, T, C, H, W]
    with pytest.raises(ValueError, match="x must end in"):
        m.features(torch.rand(2, 3, 8, 8))
    with pytest.raises(ValueError, match="NaN"):
        m.features(torch.full((1, 3, 16, 16), float("nan")))


def test_layer_counts_follow_the_architectures():
    vgg = SpikingVGG9(mask_seed=0)
    convs = [m for m in vgg.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 64, 128, 128, 256, 256, 256]
    assert vgg.fc.in_features == 256 * 4 * 4
    assert vgg.fc.out_features == 1024
    assert len(vgg.neurons()) == 7
    res = SpikingResNet20(mask_seed=0)
    weight_layers = [
        m for n, m in res.named_modules()
        if isinstance(m, torch.nn.Conv2d | torch.nn.Linear) and "shortcut" not in n and n != "head"
    ]  # fmt: skip
    assert len(weight_layers) == 20  # stem + 18 block convs + the feature layer
    assert len(res.neurons()) == 19
    # per-channel thresholds, one per output channel of every spiking layer
    assert all(n.threshold.shape == (n.num_channels,) for n in res.neurons())
    with pytest.raises(ValueError, match="multiple of 8"):
        SpikingVGG9(img_size=20)
    with pytest.raises(ValueError, match="widths"):
        SpikingResNet20(widths=(4, 8))


@pytest.mark.parametrize("name", BUILDERS)
def test_spike_rates_are_neither_dead_nor_saturated(name):
    torch.manual_seed(1)
    m = BUILDERS[name]().train()
    m.features(torch.rand(8, 3, 16, 16))
    rates = [float(n.last_rate.mean()) for n in m.neurons()]
    assert all(0.02 < r < 0.6 for r in rates), rates
    # spike_count is the exact number of spikes of the last forward
    n0 = m.neurons()[0]
    assert float(n0.spike_count) == pytest.approx(
        float(n0.last_rate.mean()) * 8 * 3 * n0.num_channels * 16 * 16
    )


@pytest.mark.parametrize("name", BUILDERS)
def test_gradient_routing_by_phase(name):
    torch.manual_seed(2)
    x = torch.rand(4, 3, 16, 16)
    for phase, theta_grad in (("base", True), ("adapt", False), ("frozen", False)):
        m = BUILDERS[name]().train()
        set_phase(m, phase)
        m(x).square().sum().backward()
        for n in m.neurons():
            assert (n.threshold.grad is not None) == theta_grad, (phase, n)
        if theta_grad:
            assert sum(float(n.threshold.grad.abs().sum()) for n in m.neurons()) > 0
        first_conv = next(c for c in m.modules() if isinstance(c, torch.nn.Conv2d))
        assert first_conv.weight.grad is not None
        assert first_conv.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("name", BUILDERS)
def test_threshold_regulation_runs_in_every_layer(name):
    torch.manual_seed(3)
    m = BUILDERS[name]().train()
    set_phase(m, "record")
    m.features(torch.rand(16, 3, 16, 16))
    before = [n.threshold.detach().clone() for n in m.neurons()]
    base = [n.base_rate.clone() for n in m.neurons()]
    set_phase(m, "adapt")
    m.features(torch.rand(4, 3, 16, 16) * 3)
    changed = 0
    for n, th, rb in zip(m.neurons(), before, base, strict=True):
        assert isinstance(n, SparsityAwareLIF)
        expected = th - n.coefficients() * (n.last_rate - rb)
        torch.testing.assert_close(n.threshold.detach(), expected)
        changed += int(not torch.equal(n.threshold.detach(), th))
    assert changed == len(m.neurons())


def _reach(size: int, k: int, stride: int, pad: int) -> np.ndarray:
    """How many output positions each input position of a 1-D conv feeds (by enumeration)."""
    out = (size + 2 * pad - k) // stride + 1
    r = np.zeros(size, dtype=np.int64)
    for o in range(out):
        for j in range(k):
            i = o * stride - pad + j
            if 0 <= i < size:
                r[i] += 1
    return r


def test_energy_counter_hand_count_on_resnet_blocks():
    torch.manual_seed(4)
    m = _resnet().eval()
    for n in m.neurons():
        n.threshold.data.fill_(0.05)  # an untrained net in eval mode barely spikes otherwise
    seen = {}

    def keep(name):
        def hook(mod, inputs, output):
            seen.setdefault(name, inputs[0].clone())  # returns None: the output is unchanged

        return hook

    hooks = [
        mod.register_forward_hook(keep(name))
        for name, mod in m.named_modules()
        if isinstance(mod, torch.nn.Conv2d)
    ]
    x = torch.rand(2, 3, 16, 16)
    rep = count_sops(m, x)
    for h in hooks:
        h.remove()
    layers = {c.name: c for c in rep.layers}
    # the stem sees the analogue image at each of the T steps: dense MACs
    assert layers["stem.conv"].kind == "MAC"
    assert layers["stem.conv"].macs == 2 * 3 * 16 * 16 * 4 * 3 * 9
    checked = 0
    for name, mod in m.named_modules():
        if not isinstance(mod, torch.nn.Conv2d) or name == "stem.conv":
            continue
        s = seen[name].numpy()  # [B·T, C, H, W] spikes
        assert set(np.unique(s)) <= {0.0, 1.0}
        k, st, p = mod.kernel_size[0], mod.stride[0], mod.padding[0]
        rh = _reach(s.shape[2], k, st, p)
        rw = _reach(s.shape[3], k, st, p)
        hand = float((s * rh[:, None] * rw[None, :]).sum() * mod.out_channels)
        assert layers[name].kind == "SOP"
        assert layers[name].sops == pytest.approx(hand), name
        checked += int(hand > 0)
    assert checked >= 10  # most layers spiked
    assert rep.sops == pytest.approx(sum(c.sops for c in rep.layers) / 2)


def test_safa_runs_on_resnet20_with_prototypes_and_regulation():
    g = torch.Generator().manual_seed(0)
    centers = torch.rand(6, 3, 8, 8, generator=g)
    y_tr, y_te = torch.arange(6).repeat_interleave(12), torch.arange(6).repeat_interleave(6)
    x_tr = (centers[y_tr] + 0.1 * torch.randn(len(y_tr), 3, 8, 8, generator=g)).clamp(0, 1)
    x_te = (centers[y_te] + 0.1 * torch.randn(len(y_te), 3, 8, 8, generator=g)).clamp(0, 1)
    data = FSCILData(x_tr, y_tr, x_te, y_te, classes=tuple(range(6)))
    protocol = FSCILProtocol(base_classes=4, way=1, shot=3, sessions=2, seed=0)
    torch.manual_seed(0)
    model = SpikingResNet20(3, img_size=8, T=2, feat_dim=16, num_classes=4, widths=(4, 4, 8),
                            blocks=1, mask_seed=0)  # fmt: skip
    base = protocol.base_classes
    idx = (data.y_train[:, None] == torch.arange(6)[:base]).any(1)
    train_base(model, x_tr[idx], y_tr[idx], tuple(range(6))[:base], epochs=3, seed=0)
    with_reg = run_fscil(SAFA(alpha=0.1), data, protocol, model, seed=0)
    without = run_fscil(SAFA(alpha=0.1, regulate=False), data, protocol, model, seed=0)
    assert len(with_reg.acc) == 3
    assert all(0.0 <= a <= 1.0 for a in with_reg.acc)
    assert with_reg.thresholds[-1] != without.thresholds[-1]  # the rule moved θ
    assert with_reg.thresholds[0] == without.thresholds[0]
    assert with_reg.session_energy[1] > without.session_energy[1] > 0


def test_relu_twin_has_the_same_layers_and_counts_only_macs():
    from iclr26.safa_snn import ReLUNeuron, SpikingConvNet, SpikingMLP, count_sops

    snn = SpikingMLP(16, hidden=(32,), feat_dim=8, T=4, num_classes=3)
    ann = SpikingMLP(16, hidden=(32,), feat_dim=8, T=1, num_classes=3, neuron="relu")
    shapes = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters() if "thresh" not in n]  # noqa: E731
    assert shapes(snn) == shapes(ann)
    assert not ann.neurons()
    assert any(isinstance(m, ReLUNeuron) for m in ann.modules())
    x = torch.rand(5, 16)
    f = ann.eval().features(x)
    assert f.shape == (5, 1, 8)
    assert (ann.layers[2](torch.tensor([-1.0, 2.0])) == torch.tensor([0.0, 2.0])).all()
    rep = count_sops(ann, x)
    assert rep.sops == 0
    assert rep.macs == 16 * 32 + 32 * 8 + 8 * 3
    conv = SpikingConvNet(16, img_size=8, T=1, widths=(4,), feat_dim=6, neuron="relu")
    assert conv.features(torch.rand(2, 16, 8, 8)).shape == (2, 1, 6)
