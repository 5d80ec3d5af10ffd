import numpy as np
import pytest

from iclr26.lifrseg.simulator import EsimSimulator, simulate_from_frames


def test_constant_frames_no_events():
    frames = np.full((5, 6, 7), 0.4)
    ev = simulate_from_frames(frames, np.linspace(0, 0.1, 5))
    assert len(ev) == 0


@pytest.mark.parametrize("sign", [1, -1])
def test_linear_ramp_exact_count_and_times(sign):
    c, k, eps = 0.2, 5, 0.03
    n = 11
    times = np.linspace(0.0, 1.0, n)
    total = k * c + eps
    logs = np.log(0.5) + sign * total * times  # linear in time in log intensity
    log_eps = 1e-3
    frames = (np.exp(logs) - log_eps)[:, None, None] * np.ones((1, 1, 1))
    ev = simulate_from_frames(frames, times, contrast_pos=c, contrast_neg=c, log_eps=log_eps)
    assert len(ev) == k
    assert set(ev.p.tolist()) == {sign}
    expected = np.arange(1, k + 1) * c / total
    np.testing.assert_allclose(ev.t, expected, atol=1e-9)


def test_crossing_on_sample_fires():
    log_eps = 1e-3
    frames = (np.exp(np.log(0.5) + np.array([0.0, 0.2, 0.4])) - log_eps)[:, None, None]
    ev = simulate_from_frames(frames, np.array([0.0, 1.0, 2.0]), log_eps=log_eps)
    assert len(ev) == 2
    np.testing.assert_allclose(ev.t, [1.0, 2.0], atol=1e-9)


def test_random_sequence_polarity_sum_tracks_log_change():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 40)
    base = rng.random((8, 8)) * 0.8 + 0.1
    phase = rng.random((8, 8)) * 6
    frames = np.stack([np.clip(base * (1 + 0.6 * np.sin(3 * ti + phase)), 0.01, 1) for ti in t])
    c = 0.15
    ev = simulate_from_frames(frames, t, contrast_pos=c, contrast_neg=c)
    net = np.zeros((8, 8))
    np.add.at(net, (ev.y, ev.x), ev.p)
    dl = np.log(frames[-1] + 1e-3) - np.log(frames[0] + 1e-3)
    assert np.all(np.abs(net * c - dl) <= c + 1e-9)
    assert np.all(np.diff(ev.t) >= 0)


def test_refractory_suppresses_but_reference_advances():
    log_eps = 1e-3
    frames = (np.exp(np.log(0.5) + np.array([0.0, 1.0])) - log_eps)[
        :, None, None
    ]  # 5 crossings in 1 s
    times = np.array([0.0, 1.0])
    all_ev = simulate_from_frames(frames, times, log_eps=log_eps)
    assert len(all_ev) == 5  # at 0.2, 0.4, ..., 1.0
    ev = simulate_from_frames(frames, times, log_eps=log_eps, refractory_s=0.3)
    np.testing.assert_allclose(ev.t, [0.2, 0.6, 1.0], atol=1e-9)
    # the reference advanced through all 5 levels: no events left to fire on a flat continuation
    sim = EsimSimulator(log_eps=log_eps, refractory_s=0.3)
    sim.reset(frames[0], 0.0)
    sim.step(frames[1], 1.0)
    assert len(sim.step(frames[1], 2.0)) == 0


def test_seeded_noise_and_mismatch_deterministic():
    frames = np.random.default_rng(0).random((4, 6, 6)) + 0.05
    t = np.array([0.0, 0.01, 0.02, 0.03])
    kw = {"contrast_sigma": 0.03, "noise_rate_hz": 50.0, "seed": 7}
    a, b = simulate_from_frames(frames, t, **kw), simulate_from_frames(frames, t, **kw)
    assert np.array_equal(a.t, b.t)
    assert np.array_equal(a.x, b.x)
    c = simulate_from_frames(frames, t, **{**kw, "seed": 8})
    assert len(a) != len(c) or not np.array_equal(a.t, c.t)


def test_bad_inputs():
    with pytest.raises(ValueError, match="contrast_pos"):
        EsimSimulator(contrast_pos=0)
    sim = EsimSimulator()
    with pytest.raises(ValueError, match="reset"):
        sim.step(np.ones((2, 2)), 0.1)
    sim.reset(np.ones((2, 2)), 0.0)
    with pytest.raises(ValueError, match="later"):
        sim.step(np.ones((2, 2)), 0.0)
    with pytest.raises(ValueError, match="NaN"):
        sim.step(np.full((2, 2), np.nan), 0.1)
    with pytest.raises(ValueError, match="strictly increasing"):
        simulate_from_frames(np.ones((3, 2, 2)), np.array([0.0, 0.0, 1.0]))
