"""Offline agents behind one ``create / update / act`` interface, sharing networks and state.

Every value-based agent has IQL's structure (Kostrikov et al. 2022): a twin Q with a Polyak
target, V by a regression on min-target-Q, and an advantage-weighted-regression actor. They differ
only in the Q loss and, for XQL, the V loss — so swapping TD for value alignment is exactly the
paper's ablation:

=============  ======================================  =======================  ============
``algo``        Q loss                                  V loss                   actor
=============  ======================================  =======================  ============
``pvo``         value alignment on segment pairs, r̂     expectile                AWR
``iql``         TD on the learned reward r̂              expectile                AWR
``oracle_iql``  TD on the true reward (upper bound)     expectile                AWR
``ipl``         BT on the implicit reward + χ² (IPL)    expectile                AWR
``xql``         TD on r̂                                 Gumbel (XQL)             AWR
``xql_va``      value alignment on r̂                    Gumbel (XQL)             AWR
``td3bc``       TD on r̂, target-policy smoothing           —                        TD3+BC
``td3bc_va``    value alignment on r̂, same V(s′)           —                        TD3+BC
``cpl``         —                                       —                        CPL
``bc``          —                                       —                        max likelihood
=============  ======================================  =======================  ============

TD3+BC (Fujimoto & Gu 2021, CORL's defaults: α = 2.5, policy noise 0.2 and clip 0.5 times the
action bound, actor and targets updated every 2nd step) has no V network: its state value is
``V(s′) = min_i Q̄_i(s′, clip(π̄(s′) + ε))``, and ``td3bc_va`` aligns ``Q(s, a) − γV(s′)`` over
segment pairs with r̂ exactly as PVO does with IQL's V.

Defaults are CORL's IQL (expectile 0.7, AWR weight exp(3·A) clipped at 100, Adam 3e-4, Polyak
0.005, γ = 0.99, 256 transitions and 16 pairs per step); PVO adds no hyperparameter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from iclr26.pvo import losses
from iclr26.pvo.nets import GaussianActor, TwinQ, ValueNet
from iclr26.pvo.reward_model import reward_apply
from iclr26.shared import check_choice, check_int, check_range

__all__ = ["ALGOS", "AgentConfig", "AgentState", "act", "create", "create_states", "update"]

ALGOS = ("pvo", "iql", "oracle_iql", "ipl", "xql", "xql_va", "td3bc", "td3bc_va", "cpl", "bc")
VALUE_ALGOS = ("pvo", "iql", "oracle_iql", "ipl", "xql", "xql_va")
TD3_ALGOS = ("td3bc", "td3bc_va")
VA_ALGOS = ("pvo", "xql_va", "td3bc_va")
NEEDS_REWARD_MODEL = ("pvo", "iql", "xql", "xql_va", "td3bc", "td3bc_va")
NEEDS_LABELS = ("ipl", "cpl")


@dataclass(frozen=True)
class AgentConfig:
    """Hyperparameters of every agent (one config; each agent reads what it uses).

    ``va_pairs`` picks the segment pairs the value-alignment loss runs on: ``"unlabeled"`` (pairs
    sampled from the whole dataset and scored by r̂, the theory's D_TJ; default [verify]),
    ``"labeled"`` (the preference pairs) or ``"both"``.
    """

    algo: str = "pvo"
    gamma: float = 0.99
    expectile: float = 0.7
    awr_beta: float = 3.0
    max_adv_weight: float = 100.0
    lr: float = 3e-4
    hidden: tuple[int, ...] = (256, 256)
    target_tau: float = 0.005
    transition_batch: int = 256
    pair_batch: int = 16
    va_pairs: str = "unlabeled"
    stop_grad_next_v: bool = True
    ipl_chi2: float = 0.5
    xql_beta: float = 2.0
    cpl_alpha: float = 0.1
    cpl_bias: float = 0.5
    max_action: float = 2.0
    td3_alpha: float = 2.5
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_freq: int = 2
    reward_hidden: tuple[int, ...] = field(default=(64, 64))

    def __post_init__(self) -> None:
        check_choice(self.algo, "algo", ALGOS)
        check_choice(self.va_pairs, "va_pairs", ("unlabeled", "labeled", "both"))
        check_range(self.gamma, "gamma", low=0, high=1, high_inclusive=False)
        check_range(
            self.expectile, "expectile", low=0, high=1, low_inclusive=False, high_inclusive=False
        )
        check_range(self.lr, "lr", low=0, low_inclusive=False)
        check_range(self.target_tau, "target_tau", low=0, high=1)
        check_range(self.td3_alpha, "td3_alpha", low=0, low_inclusive=False)
        check_range(self.policy_noise, "policy_noise", low=0)
        check_range(self.noise_clip, "noise_clip", low=0)
        for name in ("transition_batch", "pair_batch", "policy_freq"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


class AgentState(NamedTuple):
    """Parameters and optimiser states of one agent (a pytree: vmap it over seeds)."""

    q: Any
    q_target: Any
    v: Any
    actor: Any
    actor_target: Any
    q_opt: Any
    v_opt: Any
    actor_opt: Any
    step: jax.Array


def _nets(cfg: AgentConfig, act_dim: int) -> tuple[TwinQ, ValueNet, GaussianActor]:
    return (
        TwinQ(cfg.hidden),
        ValueNet(cfg.hidden),
        GaussianActor(cfg.hidden, act_dim, cfg.max_action),
    )


def create(key: jax.Array, obs_dim: int, act_dim: int, cfg: AgentConfig) -> AgentState:
    """Initialise an agent's networks and Adam states."""
    qn, vn, an = _nets(cfg, act_dim)
    kq, kv, ka = jax.random.split(key, 3)
    obs, a = jnp.zeros((1, obs_dim)), jnp.zeros((1, act_dim))
    q, v, actor = qn.init(kq, obs, a), vn.init(kv, obs), an.init(ka, obs)
    opt = optax.adam(cfg.lr)
    return AgentState(
        q, q, v, actor, actor, opt.init(q), opt.init(v), opt.init(actor), jnp.zeros((), jnp.int32)
    )


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _create_batch(keys: jax.Array, obs_dim: int, act_dim: int, shapes: AgentConfig) -> AgentState:
    return jax.vmap(lambda k: create(k, obs_dim, act_dim, shapes))(keys)


def create_states(keys: jax.Array, obs_dim: int, act_dim: int, cfg: AgentConfig) -> AgentState:
    """:func:`create` for a stack of keys (one state per key, stacked on a leading axis), as one
    compiled program per network shape: the same values as ``jax.vmap(create)``, which, un-jitted,
    runs the flax initialisers op by op and compiles each op (seconds of a fresh process)."""
    if not isinstance(cfg, AgentConfig):
        raise TypeError(f"cfg must be an AgentConfig, got {type(cfg).__name__}")
    keys = jnp.asarray(keys)
    if keys.ndim != 1 or not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        raise ValueError(
            f"keys must be a 1-D array of jax.random.key()s, got {keys.dtype}{keys.shape}"
        )
    # the initial state depends only on the networks' shapes, so every agent with the same
    # widths shares one compiled program
    shapes = AgentConfig(hidden=cfg.hidden, max_action=cfg.max_action)
    return _create_batch(
        keys, check_int(obs_dim, "obs_dim", low=1), check_int(act_dim, "act_dim", low=1), shapes
    )


def act(state: AgentState, obs: jax.Array, cfg: AgentConfig, act_dim: int) -> jax.Array:
    """The deterministic policy action (the Gaussian's mean) for observations (..., d)."""
    return _nets(cfg, act_dim)[2].apply(state.actor, obs)[0]


def update(
    state: AgentState, batch: dict[str, Any], cfg: AgentConfig, reward_params: Any = None
) -> tuple[AgentState, dict[str, jax.Array]]:
    """One gradient step of every network the agent has (pure; jit/vmap/scan it).

    ``batch`` holds ``transitions`` (obs, act, reward, next_obs, done: (B, ...)), ``va`` (segment
    pairs for value alignment) and ``prefs`` (labelled pairs), each pairs dict with obs0/act0/
    done0/obs1/act1/done1/label of shapes (P, L+1, d), (P, L, k), (P, L), ..., and ``key``
    (the PRNG key of TD3+BC's target-policy noise). ``reward_params`` are the frozen reward
    model's parameters (agents that use r̂).
    """
    if cfg.algo in TD3_ALGOS:
        return _td3bc_update(state, batch, cfg, reward_params)
    act_dim = batch["transitions"]["act"].shape[-1]
    qn, vn, an = _nets(cfg, act_dim)
    tr = batch["transitions"]
    opt = optax.adam(cfg.lr)
    metrics: dict[str, jax.Array] = {}

    def rhat(obs, a):
        return reward_apply(cfg.reward_hidden, reward_params, obs, a)

    if cfg.algo in VALUE_ALGOS:
        q_target = qn.apply(state.q_target, tr["obs"], tr["act"]).min(0)

        # V: expectile (IQL) or Gumbel (XQL) regression on min target Q.
        def v_loss_fn(vp):
            diff = q_target - vn.apply(vp, tr["obs"])
            if cfg.algo in ("xql", "xql_va"):
                return losses.gumbel_loss(diff, cfg.xql_beta)
            return losses.expectile_loss(diff, cfg.expectile)

        v_loss, v_grad = jax.value_and_grad(v_loss_fn)(state.v)
        v_upd, v_opt = opt.update(v_grad, state.v_opt, state.v)
        v_params = optax.apply_updates(state.v, v_upd)
        metrics["v_loss"] = v_loss

        def next_v(vp, obs, done):
            v = vn.apply(vp, obs) * (1.0 - done)
            return jax.lax.stop_gradient(v) if cfg.stop_grad_next_v else v

        def q_loss_fn(qp, vp):
            if cfg.algo in VA_ALGOS:
                p = batch["va"]
                q0 = qn.apply(qp, p["obs0"][:, :-1], p["act0"])  # (2, P, L)
                q1 = qn.apply(qp, p["obs1"][:, :-1], p["act1"])
                vn0, vn1 = (
                    next_v(vp, p["obs0"][:, 1:], p["done0"]),
                    next_v(vp, p["obs1"][:, 1:], p["done1"]),
                )
                r0 = rhat(p["obs0"][:, :-1], p["act0"])
                r1 = rhat(p["obs1"][:, :-1], p["act1"])
                va = jax.vmap(
                    lambda a, b: losses.value_alignment_loss(a, vn0, b, vn1, r0, r1, cfg.gamma)
                )
                return va(q0, q1).sum()
            if cfg.algo == "ipl":
                p = batch["prefs"]
                q0 = qn.apply(qp, p["obs0"][:, :-1], p["act0"])
                q1 = qn.apply(qp, p["obs1"][:, :-1], p["act1"])
                vn0, vn1 = (
                    next_v(vp, p["obs0"][:, 1:], p["done0"]),
                    next_v(vp, p["obs1"][:, 1:], p["done1"]),
                )
                ipl = jax.vmap(
                    lambda a, b: losses.ipl_loss(
                        a, vn0, b, vn1, p["label"], cfg.gamma, cfg.ipl_chi2
                    )
                )
                return ipl(q0, q1).sum()
            reward = tr["reward"] if cfg.algo == "oracle_iql" else rhat(tr["obs"], tr["act"])
            q = qn.apply(qp, tr["obs"], tr["act"])
            v_next = next_v(vp, tr["next_obs"], tr["done"])
            return jax.vmap(lambda qi: losses.td_loss(qi, reward, v_next, cfg.gamma))(q).sum()

        q_loss, q_grad = jax.value_and_grad(q_loss_fn)(state.q, state.v)
        q_upd, q_opt = opt.update(q_grad, state.q_opt, state.q)
        q_params = optax.apply_updates(state.q, q_upd)
        q_tgt = optax.incremental_update(q_params, state.q_target, cfg.target_tau)
        metrics["q_loss"] = q_loss
        adv = q_target - vn.apply(state.v, tr["obs"])

        def actor_loss_fn(ap):
            mean, log_std = an.apply(ap, tr["obs"])
            logp = an.log_prob(mean, log_std, tr["act"])
            return losses.awr_loss(logp, adv, cfg.awr_beta, cfg.max_adv_weight)

    else:
        q_params, q_tgt, v_params = state.q, state.q_target, state.v
        q_opt, v_opt = state.q_opt, state.v_opt

        def actor_loss_fn(ap):
            if cfg.algo == "bc":
                mean, log_std = an.apply(ap, tr["obs"])
                return -jnp.mean(an.log_prob(mean, log_std, tr["act"]))
            p = batch["prefs"]
            m0, s0 = an.apply(ap, p["obs0"][:, :-1])
            m1, s1 = an.apply(ap, p["obs1"][:, :-1])
            lp0, lp1 = an.log_prob(m0, s0, p["act0"]), an.log_prob(m1, s1, p["act1"])
            return losses.cpl_loss(lp0, lp1, p["label"], cfg.cpl_alpha, cfg.cpl_bias)

    a_loss, a_grad = jax.value_and_grad(actor_loss_fn)(state.actor)
    a_upd, a_opt = opt.update(a_grad, state.actor_opt, state.actor)
    metrics["actor_loss"] = a_loss
    new = AgentState(
        q_params,
        q_tgt,
        v_params,
        optax.apply_updates(state.actor, a_upd),
        state.actor_target,
        q_opt,
        v_opt,
        a_opt,
        state.step + 1,
    )
    return new, metrics


def _td3bc_update(
    state: AgentState, batch: dict[str, Any], cfg: AgentConfig, reward_params: Any
) -> tuple[AgentState, dict[str, jax.Array]]:
    """TD3+BC (``td3bc``) and TD3+BC with value alignment (``td3bc_va``): one step."""
    tr = batch["transitions"]
    act_dim = tr["act"].shape[-1]
    qn, _, an = _nets(cfg, act_dim)
    opt = optax.adam(cfg.lr)
    k_tr, k0, k1 = jax.random.split(batch["key"], 3)
    clip = cfg.noise_clip * cfg.max_action

    def rhat(obs, a):
        return reward_apply(cfg.reward_hidden, reward_params, obs, a)

    def target_v(obs, done, key):
        # V(s') = min_i Q̄_i(s', π̄(s') + clipped noise), zero at true terminations, held fixed.
        a = an.apply(state.actor_target, obs)[0]
        noise = jnp.clip(cfg.policy_noise * cfg.max_action * jax.random.normal(key, a.shape),
                         -clip, clip)  # fmt: skip
        a = jnp.clip(a + noise, -cfg.max_action, cfg.max_action)
        return jax.lax.stop_gradient(qn.apply(state.q_target, obs, a).min(0) * (1.0 - done))

    def q_loss_fn(qp):
        if cfg.algo == "td3bc_va":
            p = batch["va"]
            q0 = qn.apply(qp, p["obs0"][:, :-1], p["act0"])
            q1 = qn.apply(qp, p["obs1"][:, :-1], p["act1"])
            vn0 = target_v(p["obs0"][:, 1:], p["done0"], k0)
            vn1 = target_v(p["obs1"][:, 1:], p["done1"], k1)
            r0, r1 = rhat(p["obs0"][:, :-1], p["act0"]), rhat(p["obs1"][:, :-1], p["act1"])
            va = jax.vmap(
                lambda a, b: losses.value_alignment_loss(a, vn0, b, vn1, r0, r1, cfg.gamma)
            )
            return va(q0, q1).sum()
        q = qn.apply(qp, tr["obs"], tr["act"])
        v_next = target_v(tr["next_obs"], tr["done"], k_tr)
        reward = rhat(tr["obs"], tr["act"])
        return jax.vmap(lambda qi: losses.td_loss(qi, reward, v_next, cfg.gamma))(q).sum()

    q_loss, q_grad = jax.value_and_grad(q_loss_fn)(state.q)
    q_upd, q_opt = opt.update(q_grad, state.q_opt, state.q)
    q_params = optax.apply_updates(state.q, q_upd)

    def actor_loss_fn(ap):
        pi = an.apply(ap, tr["obs"])[0]
        return losses.td3bc_actor_loss(qn.apply(q_params, tr["obs"], pi)[0], pi, tr["act"],
                                       cfg.td3_alpha)  # fmt: skip

    a_loss, a_grad = jax.value_and_grad(actor_loss_fn)(state.actor)
    a_upd, a_opt = opt.update(a_grad, state.actor_opt, state.actor)
    actor = optax.apply_updates(state.actor, a_upd)
    # Delayed policy updates: the actor and both targets move on every policy_freq-th step.
    policy_step = (state.step + 1) % cfg.policy_freq == 0

    def pick(new, old):
        return jax.tree.map(lambda a, b: jnp.where(policy_step, a, b), new, old)

    actor = pick(actor, state.actor)
    new = AgentState(
        q_params,
        pick(optax.incremental_update(q_params, state.q_target, cfg.target_tau), state.q_target),
        state.v,
        actor,
        pick(
            optax.incremental_update(actor, state.actor_target, cfg.target_tau), state.actor_target
        ),
        q_opt,
        state.v_opt,
        pick(a_opt, state.actor_opt),
        state.step + 1,
    )
    return new, {"q_loss": q_loss, "actor_loss": a_loss}
