import pytest
import torch

from iclr26.lifrseg.splat import (
    backward_warp,
    resize_flow,
    softmax_splat,
    softmax_splat_with_coverage,
    splat_sum,
    splat_sum_reference,
)


def _x(n=2, c=3, h=9, w=11, seed=0, dtype=torch.float32):
    return torch.rand(n, c, h, w, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("mode", ["sum", "avg", "linear", "soft"])
def test_zero_flow_identity(mode):
    x = _x()
    metric = (
        torch.rand(2, 1, 9, 11) * 6
        - 3
        + (1.0 if mode == "linear" else 0.0)
        + 3.0 * (mode == "linear")
    )
    out = softmax_splat(x, torch.zeros(2, 2, 9, 11), metric, mode)
    torch.testing.assert_close(out, x, rtol=4e-5, atol=1e-5)


@pytest.mark.parametrize(("dx", "dy"), [(2, 0), (0, -1), (3, 2)])
def test_integer_translation_is_roll_with_zero_fill(dx, dy):
    x = _x(1)
    flow = torch.zeros(1, 2, 9, 11)
    flow[:, 0], flow[:, 1] = dx, dy
    out = softmax_splat(x, flow, torch.zeros(1, 1, 9, 11), "soft")
    rolled = torch.roll(x, shifts=(dy, dx), dims=(2, 3))
    ys = slice(max(dy, 0), 9 + min(dy, 0))
    xs = slice(max(dx, 0), 11 + min(dx, 0))
    torch.testing.assert_close(out[..., ys, xs], rolled[..., ys, xs], rtol=4e-5, atol=1e-6)
    mask = torch.ones(9, 11, dtype=torch.bool)
    mask[ys, xs] = False
    assert float(out[..., mask].abs().max()) == 0.0


def test_sum_mode_conserves_mass_in_bounds():
    x = _x(1, 1, 16, 16)
    flow = torch.rand(1, 2, 16, 16, generator=torch.Generator().manual_seed(1)) * 2 - 1
    flow[..., :2, :] = 0
    flow[..., -2:, :] = 0
    flow[..., :, :2] = 0
    flow[..., :, -2:] = 0
    out = softmax_splat(x, flow, mode="sum")
    assert float(out.sum()) == pytest.approx(float(x.sum()), rel=1e-5)


def test_soft_shift_invariance():
    x = _x(1, 4, 10, 10)
    g = torch.Generator().manual_seed(3)
    flow = torch.rand(1, 2, 10, 10, generator=g) * 4 - 2
    metric = torch.rand(1, 1, 10, 10, generator=g) * 6 - 3
    a = softmax_splat(x, flow, metric, "soft")
    b = softmax_splat(x, flow, metric + 5.0, "soft")
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_collision_zbuffer_and_mean():
    x = torch.zeros(1, 1, 1, 4)
    x[0, 0, 0, 0], x[0, 0, 0, 2] = 1.0, 3.0
    flow = torch.zeros(1, 2, 1, 4)
    flow[0, 0, 0, 0] = 1.0  # pixel 0 -> 1
    flow[0, 0, 0, 2] = -1.0  # pixel 2 -> 1
    flow[0, 0, 0, 1] = 2.0  # pixel 1 -> 3 (out of the way)
    flow[0, 0, 0, 3] = 5.0  # pixel 3 leaves the image
    metric = torch.zeros(1, 1, 1, 4)
    metric[0, 0, 0, 0] = 20.0
    out = softmax_splat(x, flow, metric, "soft", clamp=20.0)
    assert float(out[0, 0, 0, 1]) == pytest.approx(1.0, abs=1e-6)
    metric[0, 0, 0, 0] = 0.0
    out = softmax_splat(x, flow, metric, "soft")
    assert float(out[0, 0, 0, 1]) == pytest.approx(2.0, rel=1e-5)
    assert float(softmax_splat(x, flow, mode="avg")[0, 0, 0, 1]) == pytest.approx(2.0, rel=1e-5)


def test_gradcheck_input_metric_flow():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(1, 2, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    flow = (
        torch.rand(1, 2, 5, 5, generator=g, dtype=torch.float64) * 1.6 - 0.8 + 0.137
    ).requires_grad_(True)
    metric = torch.rand(1, 1, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda a, f, m: softmax_splat(a, f, m, "soft"), (x, flow, metric), eps=1e-6, atol=1e-5
    )


def test_constant_flow_forward_equals_backward_warp():
    x = _x(1, 3, 12, 12)
    flow = torch.zeros(1, 2, 12, 12)
    flow[:, 0], flow[:, 1] = 1.3, -0.6
    fwd = softmax_splat(x, flow, mode="sum")
    bwd = backward_warp(x, -flow)
    torch.testing.assert_close(fwd[..., 1:-2, 2:-2], bwd[..., 1:-2, 2:-2], atol=1e-5, rtol=1e-5)


def test_resize_flow_rescales_vectors():
    flow = torch.ones(1, 2, 16, 16) * torch.tensor([4.0, -8.0]).view(1, 2, 1, 1)
    small = resize_flow(flow, (4, 4))
    torch.testing.assert_close(
        small, torch.ones(1, 2, 4, 4) * torch.tensor([1.0, -2.0]).view(1, 2, 1, 1)
    )


def test_bad_inputs():
    x = _x(1)
    with pytest.raises(ValueError, match="flow must be"):
        softmax_splat(x, torch.zeros(1, 2, 3, 3))
    with pytest.raises(ValueError, match="metric is required"):
        softmax_splat(x, torch.zeros(1, 2, 9, 11), None, "soft")
    with pytest.raises(ValueError, match="mode"):
        softmax_splat(x, torch.zeros(1, 2, 9, 11), mode="max")
    with pytest.raises(ValueError, match="finite"):
        softmax_splat(x, torch.full((1, 2, 9, 11), float("nan")), mode="sum")


def _random_case(n, c, h, w, seed, dtype, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=dtype)
    flow = scale * torch.randn(n, 2, h, w, generator=g, dtype=dtype)  # many targets leave the image
    metric = 2 * torch.randn(n, 1, h, w, generator=g, dtype=dtype)
    return x, flow, metric


@pytest.mark.parametrize(
    ("n", "c", "h", "w"),
    [(2, 3, 9, 11), (1, 5, 16, 16), (1, 2, 1, 7), (3, 1, 33, 20), (2, 19, 9, 11)],
)
def test_splat_sum_equals_reference_implementation(n, c, h, w):
    # the native adjoint-of-grid_sample splat equals the literal four-corner index_add_ version
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-4)):
        x, flow, _ = _random_case(n, c, h, w, seed=h * w + c, dtype=dtype)
        torch.testing.assert_close(
            splat_sum(x, flow), splat_sum_reference(x, flow), atol=tol, rtol=tol
        )


@pytest.mark.parametrize("mode", ["sum", "avg", "linear", "soft"])
def test_softmax_splat_equals_reference_composition(mode):
    x, flow, metric = _random_case(2, 4, 12, 10, seed=7, dtype=torch.float64)
    metric = metric.abs() + 0.1 if mode == "linear" else metric
    if mode == "sum":
        ref = splat_sum_reference(x, flow)
    else:
        if mode == "avg":
            m = torch.ones_like(metric)
        elif mode == "linear":
            m = metric
        else:
            m = torch.exp(metric.clamp(-20, 20) - metric.clamp(-20, 20).amax((1, 2, 3), True))
        ref = splat_sum_reference(x * m, flow) / (splat_sum_reference(m, flow) + 1e-7)
    out, cover = softmax_splat_with_coverage(x, flow, metric, mode)
    torch.testing.assert_close(softmax_splat(x, flow, metric, mode), ref, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(
        cover, splat_sum_reference(torch.ones_like(metric), flow), atol=1e-10, rtol=1e-10
    )


def test_splat_sum_gradients_equal_reference_gradients():
    x, flow, _ = _random_case(1, 3, 8, 9, seed=11, dtype=torch.float64, scale=2.0)
    flow = flow + 0.137  # keep targets off the integer grid (the tent kernel's kinks)
    weight = torch.randn(
        1, 3, 8, 9, generator=torch.Generator().manual_seed(12), dtype=torch.float64
    )
    grads = []
    for fn in (splat_sum, splat_sum_reference):
        a, f = x.clone().requires_grad_(True), flow.clone().requires_grad_(True)
        (fn(a, f) * weight).sum().backward()
        grads.append((a.grad, f.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-10, rtol=1e-10)


def test_gradcheck_splat_sum():
    x, flow, _ = _random_case(1, 2, 5, 6, seed=13, dtype=torch.float64, scale=1.5)
    x.requires_grad_(True)
    flow = (flow + 0.137).requires_grad_(True)
    assert torch.autograd.gradcheck(splat_sum, (x, flow), eps=1e-6, atol=1e-5)


def test_integer_targets_are_exact():
    # the canvas normalisation keeps integer targets exact: a 1-px shift is a bit-exact roll
    x = _x(1, 2, 20, 13)
    flow = torch.zeros(1, 2, 20, 13)
    flow[:, 0] = 1.0
    out = splat_sum(x, flow)
    assert torch.equal(out[..., 1:], x[..., :-1])
    assert torch.equal(out[..., 0], torch.zeros_like(out[..., 0]))
