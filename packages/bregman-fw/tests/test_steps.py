"""Step-rule invariants: the descent certificate on every accepted step, monotonicity, caps,
both κ policies, and the reduction of the adaptive Bregman rule to Pedregosa et al.'s rule."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import iclr26.bregman_fw as bfw

ITERS = 300


def run(problem, step, kernel=None):
    kernel = problem.kernel if kernel is None else kernel
    return bfw.frank_wolfe(
        problem.f,
        problem.x0,
        problem.lmo,
        step=step,
        kernel=kernel,
        args=problem.args,
        max_iter=ITERS,
        tol=0.0,
    )


PROBLEMS = {
    "kl-entropy": bfw.kl_regression(20, 10, support=4, seed=1),
    "poisson-burg": bfw.poisson_inverse(20, 10, eps=1e-3, seed=1),
    "dopt-burg": bfw.d_optimal(4, 12, eps=1e-3, seed=1),
    "phase-quartic": bfw.phase_retrieval(40, 20, k=4, seed=1),
}


CASES = [(name, True) for name in PROBLEMS] + [("kl-entropy", False), ("poisson-burg", False)]


@pytest.mark.parametrize(
    ("name", "reset"), CASES, ids=[f"{n}-{'reset' if r else 'carry'}" for n, r in CASES]
)
def test_descent_certificate_and_monotonicity(name, reset):
    """Both [verify] κ policies: reset to 1 every iteration (default) and carried over."""
    p = PROBLEMS[name]
    rule = bfw.AdaptiveBregman(kappa_reset=reset)
    r = run(p, rule)
    n = int(r.n_iter)
    h = r.history
    f, bound, gamma, gap, kappa = (np.asarray(a) for a in (h.f, h.bound, h.gamma, h.gap, h.kappa))
    acc = np.asarray(h.accepted)[:n]
    assert acc.mean() > 0.99, "the cap should practically never be hit in float64"
    slack = rule.rtol * np.abs(f[:n]) + 1e-300
    ok = acc
    # the certificate f(x⁺) ≤ f(x) − γ g + M γ^{1+κ} D_φ(v, x), up to the documented round-off slack
    assert np.all(f[1 : n + 1][ok] <= bound[:n][ok] + slack[ok])
    # monotone descent: f(x⁺) − f(x) ≤ −γ g κ/(1+κ) (+ slack)
    decrease = -gamma[:n] * gap[:n] * kappa[:n] / (1 + kappa[:n])
    assert np.all(f[1 : n + 1] - f[:n] <= decrease + slack)
    assert np.all(np.asarray(h.n_evals)[:n] <= rule.max_backtracks)
    assert np.all((kappa[:n] >= rule.kappa_min) & (kappa[:n] <= 1.0))
    assert f[n] < f[0]


def pedregosa_numpy(f, grad, x0, lmo, L0, iters, eta=0.9, tau=2.0):
    """Independent NumPy implementation of Pedregosa et al. (2020), Algorithm 1 + 2."""
    x, L, gammas = np.array(x0), L0, []
    for _ in range(iters):
        g = grad(x)
        v = np.asarray(lmo(jnp.asarray(g)))
        d = v - x
        gap = -g @ d
        M = eta * L
        while True:
            gamma = min(gap / (M * (d @ d)), 1.0)
            if f(x + gamma * d) <= f(x) - gamma * gap + 0.5 * gamma**2 * M * (d @ d):
                break
            M *= tau
        L = M
        x = x + gamma * d
        gammas.append(gamma)
    return np.array(gammas)


def test_adaptive_bregman_reduces_to_euclidean_adaptive():
    p = bfw.kl_regression(20, 10, seed=2)
    A, b = (np.asarray(a) for a in p.args)

    def f(x):
        y = A @ x
        return float(np.sum(y * np.log(y / b) - y + b))

    def grad(x):
        return A.T @ np.log((A @ x) / b)

    rule = bfw.AdaptiveBregman(beta=1.0, L0=5.0, rtol=0.0)  # κ frozen at 1
    r = bfw.frank_wolfe(
        p.f, p.x0, p.lmo, step=rule, kernel=bfw.Euclidean(), args=p.args, max_iter=ITERS, tol=0.0
    )
    reference = pedregosa_numpy(f, grad, np.asarray(p.x0), p.lmo, 5.0, 40)
    np.testing.assert_allclose(np.asarray(r.history.gamma)[:40], reference, rtol=1e-8)
    np.testing.assert_array_equal(np.asarray(r.history.kappa)[:40], 1.0)


def test_bregman_short_step_closed_form():
    p = PROBLEMS["poisson-burg"]
    rule = bfw.BregmanShortStep(L=p.L_rel, nu=1.0)
    r = run(p, rule)
    x1 = np.asarray(p.x0)
    # first step by hand: γ = min(g / (2 L D_Burg(v, x)), 1)
    grad = np.asarray(jax.grad(p.objective)(p.x0))
    v = np.asarray(p.lmo(jnp.asarray(grad)))
    gap = grad @ (x1 - v)
    D = np.sum(v / x1 - np.log(v / x1) - 1)
    assert float(r.history.gamma[0]) == pytest.approx(min(gap / (2 * p.L_rel * D), 1.0), rel=1e-10)
    assert np.all(np.diff(np.asarray(r.history.f)[: int(r.n_iter) + 1]) <= 1e-12)


def test_cap_and_fallback_keep_the_estimate_finite():
    # a rule that may only try once with an absurdly small estimate: the cap is hit, the step
    # falls back to a decreasing trial or 0, and f never increases
    p = PROBLEMS["kl-entropy"]
    rule = bfw.AdaptiveBregman(L0=1e-8, max_backtracks=1, rtol=0.0)
    r = run(p, rule)
    h = r.history
    n = int(r.n_iter)
    assert not np.asarray(h.accepted)[:n].all()
    assert np.all(np.isfinite(np.asarray(h.M)[:n]))
    assert np.all(np.diff(np.asarray(h.f)[: n + 1]) <= 0.0)


def test_rule_hyperparameters_are_validated():
    with pytest.raises(ValueError, match="tau"):
        bfw.AdaptiveBregman(tau=0.5)
    with pytest.raises(ValueError, match="kappa_min"):
        bfw.AdaptiveBregman(kappa_min=2.0)


def test_d_optimal_step_is_the_exact_line_minimum():
    """The closed-form Fedorov–Wynn step equals bisection on the slope, for FW and away
    directions, and an AFW run with it follows the same iterates as with bisection."""
    from iclr26.bregman_fw.problems import dopt_objective
    from iclr26.bregman_fw.steps import Oracle

    rng = np.random.default_rng(3)
    m, n = 4, 15
    H = jnp.asarray(rng.standard_normal((m, n)))
    fa = lambda x: dopt_objective(x, H)  # noqa: E731
    oracle = Oracle(fa, jax.value_and_grad(fa))
    x = jnp.asarray(rng.dirichlet(np.ones(n)))
    fx, g = oracle.value_and_grad(x)
    exact, closed = bfw.ExactLineSearch(iters=80), bfw.DOptimalStep()

    @jax.jit
    def both(d, g_d, gmax):  # one compiled call per rule instead of eager op-by-op bisection
        args = (oracle, 0, x, fx, g, d, g_d, gmax, bfw.Euclidean(), None)
        return exact(*args)[0], closed(*args)[0]

    checked = 0
    for k in range(n):
        e = jnp.zeros(n).at[k].set(1.0)
        wk = float(x[k])
        for d, gmax in ((e - x, 1.0), (x - e, wk / (1.0 - wk))):
            g_d = -jnp.sum(g * d)
            if float(g_d) <= 0:
                continue
            ge, gc = (float(v) for v in both(d, g_d, jnp.asarray(gmax)))
            assert gc == pytest.approx(ge, abs=1e-9), (k, gmax)
            checked += 1
    assert checked >= n  # every vertex gives one descent direction (FW or away)
    V, x0 = jnp.eye(n), jnp.full(n, 1.0 / n)
    kw = {"args": (H,), "atoms": V, "weights": x0, "max_iter": 60, "tol": 0.0, "patience": None}
    a = bfw.away_frank_wolfe(dopt_objective, x0, bfw.Simplex(), step=closed, **kw)
    b = bfw.away_frank_wolfe(dopt_objective, x0, bfw.Simplex(), step=exact, **kw)
    np.testing.assert_allclose(np.asarray(a.history.f), np.asarray(b.history.f), rtol=1e-10)
    assert int(a.n_f_evals) <= 61 + 1  # one value-and-grad per iteration


def test_d_optimal_step_refuses_an_ascent():
    # not the D-optimal objective: a quadratic whose line minimum is at γ = 1e-6; the formula
    # proposes the full step, which increases f, and the guard takes γ = 0 instead
    from iclr26.bregman_fw.steps import Oracle

    x = jnp.array([0.2, 0.5, 0.3])
    d = jnp.array([0.0, 1.0, 0.0]) - x
    target = x + 1e-6 * d
    fa = lambda z: 1e3 * jnp.sum((z - target) ** 2)  # noqa: E731
    oracle = Oracle(fa, jax.value_and_grad(fa))
    fx, g = oracle.value_and_grad(x)
    gamma, _, info, point = bfw.DOptimalStep().apply(
        oracle, 0, x, fx, g, d, -jnp.sum(g * d), jnp.asarray(1.0), bfw.Euclidean(), None
    )
    assert not bool(info.accepted)
    assert float(gamma) == 0.0
    assert float(point[0]) == float(fx)
