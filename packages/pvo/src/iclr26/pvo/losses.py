"""Pure, jittable losses of PVO and the baselines it is compared with.

Conventions: segment sums run over the segment's L steps; ``label = 1`` means segment 1 is
preferred; ``q`` arrays are (B, L), ``v_next`` (B, L) is V(s_{l+1}) (already zeroed at true
terminations by ``1 − done``), ``mask`` (B, L) marks valid steps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "awr_loss",
    "bt_nll",
    "cpl_loss",
    "expectile_loss",
    "gumbel_loss",
    "ipl_loss",
    "segment_implicit_reward",
    "td3bc_actor_loss",
    "td_loss",
    "value_alignment_loss",
]


def bt_nll(r_seg0: jax.Array, r_seg1: jax.Array, label: jax.Array) -> jax.Array:
    """Bradley–Terry negative log-likelihood, mean over pairs (paper §1.2 step 1, soft-label form).

    ``−[y log σ(R¹ − R⁰) + (1 − y) log σ(R⁰ − R¹)]``: equals the paper's
    ``−log σ((2y − 1)(R¹ − R⁰))`` on hard labels and is not constant at ties (y = 0.5).
    """
    d = r_seg1 - r_seg0
    return -jnp.mean(label * jax.nn.log_sigmoid(d) + (1 - label) * jax.nn.log_sigmoid(-d))


def segment_implicit_reward(
    q: jax.Array, v_next: jax.Array, gamma: float, mask: jax.Array | None = None
) -> jax.Array:
    """r_{Q,V}(σ) = Σ_l mask_l (Q(s_l, a_l) − γ V(s_{l+1})), shape (B, L) -> (B,)."""
    r = q - gamma * v_next
    return jnp.sum(r if mask is None else r * mask, axis=-1)


def value_alignment_loss(
    q0: jax.Array,
    v_next0: jax.Array,
    q1: jax.Array,
    v_next1: jax.Array,
    rhat0: jax.Array,
    rhat1: jax.Array,
    gamma: float,
    mask0: jax.Array | None = None,
    mask1: jax.Array | None = None,
) -> jax.Array:
    """PVO's value-alignment loss (paper §1.3), mean over pairs.

    ``(r_{Q,V}(σ⁰) − r_{Q,V}(σ¹) − R̂(σ⁰) + R̂(σ¹))²`` with ``R̂(σ) = Σ_l r̂(s_l, a_l)``: the
    squared difference of the two segments' summed Bellman residuals with respect to r̂.
    ``rhat*`` are per-step (B, L) learned rewards.
    """
    res0 = segment_implicit_reward(q0, v_next0, gamma, mask0) - _masked_sum(rhat0, mask0)
    res1 = segment_implicit_reward(q1, v_next1, gamma, mask1) - _masked_sum(rhat1, mask1)
    return jnp.mean((res0 - res1) ** 2)


def _masked_sum(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    return jnp.sum(x if mask is None else x * mask, axis=-1)


def expectile_loss(diff: jax.Array, tau: float) -> jax.Array:
    """IQL's asymmetric square ``L₂^τ(u) = |τ − 1(u < 0)| u²``, mean; ``diff = Q̄ − V``."""
    weight = jnp.where(diff < 0, 1 - tau, tau)
    return jnp.mean(weight * diff**2)


def gumbel_loss(diff: jax.Array, beta: float, max_z: float = 5.0) -> jax.Array:
    """XQL's Gumbel regression ``e^z − z − 1`` with ``z = (Q̄ − V)/β`` (clipped at ``max_z``)."""
    z = jnp.clip(diff / beta, -max_z, max_z)
    return jnp.mean(jnp.exp(z) - z - 1)


def awr_loss(
    log_prob: jax.Array, adv: jax.Array, beta: float, max_weight: float = 100.0
) -> jax.Array:
    """Advantage-weighted regression ``−E[min(exp(β·A), w_max) log π(a|s)]`` (weights held fixed)."""
    weight = jnp.minimum(jnp.exp(beta * jax.lax.stop_gradient(adv)), max_weight)
    return -jnp.mean(weight * log_prob)


def td_loss(q: jax.Array, reward: jax.Array, v_next: jax.Array, gamma: float) -> jax.Array:
    """IQL's per-transition TD loss ``(r + γ V(s') − Q(s, a))²`` with V(s') held fixed."""
    target = reward + gamma * jax.lax.stop_gradient(v_next)
    return jnp.mean((q - target) ** 2)


def ipl_loss(
    q0: jax.Array,
    v_next0: jax.Array,
    q1: jax.Array,
    v_next1: jax.Array,
    label: jax.Array,
    gamma: float,
    chi2_coeff: float = 0.5,
) -> jax.Array:
    """IPL (Hejna & Sadigh 2023): BT likelihood on the implicit reward Q − γV(s') summed over
    segments, plus a χ² regulariser ``chi2_coeff · mean(r²)`` on the per-step implicit reward."""
    r0, r1 = q0 - gamma * v_next0, q1 - gamma * v_next1
    nll = bt_nll(r0.sum(-1), r1.sum(-1), label)
    return nll + chi2_coeff * 0.5 * (jnp.mean(r0**2) + jnp.mean(r1**2))


def cpl_loss(
    logp0: jax.Array, logp1: jax.Array, label: jax.Array, alpha: float = 0.1, bias: float = 0.5
) -> jax.Array:
    """CPL (Hejna et al. 2024): contrastive preference loss on ``α Σ_l log π(a_l|s_l)``, with the
    conservative bias λ multiplying the non-preferred segment's score."""
    a0, a1 = alpha * logp0.sum(-1), alpha * logp1.sum(-1)
    prefer1 = -jax.nn.log_sigmoid(a1 - bias * a0)
    prefer0 = -jax.nn.log_sigmoid(a0 - bias * a1)
    return jnp.mean(label * prefer1 + (1 - label) * prefer0)


def td3bc_actor_loss(q: jax.Array, pi: jax.Array, act: jax.Array, alpha: float = 2.5) -> jax.Array:
    """TD3+BC's actor loss (Fujimoto & Gu 2021): ``−λ·mean Q(s, π(s)) + mean (π(s) − a)²`` with
    ``λ = α / mean|Q|`` held fixed, so the Q term has a scale-free weight against the BC term
    (the squared error is averaged over batch and action dimensions, as CORL's ``mse_loss``).
    ``q`` (B,), ``pi`` and ``act`` (B, k)."""
    lam = alpha / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)))
    return -lam * jnp.mean(q) + jnp.mean((pi - act) ** 2)
