"""PPO (the official MIKASA-Robo baseline) with MLP, GRU, LSTM and transformer actor-critics.

The official baselines (``ppo_memtasks.py`` / ``ppo_memtasks_lstm.py``, CleanRL style) run PPO on
1,024 GPU environments with ``num_steps = T``, finite-horizon GAE, γ = 0.99, λ = 0.95, clip 0.2,
4 update epochs, entropy coefficient 0, value coefficient 0.5, gradient norm 0.5 and
``target_kl = 0.2``, on the ``normalized_dense`` reward. This class keeps those defaults at CPU
scale on the batched kinematic backend:

* every rollout is exactly one episode of T steps in each of ``num_envs`` environments (episodes
  have a fixed length, so all environments start together and the recurrent state starts at zero
  at every rollout — no hidden state crosses an episode boundary);
* finite-horizon GAE: the value after the last step is 0 (the time t/T is in the observation);
* a diagonal Gaussian policy with a state-independent log-std; the sampled action is clipped to
  [-1, 1] for the environment and its unclipped value scored by the log-probability;
* minibatches are sets of whole episodes, so a recurrent core is trained on full sequences
  (the official LSTM script does the same with ``envsperbatch``);
* the ``transformer`` core is a small causal transformer over the episode so far (2 layers,
  4 heads, learned positions, context ``max(256, T)``): when acting, its state is the encoded
  history of the episode, and the action at step t attends to steps 0..t only, exactly as in
  training on the whole episode with a causal mask.

After :meth:`PPO.fit`, the object is a policy for :func:`iclr26.mikasa.evaluate` (deterministic:
the Gaussian mean).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from iclr26.mikasa.kinematic import check_seed
from iclr26.shared import progress as progress_bar

__all__ = [
    "PPO",
    "PPO_POLICIES",
    "ActorCritic",
    "CausalTransformerCore",
    "RunningMeanStd",
    "finite_horizon_gae",
]

log = logging.getLogger(__name__)
PPO_POLICIES = ("mlp", "gru", "lstm", "transformer")


def finite_horizon_gae(
    rewards: np.ndarray, values: np.ndarray, gamma: float, gae_lambda: float
) -> np.ndarray:
    """GAE advantages (N, T) of whole episodes: the value after the last step is 0.

    A_t = Σ_k (γλ)^k δ_{t+k}, δ_t = r_t + γ V_{t+1} − V_t with V_T = 0.
    """
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    if rewards.ndim != 2 or values.shape != rewards.shape:
        raise ValueError(
            f"rewards and values must both be (N, T), got {rewards.shape} and {values.shape}"
        )
    if not (np.isfinite(rewards).all() and np.isfinite(values).all()):
        raise ValueError("rewards and values must be finite")
    T = rewards.shape[1]
    # δ_t with V_T = 0, then A = δ M with M[k, t] = (γλ)^(k − t) for k ≥ t: the backward
    # recursion A_t = δ_t + γλ A_{t+1} as one matrix product over all episodes
    nxt = np.concatenate([values[:, 1:], np.zeros((len(values), 1))], 1)
    delta = rewards + gamma * nxt - values
    k = np.arange(T)
    lag = k[:, None] - k[None, :]
    decay = np.where(lag >= 0, float(gamma * gae_lambda) ** np.maximum(lag, 0), 0.0)
    return delta @ decay


def _cached_layer(
    layer: nn.TransformerEncoderLayer, x: torch.Tensor, cache: Any, start: int, max_len: int
):
    """One post-norm encoder layer on new steps ``x`` (B, L, H) attending to ``cache`` + x.

    The same arithmetic as ``nn.TransformerEncoderLayer`` (dropout 0, ReLU, post-norm) with a
    causal mask, written out so that the keys and values of earlier steps are kept (a KV
    cache) instead of re-encoding the whole episode at every step. ``cache`` holds the keys and
    values of the ``start`` earlier steps (None when ``start`` is 0). Without gradients the new
    keys and values are written into a buffer of ``max_len`` steps (allocated once per episode),
    so a step costs O(t) instead of copying the whole history; with gradients they are
    concatenated (autograd cannot see through the in-place writes).
    """
    attn = layer.self_attn
    b, n_new, h = x.shape
    heads = attn.num_heads
    q, k, v = F.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, -1)
    n_all = start + n_new
    if cache is not None:
        kc, vc = cache
        if torch.is_grad_enabled():
            k, v = torch.cat([kc[:, :start], k], 1), torch.cat([vc[:, :start], v], 1)
        else:
            if kc.shape[1] < n_all:  # a cache from a gradient pass: move it into a buffer
                kb, vb = kc.new_zeros(b, max_len, h), vc.new_zeros(b, max_len, h)
                kb[:, :start], vb[:, :start] = kc[:, :start], vc[:, :start]
                kc, vc = kb, vb
            kc[:, start:n_all], vc[:, start:n_all] = k, v
            k, v = kc[:, :n_all], vc[:, :n_all]
            cache = (kc, vc)
    if cache is None or torch.is_grad_enabled():
        cache = (k, v)

    def split(z: torch.Tensor) -> torch.Tensor:
        return z.reshape(b, -1, heads, h // heads).transpose(1, 2)

    if start == 0:  # the whole prefix: the plain causal mask
        a = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=n_new > 1)
    else:
        mask = torch.ones(n_new, n_all, dtype=torch.bool, device=x.device).tril(start)
        a = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=mask)
    a = attn.out_proj(a.transpose(1, 2).reshape(b, n_new, h))
    x = layer.norm1(x + a)
    x = layer.norm2(x + layer.linear2(F.relu(layer.linear1(x))))
    return x, cache


class CausalTransformerCore(nn.Module):
    """A causal transformer over an episode's encoded observations (B, T, H) -> (B, T, H).

    ``forward(h, state)`` takes the new steps ``h`` and ``state``, the keys and values of the
    steps seen before in this episode (None at the start); every output attends only to itself
    and earlier steps, so stepping one observation at a time gives the same outputs as one pass
    over the episode, at the cost of one step per step (the cache is not re-encoded).
    Without gradients a state's key-value buffers are advanced in place: keep stepping from the
    latest state only (stepping again from an older state of the episode rewrites the keys
    and values of the steps after it).
    """

    def __init__(self, hidden: int, max_len: int = 256, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(
                f"hidden must be a multiple of {heads} for the transformer, got {hidden}"
            )
        self.max_len = int(max_len)
        self.pos = nn.Parameter(torch.zeros(1, self.max_len, hidden))
        nn.init.normal_(self.pos, std=0.02)
        block = nn.TransformerEncoderLayer(
            hidden, heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
        )
        self.body = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)

    def forward(self, h: torch.Tensor, state: Any = None):
        start = 0 if state is None else state[0]
        t = start + h.shape[1]
        if t > self.max_len:
            raise ValueError(f"episode length {t} exceeds the transformer context {self.max_len}")
        x = h + self.pos[:, start:t]
        caches = []
        for i, layer in enumerate(self.body.layers):
            cache = None if state is None else state[1][i]
            x, kv = _cached_layer(layer, x, cache, start, self.max_len)
            caches.append(kv)
        return x, (t, caches)


class RunningMeanStd:
    """Running mean and variance of observation features (parallel Welford updates).

    ``update(x)`` merges a batch (N, D); ``normalize(x)`` is (x − mean) / sqrt(var + 1e-8)
    clipped to ±``clip``: gymnasium's ``NormalizeObservation`` over a vector env.
    """

    def __init__(self, dim: int, clip: float = 10.0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        if not (isinstance(clip, float | int) and np.isfinite(clip) and clip > 0):
            raise ValueError(f"clip must be a finite number > 0, got {clip!r}")
        self.mean = np.zeros(dim)
        self.var = np.ones(dim)
        self.count = 1e-4
        self.clip = float(clip)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or x.shape[1] != self.mean.shape[0] or len(x) == 0:
            raise ValueError(f"x must be (N >= 1, {self.mean.shape[0]}), got {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("x holds NaN or inf")
        n = len(x)
        mean, var = x.mean(0), x.var(0)
        delta, tot = mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / tot
        m2 = self.var * self.count + var * n + delta**2 * self.count * n / tot
        self.var, self.count = m2 / tot, tot

    def normalize(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, np.float64) - self.mean) / np.sqrt(self.var + 1e-8)
        return np.clip(z, -self.clip, self.clip).astype(np.float32)


_HALF_LOG_2PI = 0.5 * float(np.log(2 * np.pi))


def _gaussian_logp(a: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log N(a; mean, diag(exp(log_std))^2) summed over the action dimensions."""
    z = (a - mean) * torch.exp(-log_std)
    return -(0.5 * z * z + log_std + _HALF_LOG_2PI).sum(-1)


class ActorCritic(nn.Module):
    """Shared encoder, an optional memory core, a Gaussian actor head and a value head.

    ``core``: ``mlp`` (none), ``gru``, ``lstm`` or ``transformer`` (:class:`CausalTransformerCore`).
    """

    def __init__(
        self, obs_dim: int, hidden: int = 128, core: str = "mlp", max_len: int = 256
    ) -> None:
        super().__init__()
        self.core_kind = core
        self.enc = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()
        )
        self.rnn = None
        if core == "gru":
            self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        elif core == "lstm":
            self.rnn = nn.LSTM(hidden, hidden, batch_first=True)
        elif core == "transformer":
            self.rnn = CausalTransformerCore(hidden, max_len)
        self.actor = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 3))
        self.critic = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.log_std = nn.Parameter(torch.full((3,), -0.5))
        nn.init.orthogonal_(self.actor[-1].weight, 0.01)
        nn.init.zeros_(self.actor[-1].bias)

    def forward(self, seq: torch.Tensor, state: Any = None):
        """(B, T, D) observations -> action means (B, T, 3), values (B, T) and the new state."""
        h = self.enc(seq)
        if self.rnn is not None:
            h, state = self.rnn(h, state)
        return self.actor(h), self.critic(h)[..., 0], state


class PPO:
    """Proximal policy optimisation on a MikasaLite task (kinematic backend).

    Args:
        policy: ``mlp`` (memoryless), ``gru``, ``lstm`` or ``transformer`` (a 2-layer causal
            transformer over the episode, context ``max(256, T)``).
        hidden: width of the encoder, core and heads (a multiple of 4 for the transformer).
        num_envs: environments per rollout (each rollout is one episode per environment).
        total_steps: environment steps to train for (rounded up to whole rollouts).
        lr, gamma, gae_lambda, clip, ent_coef, vf_coef, update_epochs, minibatches,
        max_grad_norm, target_kl: the official PPO hyper-parameters (defaults as upstream,
            except ``minibatches``: 4 for 16 environments instead of 32 for 1,024).
        obs_mode: ``memory`` (default) or ``state``.
        normalize_obs: standardise observations by a running mean and variance over every
            observation seen in training (gymnasium's ``NormalizeObservation``, clipped to ±10,
            as in CleanRL's continuous PPO), frozen for acting. The official script feeds raw
            observations; positions of a few centimetres against actions of ``Δ / 0.03 m``
            train slowly at a CPU budget without it.
        reward_mode: ``normalized_dense`` (default, as upstream), ``dense`` or ``sparse``.
        seed: seeds the network, the sampling and the environments.
        device: torch device (CPU default).
    """

    def __init__(
        self,
        policy: str = "gru",
        *,
        hidden: int = 128,
        num_envs: int = 16,
        total_steps: int = 200_000,
        lr: float = 3e-4,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip: float = 0.2,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        update_epochs: int = 4,
        minibatches: int = 4,
        max_grad_norm: float = 0.5,
        target_kl: float | None = 0.2,
        obs_mode: str = "memory",
        normalize_obs: bool = True,
        reward_mode: str = "normalized_dense",
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        if policy not in PPO_POLICIES:
            raise ValueError(f"policy must be one of {PPO_POLICIES}; got {policy!r}")
        for name, v in (
            ("hidden", hidden), ("num_envs", num_envs), ("total_steps", total_steps),
            ("update_epochs", update_epochs), ("minibatches", minibatches),
        ):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if policy == "transformer" and hidden % 4:
            raise ValueError(f"hidden must be a multiple of 4 for the transformer, got {hidden!r}")
        if minibatches > num_envs:
            raise ValueError(f"minibatches ({minibatches}) must be <= num_envs ({num_envs})")
        for name, v, lo, hi in (
            ("lr", lr, 0.0, np.inf), ("gamma", gamma, 0.0, 1.0), ("gae_lambda", gae_lambda, 0.0, 1.0),
            ("clip", clip, 0.0, np.inf), ("max_grad_norm", max_grad_norm, 0.0, np.inf),
        ):  # fmt: skip
            if not (isinstance(v, float | int) and np.isfinite(v) and lo < v <= hi):
                raise ValueError(f"{name} must be a finite number in ({lo}, {hi}], got {v!r}")
        for name, v in (("ent_coef", ent_coef), ("vf_coef", vf_coef)):
            if not (isinstance(v, float | int) and np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if obs_mode not in ("memory", "state"):
            raise ValueError(f"obs_mode must be 'memory' or 'state'; got {obs_mode!r}")
        if not isinstance(normalize_obs, bool):
            raise TypeError(f"normalize_obs must be a bool, got {type(normalize_obs).__name__}")
        self.normalize_obs = normalize_obs
        self.kind, self.hidden, self.num_envs = policy, int(hidden), int(num_envs)
        self.total_steps = int(total_steps)
        self.lr, self.gamma, self.gae_lambda, self.clip = float(lr), gamma, gae_lambda, clip
        self.ent_coef, self.vf_coef = float(ent_coef), float(vf_coef)
        self.update_epochs, self.minibatches = int(update_epochs), int(minibatches)
        self.max_grad_norm, self.target_kl = float(max_grad_norm), target_kl
        self.obs_mode, self.reward_mode = obs_mode, reward_mode
        self.seed = check_seed(seed) or 0
        self.device = torch.device(device)
        self.net_: ActorCritic | None = None
        self.history_: list[dict[str, float]] = []
        self.obs_rms_: RunningMeanStd | None = None

    # --- training -----------------------------------------------------------------------------
    def fit(self, env_id: str, *, progress: bool = False, **env_kwargs: Any) -> PPO:
        """Train on ``env_id`` (kinematic backend); ``history_`` records every update."""
        from iclr26.mikasa.kinematic import KinematicVectorEnv
        from iclr26.mikasa.tasks import get_spec

        spec = get_spec(env_id)
        env = KinematicVectorEnv(
            spec, self.num_envs, obs_mode=self.obs_mode, reward_mode=self.reward_mode,
            **env_kwargs,
        )  # fmt: skip
        T, n = spec.T, self.num_envs
        torch.manual_seed(self.seed)
        gen = np.random.default_rng(self.seed)
        obs_dim = env.single_observation_space.shape[0]
        rms = self.obs_rms_ = RunningMeanStd(obs_dim)
        net = ActorCritic(obs_dim, self.hidden, self.kind, max(256, T)).to(self.device)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr, eps=1e-5)
        iters = -(-self.total_steps // (n * T))
        obs_buf = np.zeros((n, T, obs_dim), np.float32)
        act_buf = torch.zeros((n, T, 3), device=self.device)
        logp_buf = torch.zeros((n, T), device=self.device)
        val_buf = torch.zeros((n, T), device=self.device)
        rew = np.zeros((n, T))
        t0 = time.perf_counter()
        for it in progress_bar(range(iters), desc=f"PPO {self.kind}", enabled=progress):
            frac = 1.0 - it / iters  # linear learning-rate annealing, as upstream
            opt.param_groups[0]["lr"] = frac * self.lr
            obs, _ = env.reset(seed=int(gen.integers(2**31)))
            state = None
            success = np.zeros(n, bool)
            with torch.inference_mode():
                std = net.log_std.exp()
                for t in range(T):
                    if self.normalize_obs:
                        rms.update(obs)
                        obs = rms.normalize(obs)
                    o = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
                    obs_buf[:, t] = obs
                    mean, value, state = net(o[:, None], state)
                    mean = mean[:, 0]
                    a = mean + std * torch.randn_like(mean)
                    act_buf[:, t], val_buf[:, t] = a, value[:, 0]
                    logp_buf[:, t] = _gaussian_logp(a, mean, net.log_std)
                    a_env = a.clamp(-1.0, 1.0).cpu().numpy().astype(np.float64)
                    obs, r, _term, _trunc, info = env.step(a_env)
                    rew[:, t] = r
                success = info["success"]
                once = info["success_once"]
            obs_t = torch.as_tensor(obs_buf, device=self.device)
            # finite-horizon GAE (the value after step T is 0)
            values = val_buf.cpu().numpy()
            adv = finite_horizon_gae(rew, values, self.gamma, self.gae_lambda)
            ret = torch.as_tensor(adv + values, dtype=torch.float32, device=self.device)
            adv_t = torch.as_tensor(adv, dtype=torch.float32, device=self.device)
            stats = self._update(net, opt, obs_t, act_buf, logp_buf, adv_t, ret, gen)
            stats.update(
                iteration=it, env_steps=(it + 1) * n * T, success_at_end=float(success.mean()),
                success_once=float(once.mean()), mean_return=float(rew.sum(1).mean()),
                seconds=time.perf_counter() - t0,
            )  # fmt: skip
            self.history_.append(stats)
        self.net_ = net.eval()
        return self

    def _update(self, net, opt, obs, act, logp_old, adv, ret, gen) -> dict[str, float]:
        n = obs.shape[0]
        mb = n // self.minibatches
        approx_kl = 0.0
        for _epoch in range(self.update_epochs):
            perm = gen.permutation(n)
            for start in range(0, n - mb + 1, mb):
                idx = torch.as_tensor(perm[start : start + mb], device=self.device)
                mean, value, _ = net(obs[idx])
                logp = _gaussian_logp(act[idx], mean, net.log_std)
                ratio = (logp - logp_old[idx]).exp()
                a = adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - self.clip, 1 + self.clip)).mean()
                v_loss = 0.5 * ((value - ret[idx]) ** 2).mean()
                ent = (0.5 + _HALF_LOG_2PI + net.log_std).sum()  # the same at every step
                loss = pg + self.vf_coef * v_loss - self.ent_coef * ent
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), self.max_grad_norm)
                opt.step()
                with torch.no_grad():
                    approx_kl = float(((ratio - 1) - (logp - logp_old[idx])).mean())
            if self.target_kl is not None and approx_kl > self.target_kl:
                break
        return {
            "policy_loss": float(pg.detach()),
            "value_loss": float(v_loss.detach()),
            "approx_kl": approx_kl,
        }

    # --- acting -------------------------------------------------------------------------------
    def reset(self, num_envs: int) -> None:
        """Start ``num_envs`` new episodes (zero recurrent state, empty transformer history)."""
        if self.net_ is None:
            raise RuntimeError("PPO.fit must be called before acting")
        self._state = None

    @torch.inference_mode()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions (num_envs, 3): the clipped Gaussian mean."""
        if self.net_ is None:
            raise RuntimeError("PPO.fit must be called before acting")
        obs = np.asarray(obs, np.float32)
        if self.normalize_obs:
            obs = self.obs_rms_.normalize(obs)
        o = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        mean, _, self._state = self.net_(o[:, None], self._state)
        return mean[:, 0].clamp(-1.0, 1.0).cpu().numpy().astype(np.float64)
