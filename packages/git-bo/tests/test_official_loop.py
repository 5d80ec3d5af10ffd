"""One GIT-BO iteration recomputed from the official algorithm's steps, independently of the
loop: the subspace of step t + 1 comes from the predictive-mean gradients at step t's
candidates (H = GᵀG / M, top-r eigenvectors), the candidates are x₀ + U_r α with α uniform in
[-s, s]^r around the mean of the evaluated inputs (unit cube, clipped), the surrogate's context
is the unit-cube inputs with the raw values (standardised inside), and UCB picks μ + √β σ."""

import itertools

import numpy as np
import pytest
import torch

from iclr26.git_bo import GITBO, Embedded, RFFSurrogate


def _projector(U):
    return U @ U.T


@pytest.fixture(scope="module")
def state():
    p = Embedded("ackley", dim=30, d_eff=4, seed=2)
    bounds = np.array([[-5.0] * 30, [10.0] * 30])  # a user box: the loop works in [0, 1]^D
    opt = GITBO(bounds, "rff", rank=6, n_candidates=500, scale=0.2, origin="mean", n_init=12,
                seed=3, maximize=False)  # fmt: skip

    def f(x):
        return p((x - bounds[0]) / (bounds[1] - bounds[0]))

    steps = []
    for _ in range(16):
        x = opt.ask(1)
        if opt.candidates_ is not None and opt.n_told >= opt.n_init:
            steps.append({"x": x[0].copy(), "cand": opt.candidates_.clone(),
                          "basis": None if opt.basis_ is None else opt.basis_.clone(),
                          "origin": opt.origin_, "X": np.asarray(opt._X).copy(),
                          "y": np.asarray(opt._y).copy()})  # fmt: skip
        opt.tell(x, [f(x[0])])
    return opt, bounds, steps


def _surrogate(X, y):
    s = RFFSurrogate()  # the loop's own surrogate settings (defaults), refit on the same data
    s.condition(torch.as_tensor(X), torch.as_tensor(-y))  # the loop maximises -f
    return s


def _mean_grads(s, cand):
    q = cand.clone().requires_grad_(True)
    mean, _ = s.posterior(q)
    (g,) = torch.autograd.grad(mean.sum(), q)
    return g


def test_first_step_is_full_box_then_subspace(state):
    opt, _, steps = state
    assert opt.diagnostics[0]["candidates"] == "sobol-full-box"
    assert all(d["candidates"] == "subspace" for d in opt.diagnostics[1:])
    assert steps[0]["origin"] is None
    assert all(s["origin"] is not None for s in steps[1:])


def test_subspace_comes_from_previous_candidates_mean_gradients(state):
    _, _, steps = state
    for prev, cur in itertools.pairwise(steps):
        s = _surrogate(prev["X"], prev["y"])
        G = _mean_grads(s, prev["cand"])
        H = G.T @ G / G.shape[0]
        _, evecs = torch.linalg.eigh(H)
        U_ref = evecs[:, -6:]  # top-6 eigenvectors
        assert torch.allclose(_projector(cur["basis"]), _projector(U_ref), atol=1e-6)


def test_origin_is_the_mean_of_the_evaluated_unit_inputs(state):
    _, _, steps = state
    for st in steps[1:]:
        assert torch.allclose(st["origin"], torch.as_tensor(st["X"].mean(0)), atol=1e-12)


def test_candidates_are_uniform_in_the_subspace_box(state):
    _, _, steps = state
    alphas = []
    for st in steps[1:]:
        cand, U, x0 = st["cand"], st["basis"], st["origin"]
        inside = ((cand > 0) & (cand < 1)).all(1)  # not clipped
        d = cand[inside] - x0
        assert torch.allclose(d, d @ U @ U.T, atol=1e-9)  # in x0 + span(U_r)
        a = d @ U
        assert float(a.abs().max()) <= 0.2 + 1e-9
        alphas.append(a)
    a = torch.cat(alphas).flatten()
    # U[-0.2, 0.2]: mean 0, variance 0.2² / 3 (the unclipped points are a slightly central subset)
    assert abs(float(a.mean())) < 0.01
    assert float(a.var()) == pytest.approx(0.2**2 / 3, rel=0.1)


def test_ucb_picks_mean_plus_two_sigma(state):
    _, bounds, steps = state
    for st in steps[1:]:
        s = _surrogate(st["X"], st["y"])
        with torch.no_grad():
            mean, var = s.posterior(st["cand"])
        j = int(torch.argmax(mean + 2.0 * var.sqrt()))  # beta = 4
        chosen_unit = (st["x"] - bounds[0]) / (bounds[1] - bounds[0])
        assert np.allclose(st["cand"][j].numpy(), chosen_unit, atol=1e-9)
