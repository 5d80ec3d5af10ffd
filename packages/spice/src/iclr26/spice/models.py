"""Small torch models trained from scratch for the experiments: an MLP for digits and a
character-level causal transformer for the instruction suite."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from iclr26.shared import check_int

__all__ = ["MLP", "CharTransformer", "CharVocab", "train_classifier"]


class MLP(nn.Module):
    """``in → hidden → classes`` with tanh; ``hidden=0`` gives softmax regression."""

    def __init__(self, n_in: int = 64, n_classes: int = 10, hidden: int = 32) -> None:
        super().__init__()
        self.net = (
            nn.Linear(n_in, n_classes)
            if hidden == 0
            else nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_classes))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train_classifier(
    model: nn.Module,
    X: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 100,
    lr: float = 0.01,
    batch_size: int = 64,
    seed: int = 0,
) -> nn.Module:
    """Train with Adam on cross-entropy (mini-batches, seeded shuffling); returns the model."""
    check_int(epochs, "epochs", low=0)
    if len(y) == 0:
        raise ValueError("cannot train on an empty set")
    gen = torch.Generator().manual_seed(seed)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(yt), generator=gen).split(batch_size):
            opt.zero_grad()
            nn.functional.cross_entropy(model(Xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval()


class CharVocab:
    """Characters ↔ ids, with padding (0) and end-of-sequence (1)."""

    PAD, EOS = 0, 1

    def __init__(self, texts: Sequence[str]) -> None:
        chars = sorted({c for t in texts for c in t})
        self.itos = ["<pad>", "<eos>", *chars]
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, texts: Sequence[str], length: int) -> torch.Tensor:
        """``(len(texts), length)`` ids, EOS-terminated and padded (or truncated)."""
        out = torch.zeros(len(texts), length, dtype=torch.long)
        for r, t in enumerate(texts):
            ids = [*[self.stoi[c] for c in t][: length - 1], self.EOS]
            out[r, : len(ids)] = torch.tensor(ids)
        return out


class _Block(nn.Module):
    """Pre-norm causal self-attention + MLP, written with plain ops so ``vmap`` batches it."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, d_model)
        )

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T, D = h.shape
        q, k, v = (
            self.qkv(self.norm1(h))
            .view(B, T, 3, self.n_heads, D // self.n_heads)
            .permute(2, 0, 3, 1, 4)
        )
        att = torch.softmax(q @ k.transpose(-1, -2) / (D // self.n_heads) ** 0.5 + mask, dim=-1)
        h = h + self.proj((att @ v).transpose(1, 2).reshape(B, T, D))
        return h + self.mlp(self.norm2(h))


class CharTransformer(nn.Module):
    """A tiny decoder-only transformer (pre-norm, causal, learned positions).

    The last block plays the role of LoRA in the experiments: only its parameters are trained
    during online selection and differentiated for per-sample gradients.
    """

    def __init__(
        self,
        vocab: int,
        *,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        length: int = 48,
    ) -> None:
        super().__init__()
        check_int(vocab, "vocab", low=2)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(length, d_model))
        self.blocks = nn.ModuleList(_Block(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer(
            "mask", torch.triu(torch.full((length, length), float("-inf")), diagonal=1)
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        h = self.embed(ids) + self.pos[:T]
        for block in self.blocks:
            h = block(h, self.mask[:T, :T])
        return self.head(self.norm(h))

    def last_block_names(self) -> list[str]:
        """Names of the parameters of the last block (the "LoRA" stand-in)."""
        last = len(self.blocks) - 1
        return [n for n, _ in self.named_parameters() if n.startswith(f"blocks.{last}.")]
