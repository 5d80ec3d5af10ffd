"""Every function of the README API table refuses bad input with a clear error naming the argument."""

import numpy as np
import pytest
import torch

import iclr26.interp_equiv as ie

rng = np.random.default_rng(0)
X = rng.standard_normal((40, 3))
G = [rng.standard_normal((40, 3)) for _ in range(3)]
TASK = ie.PermutationDetection(5)
MODEL = ie.TinyTransformer(6, 6, 2, d_model=16, n_layers=2)
TOK = TASK.sample(8, torch.Generator().manual_seed(0))[0]
ALIGN = {f"v{i}": ie.Site.resid(0, pos=i) for i in range(5)}

CASES = [
    # similarity
    (ie.linear_predictivity, (X, X[:30]), {}, ValueError, "same number of rows"),
    (ie.linear_predictivity, (X[:4], X[:4]), {}, ValueError, "at least 5 rows"),
    (ie.linear_predictivity, (X, np.where(X > 1, np.nan, X)), {}, ValueError, "Y contains NaN"),
    (ie.linear_predictivity, (X[:, 0], X), {}, ValueError, "X must be 2-D"),
    (ie.linear_predictivity, (X, X), {"alphas": (0.0, 1.0)}, ValueError, "alphas"),
    (ie.linear_predictivity, (X, X), {"test_size": 1.5}, ValueError, "test_size"),
    (ie.linear_predictivity, (X, X), {"seed": 1.0}, TypeError, "seed"),
    (ie.linear_predictivity, (X.astype(complex), X), {}, TypeError, "real numeric"),
    (ie.linear_predictivity, (X[:12], X[:12]), {"test_size": 0.05}, ValueError, "too few samples"),
    (ie.ridge_r2, (X, "abc"), {}, TypeError, "Y must be a real numeric"),
    (ie.cka, (X, X[:10]), {}, ValueError, "same number of rows"),
    (ie.cka, (X, np.full_like(X, np.inf)), {}, ValueError, "NaN or inf"),
    (ie.cka, (ie.CKAStats(X), ie.CKAStats(X[:10])), {}, ValueError, "same number of rows"),
    (ie.cka, ([["a"] * 3] * 5, X[:5]), {}, TypeError, "X must be a real numeric"),
    (ie.CKAStats, (X[:, 0],), {}, ValueError, "X must be 2-D"),
    (ie.CKAStats, (X[:1],), {}, ValueError, "at least 2 rows"),
    (ie.CKAStats, (np.where(X > 1, np.nan, X),), {}, ValueError, "X contains NaN"),
    (ie.cka_permutation_test, (X, X), {"n_perm": 0}, ValueError, "n_perm"),
    (ie.procrustes_similarity, (X, np.ones((40, 2))), {}, ValueError, "constant"),
    (ie.svcca, (X, X), {"keep": 0}, ValueError, "keep"),
    (ie.svcca, (X, X), {"keep": 1.5}, ValueError, "keep"),
    # estimators
    (ie.similarity_matrix, ([],), {}, ValueError, "at least one"),
    (ie.similarity_matrix, (X,), {}, TypeError, "sequence of 2-D"),
    (ie.similarity_matrix, (G,), {"measure": "l2"}, ValueError, "measure must be one of"),
    (ie.point_test, (G, G[:2]), {"n": 0}, ValueError, "n must be"),
    (ie.point_test, (G, G[:2]), {"crit": -1.0}, ValueError, "crit"),
    (ie.equivalence_test, (G, []), {}, ValueError, "G2 must hold"),
    (ie.equivalence_test, (G, G[:1]), {}, ValueError, "at least 2 implementations"),
    (ie.equivalence_test, (G, G[:2]), {"n_boot": 0}, ValueError, "n_boot"),
    (ie.permutation_test, (G, G), {}, ValueError, "disjoint"),
    (ie.permutation_test, (G, G[:1]), {}, ValueError, ">= 2"),
    (ie.permutation_test, (G, G[:2]), {"alpha": 2.0}, ValueError, "alpha"),
    (ie.selectivity_matrix, ({},), {}, ValueError, "non-empty mapping"),
    (ie.selectivity_matrix, ({"a": G},), {"method": "vote"}, ValueError, "method"),
    (ie.selectivity_matrix, ({"a": G},), {"S": np.ones((2, 2))}, ValueError, "S must be"),
    # models, IIT, representations
    (ie.TinyTransformer, (6, 6, 2), {"d_model": 10, "n_heads": 4}, ValueError, "divisible"),
    (ie.TinyTransformer, (6, 6, 2), {"n_layers": 0}, ValueError, "n_layers"),
    (ie.TinyMLP, (5, 4, (), 5), {}, ValueError, "widths"),
    (ie.PermutationDetection, (1,), {}, ValueError, "n must be"),
    (ie.ModSum, (5, 5), {}, ValueError, "even"),
    (ie.train_implementation, (TASK, "sort_diff", MODEL, {}), {}, ValueError, "non-empty mapping"),
    (ie.train_implementation, (TASK, "sort_diff", MODEL, ALIGN), {"lr": 0.0}, ValueError, "lr"),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"intervention": "all"},
        ValueError,
        "intervention",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"strict_sites": [ie.Site.resid(0, pos=0)]},
        ValueError,
        "outside the alignment",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"strict_sites": [ie.Site("blocks.9.hook_resid_post")]},
        ValueError,
        "valid sites",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"strict_w": -1.0},
        ValueError,
        "strict_w",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"clip_grad_norm": 0.0},
        ValueError,
        "clip_grad_norm",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"betas": (0.9,)},
        ValueError,
        "betas",
    ),
    (
        ie.train_implementation,
        (TASK, "sort_diff", MODEL, ALIGN),
        {"betas": (0.9, 1.0)},
        ValueError,
        "betas",
    ),
    (
        ie.interchange_accuracy,
        (MODEL, TASK, TASK.algorithm("sort_diff"), ALIGN),
        {"variables": ["v9"]},
        ValueError,
        "not aligned",
    ),
    (
        ie.interchange_accuracy,
        (MODEL, TASK, TASK.algorithm("sort_diff"), ALIGN),
        {"n": 0},
        ValueError,
        "n must be",
    ),
    (ie.accuracy, (MODEL, TASK), {"n": -1}, ValueError, "n must be"),
    (ie.gate, ([],), {"min_accuracy": 2.0}, ValueError, "min_accuracy"),
    (ie.gate, ([object()],), {}, TypeError, "Implementation"),
    (ie.representations, (MODEL, TOK.float()), {}, TypeError, "integer"),
    (ie.representations, (MODEL, TOK.bool()), {}, TypeError, "token ids"),
    (ie.representations, (MODEL, TOK[:0]), {}, ValueError, "n > 0"),
    (ie.representations, (MODEL, TOK), {"pool": "max"}, ValueError, "pool"),
    (
        ie.representations,
        (MODEL, TOK),
        {"sites": ["blocks.5.hook_resid_post"]},
        ValueError,
        "valid sites",
    ),
    (ie.representations, (MODEL, TOK.numpy()), {}, TypeError, "torch.Tensor"),
    (ie.intervened_representations, (MODEL, TOK, TOK, []), {}, ValueError, "patch_sites"),
    (ie.save_representations, ("x.npy", np.zeros(3)), {}, ValueError, "2-D"),
    (ie.load_representations, ("/nonexistent/reps.npy",), {}, OSError, "no such"),
    (ie.load_implementation, ("/nonexistent/m.safetensors",), {}, OSError, "no such"),
    (ie.weight_correlation, (MODEL, np.zeros(3)), {}, TypeError, "model_b"),
]


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "exc", "match"),
    CASES,
    ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)],
)
def test_bad_input(fn, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args, **kwargs)


def test_weight_correlation_ignores_layernorm_gains_and_biases():
    torch.manual_seed(0)
    a = ie.TinyTransformer(6, 6, 2, d_model=16, n_layers=2)
    torch.manual_seed(1)
    b = ie.TinyTransformer(6, 6, 2, d_model=16, n_layers=2)
    # Independent inits: LayerNorm gains (all 1) and zero biases are identical in both models,
    # which made the old all-parameter correlation large; the weight matrices are independent.
    assert abs(ie.weight_correlation(a, b)) < 0.05
    assert ie.weight_correlation(a, a) == pytest.approx(1.0)
    wide = ie.TinyTransformer(6, 6, 2, d_model=32, n_layers=2)
    assert ie.weight_correlation(a, wide) is None
