"""tonic / evlib interop and conformance (spec §12.1): structured arrays both ways, the voxel
grid's ``B`` vs ``B - 1`` time scaling, and tonic's in-place polarity rewrite (ours never mutates).
The tonic and evlib tests skip when the ``[tonic]`` / ``[evlib]`` extras are not installed."""

import numpy as np
import pytest

from iclr26.lifrseg.events import EventStream, voxel_grid

H, W, B = 12, 16, 5


def _events(n=2000, seed=0, zero_polarity=False):
    rng = np.random.default_rng(seed)
    p = rng.choice([0, 1] if zero_polarity else [-1, 1], n)
    t = np.sort(rng.integers(0, 1_000_000, n)) * 1e-6  # whole microseconds, as tonic stores them
    return rng.integers(0, W, n), rng.integers(0, H, n), t, p


def test_tonic_time_convention_from_the_formula():
    # tonic / evlib: t* = B (t - t_first) / (t_last - t_first); B = 2 over [0, 1] s puts the
    # events at t* = 0, 0.75, 1.5, 2: bins (1), (0.25, 0.75), (0, 0.5 + dropped 0.5), dropped
    ev = EventStream([0, 1, 2, 3], [0, 0, 0, 0], [0.0, 0.375, 0.75, 1.0], [1, 1, -1, 1])
    v = voxel_grid(ev, 2, 1, 4, time_ref="tonic", normalize=False)[:, 0]
    expect = np.array([[1.0, 0.25, 0.0, 0.0], [0.0, 0.75, -0.5, 0.0]])
    np.testing.assert_allclose(v.numpy(), expect, atol=1e-7)
    # DSEC's convention (B - 1) keeps every event: the sum over bins is the polarity sum
    d = voxel_grid(ev, 2, 1, 4, time_ref="events", normalize=False)
    assert float(d.sum()) == pytest.approx(2.0)
    assert float(v.sum()) == pytest.approx(1.5)  # tonic loses half of one event and the last one


def test_structured_round_trip_never_mutates():
    x, y, t, p = _events(zero_polarity=True)
    ev = EventStream(x, y, t, p, height=H, width=W)
    arr = ev.to_structured()
    before = arr.copy()
    back = EventStream.from_structured(arr, height=H, width=W)
    voxel_grid(back, B, H, W, time_ref="tonic")
    np.testing.assert_array_equal(arr, before)
    np.testing.assert_array_equal(back.t, ev.t)
    np.testing.assert_array_equal(back.p, ev.p)
    assert set(np.unique(back.p)) <= {-1, 1}


def test_tonic_structured_arrays_both_ways():
    tonic = pytest.importorskip("tonic")
    x, y, t, p = _events(zero_polarity=True)
    arr = tonic.io.make_structured_array(x, y, np.round(t * 1e6).astype(np.int64), p.astype(bool))
    before = arr.copy()
    ev = EventStream.from_structured(arr, height=H, width=W)  # tonic: p bool, t in µs
    np.testing.assert_array_equal(arr, before)
    np.testing.assert_array_equal(ev.p, np.where(p > 0, 1, -1))
    np.testing.assert_allclose(ev.t, t, atol=1e-12)
    # ours -> tonic: tonic's own transforms accept the array (ToFrame counts per polarity)
    frame = tonic.transforms.ToFrame(sensor_size=(W, H, 2), n_event_bins=1)(ev.to_structured())
    counts = frame.sum(0)  # [2, H, W]: polarity channel 0 = negative (p <= 0), 1 = positive
    np.testing.assert_array_equal(counts[1].sum(), (ev.p > 0).sum())
    np.testing.assert_array_equal(counts.sum(), len(ev))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("n", [1, 2, 2000])
def test_voxel_grid_equals_tonic_in_its_convention(n):
    tonic = pytest.importorskip("tonic")
    import tonic.functional as tf

    ev = EventStream(*_events(n, seed=n), height=H, width=W)
    arr = ev.to_structured()
    theirs = tonic.transforms.ToVoxelGrid(sensor_size=(W, H, 2), n_time_bins=B)(arr)
    assert theirs.shape == (B, 1, H, W)
    ours = voxel_grid(ev, B, H, W, time_ref="tonic", normalize=False).double().numpy()
    if n == 1:  # one event: tonic divides by a zero time span (NaN); ours puts it at t* = 0
        assert np.isfinite(ours).all()
        assert ours[0].sum() == ev.p[0]
        return
    np.testing.assert_allclose(theirs[:, 0], ours, atol=1e-6)
    # the documented difference: DSEC's (B - 1) scaling is another grid
    dsec = voxel_grid(ev, B, H, W, time_ref="events", normalize=False).double().numpy()
    assert np.abs(dsec - theirs[:, 0]).max() > 1e-3
    # tonic's functional rewrites the caller's polarity field in place (0 -> -1) ...
    zeros = EventStream(*_events(50, seed=1, zero_polarity=True), height=H, width=W).to_structured()
    zeros["p"] = np.where(zeros["p"] > 0, 1, 0)
    mine = zeros.copy()
    tf.to_voxel_grid_numpy(zeros, (W, H, 2), B)
    assert (zeros["p"] == -1).any()
    assert not (mine["p"] == -1).any()
    # ... ours reads a copy: the array handed to from_structured is left as it was
    EventStream.from_structured(mine, height=H, width=W)
    assert not (mine["p"] == -1).any()


def test_voxel_grid_equals_evlib():
    pytest.importorskip("evlib")
    import evlib.representations as er
    import polars as pl

    ev = EventStream(*_events(3000, seed=4), height=H, width=W)
    arr = ev.to_structured()
    frame = pl.DataFrame({
        "t": arr["t"], "x": arr["x"].astype(np.int64), "y": arr["y"].astype(np.int64),
        "polarity": arr["p"].astype(np.int64),
    })  # fmt: skip
    theirs = er.densify_voxel_grid(er.create_voxel_grid(frame, H, W, B), B, H, W)[:, 0]
    ours = voxel_grid(ev, B, H, W, time_ref="tonic", normalize=False).double().numpy()
    np.testing.assert_allclose(theirs, ours, atol=1e-6)
