import h5py
import numpy as np
import pytest
import torch

from iclr26.lifrseg.events import (
    EventStream,
    event_count_frame,
    read_dsec_h5,
    voxel_grid,
    voxel_grid_reference,
    write_dsec_h5,
)


def _random_events(n=500, h=12, w=16, seed=0):
    rng = np.random.default_rng(seed)
    return EventStream(
        rng.integers(0, w, n), rng.integers(0, h, n), np.sort(rng.random(n)), rng.choice([-1, 1], n)
    )


def test_voxel_sum_equals_polarity_sum_and_bin_placement():
    ev = _random_events()
    v = voxel_grid(ev, 5, 12, 16, time_ref="events", normalize=False)
    assert float(v.sum()) == pytest.approx(float(ev.p.sum()), abs=1e-4)
    # t* = 1.0 lands in bin 1 only; t* = 0.5 splits 0.5 / 0.5 (B = 3 over window [0, 2])
    one = EventStream([3], [2], [1.0], [1])
    v = voxel_grid(one, 3, 4, 5, t_start=0.0, t_end=2.0, normalize=False)
    assert v[1, 2, 3] == 1.0
    assert float(v.abs().sum()) == 1.0
    half = EventStream([3], [2], [0.5], [-1])
    v = voxel_grid(half, 3, 4, 5, t_start=0.0, t_end=2.0, normalize=False)
    assert v[0, 2, 3] == pytest.approx(-0.5)
    assert v[1, 2, 3] == pytest.approx(-0.5)


@pytest.mark.parametrize("n", [500, 20_000])  # 20k on 12x16: many cells where polarities cancel
@pytest.mark.parametrize("normalize", [False, True])
def test_voxel_matches_literal_dsec_loop(normalize, n):
    ev = _random_events(n=n, seed=3)
    ours = voxel_grid(ev, 7, 12, 16, time_ref="events", normalize=normalize)
    ref = voxel_grid_reference(ev, 7, 12, 16, normalize=normalize)
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("time_ref", ["window", "tonic", "events"])
def test_voxel_equals_the_formula_literally(time_ref):
    """V(x, y, b) = Σ_j p_j max(0, 1 − |b − t*_j|) by brute force, including events that lie
    just outside the window (−1 < t* < 0 or B − 1 < t* < B touch one bin) and far outside it."""
    rng = np.random.default_rng(7)
    n, h, w, b = 300, 5, 6, 4
    t = np.sort(rng.uniform(0.0, 1.0, n))
    ev = EventStream(rng.integers(0, w, n), rng.integers(0, h, n), t, rng.choice([-1, 1], n))
    t0, t1 = 0.3, 0.7
    if time_ref == "window":
        tstar = (b - 1) * (t - t0) / (t1 - t0)
    else:
        tstar = (b if time_ref == "tonic" else b - 1) * (t - t[0]) / (t[-1] - t[0])
    want = np.zeros((b, h, w))
    for j in range(n):
        for k in range(b):
            want[k, ev.y[j], ev.x[j]] += ev.p[j] * max(0.0, 1.0 - abs(k - tstar[j]))
    got = voxel_grid(ev, b, h, w, t_start=t0, t_end=t1, time_ref=time_ref, normalize=False)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


def test_voxel_window_vs_events_reference():
    # a sparse window: 'window' keeps time as the window says, 'events' stretches it
    ev = EventStream([1, 2], [0, 0], [0.10, 0.11], [1, 1])
    win = voxel_grid(ev, 5, 2, 4, t_start=0.0, t_end=0.2, normalize=False)
    evs = voxel_grid(ev, 5, 2, 4, t_start=0.0, t_end=0.2, time_ref="events", normalize=False)
    assert win[2, 0, 1] == pytest.approx(1.0)  # t* = 4·0.1/0.2 = 2
    assert evs[0, 0, 1] == pytest.approx(1.0)
    assert evs[4, 0, 2] == pytest.approx(1.0)


def test_empty_window_gives_zeros_without_nan():
    ev = EventStream.empty()
    for ref in ("window", "events"):
        v = voxel_grid(ev, 5, 8, 8, t_start=0.0, t_end=0.1, time_ref=ref)
        assert torch.isfinite(v).all()
        assert float(v.abs().sum()) == 0.0
    # zero time span: every event at t* = 0, single non-zero cell: mean subtracted, no NaN
    same = EventStream([1, 1], [1, 1], [0.5, 0.5], [1, 1])
    v = voxel_grid(same, 3, 4, 4, time_ref="events")
    assert torch.isfinite(v).all()
    v_raw = voxel_grid(same, 3, 4, 4, time_ref="events", normalize=False)
    assert v_raw[0, 1, 1] == 2.0


def test_count_frame():
    ev = EventStream([0, 0, 1], [0, 0, 1], [0.0, 0.1, 0.2], [1, 1, -1])
    c = event_count_frame(ev, 2, 2)
    assert c[0, 0, 0] == 2
    assert c[1, 1, 1] == 1
    assert float(c.sum()) == 3


def test_stream_copies_and_validates():
    x, y, t, p = np.array([1, 2]), np.array([0, 1]), np.array([0.1, 0.2]), np.array([0, 1])
    ev = EventStream(x, y, t, p)
    assert ev.p.tolist() == [-1, 1]
    assert p.tolist() == [0, 1]
    arr = ev.to_structured()
    back = EventStream.from_structured(arr)
    assert np.array_equal(back.x, ev.x)
    assert np.allclose(back.t, ev.t)
    arr_copy = arr.copy()
    voxel_grid(back, 3, 2, 3)
    assert np.array_equal(arr, arr_copy)
    with pytest.raises(ValueError, match="sorted"):
        EventStream([0, 0], [0, 0], [0.2, 0.1], [1, 1])
    with pytest.raises(ValueError, match="non-negative"):
        EventStream([0], [0], [-0.1], [1])
    with pytest.raises(ValueError, match="polarities"):
        EventStream([0], [0], [0.1], [2])
    with pytest.raises(ValueError, match="outside the sensor"):
        EventStream([5], [0], [0.1], [1], width=5)
    with pytest.raises(ValueError, match="one length"):
        EventStream([0, 1], [0], [0.1], [1])
    with pytest.raises(ValueError, match="outside"):
        voxel_grid(EventStream([9], [0], [0.1], [1]), 2, 4, 4)


def test_slice_half_open():
    ev = EventStream([0, 1, 2, 3], [0, 0, 0, 0], [0.0, 0.1, 0.2, 0.3], [1, 1, 1, 1])
    s = ev.slice(0.1, 0.3)
    assert s.t.tolist() == [0.1, 0.2]
    with pytest.raises(ValueError, match="t1 must be"):
        ev.slice(0.3, 0.1)


def test_dsec_h5_roundtrip_and_slicing(tmp_path):
    rng = np.random.default_rng(1)
    n = 3000
    t_us = np.sort(rng.integers(1_000_000, 1_500_000, n))
    ev = EventStream(
        rng.integers(0, 64, n), rng.integers(0, 48, n), t_us * 1e-6, rng.choice([-1, 1], n)
    )
    path = tmp_path / "events.h5"
    write_dsec_h5(path, ev, t_offset_us=900_000)
    with h5py.File(path) as f:
        assert int(f["t_offset"][()]) == 900_000
        assert f["events/t"][0] == t_us[0] - 900_000
        ms = f["ms_to_idx"][:]
        t_rel = f["events/t"][:]
        for k in (0, 100, 333, len(ms) - 1):
            assert np.all(t_rel[: ms[k]] < 1000 * k)
            assert np.all(t_rel[ms[k] :] >= 1000 * k)
    for t0, t1 in ((1.1, 1.2), (1.0005, 1.0007), (1.2345, 1.4999), (0.0, 2.0)):
        got = read_dsec_h5(path, t0, t1)
        keep = (ev.t >= t0) & (ev.t < t1)
        assert np.array_equal(got.x, ev.x[keep])
        assert np.array_equal(got.p, ev.p[keep])
        np.testing.assert_allclose(got.t, ev.t[keep], atol=1e-9)
    full = read_dsec_h5(path)
    assert len(full) == n


def test_dsec_h5_missing_dataset(tmp_path):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("events/x", data=np.zeros(2))
    with pytest.raises(ValueError, match="lacks the dataset"):
        read_dsec_h5(path)
    with pytest.raises(OSError, match="does not exist"):
        read_dsec_h5(tmp_path / "nope.h5")
