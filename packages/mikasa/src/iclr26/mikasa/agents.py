"""Memory baselines: behaviour cloning with MLP, frame-stack, GRU, LSTM and a causal transformer.

Every policy maps an observation *sequence* (B, T, D) to actions (B, T, 3) causally, so one
forward pass trains it on whole episodes, and steps online through ``reset(n)`` / ``act(obs)``:

* ``mlp``: the current observation only (memoryless);
* ``framestack``: an MLP on the last ``k`` observations (a short window, :class:`FrameStack`);
* ``gru`` / ``lstm``: one recurrent layer (the official PPO-LSTM baseline's recurrent core);
* ``transformer``: a 2-layer causal transformer over the whole episode (context T);
* ``slot_gru``: an object-centric GRU for ``memory`` observations — a shared encoder per object
  slot, a GRU over the pooled slots, and an attention pointer from the GRU state to the visible
  slots whose pointed position (relative to the gripper) feeds the action head.

:class:`BC` fits one of them to oracle demonstrations (:func:`iclr26.mikasa.collect_demos`) by
mean-squared error on the actions, and is itself a policy for :func:`iclr26.mikasa.evaluate`.
Recurrent state is reset by ``reset(n)``, i.e. at every episode start (the batched evaluation
starts all episodes together; with an autoresetting vector env reset where
``terminated | truncated``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from iclr26.mikasa.kinematic import check_seed
from iclr26.shared import progress as progress_bar

__all__ = ["BC", "POLICIES", "FrameStack", "make_policy"]

log = logging.getLogger(__name__)
POLICIES = ("mlp", "framestack", "gru", "lstm", "transformer", "slot_gru")


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, d_out),
    )  # fmt: skip


class _Policy(nn.Module):
    def begin(self, n: int) -> None:  # start n new episodes
        self._hist: list[torch.Tensor] = []

    def step(self, obs: torch.Tensor) -> torch.Tensor:
        """Action (n, 3) for the current observations (n, D), keeping the episode's memory."""
        self._hist.append(obs)
        seq = torch.stack(self._hist, 1)
        return self.forward(seq)[:, -1]


class MLPPolicy(_Policy):
    """Memoryless: a = f(o_t)."""

    def __init__(self, obs_dim: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = _mlp(obs_dim, hidden, 3)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(seq))

    def step(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(obs))


class FrameStack(_Policy):
    """a = f(o_{t-k+1}, ..., o_t): a window of ``k`` observations (zeros before the start)."""

    def __init__(self, obs_dim: int, hidden: int = 128, k: int = 4) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        self.k = k
        self.net = _mlp(obs_dim * k, hidden, 3)

    def _stack(self, seq: torch.Tensor) -> torch.Tensor:
        b, t, d = seq.shape
        padded = torch.cat([seq.new_zeros(b, self.k - 1, d), seq], 1)
        return torch.cat([padded[:, i : i + t] for i in range(self.k)], -1)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(self._stack(seq)))

    def step(self, obs: torch.Tensor) -> torch.Tensor:
        self._hist = [*self._hist[-(self.k - 1) :], obs] if self.k > 1 else [obs]
        seq = torch.stack(self._hist, 1)
        return self.forward(seq)[:, -1]


class RecurrentPolicy(_Policy):
    """a_t = f(h_t), h_t = RNN(h_{t-1}, g(o_t)) with a GRU or an LSTM."""

    def __init__(self, obs_dim: int, hidden: int = 128, cell: str = "gru") -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU())
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(hidden, hidden, batch_first=True)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, seq: torch.Tensor, state=None):
        out, state = self.rnn(self.enc(seq), state)
        self._state = state
        return torch.tanh(self.head(out))

    def begin(self, n: int) -> None:
        self._state = None

    def step(self, obs: torch.Tensor) -> torch.Tensor:
        return self.forward(obs[:, None], self._state)[:, 0]


class TransformerPolicy(_Policy):
    """A causal transformer over the episode so far (learned positions, context ``max_len``)."""

    def __init__(
        self, obs_dim: int, hidden: int = 64, max_len: int = 256, layers: int = 2, heads: int = 4
    ) -> None:
        super().__init__()
        self.enc = nn.Linear(obs_dim, hidden)
        self.pos = nn.Parameter(torch.zeros(1, max_len, hidden))
        nn.init.normal_(self.pos, std=0.02)
        block = nn.TransformerEncoderLayer(
            hidden, heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
        )
        self.body = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Linear(hidden, 3)
        self.max_len = max_len

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        t = seq.shape[1]
        if t > self.max_len:
            raise ValueError(f"sequence length {t} exceeds the context {self.max_len}")
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=seq.device)
        h = self.body(self.enc(seq) + self.pos[:, :t], mask=mask, is_causal=True)
        return torch.tanh(self.head(h))


class SlotGRUPolicy(_Policy):
    """Object-centric recurrent policy for ``memory`` observations (header + object slots).

    Slots are encoded by one shared MLP; the GRU reads the header and the mean slot embedding;
    a query from the GRU state attends over the visible slots (dot product with their keys), and
    the attended slot position minus the gripper position enters the action head with the state.
    """

    def __init__(self, obs_dim: int, hidden: int = 128) -> None:
        super().__init__()
        from iclr26.mikasa.semantics import HEADER
        from iclr26.mikasa.tasks import N_FEATURES

        if (obs_dim - HEADER) % N_FEATURES or obs_dim <= HEADER:
            raise ValueError(
                f"slot_gru needs memory-mode observations ({HEADER} + k × {N_FEATURES} values), "
                f"got obs_dim={obs_dim}"
            )
        self.header, self.nf = HEADER, N_FEATURES
        self.n_slots = (obs_dim - HEADER) // N_FEATURES
        self.slot = nn.Sequential(
            nn.Linear(N_FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden)
        )
        self.inp = nn.Sequential(nn.Linear(HEADER + hidden, hidden), nn.ReLU())
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.query = nn.Linear(hidden, hidden)
        self.head = nn.Sequential(
            nn.Linear(hidden + 3 + 3, hidden), nn.ReLU(), nn.Linear(hidden, 3)
        )

    def _parts(self, seq: torch.Tensor):
        b, t, _ = seq.shape
        head = seq[..., : self.header]
        slots = seq[..., self.header :].reshape(b, t, self.n_slots, self.nf)
        emb = self.slot(slots)  # (B, T, S, H)
        vis = slots[..., 0] > 0.5
        pooled = (emb * vis[..., None]).sum(2) / vis.sum(2, keepdim=True).clamp(min=1)
        return head, slots, emb, vis, pooled

    def _act(self, h, head, slots, emb, vis):
        scores = (self.query(h)[..., None, :] * emb).sum(-1) / emb.shape[-1] ** 0.5
        scores = scores.masked_fill(~vis, -1e9)
        attn = torch.softmax(scores, -1) * vis.any(-1, keepdim=True)
        pointed = (attn[..., None] * slots[..., 1:4]).sum(-2)
        rel = pointed - head[..., 0:3]
        return torch.tanh(self.head(torch.cat([h, rel, head[..., 3:6]], -1)))

    def forward(self, seq: torch.Tensor, state=None) -> torch.Tensor:
        head, slots, emb, vis, pooled = self._parts(seq)
        h, state = self.rnn(self.inp(torch.cat([head, pooled], -1)), state)
        self._state = state
        return self._act(h, head, slots, emb, vis)

    def begin(self, n: int) -> None:
        self._state = None

    def step(self, obs: torch.Tensor) -> torch.Tensor:
        return self.forward(obs[:, None], self._state)[:, 0]


def make_policy(
    kind: str, obs_dim: int, hidden: int = 128, *, k: int = 4, max_len: int = 256
) -> _Policy:
    """A fresh policy network of ``kind`` (one of :data:`POLICIES`)."""
    if kind not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}; got {kind!r}")
    if isinstance(obs_dim, bool) or not isinstance(obs_dim, int) or obs_dim < 1:
        raise ValueError(f"obs_dim must be an int >= 1, got {obs_dim!r}")
    if kind == "mlp":
        return MLPPolicy(obs_dim, hidden)
    if kind == "framestack":
        return FrameStack(obs_dim, hidden, k)
    if kind in ("gru", "lstm"):
        return RecurrentPolicy(obs_dim, hidden, kind)
    if kind == "slot_gru":
        return SlotGRUPolicy(obs_dim, hidden)
    return TransformerPolicy(obs_dim, min(hidden, 64), max_len=max_len)


class BC:
    """Behaviour cloning of oracle demonstrations with one of :data:`POLICIES`.

    Args:
        policy: ``mlp``, ``framestack``, ``gru``, ``lstm``, ``transformer`` or ``slot_gru``.
        hidden: width (the transformer uses at most 64).
        k: frame-stack window.
        epochs: passes over the demonstrations.
        batch_size: episodes per gradient step.
        lr: Adam learning rate.
        seed: initialisation and shuffling seed.
        device: torch device (CPU default).
        obs_mode: observation mode the policy acts on (for :func:`iclr26.mikasa.evaluate`).
        normalize: standardise every observation feature by its mean and standard deviation
            over the demonstrations (features constant in the demonstrations are centred only;
            ``slot_gru`` reads raw visibility bits and positions and is never normalised).
            Positions are a few centimetres while the actions are ``Δ / 0.03 m``, so without it
            the network must grow large first-layer weights to resolve a cube's position.
    """

    def __init__(
        self,
        policy: str = "gru",
        *,
        hidden: int = 128,
        k: int = 4,
        epochs: int = 30,
        batch_size: int = 32,
        lr: float = 1e-3,
        seed: int = 0,
        device: str | torch.device = "cpu",
        obs_mode: str = "memory",
        normalize: bool = True,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}; got {policy!r}")
        for name, v in (("hidden", hidden), ("epochs", epochs), ("batch_size", batch_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not (isinstance(lr, float | int) and np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
        self.kind, self.hidden, self.k = policy, hidden, k
        self.epochs, self.batch_size, self.lr = epochs, batch_size, float(lr)
        self.seed = check_seed(seed) or 0
        self.device = torch.device(device)
        self.obs_mode = obs_mode
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}")
        self.normalize = normalize
        self.obs_mean_: np.ndarray | None = None
        self.obs_std_: np.ndarray | None = None
        self.net_: _Policy | None = None
        self.losses_: list[float] = []

    def fit(self, demos: Mapping[str, np.ndarray], *, progress: bool = False) -> BC:
        """Fit to ``demos`` (``obs`` (E, T, D) and ``action`` (E, T, 3), as from collect_demos).

        An optional ``mask`` (E, T) of bools marks the steps that count (padding after an
        episode that ended early is False): the loss and the normalisation use only those.
        """
        for key in ("obs", "action"):
            if key not in demos:
                raise ValueError(f"demos lacks field {key!r}")
        obs = np.asarray(demos["obs"], np.float32)
        act = np.asarray(demos["action"], np.float32)
        if obs.ndim != 3 or act.shape != (*obs.shape[:2], 3):
            raise ValueError(
                f"demos must hold obs (E, T, D) and action (E, T, 3), got {obs.shape} and {act.shape}"
            )
        if len(obs) == 0:
            raise ValueError("demos holds no episodes")
        if not (np.isfinite(obs).all() and np.isfinite(act).all()):
            raise ValueError("demos holds NaN or inf")
        mask = np.ones(obs.shape[:2], bool)
        if "mask" in demos:
            mask = np.asarray(demos["mask"])
            if mask.dtype != bool or mask.shape != obs.shape[:2]:
                raise ValueError(
                    f"demos mask must be bools of shape {obs.shape[:2]}, got {mask.dtype} "
                    f"{mask.shape}"
                )
            if not mask.any():
                raise ValueError("demos mask marks no step")
        flat = obs[mask]
        if self.normalize and self.kind != "slot_gru":  # slot_gru reads raw bits and positions
            mean, std = flat.mean(0), flat.std(0)
            std[std < 1e-6] = 1.0  # constant in the demonstrations: centred, not scaled
        else:
            mean, std = np.zeros(obs.shape[2], np.float32), np.ones(obs.shape[2], np.float32)
        self.obs_mean_, self.obs_std_ = mean.astype(np.float32), std.astype(np.float32)
        torch.manual_seed(self.seed)
        gen = torch.Generator().manual_seed(self.seed)
        net = make_policy(
            self.kind, obs.shape[2], self.hidden, k=self.k, max_len=max(256, obs.shape[1])
        )
        net.to(self.device)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        x = torch.as_tensor(self._scale(obs), device=self.device)
        y = torch.as_tensor(act, device=self.device)
        w = torch.as_tensor(mask, dtype=torch.float32, device=self.device)
        n = len(x)
        for _ in progress_bar(range(self.epochs), desc=f"BC {self.kind}", enabled=progress):
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for i in range(0, n, self.batch_size):
                idx = perm[i : i + self.batch_size].to(self.device)
                err = ((net(x[idx]) - y[idx]) ** 2).mean(-1)
                loss = (err * w[idx]).sum() / w[idx].sum().clamp(min=1.0)
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                total += float(loss.detach()) * len(idx)
            self.losses_.append(total / n)
        self.net_ = net.eval()
        return self

    def _scale(self, obs: np.ndarray) -> np.ndarray:
        return ((obs - self.obs_mean_) / self.obs_std_).astype(np.float32)

    def reset(self, num_envs: int) -> None:
        """Start ``num_envs`` new episodes (clears the recurrent state / history)."""
        if self.net_ is None:
            raise RuntimeError("BC.fit must be called before acting")
        self.net_.begin(int(num_envs))

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """Actions (num_envs, 3) for observations (num_envs, D)."""
        if self.net_ is None:
            raise RuntimeError("BC.fit must be called before acting")
        o = torch.as_tensor(self._scale(np.asarray(obs, np.float32)), device=self.device)
        return self.net_.step(o).cpu().numpy().astype(np.float64)
