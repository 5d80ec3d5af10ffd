"""One bad input per entry of the README API table: a clear error naming the argument."""

import numpy as np
import pytest
import torch

import iclr26.lifrseg as L

EV = L.EventStream([1, 2], [1, 2], [0.1, 0.2], [1, -1])
X = torch.rand(1, 3, 8, 8)
FLOW = torch.zeros(1, 2, 8, 8)


def _frame_mismatch():
    m = L.LiFRSeg()
    img, ev = torch.rand(1, 3, 32, 32), torch.rand(1, 5, 32, 32)
    frame = m.encode_frame(img, ev)
    return m(img.clone(), ev, ev, frame=frame)


CASES = {
    "EventStream t unsorted": (
        lambda: L.EventStream([0, 0], [0, 0], [0.2, 0.1], [1, 1]),
        ValueError,
        "sorted",
    ),
    "EventStream t negative": (
        lambda: L.EventStream([0], [0], [-1.0], [1]),
        ValueError,
        "non-negative",
    ),
    "EventStream x fraction": (
        lambda: L.EventStream([0.5], [0], [0.1], [1]),
        ValueError,
        "whole pixel",
    ),
    "EventStream x outside": (
        lambda: L.EventStream([9], [0], [0.1], [1], width=4),
        ValueError,
        "outside the sensor",
    ),
    "EventStream p": (lambda: L.EventStream([0], [0], [0.1], [3]), ValueError, "polarities"),
    "EventStream t NaN": (lambda: L.EventStream([0], [0], [np.nan], [1]), ValueError, "finite"),
    "EventStream.slice": (lambda: EV.slice(0.2, 0.1), ValueError, "t1 must"),
    "from_structured": (
        lambda: L.EventStream.from_structured(np.zeros(3)),
        TypeError,
        "structured",
    ),
    "voxel_grid ev": (lambda: L.voxel_grid("events", 3, 4, 4), TypeError, "ev must"),
    "voxel_grid num_bins": (lambda: L.voxel_grid(EV, 0, 4, 4), ValueError, "num_bins"),
    "voxel_grid time_ref": (
        lambda: L.voxel_grid(EV, 2, 4, 4, time_ref="first"),
        ValueError,
        "time_ref",
    ),
    "voxel_grid window": (
        lambda: L.voxel_grid(EV, 2, 4, 4, t_start=0.3, t_end=0.1),
        ValueError,
        "t_end",
    ),
    "voxel_grid height": (lambda: L.voxel_grid(EV, 2, 0, 4), ValueError, "height"),
    "event_count_frame": (lambda: L.event_count_frame(EV, 2, 2), ValueError, "outside"),
    "read_dsec_h5 missing": (
        lambda: L.read_dsec_h5("/nonexistent/events.h5"),
        OSError,
        "does not exist",
    ),
    "write_dsec_h5 ev": (lambda: L.write_dsec_h5("x.h5", [1, 2]), TypeError, "ev must"),
    "EsimSimulator contrast": (
        lambda: L.EsimSimulator(contrast_neg=-1),
        ValueError,
        "contrast_neg",
    ),
    "EsimSimulator refractory": (
        lambda: L.EsimSimulator(refractory_s=float("nan")),
        ValueError,
        "refractory_s",
    ),
    "simulate_from_frames times": (
        lambda: L.simulate_from_frames(np.ones((3, 4, 4)), np.zeros(2)),
        ValueError,
        "times",
    ),
    "simulate_from_frames frames": (
        lambda: L.simulate_from_frames(np.ones(4), np.zeros(4)),
        ValueError,
        "frames",
    ),
    "ShapesWorld textures": (lambda: L.ShapesWorld(textures="photos"), ValueError, "textures"),
    "ShapesWorld height": (lambda: L.ShapesWorld(height=4), ValueError, "height"),
    "make_sequence rates": (
        lambda: L.make_sequence(L.ShapesWorld(), 0.1, rgb_hz=30),
        ValueError,
        "divide",
    ),
    "make_sequence world": (lambda: L.make_sequence("world"), TypeError, "world"),
    "night_degrade": (lambda: L.night_degrade(np.full((2, 2, 3), np.nan)), ValueError, "finite"),
    "AnytimeSegDataset empty": (lambda: L.AnytimeSegDataset([]), ValueError, "sequences"),
    "collate_anytime": (lambda: L.collate_anytime([]), ValueError, "items"),
    "softmax_splat mode": (lambda: L.softmax_splat(X, FLOW, mode="max"), ValueError, "mode"),
    "softmax_splat flow shape": (
        lambda: L.softmax_splat(X, torch.zeros(1, 2, 4, 4)),
        ValueError,
        "flow must",
    ),
    "softmax_splat x dtype": (
        lambda: L.softmax_splat(X.long(), FLOW, mode="sum"),
        TypeError,
        "floating",
    ),
    "softmax_splat metric NaN": (
        lambda: L.softmax_splat(X, FLOW, torch.full((1, 1, 8, 8), float("nan"))),
        ValueError,
        "metric must be finite",
    ),
    "softmax_splat_with_coverage metric int": (
        lambda: L.softmax_splat_with_coverage(X, FLOW, torch.zeros(1, 1, 8, 8, dtype=torch.long)),
        TypeError,
        "metric must be a floating",
    ),
    "softmax_splat eps": (
        lambda: L.softmax_splat(X, FLOW, mode="avg", eps=-1.0),
        ValueError,
        "eps",
    ),
    "splat_sum flow inf": (
        lambda: L.splat_sum(X, torch.full((1, 2, 8, 8), float("inf"))),
        ValueError,
        "flow must be finite",
    ),
    "splat_sum_reference flow dtype": (
        lambda: L.splat_sum_reference(X, FLOW.long()),
        TypeError,
        "flow must be a floating",
    ),
    "fit_lifrseg segmenter_lr_factor": (
        lambda: L.fit_lifrseg(
            L.LiFRSeg(),
            None,
            L.TrainConfig(1, 1),
            segmenter_lr_factor=0.0,
        ),
        ValueError,
        "segmenter_lr_factor",
    ),
    "backward_warp padding": (lambda: L.backward_warp(X, FLOW, "wrap"), ValueError, "padding_mode"),
    "resize_flow": (
        lambda: L.resize_flow(torch.zeros(1, 3, 4, 4), (2, 2)),
        ValueError,
        "flow must",
    ),
    "ohem target dtype": (
        lambda: L.ohem_cross_entropy(torch.rand(1, 3, 4, 4), torch.rand(1, 4, 4)),
        TypeError,
        "target",
    ),
    "ohem thresh": (
        lambda: L.ohem_cross_entropy(
            torch.rand(1, 3, 4, 4), torch.zeros(1, 4, 4, dtype=torch.long), thresh=0
        ),
        ValueError,
        "thresh",
    ),
    "flow_epe": (
        lambda: L.flow_epe(torch.zeros(1, 2, 4, 4), torch.zeros(1, 2, 4, 5)),
        ValueError,
        "target",
    ),
    "laplace_nll": (
        lambda: L.laplace_nll(FLOW, FLOW, torch.zeros(1, 2, 8, 8)),
        ValueError,
        "log_precision",
    ),
    "mean_iou float pred": (
        lambda: L.mean_iou(torch.rand(4), torch.zeros(4, dtype=torch.long), 2),
        TypeError,
        "pred",
    ),
    "mean_iou out of range": (
        lambda: L.mean_iou(torch.tensor([5]), torch.tensor([0]), 2),
        ValueError,
        "class ids",
    ),
    "confusion_matrix num_classes": (
        lambda: L.confusion_matrix(torch.tensor([0]), torch.tensor([0]), 0),
        ValueError,
        "num_classes",
    ),
    "Segmenter num_classes": (lambda: L.Segmenter(1), ValueError, "num_classes"),
    "Segmenter image NaN": (
        lambda: L.Segmenter(3)(torch.full((1, 3, 32, 32), float("nan"))),
        ValueError,
        "finite",
    ),
    "TinyMiT channels": (lambda: L.TinyMiT()(torch.rand(1, 4, 32, 32)), ValueError, "channels"),
    "ERaftLite iters": (lambda: L.ERaftLite(iters=0), ValueError, "iters"),
    "ERaftLite shapes": (
        lambda: L.ERaftLite()(torch.rand(1, 5, 32, 32), torch.rand(1, 5, 32, 36)),
        ValueError,
        "differ",
    ),
    "ERaftLite past_features": (
        lambda: L.ERaftLite()(
            torch.rand(1, 5, 32, 32),
            torch.rand(1, 5, 32, 32),
            past_features=torch.rand(1, 48, 4, 4),
        ),
        ValueError,
        "past_features must",
    ),
    "ERaftLite.encode": (lambda: L.ERaftLite().encode(torch.rand(1, 4, 32, 32)), ValueError, "ev"),
    "MemoryBank length": (lambda: L.MemoryBank(0), ValueError, "length"),
    "TemporalMemoryAttention heads": (
        lambda: L.TemporalMemoryAttention(10, heads=4),
        ValueError,
        "divisible",
    ),
    "LiFRSegConfig propagate": (
        lambda: L.LiFRSegConfig(propagate="depth"),
        ValueError,
        "propagate",
    ),
    "LiFRSeg config": (lambda: L.LiFRSeg("big"), TypeError, "config"),
    "LiFRSeg image size": (
        lambda: L.LiFRSeg()(
            torch.rand(1, 3, 40, 40), torch.rand(1, 5, 40, 40), torch.rand(1, 5, 40, 40)
        ),
        ValueError,
        "multiples of 32",
    ),
    "LiFRSeg flow override": (
        lambda: L.LiFRSeg()(
            torch.rand(1, 3, 32, 32),
            torch.rand(1, 5, 32, 32),
            torch.rand(1, 5, 32, 32),
            flow=torch.zeros(1, 2, 8, 8),
        ),
        ValueError,
        "flow must be",
    ),
    "LiFRSeg.encode_frame ev_past": (
        lambda: L.LiFRSeg().encode_frame(torch.rand(1, 3, 32, 32), torch.rand(1, 4, 32, 32)),
        ValueError,
        "ev_past must",
    ),
    "LiFRSeg.encode_frame image": (
        lambda: L.LiFRSeg().encode_frame(torch.rand(1, 3, 40, 40), torch.rand(1, 5, 40, 40)),
        ValueError,
        "multiples of 32",
    ),
    "LiFRSeg frame type": (
        lambda: L.LiFRSeg()(
            torch.rand(1, 3, 32, 32),
            torch.rand(1, 5, 32, 32),
            torch.rand(1, 5, 32, 32),
            frame=(1, 2),
        ),
        TypeError,
        "frame must",
    ),
    "LiFRSeg frame of another image": (
        lambda: _frame_mismatch(),
        ValueError,
        "frame must be encode_frame",
    ),
    "LiFRSeg.predict_anytime before frame": (
        lambda: L.LiFRSeg().predict_anytime(torch.rand(3, 32, 32), EV, 0.2, [0.1]),
        ValueError,
        "before the RGB frame",
    ),
    "LiFRSeg.predict_anytime events": (
        lambda: L.LiFRSeg().predict_anytime(torch.rand(3, 32, 32), "ev", 0.2, [0.3]),
        TypeError,
        "events must",
    ),
    "HFROracle batch": (lambda: L.HFROracle(L.Segmenter(3))({}), ValueError, "batch lacks"),
    "LiFRMethod model": (lambda: L.LiFRMethod(L.Segmenter(3)), TypeError, "LiFRSeg"),
    "LiFRMethod traced": (lambda: L.LiFRMethod(L.LiFRSeg(), traced=1), TypeError, "traced"),
    "LiFRMethod flow_cache": (
        lambda: L.LiFRMethod(L.LiFRSeg(), flow_cache={}),
        TypeError,
        "flow_cache",
    ),
    "LiFRSeg.forward traced": (
        lambda: L.LiFRSeg()(torch.rand(1, 3, 32, 32), *[torch.rand(1, 5, 32, 32)] * 2, traced="y"),
        TypeError,
        "traced",
    ),
    "FlowCache flownet": (lambda: L.FlowCache(L.Segmenter(3)), TypeError, "ERaftLite"),
    "FlowCache grids": (
        lambda: L.FlowCache(L.ERaftLite())(torch.rand(1, 5, 8, 8), torch.rand(1, 5, 8, 4)),
        ValueError,
        "one shape",
    ),
    "fit_lifrseg flow_cache": (
        lambda: L.fit_lifrseg(L.LiFRSeg(), None, L.TrainConfig(), flow_cache="c"),
        TypeError,
        "flow_cache",
    ),
    "anytime_curve dataset": (
        lambda: L.anytime_curve(lambda b: b, [1, 2], 3),
        TypeError,
        "dataset",
    ),
    "TrainConfig steps": (lambda: L.TrainConfig(steps=0), ValueError, "steps"),
    "fit_segmenter model": (
        lambda: L.fit_segmenter("m", [], L.TrainConfig()),
        TypeError,
        "segmenter",
    ),
    "fit_flow model": (
        lambda: L.fit_flow(L.Segmenter(3), None, L.TrainConfig()),
        TypeError,
        "flownet",
    ),
    "fit_lifrseg model": (
        lambda: L.fit_lifrseg(L.Segmenter(3), None, L.TrainConfig()),
        TypeError,
        "LiFRSeg",
    ),
    "load_lifrseg missing": (
        lambda: L.load_lifrseg("/nonexistent.safetensors"),
        OSError,
        "does not exist",
    ),
    "fit_lifrseg train_segmenter": (
        lambda: L.fit_lifrseg(L.LiFRSeg(), None, L.TrainConfig(), train_segmenter=1),
        TypeError,
        "train_segmenter",
    ),
    "pretrain_flow steps": (lambda: L.pretrain_flow(steps=0), ValueError, "steps"),
    "pretrain_flow seed": (lambda: L.pretrain_flow(seed=-1), ValueError, "seed"),
    "pretrain_flow duration": (
        lambda: L.pretrain_flow(duration_s=0.2),
        ValueError,
        "duration_s",
    ),
    "pretrain_flow config": (lambda: L.pretrain_flow(config="x"), TypeError, "config"),
    "load_pretrained_flow missing": (
        lambda: L.load_pretrained_flow("/nonexistent.safetensors"),
        OSError,
        "do not exist",
    ),
    "to_structured polarity": (lambda: EV.to_structured("pm"), ValueError, "polarity"),
    "save_lifrseg model": (
        lambda: L.save_lifrseg(L.Segmenter(3), "x.safetensors"),
        TypeError,
        "LiFRSeg",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(name):
    fn, exc, match = CASES[name]
    with pytest.raises(exc, match=match):
        fn()


def test_caller_arrays_never_modified():
    x, y, t, p = (
        np.array([1, 2]),
        np.array([0, 1]),
        np.array([0.1, 0.2]),
        np.array([0, 1], dtype=np.int8),
    )
    copies = [a.copy() for a in (x, y, t, p)]
    ev = L.EventStream(x, y, t, p)
    L.voxel_grid(ev, 3, 2, 3)
    arr = ev.to_structured()
    ref = arr.copy()
    L.EventStream.from_structured(arr)
    for a, c in zip((x, y, t, p), copies, strict=True):
        assert np.array_equal(a, c)
    assert np.array_equal(arr, ref)
