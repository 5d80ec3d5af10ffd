"""Synthetic DVS-like event streams: shapes, polarity semantics, determinism, bad input."""

import numpy as np
import pytest
import torch

from iclr26.safa_snn import EVENT_CLASSES, load_events_fscil, make_sessions
from iclr26.safa_snn.fscil import FSCILProtocol


def test_shapes_binary_and_deterministic():
    a = load_events_fscil(T=5, size=16, train_per_class=3, test_per_class=2, seed=3)
    assert a.x_train.shape == (11 * 3, 5, 2, 16, 16)
    assert a.x_test.shape == (11 * 2, 5, 2, 16, 16)
    assert set(torch.unique(a.x_train).tolist()) <= {0.0, 1.0}
    assert a.classes == tuple(range(11))
    assert len(EVENT_CLASSES) == 11
    b = load_events_fscil(T=5, size=16, train_per_class=3, test_per_class=2, seed=3)
    assert torch.equal(a.x_train, b.x_train)
    assert torch.equal(a.y_test, b.y_test)
    c = load_events_fscil(T=5, size=16, train_per_class=3, test_per_class=2, seed=4)
    assert not torch.equal(a.x_train, c.x_train)


def test_polarity_follows_motion_direction():
    # noise-free: a bar moving right leaves OFF events behind (left) and ON events ahead (right)
    d = load_events_fscil(4, T=6, size=32, train_per_class=4, test_per_class=1, noise=0.0, seed=0)
    cols = np.arange(32)
    for k, sign in ((0, 1.0), (1, -1.0)):  # bar right, bar left
        x = d.x_train[d.y_train == k].numpy()
        on = (x[:, :, 0].sum(axis=2) * cols).sum(-1)  # column-weighted ON counts [n, T]
        off = (x[:, :, 1].sum(axis=2) * cols).sum(-1)
        n_on, n_off = x[:, :, 0].sum(axis=(2, 3)), x[:, :, 1].sum(axis=(2, 3))
        assert (n_on > 0).all()
        assert (n_off > 0).all()
        centroid_gap = on / n_on - off / n_off  # ON centroid minus OFF centroid, per frame
        assert (sign * centroid_gap > 0).all()
        # the pattern moves: the ON centroid advances across frames
        c_on = on / n_on
        assert (sign * np.diff(c_on, axis=1) > 0).mean() > 0.9


def test_noise_rate_and_fscil_protocol():
    d = load_events_fscil(T=4, size=16, train_per_class=2, test_per_class=2, noise=0.2, seed=1)
    assert 0.2 <= float(d.x_train.mean()) < 0.5
    protocol = FSCILProtocol(base_classes=6, way=1, shot=1, sessions=5, seed=0)
    sessions = make_sessions(d, protocol)
    assert [len(s.train_idx) for s in sessions[1:]] == [1] * 5


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"classes": 12}, "classes"),
        ({"classes": 1}, "classes"),
        ({"T": 0}, "T"),
        ({"T": 2.0}, "T"),
        ({"size": 4}, "size"),
        ({"noise": float("nan")}, "noise"),
        ({"noise": 1.0}, "noise"),
        ({"contrast_threshold": 0.0}, "contrast_threshold"),
        ({"train_per_class": 0}, "train_per_class"),
    ],
)
def test_bad_inputs(kw, match):
    with pytest.raises(ValueError, match=match):
        load_events_fscil(**kw)


def test_regulation_on_event_frames_uses_per_channel_rates():
    # E3's path: [B, T, 2, H, W] frames through the conv net; every sparsity-aware layer's rate
    # is its spikes averaged over batch, time and space per channel, and one adapt step moves
    # θ by exactly −A (rate − r̄_b)
    from iclr26.safa_snn import SparsityAwareLIF, SpikingConvNet, set_phase

    data = load_events_fscil(3, T=4, size=8, train_per_class=4, test_per_class=2, seed=1)
    net = SpikingConvNet(2, img_size=8, T=4, widths=(4,), feat_dim=8, mask_seed=0).eval()
    lif = next(m for m in net.modules() if isinstance(m, SparsityAwareLIF))
    spikes = []
    lif.register_forward_hook(lambda m, i, o: spikes.append(o.detach()))
    set_phase(net, "record")
    net.features(data.x_train)
    base = spikes[-1].mean(dim=(0, 1, 3, 4))
    torch.testing.assert_close(lif.base_rate, base)
    theta0 = lif.threshold.detach().clone()
    set_phase(net, "adapt")
    net.features(data.x_test[:1])
    rate = spikes[-1].mean(dim=(0, 1, 3, 4))
    torch.testing.assert_close(lif.threshold.detach(), theta0 - lif.coefficients() * (rate - base))
    assert not torch.equal(rate, base)
