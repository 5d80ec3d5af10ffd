"""Every function of the README's API table refuses bad input with a clear error."""

import numpy as np
import pytest
import torch

from iclr26.git_bo import (
    GITBO,
    Embedded,
    GPSurrogate,
    PFNSurrogate,
    RFFSurrogate,
    TabPFNSurrogate,
    acquisition_values,
    active_subspace,
    captured_fraction,
    expected_improvement,
    gp_ucb_beta,
    gradient_outer_product,
    load_objective,
    load_pfn,
    make_surrogate,
    minimize,
    random_subspace,
    sample_subspace,
    thompson,
    train_pfn,
    ucb,
)
from iclr26.git_bo.baselines import SAASBO, TPE, TuRBO1, saasbo, tpe, turbo

T = torch.tensor
f64 = torch.float64
B = np.array([[0.0, 0.0], [1.0, 1.0]])
G = torch.ones(4, 3, dtype=f64)
U = torch.eye(3, dtype=f64)[:, :2]
x0 = torch.full((3,), 0.5, dtype=f64)
m1, v1 = torch.zeros(3, dtype=f64), torch.ones(3, dtype=f64)

CASES = [
    ("grads 1-D", lambda: gradient_outer_product(torch.ones(3, dtype=f64)), ValueError, "grads"),
    (
        "grads NaN",
        lambda: gradient_outer_product(T([[float("nan"), 1.0]], dtype=f64)),
        ValueError,
        "finite",
    ),
    (
        "grads empty",
        lambda: gradient_outer_product(torch.ones(0, 3, dtype=f64)),
        ValueError,
        "empty",
    ),
    (
        "grads int",
        lambda: gradient_outer_product(torch.ones(2, 3, dtype=torch.int64)),
        TypeError,
        "floating",
    ),
    (
        "weights len",
        lambda: gradient_outer_product(G, torch.ones(3, dtype=f64)),
        ValueError,
        "weights",
    ),
    (
        "weights neg",
        lambda: gradient_outer_product(G, -torch.ones(4, dtype=f64)),
        ValueError,
        "non-negative",
    ),
    ("H not square", lambda: active_subspace(torch.ones(2, 3, dtype=f64)), ValueError, "square"),
    ("rank 0", lambda: active_subspace(torch.eye(3, dtype=f64), rank=0), ValueError, "rank"),
    ("rank float", lambda: active_subspace(torch.eye(3, dtype=f64), rank=2.0), TypeError, "rank"),
    (
        "energy 0",
        lambda: active_subspace(torch.eye(3, dtype=f64), energy=0.0),
        ValueError,
        "energy",
    ),
    ("no rank", lambda: active_subspace(torch.eye(3, dtype=f64), rank=None), ValueError, "rank"),
    ("basis rows", lambda: sample_subspace(x0, torch.eye(4, dtype=f64), 5), ValueError, "basis"),
    ("n 0", lambda: sample_subspace(x0, U, 0), ValueError, "n"),
    ("n float", lambda: sample_subspace(x0, U, 2.5), TypeError, "n"),
    ("scale 0", lambda: sample_subspace(x0, U, 5, scale=0.0), ValueError, "scale"),
    ("method", lambda: sample_subspace(x0, U, 5, method="lhs"), ValueError, "method"),
    ("bounds order", lambda: sample_subspace(x0, U, 5, lower=1.0, upper=0.0), ValueError, "lower"),
    (
        "origin inf",
        lambda: sample_subspace(T([0.5, float("inf"), 0.5], dtype=f64), U, 5),
        ValueError,
        "finite",
    ),
    ("random rank", lambda: random_subspace(3, 4), ValueError, "rank"),
    ("captured rows", lambda: captured_fraction(torch.eye(4, dtype=f64), U), ValueError, "rows"),
    ("ucb beta", lambda: ucb(m1, v1, -1.0), ValueError, "beta"),
    ("ucb shapes", lambda: ucb(m1, torch.ones(4, dtype=f64), 1.0), ValueError, "var"),
    ("ucb neg var", lambda: ucb(m1, -v1, 1.0), ValueError, "non-negative"),
    ("ucb nan", lambda: ucb(T([float("nan")] * 3, dtype=f64), v1), ValueError, "finite"),
    ("ucb numpy", lambda: ucb(np.zeros(3), np.ones(3)), TypeError, "tensor"),
    ("ei best nan", lambda: expected_improvement(m1, v1, float("nan")), ValueError, "best"),
    (
        "ts 2-D",
        lambda: thompson(torch.zeros(2, 2, dtype=f64), torch.ones(2, 2, dtype=f64)),
        ValueError,
        "1-D",
    ),
    ("beta t", lambda: gp_ucb_beta(0, 10), ValueError, "t"),
    ("beta delta", lambda: gp_ucb_beta(1, 10, delta=1.0), ValueError, "delta"),
    ("acq name", lambda: acquisition_values("poi", m1, v1), ValueError, "acquisition"),
    ("bounds shape", lambda: GITBO(np.zeros((3, 2))), ValueError, "bounds"),
    (
        "bounds order",
        lambda: GITBO(np.array([[1.0, 0.0], [0.0, 1.0]])),
        ValueError,
        "lower must be below",
    ),
    (
        "bounds equal",
        lambda: GITBO(np.array([[0.0, 0.0], [0.0, 1.0]])),
        ValueError,
        "lower must be below",
    ),
    ("bounds inf", lambda: GITBO(np.array([[0.0, -np.inf], [1.0, 1.0]])), ValueError, "finite"),
    ("bounds str", lambda: GITBO([["a", "b"], ["c", "d"]]), TypeError, "bounds"),
    ("origin", lambda: GITBO(B, "rff", origin="centre"), ValueError, "origin"),
    ("subspace", lambda: GITBO(B, "rff", subspace="pca"), ValueError, "subspace"),
    ("n_init 0", lambda: GITBO(B, "rff", n_init=0), ValueError, "n_init"),
    ("n_init float", lambda: GITBO(B, "rff", n_init=3.0), TypeError, "n_init"),
    ("maximize str", lambda: GITBO(B, "rff", maximize="yes"), TypeError, "maximize"),
    ("nonfinite", lambda: GITBO(B, "rff", nonfinite="ignore"), ValueError, "nonfinite"),
    ("seed neg", lambda: GITBO(B, "rff", seed=-1), ValueError, "seed"),
    ("true_basis", lambda: GITBO(B, "rff", true_basis=np.eye(3)), ValueError, "true_basis"),
    ("surrogate name", lambda: GITBO(B, "tabpfn3"), ValueError, "surrogate"),
    ("surrogate obj", lambda: make_surrogate(object()), TypeError, "surrogate"),
    (
        "tell shape",
        lambda: GITBO(B, "rff").tell(np.zeros((1, 3)), [1.0]),
        ValueError,
        "X must have shape",
    ),
    (
        "tell y len",
        lambda: GITBO(B, "rff").tell(np.zeros((2, 2)), [1.0]),
        ValueError,
        "y must have shape",
    ),
    (
        "tell out",
        lambda: GITBO(B, "rff").tell(np.full((1, 2), 2.0), [1.0]),
        ValueError,
        "outside bounds",
    ),
    (
        "tell nan X",
        lambda: GITBO(B, "rff").tell(np.full((1, 2), np.nan), [1.0]),
        ValueError,
        "finite",
    ),
    (
        "tell nan y",
        lambda: GITBO(B, "rff").tell(np.zeros((1, 2)), [np.nan]),
        ValueError,
        "non-finite",
    ),
    ("ask q", lambda: GITBO(B, "rff").ask(0), ValueError, "q"),
    ("result empty", lambda: GITBO(B, "rff").result(), ValueError, "no observations"),
    ("run f", lambda: GITBO(B, "rff").run(3.0, 10), TypeError, "callable"),
    (
        "budget",
        lambda: minimize(lambda x: 0.0, B, 2, surrogate="rff", n_init=3),
        ValueError,
        "initial design",
    ),
    ("budget float", lambda: minimize(lambda x: 0.0, B, 2.0, surrogate="rff"), TypeError, "budget"),
    ("rff features", lambda: RFFSurrogate(num_features=0), ValueError, "num_features"),
    ("rff ell", lambda: RFFSurrogate(lengthscale="mean"), ValueError, "lengthscale"),
    ("rff noise", lambda: RFFSurrogate(noise=0.0), ValueError, "noise"),
    (
        "rff y len",
        lambda: RFFSurrogate().condition(torch.rand(3, 2, dtype=f64), torch.rand(2, dtype=f64)),
        ValueError,
        "y must have shape",
    ),
    (
        "rff nan",
        lambda: RFFSurrogate().condition(
            torch.full((3, 2), float("nan"), dtype=f64), torch.rand(3, dtype=f64)
        ),
        ValueError,
        "finite",
    ),
    (
        "rff unconditioned",
        lambda: RFFSurrogate().posterior(torch.rand(3, 2, dtype=f64)),
        RuntimeError,
        "condition",
    ),
    ("gp maxiter", lambda: GPSurrogate(maxiter=0), ValueError, "maxiter"),
    (
        "gp numpy",
        lambda: GPSurrogate().condition(np.zeros((3, 2)), np.zeros(3)),
        TypeError,
        "tensors",
    ),
    ("pfn both", lambda: PFNSurrogate(model=object(), path="x"), ValueError, "model or path"),
    ("pfn type", lambda: PFNSurrogate(model=object()), TypeError, "InContextPFN"),
    (
        "pfn path",
        lambda: PFNSurrogate(path="no/such.safetensors"),
        FileNotFoundError,
        "does not exist",
    ),
    ("load_pfn", lambda: load_pfn("no/such.safetensors"), FileNotFoundError, "does not exist"),
    ("tabpfn n_est", lambda: TabPFNSurrogate("x.ckpt", n_estimators=0), ValueError, "n_estimators"),
    ("train steps", lambda: train_pfn(steps=0), ValueError, "steps"),
    ("train lr", lambda: train_pfn(steps=1, lr=0.0), ValueError, "lr"),
    ("embedded fn", lambda: Embedded("rastrigin"), ValueError, "fn"),
    ("embedded d_eff", lambda: Embedded("ackley", dim=3, d_eff=4), ValueError, "d_eff"),
    ("embedded dim float", lambda: Embedded("ackley", dim=3.0), TypeError, "dim"),
    (
        "embedded eval",
        lambda: Embedded("ackley", dim=3, d_eff=2).evaluate(torch.rand(2, 4, dtype=f64)),
        ValueError,
        "shape",
    ),
    ("objective spec", lambda: load_objective("nomodule"), ValueError, "module:function"),
    (
        "objective import",
        lambda: load_objective("no_such_mod_xyz:f"),
        ValueError,
        "cannot be imported",
    ),
    ("objective attr", lambda: load_objective("math:nope"), ValueError, "no attribute"),
    ("objective call", lambda: load_objective("math:pi"), ValueError, "not callable"),
    ("turbo dim 0", lambda: TuRBO1(0), ValueError, "dim"),
    ("turbo n_init float", lambda: TuRBO1(3, n_init=4.0), TypeError, "n_init"),
    ("turbo length", lambda: TuRBO1(3, length_init=2.0), ValueError, "length_init"),
    ("turbo candidates 0", lambda: TuRBO1(3, n_candidates=0), ValueError, "n_candidates"),
    ("saasbo thinning", lambda: SAASBO(3, num_samples=4, thinning=8), ValueError, "thinning"),
    ("saasbo warmup 0", lambda: SAASBO(3, warmup_steps=0), ValueError, "warmup_steps"),
    ("tpe seed neg", lambda: TPE(3, seed=-1), ValueError, "seed"),
    ("turbo budget < n_init", lambda: turbo(lambda x: 0.0, 3, 4, n_init=5), ValueError, "budget"),
    ("tpe budget float", lambda: tpe(lambda x: 0.0, 3, 4.0), TypeError, "budget"),
    ("saasbo dim float", lambda: saasbo(lambda x: 0.0, 3.0, 4), TypeError, "dim"),
    ("ask-tell x shape", lambda: TuRBO1(3).tell([0.1, 0.2], 1.0), ValueError, "x must have 3"),
    ("ask-tell x outside", lambda: TuRBO1(2).tell([0.1, 1.2], 1.0), ValueError, "inside"),
    ("ask-tell y inf", lambda: TuRBO1(2).tell([0.1, 0.2], float("inf")), ValueError, "y must"),
    ("ask-tell f", lambda: TuRBO1(2, n_init=2).run(3, 4), TypeError, "callable"),
    ("propose early", lambda: TuRBO1(2).propose(), ValueError, "at least 2"),
]


@pytest.mark.parametrize(("name", "call", "exc", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, exc, match):
    with pytest.raises(exc, match=match):
        call()
