"""A small in-context prior-fitted network (PFN) trained on GP prior samples, and its recipe.

A stand-in for TabPFN v2 that can be trained and shipped offline. Like TabPFN it predicts a bar
("Riemann") distribution over the standardised target for each query, conditioned on a context
of (x, y) pairs in a single forward pass: observations are attended to, never fitted. Queries
attend to the context only (not to each other), so ``μ(x_j)`` depends on ``x_j`` and the context
alone and ``∇_x μ`` is the per-candidate gradient GIT-BO needs.

Inputs are centred (``x - 0.5``) and zero-padded to ``max_dim`` features (the PFNs4BO recipe);
the training prior is a GP with an RBF kernel on a random low-dimensional projection of the
inputs, matching the embedded high-dimensional problems GIT-BO targets.
"""

from __future__ import annotations

import json
import logging
import math
import os
from importlib.resources import files
from pathlib import Path

import torch
from torch import nn

from iclr26.shared import check_int, check_range, progress

__all__ = [
    "InContextPFN",
    "default_checkpoint",
    "load_pfn",
    "pfn_nll",
    "sample_prior_batch",
    "save_pfn",
    "train_pfn",
]

log = logging.getLogger(__name__)

_FORMAT = "iclr26-git-bo/pfn-v1"


class _Layer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def _split(self, h: torch.Tensor, which: int) -> torch.Tensor:
        # one of the q/k/v input projections of ``attn``, as (B, heads, tokens, head_dim)
        d, heads = self.attn.embed_dim, self.attn.num_heads
        w = self.attn.in_proj_weight[which * d : (which + 1) * d]
        b = self.attn.in_proj_bias[which * d : (which + 1) * d]
        B, t, _ = h.shape
        return nn.functional.linear(h, w, b).view(B, t, heads, d // heads).transpose(1, 2)

    def keys_values(self, ctx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention keys and values of the context tokens ``(B, n, d)``."""
        return self._split(ctx, 1), self._split(ctx, 2)

    def step(self, h: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Tokens ``h (B, t, d)`` attend to the context's keys/values, then the feed-forward.

        The same computation as ``nn.MultiheadAttention(h, ctx, ctx)`` (no dropout), written
        out so that the context's keys and values can be computed once and reused."""
        B, t, d = h.shape
        a = nn.functional.scaled_dot_product_attention(self._split(h, 0), k, v)
        a = self.attn.out_proj(a.transpose(1, 2).reshape(B, t, d))
        h = self.n1(h + a)
        return self.n2(h + self.ff(h))


class InContextPFN(nn.Module):
    """Transformer over (context, query) tokens with a bar-distribution head.

    Args:
        max_dim: largest input dimension (inputs are zero-padded to it).
        d_model, heads, layers, ff: transformer sizes.
        n_buckets: bars of the output distribution, uniform on ``[-y_range, y_range]`` in
            standardised units.
        y_range: half-width of the support.
        kernel_features: fixed random Fourier features of x added to the linear encoding
            (0: none).
    """

    def __init__(self, max_dim: int = 512, d_model: int = 64, heads: int = 4, layers: int = 3,
                 ff: int = 128, n_buckets: int = 64, y_range: float = 4.0,
                 kernel_features: int = 256) -> None:  # fmt: skip
        super().__init__()
        self.config = {"max_dim": max_dim, "d_model": d_model, "heads": heads, "layers": layers,
                       "ff": ff, "n_buckets": n_buckets, "y_range": y_range,
                       "kernel_features": kernel_features}  # fmt: skip
        self.max_dim = max_dim
        self.x_enc = nn.Linear(max_dim, d_model)
        # fixed random Fourier features of x at three length scales: dot products between
        # encoded points then approximate RBF similarities, which attention can use directly
        # (kernel_features = 0 switches them off)
        self.k_enc = None
        if kernel_features > 0:
            g = torch.Generator().manual_seed(0)
            scales = torch.tensor([1.0, 2.0, 4.0]).repeat_interleave(-(-kernel_features // 3))
            proj = torch.randn(max_dim, kernel_features, generator=g) * scales[:kernel_features]
            self.register_buffer("proj", proj)
            self.register_buffer("phase", 2 * math.pi * torch.rand(kernel_features, generator=g))
            self.k_enc = nn.Linear(kernel_features, d_model)
        self.y_enc = nn.Linear(1, d_model)
        self.layers = nn.ModuleList(_Layer(d_model, heads, ff) for _ in range(layers))
        self.head = nn.Linear(d_model, n_buckets)
        self.register_buffer("borders", torch.linspace(-y_range, y_range, n_buckets + 1))

    def _pad(self, X: torch.Tensor) -> torch.Tensor:
        D = X.shape[-1]
        if self.max_dim < D:
            raise ValueError(f"inputs have {D} features, more than max_dim={self.max_dim}")
        # scale keeps ‖x‖ comparable across dimensions after the linear encoder
        Xc = (X - 0.5) * math.sqrt(12.0 / D)
        return nn.functional.pad(Xc, (0, self.max_dim - D))

    def _encode(self, X: torch.Tensor) -> torch.Tensor:
        Xp = self._pad(X)
        if self.k_enc is None:
            return self.x_enc(Xp)
        feats = torch.cos(Xp @ self.proj + self.phase) * math.sqrt(2.0 / self.proj.shape[1])
        return self.x_enc(Xp) + self.k_enc(feats)

    def context_cache(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-layer attention keys and values of the context ``x_ctx (B, n, D)``, ``y_ctx (B, n)``.

        Context tokens attend only to the context, so they do not depend on the queries: this
        is computed once per conditioning and reused for every query chunk
        (:meth:`forward_cached`)."""
        h = self._encode(x_ctx) + self.y_enc(y_ctx.unsqueeze(-1))
        cache = []
        for layer in self.layers:
            k, v = layer.keys_values(h)
            cache.append((k, v))
            h = layer.step(h, k, v)
        return cache

    def forward_cached(
        self, cache: list[tuple[torch.Tensor, torch.Tensor]], x_q: torch.Tensor
    ) -> torch.Tensor:
        """Bar logits ``(B, m, n_buckets)`` of queries ``x_q (B, m, D)`` given a context cache."""
        h = self._encode(x_q)
        for layer, (k, v) in zip(self.layers, cache, strict=True):
            h = layer.step(h, k, v)
        return self.head(h)

    def forward(self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
        """Bar logits ``(B, m, n_buckets)`` for ``x_ctx (B, n, D)``, ``y_ctx (B, n)`` standardised,
        ``x_q (B, m, D)``."""
        return self.forward_cached(self.context_cache(x_ctx, y_ctx), x_q)

    def moments(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of the bar distribution (piecewise-uniform within each bar)."""
        p = logits.softmax(-1)
        lo, hi = self.borders[:-1], self.borders[1:]
        mid, width = 0.5 * (lo + hi), hi - lo
        mean = (p * mid).sum(-1)
        second = (p * (mid.pow(2) + width.pow(2) / 12.0)).sum(-1)
        return mean, (second - mean.pow(2)).clamp_min(1e-8)

    def predict(
        self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Unbatched ``(n, D)``, ``(n,)``, ``(m, D)`` -> mean ``(m,)``, variance ``(m,)``."""
        logits = self(x_ctx.unsqueeze(0), y_ctx.unsqueeze(0), x_q.unsqueeze(0))[0]
        return self.moments(logits)


def pfn_nll(model: InContextPFN, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Negative log density of standardised ``y`` under the bar distribution (values outside the
    support are clamped into the outer bars)."""
    b = model.borders
    idx = torch.bucketize(y.clamp(b[0] + 1e-6, b[-1] - 1e-6), b[1:-1])
    width = (b[1:] - b[:-1])[idx]
    return -logits.log_softmax(-1).gather(-1, idx.unsqueeze(-1)).squeeze(-1) + width.log()


def sample_prior_batch(
    batch: int,
    n_points: int,
    *,
    max_dim: int,
    generator: torch.Generator,
    dims: tuple[int, int] | None = None,
    noise: tuple[float, float] = (1e-4, 0.05),
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Datasets from the training prior: ``(X (B, n, D), y (B, n) standardised, D)``.

    ``D`` is log-uniform in ``dims`` (default ``[1, max_dim]``, one ``D`` per batch); the function
    is a GP draw with an RBF kernel on ``A (x - c)`` where ``A`` has ``d_e ≤ 6`` orthonormal rows,
    a random lengthscale and a random noise level. Half the points are uniform in the cube and half
    cluster around a random point, as BO contexts do.
    """
    lo, hi = dims or (1, max_dim)
    D = round(math.exp(math.log(lo) + torch.rand(1, generator=generator).item()
                         * (math.log(hi) - math.log(lo))))  # fmt: skip
    D = min(max(D, lo), hi)
    X = torch.rand(batch, n_points, D, generator=generator)
    half = n_points // 2
    centre = torch.rand(batch, 1, D, generator=generator)
    spread = 0.05 + 0.25 * torch.rand(batch, 1, 1, generator=generator)
    X[:, :half] = (
        centre + spread * (2 * torch.rand(batch, half, D, generator=generator) - 1)
    ).clamp(0, 1)
    X = X[:, torch.randperm(n_points, generator=generator)]
    ys = []
    for b in range(batch):
        d_e = int(torch.randint(1, min(6, D) + 1, (1,), generator=generator))
        A, _ = torch.linalg.qr(torch.randn(D, d_e, generator=generator, dtype=torch.float64))
        Z = (X[b].double() - 0.5) @ A * math.sqrt(12.0)  # ~unit variance per direction
        ell = 0.3 + 1.7 * torch.rand(1, generator=generator, dtype=torch.float64)
        K = torch.exp(-0.5 * torch.cdist(Z, Z).pow(2) / ell.pow(2))
        K = K + 1e-6 * torch.eye(n_points, dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        f = L @ torch.randn(n_points, generator=generator, dtype=torch.float64)
        s2 = math.exp(math.log(noise[0]) + torch.rand(1, generator=generator).item()
                      * (math.log(noise[1]) - math.log(noise[0])))  # fmt: skip
        y = f + math.sqrt(s2) * torch.randn(n_points, generator=generator, dtype=torch.float64)
        ys.append(y)
    y = torch.stack(ys).float()
    return X, y, D


def _standardise_by_context(y: torch.Tensor, n_ctx: int) -> torch.Tensor:
    mu = y[:, :n_ctx].mean(1, keepdim=True)
    sd = y[:, :n_ctx].std(1, keepdim=True).clamp_min(1e-3)
    return (y - mu) / sd


def train_pfn(
    *,
    steps: int = 2500,
    batch: int = 16,
    n_points: int = 128,
    max_dim: int = 512,
    lr: float = 1e-3,
    seed: int = 0,
    dims: tuple[int, int] | None = None,
    model: InContextPFN | None = None,
    progress_bar: bool = False,
    **model_kwargs,
) -> InContextPFN:
    """Train an :class:`InContextPFN` by prior-data fitting (Müller et al. 2022).

    Each step draws ``batch`` datasets of ``n_points`` from :func:`sample_prior_batch`, splits
    each at a random context size, standardises ``y`` by the context, and minimises the bar
    NLL of the held-out points. Adam with a cosine schedule.

    Args:
        steps, batch, n_points: training length and data per step.
        max_dim: largest input dimension the model will accept.
        lr: peak learning rate.
        seed: seeds the prior samples and the initialisation.
        dims: range of training input dimensions (default ``[1, max_dim]``, log-uniform).
        model: continue training this model instead of a new one.
        progress_bar: show a progress bar.
        **model_kwargs: sizes of a new :class:`InContextPFN`.
    """
    check_int(steps, "steps", low=1)
    check_int(batch, "batch", low=1)
    check_int(n_points, "n_points", low=4)
    check_int(max_dim, "max_dim", low=1)
    check_range(lr, "lr", low=0.0, low_inclusive=False)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    if model is None:
        model = InContextPFN(max_dim=max_dim, **model_kwargs)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    bar = progress(range(steps), enabled=progress_bar, desc="train-pfn")
    for step in bar:
        X, y, _ = sample_prior_batch(batch, n_points, max_dim=model.max_dim, generator=g, dims=dims)
        n_ctx = int(torch.randint(2, n_points - 1, (1,), generator=g))
        ys = _standardise_by_context(y, n_ctx)
        logits = model(X[:, :n_ctx], ys[:, :n_ctx], X[:, n_ctx:])
        loss = pfn_nll(model, logits, ys[:, n_ctx:]).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0:
            log.info("train-pfn step %d loss %.4f", step, loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return model


def save_pfn(model: InContextPFN, path: str | os.PathLike[str], **meta) -> Path:
    """Write ``model`` as safetensors with its config (and ``meta``) in the header."""
    from safetensors.torch import save_file

    if not isinstance(model, InContextPFN):
        raise TypeError(f"model must be an InContextPFN, got {type(model).__name__}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, expected a file path")
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(state, str(tmp), metadata={"format": _FORMAT, "config": json.dumps(model.config),
                                           "meta": json.dumps(meta)})  # fmt: skip
    os.replace(tmp, path)
    return path


def default_checkpoint() -> Path:
    """The PFN checkpoint shipped inside the package."""
    return Path(str(files("iclr26.git_bo") / "pfn_default.safetensors"))


def load_pfn(
    path: str | os.PathLike[str] | None = None, device: str | torch.device = "cpu"
) -> InContextPFN:
    """Load a PFN written by :func:`save_pfn` (``None``: the shipped checkpoint).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not a PFN checkpoint of this package.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file, safe_open

    path = default_checkpoint() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"PFN checkpoint {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"{path} is not a safetensors PFN checkpoint ({err})") from err
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{path} is not a PFN checkpoint of iclr26-git-bo (format tag missing)")
    config = json.loads(meta["config"])
    config.setdefault("kernel_features", 0)  # checkpoints written before the kernel features
    model = InContextPFN(**config)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not match the stored config ({err})") from err
    return model.to(device).eval()
