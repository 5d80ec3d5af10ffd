"""Exact tabular PVO (the theory version with the greedy max), TD on a learned reward, and the
small MDPs used to test both and to study how reward-model error propagates (P5).

With full coverage and tabular f the VA minimisers are the optimal Q of r̂ plus a null-space
component, so PVO's greedy policy equals value iteration on r̂; differences appear only under
partial coverage, where the minimiser is not unique and the tie-break matters (``tie``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iclr26.shared import check_array, check_choice, check_int, check_range

__all__ = [
    "TabularMDP",
    "chain_mdp",
    "fit_tabular_reward",
    "fitted_td_tabular",
    "gridworld_mdp",
    "policy_value",
    "sample_tabular_pairs",
    "sample_trajectories",
    "solve_pvo_tabular",
    "value_iteration",
]


@dataclass(frozen=True)
class TabularMDP:
    """Deterministic or stochastic MDP: P (S, A, S), reward r (S, A), discount, start distribution."""

    P: np.ndarray
    r: np.ndarray
    gamma: float
    start: np.ndarray

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]


def chain_mdp(n: int = 6, gamma: float = 0.9) -> TabularMDP:
    """A chain: action 1 moves right, 0 left; reward 1 for acting at the right end, 0.1 for
    acting left at the left end (a local optimum); start uniform."""
    check_int(n, "n", low=2)
    P = np.zeros((n, 2, n))
    for s in range(n):
        P[s, 0, max(s - 1, 0)] = 1
        P[s, 1, min(s + 1, n - 1)] = 1
    r = np.zeros((n, 2))
    r[n - 1, 1], r[0, 0] = 1.0, 0.1
    return TabularMDP(P, r, gamma, np.full(n, 1 / n))


def gridworld_mdp(size: int = 5, gamma: float = 0.9) -> TabularMDP:
    """A size × size grid, actions up/down/left/right (walls keep you in place); reward 1 for
    any action in the far corner, −0.05 per step elsewhere; start uniform."""
    check_int(size, "size", low=2)
    n = size * size
    P = np.zeros((n, 4, n))
    moves = ((-1, 0), (1, 0), (0, -1), (0, 1))
    for s in range(n):
        i, j = divmod(s, size)
        for a, (di, dj) in enumerate(moves):
            ni, nj = min(max(i + di, 0), size - 1), min(max(j + dj, 0), size - 1)
            P[s, a, ni * size + nj] = 1
    r = np.full((n, 4), -0.05)
    r[n - 1] = 1.0
    return TabularMDP(P, r, gamma, np.full(n, 1 / n))


def value_iteration(
    mdp: TabularMDP, reward: np.ndarray | None = None, tol: float = 1e-10
) -> np.ndarray:
    """Optimal Q (S, A) of ``reward`` (default: the MDP's own)."""
    r = (
        mdp.r
        if reward is None
        else check_array(np.asarray(reward, float), "reward", shape=mdp.r.shape)
    )
    q = np.zeros_like(r)
    for _ in range(100_000):
        new = r + mdp.gamma * mdp.P @ q.max(1)
        if np.abs(new - q).max() < tol:
            return new
        q = new
    return q


def policy_value(mdp: TabularMDP, policy: np.ndarray) -> float:
    """Expected discounted return of a deterministic ``policy`` (S,) from the start distribution."""
    s = np.arange(mdp.n_states)
    P_pi = mdp.P[s, policy]
    v = np.linalg.solve(np.eye(mdp.n_states) - mdp.gamma * P_pi, mdp.r[s, policy])
    return float(mdp.start @ v)


def sample_trajectories(
    mdp: TabularMDP, behaviour: np.ndarray, n: int, horizon: int, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` trajectories of ``horizon`` steps under a stochastic ``behaviour`` (S, A) policy:
    states (n, horizon + 1) and actions (n, horizon)."""
    behaviour = check_array(np.asarray(behaviour, float), "behaviour", shape=mdp.r.shape)
    if np.any(behaviour < 0) or not np.allclose(behaviour.sum(1), 1):
        raise ValueError("behaviour must hold a probability distribution over actions per state")
    rng = np.random.default_rng(seed)
    S, A = mdp.n_states, mdp.n_actions
    states = np.zeros((n, horizon + 1), int)
    actions = np.zeros((n, horizon), int)
    states[:, 0] = rng.choice(S, size=n, p=mdp.start)
    for t in range(horizon):
        u = rng.random(n)
        actions[:, t] = (behaviour[states[:, t]].cumsum(1) < u[:, None]).sum(1).clip(0, A - 1)
        nxt = mdp.P[states[:, t], actions[:, t]]
        states[:, t + 1] = (nxt.cumsum(1) < rng.random(n)[:, None]).sum(1).clip(0, S - 1)
    return states, actions


def sample_tabular_pairs(
    states: np.ndarray, actions: np.ndarray, n_pairs: int, length: int, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Segment pairs (s0 (M, L+1), a0 (M, L), s1, a1) from trajectories, never crossing one."""
    check_int(length, "length", low=1, high=actions.shape[1])
    rng = np.random.default_rng(seed)
    ep = rng.integers(0, states.shape[0], (2, n_pairs))
    t0 = rng.integers(0, actions.shape[1] - length + 1, (2, n_pairs))
    s = states[ep[..., None], t0[..., None] + np.arange(length + 1)]
    a = actions[ep[..., None], t0[..., None] + np.arange(length)]
    return s[0], a[0], s[1], a[1]


def fit_tabular_reward(
    s0, a0, s1, a1, label, n_states: int, n_actions: int, *, l2: float = 1e-3, iters: int = 200
) -> np.ndarray:
    """Tabular BT maximum likelihood r̂ (S, A) by Newton's method with a small ridge ``l2``."""
    label = np.asarray(label, float)
    check_range(l2, "l2", low=0, low_inclusive=False)
    X = _counts(s1[:, :-1], a1, n_states, n_actions) - _counts(s0[:, :-1], a0, n_states, n_actions)
    w = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-X @ w))
        grad = X.T @ (p - label) + l2 * w
        hess = (X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w.reshape(n_states, n_actions)


def _counts(s: np.ndarray, a: np.ndarray, S: int, A: int) -> np.ndarray:
    """Visit counts of each (s, a) in each segment: (M, S·A)."""
    m = s.shape[0]
    out = np.zeros((m, S * A))
    np.add.at(out, (np.repeat(np.arange(m), s.shape[1]), (s * A + a).ravel()), 1)
    return out


def solve_pvo_tabular(
    s0: np.ndarray,
    a0: np.ndarray,
    s1: np.ndarray,
    a1: np.ndarray,
    r_hat: np.ndarray,
    gamma: float,
    *,
    tie: str = "min_norm",
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """Minimise the VA loss over tabular f with V(s) = f(s, π_f(s)), π_f greedy (paper §1.2).

    Given π, ``r_f(σ) = Σ_l f(s_l, a_l) − γ f(s_{l+1}, π(s_{l+1}))`` is linear in f, so each
    round solves a least-squares problem exactly, then makes π greedy in f, until π is stable
    (policy-iteration style). The minimiser is not unique: ``tie="min_norm"`` picks the
    minimum-norm f, ``"anchored"`` the one closest to r̂. Returns (f (S, A), greedy π (S,)).
    """
    check_choice(tie, "tie", ("min_norm", "anchored"))
    check_range(gamma, "gamma", low=0, high=1, high_inclusive=False)
    S, A = r_hat.shape
    R0 = r_hat[s0[:, :-1], a0].sum(1)
    R1 = r_hat[s1[:, :-1], a1].sum(1)
    target = R0 - R1
    anchor = r_hat.ravel() if tie == "anchored" else np.zeros(S * A)
    policy = r_hat.argmax(1)
    f = anchor.reshape(S, A)
    for _ in range(max_iter):
        D = _residual_design(s0, a0, policy, gamma, S, A) - _residual_design(
            s1, a1, policy, gamma, S, A
        )
        sol, *_ = np.linalg.lstsq(D, target - D @ anchor, rcond=None)
        f = (anchor + sol).reshape(S, A)
        new = f.argmax(1)
        if np.array_equal(new, policy):
            break
        policy = new
    return f, policy


def _residual_design(s, a, policy, gamma, S, A):
    """Rows: Σ_l e(s_l, a_l) − γ e(s_{l+1}, π(s_{l+1})) as (M, S·A)."""
    m, L = a.shape
    out = np.zeros((m, S * A))
    rows = np.repeat(np.arange(m), L)
    np.add.at(out, (rows, (s[:, :-1] * A + a).ravel()), 1.0)
    nxt = s[:, 1:]
    np.add.at(out, (rows, (nxt * A + policy[nxt]).ravel()), -gamma)
    return out


def fitted_td_tabular(
    states: np.ndarray, actions: np.ndarray, r_hat: np.ndarray, gamma: float, *, iters: int = 1000
) -> np.ndarray:
    """TD on the learned reward from data (fitted Q iteration): for every observed (s, a),
    ``Q(s, a) ← r̂(s, a) + γ mean_{s' observed} max_a' Q(s', a')``; unobserved pairs stay 0."""
    S, A = r_hat.shape
    s, a, nxt = states[:, :-1].ravel(), actions.ravel(), states[:, 1:].ravel()
    idx = s * A + a
    count = np.bincount(idx, minlength=S * A).reshape(S, A).astype(float)
    seen = count > 0
    q = np.zeros((S, A))
    for _ in range(iters):
        target = np.bincount(idx, weights=q[nxt].max(1), minlength=S * A).reshape(S, A)
        new = np.where(seen, r_hat + gamma * target / np.maximum(count, 1), 0.0)
        if np.abs(new - q).max() < 1e-10:
            return new
        q = new
    return q
