"""Every name in the README's API table refuses bad input with a ValueError/TypeError naming the
argument: wrong shape, wrong dtype (integers converted exactly or refused, never truncated),
NaN/inf, empty, out of range."""

import jax.numpy as jnp
import numpy as np
import pytest

import iclr26.bregman_fw as bfw

ITERS = 300  # the buffer length the other solver tests compile


def quad_f(x, y):
    return 0.5 * jnp.sum((x - y) ** 2)


Y = jnp.array([0.6, 0.3, 0.1, -0.2])
X0 = jnp.array([1.0, 0.0, 0.0, 0.0])
POS = jnp.full(4, 0.25)


def fw(**kw):
    args = {"f": quad_f, "x0": X0, "lmo": bfw.Simplex(), "args": (Y,), "max_iter": ITERS}
    args.update(kw)
    return bfw.frank_wolfe(args.pop("f"), args.pop("x0"), args.pop("lmo"), **args)


def afw(**kw):
    args = {"f": quad_f, "x0": X0, "lmo": bfw.Simplex(), "args": (Y,), "max_iter": ITERS}
    args.update(kw)
    return bfw.away_frank_wolfe(args.pop("f"), args.pop("x0"), args.pop("lmo"), **args)


def kl_f(x):
    return jnp.sum(x * jnp.log(x))


CASES = [
    # frank_wolfe / away_frank_wolfe (shared checks)
    (fw, {"f": lambda x, y: x - y}, ValueError, "scalar"),  # f must return a scalar
    (fw, {"x0": jnp.array([1.0, 0.0, 0.0, np.nan])}, ValueError, "x0"),
    (fw, {"x0": jnp.array([1.0, 0.0, 0.0, np.inf])}, ValueError, "x0"),
    (fw, {"x0": jnp.zeros(0)}, ValueError, "x0"),
    (fw, {"x0": np.array([1, 0, 0, 0], np.float32)}, TypeError, "x0"),
    (fw, {"x0": np.array([True, False, False, False])}, TypeError, "x0"),
    (fw, {"x0": np.array([1 + 0j, 0, 0, 0])}, TypeError, "x0"),
    (fw, {"x0": np.array([2**60, 0, 0, 0], np.int64)}, ValueError, "x0"),
    (fw, {"x0": jnp.array([0.5, 0.0, 0.0, 0.0])}, ValueError, "x0"),  # not in the simplex
    (fw, {"f": "quad"}, TypeError, "f must be callable"),
    (fw, {"lmo": "simplex"}, TypeError, "lmo"),
    (fw, {"step": 0.1}, TypeError, "step"),
    (fw, {"kernel": "euclidean"}, TypeError, "kernel"),
    (fw, {"kernel": bfw.Burg(), "x0": POS}, ValueError, "burg"),  # simplex touches the boundary
    (fw, {"args": [Y]}, TypeError, "args"),
    (fw, {"max_iter": 0}, ValueError, "max_iter"),
    (fw, {"max_iter": 10.5}, TypeError, "max_iter"),
    (fw, {"tol": -1.0}, ValueError, "tol"),
    (fw, {"tol": float("nan")}, ValueError, "tol"),
    (fw, {"tol": float("inf")}, ValueError, "tol"),
    (fw, {"patience": 0}, ValueError, "patience"),
    (fw, {"ftol": -1e-3}, ValueError, "ftol"),
    (afw, {"lmo": bfw.L2Ball(1.0)}, ValueError, "polytope"),
    (afw, {"drop_tol": -1.0}, ValueError, "drop_tol"),
    (afw, {"max_active": 1, "vertex_index": False}, ValueError, "max_active"),
    (afw, {"atoms": jnp.eye(4)}, ValueError, "atoms and weights"),
    (afw, {"atoms": jnp.eye(4), "weights": jnp.array([0.5, 0.5, 0.0, 0.0])}, ValueError, "x0"),
    (
        afw,
        {"atoms": jnp.eye(4), "weights": jnp.array([1.0, -0.5, 0.5, 0.0])},
        ValueError,
        "weights",
    ),
    (afw, {"atoms": jnp.eye(3), "weights": jnp.ones(3) / 3}, ValueError, "atoms"),
    (afw, {"atoms": jnp.eye(4), "weights": jnp.array([1.0, 0, 0, np.nan])}, ValueError, "weights"),
    (afw, {"vertex_index": "yes"}, TypeError, "vertex_index"),
    (
        afw,
        {"lmo": bfw.Box(0.0, 1.0), "x0": jnp.ones(4), "vertex_index": True},
        ValueError,
        "vertex_index",
    ),
    # step rules
    (bfw.AdaptiveBregman, {"eta": 0.0}, ValueError, "eta"),
    (bfw.AdaptiveBregman, {"tau": 1.0}, ValueError, "tau"),
    (bfw.AdaptiveBregman, {"beta": float("nan")}, ValueError, "beta"),
    (bfw.AdaptiveBregman, {"kappa_min": 0.0}, ValueError, "kappa_min"),
    (bfw.AdaptiveBregman, {"max_backtracks": 0}, ValueError, "max_backtracks"),
    (bfw.AdaptiveBregman, {"L0": -1.0}, ValueError, "L0"),
    (bfw.AdaptiveBregman, {"max_estimate": float("inf")}, ValueError, "max_estimate"),
    (bfw.AdaptiveBregman, {"rtol": -1.0}, ValueError, "rtol"),
    (bfw.EuclideanAdaptive, {"eta": 2.0}, ValueError, "eta"),
    (bfw.EuclideanAdaptive, {"tau": 0.5}, ValueError, "tau"),
    (bfw.EuclideanAdaptive, {"L0": float("nan")}, ValueError, "L0"),
    (bfw.FWJLAdaptive, {"tau": 1.0}, ValueError, "tau"),
    (bfw.FWJLAdaptive, {"max_backtracks": 0}, ValueError, "max_backtracks"),
    (bfw.ShortStep, {"L": 0.0}, ValueError, "L"),
    (bfw.ShortStep, {"L": float("inf")}, ValueError, "L"),
    (bfw.BregmanShortStep, {"L": -1.0}, ValueError, "L"),
    (bfw.BregmanShortStep, {"nu": 1.5}, ValueError, "nu"),
    (bfw.OpenLoop, {"ell": 0.0}, ValueError, "ell"),
    (bfw.ExactLineSearch, {"iters": 0}, ValueError, "iters"),
    # kernels
    (bfw.Euclidean, {"scale": 0.0}, ValueError, "scale"),
    (bfw.Euclidean, {"scale": float("nan")}, ValueError, "scale"),
    (bfw.Quartic, {"a": -1.0}, ValueError, "a"),
    (bfw.Quartic, {"s": float("inf")}, ValueError, "s"),
    (bfw.Power, {"p": 1.0}, ValueError, "p"),
    (bfw.from_function, {"phi": 3}, TypeError, "phi"),
    (bfw.from_function, {"phi": kl_f, "domain": "complex"}, ValueError, "domain"),
    # LMOs
    (bfw.Simplex, {"radius": -1.0}, ValueError, "radius"),
    (bfw.Simplex, {"radius": float("inf")}, ValueError, "radius"),
    (bfw.TruncatedSimplex, {"eps": 0.0}, ValueError, "eps"),
    (bfw.L1Ball, {"radius": float("nan")}, ValueError, "radius"),
    (bfw.L2Ball, {"radius": 0.0}, ValueError, "radius"),
    (bfw.LpBall, {"p": 0.5}, ValueError, "p"),
    (bfw.Box, {"lo": 1.0, "hi": 0.0}, ValueError, "lo"),
    (bfw.Box, {"lo": float("-inf"), "hi": 0.0}, ValueError, "lo"),
    (bfw.KSparse, {"k": 0}, ValueError, "k"),
    (bfw.KSparse, {"k": 2, "tau": -1.0}, ValueError, "tau"),
    (bfw.NuclearBall, {"radius": 1.0, "method": "qr"}, ValueError, "method"),
    (bfw.Spectrahedron, {"trace": 0.0}, ValueError, "trace"),
    (bfw.Product, {"lmos": (bfw.Simplex(),), "sizes": (3, 4)}, ValueError, ""),
    # optax transform
    (bfw.frank_wolfe_transform, {"lmo": "l1"}, TypeError, "lmo"),
    (bfw.frank_wolfe_transform, {"lmo": bfw.L1Ball(), "step": 0.1}, TypeError, "step"),
    (bfw.frank_wolfe_transform, {"lmo": bfw.L1Ball(), "kernel": "euclid"}, TypeError, "kernel"),
    # baselines
    (
        bfw.projected_gradient,
        {"f": quad_f, "x0": X0, "projection": "cube", "args": (Y,)},
        ValueError,
        "projection",
    ),
    (
        bfw.projected_gradient,
        {"f": quad_f, "x0": jnp.array([1.0, np.nan, 0, 0]), "args": (Y,)},
        ValueError,
        "x0",
    ),
    (
        bfw.projected_gradient,
        {"f": quad_f, "x0": X0, "args": (Y,), "max_iter": 0},
        ValueError,
        "max_iter",
    ),
    (
        bfw.projected_gradient,
        {"f": quad_f, "x0": np.ones(4, np.float32) / 4, "args": (Y,)},
        TypeError,
        "x0",
    ),
    (bfw.mirror_descent, {"f": kl_f, "x0": jnp.array([1.0, 0.0, 0.0, 0.0])}, ValueError, "x0"),
    (bfw.mirror_descent, {"f": kl_f, "x0": POS, "step_size": 0.0}, ValueError, "step_size"),
    (bfw.mirror_descent, {"f": kl_f, "x0": jnp.zeros(0)}, ValueError, "x0"),
    (bfw.mirror_descent, {"f": kl_f, "x0": POS[None]}, ValueError, "x0"),
    (
        bfw.bregman_proximal_gradient,
        {"f": kl_f, "x0": POS, "kernel": bfw.Euclidean(), "L": 1.0},
        ValueError,
        "kernel",
    ),
    (
        bfw.bregman_proximal_gradient,
        {"f": kl_f, "x0": POS, "kernel": bfw.Entropy(), "L": 0.0},
        ValueError,
        "L",
    ),
    (
        bfw.bregman_proximal_gradient,
        {"f": kl_f, "x0": POS, "kernel": bfw.Entropy(), "L": float("nan")},
        ValueError,
        "L",
    ),
    (
        bfw.bregman_proximal_gradient,
        {"f": kl_f, "x0": jnp.array([1.0, 0, 0, np.inf]), "kernel": bfw.Entropy(), "L": 1.0},
        ValueError,
        "x0",
    ),
    # problems
    (bfw.kl_regression, {"m": 0}, ValueError, "m"),
    (bfw.kl_regression, {"n": 10, "support": 11}, ValueError, "support"),
    (bfw.kl_regression, {"m": 5.5}, TypeError, "m"),
    (bfw.poisson_inverse, {"eps": 0.5}, ValueError, "eps"),
    (bfw.poisson_inverse, {"counts": 0.0}, ValueError, "counts"),
    (bfw.d_optimal, {"m": 10, "n": 5}, ValueError, "n"),
    (bfw.d_optimal_symmetric, {"eps": 1.0}, ValueError, "eps"),
    (bfw.phase_retrieval, {"k": 0}, ValueError, "k"),
    (bfw.phase_retrieval, {"start": "far"}, ValueError, "start"),
    (bfw.phase_retrieval, {"tau": float("nan")}, ValueError, "tau"),
    (bfw.lp_regression, {"p": 3.0}, ValueError, "p"),
    (bfw.lp_regression, {"data": "iris"}, ValueError, "data"),
    (bfw.lp_regression, {"radius": -1.0}, ValueError, "radius"),
    (bfw.quadratic_simplex, {"n": 1}, ValueError, "n"),
    (bfw.quadratic_simplex, {"margin": float("inf")}, ValueError, "margin"),
]


@pytest.mark.parametrize(
    ("fn", "kwargs", "error", "match"),
    CASES,
    ids=[f"{getattr(c[0], '__name__', c[0])}-{'-'.join(c[1])}-{i}" for i, c in enumerate(CASES)],
)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, error, match):
    with pytest.raises(error, match=match):
        fn(**kwargs)


def test_integer_start_is_converted_exactly():
    r_int = fw(x0=np.array([1, 0, 0, 0], np.int64))
    r_float = fw(x0=X0)
    assert r_int.x.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(r_int.x), np.asarray(r_float.x))
    r = afw(
        x0=np.array([0, 1, 0, 0]),
        atoms=np.eye(4, dtype=np.int32)[[1]],
        weights=np.array([1]),
    )
    assert r.x.dtype == jnp.float64
    assert bool(r.converged)


def test_readme_api_table_is_covered():
    """Every name in the README's API table appears in CASES (by function or class)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## API", 1)[1].split("\n## ", 1)[0]
    first_cells = [row.split("|")[1] for row in table.splitlines() if row.startswith("| ")]
    names = {n for cell in first_cells[1:] for n in re.findall(r"`([A-Za-z_]+)[(`]", cell)}
    names -= {"k1", "SumKernel", "Entropy", "Burg", "DOptimalStep"}  # k1 + k2 is SumKernel; no args
    covered = {getattr(c[0], "__name__", "") for c in CASES} | {"frank_wolfe", "away_frank_wolfe"}
    missing = sorted(n for n in names if n not in covered)
    assert not missing, f"README API names without a bad-input case: {missing}"
