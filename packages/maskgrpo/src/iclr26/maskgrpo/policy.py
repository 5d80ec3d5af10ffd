"""Masked-diffusion policies: the protocol, a tiny bidirectional denoiser, save/load.

A policy is any ``torch.nn.Module`` that maps (B, T) token ids to (B, T, V) logits over the clean
token at every position — either directly or as the ``.logits`` of a Hugging Face model output
(``BertForMaskedLM``, ModernBERT, LLaDA-style remote-code denoisers). No time embedding is needed:
like LLaDA, the mask pattern itself tells the model the noise level.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from iclr26.shared import check_int, check_range

__all__ = [
    "MaskedDiffusionPolicy",
    "TinyMaskedDenoiser",
    "load_denoiser",
    "policy_logits",
    "save_denoiser",
]


@runtime_checkable
class MaskedDiffusionPolicy(Protocol):
    """What the samplers and the trainer call: ``policy(input_ids)`` → logits or an output with
    ``.logits``, shape (B, T, V)."""

    def __call__(self, input_ids: torch.Tensor) -> Any: ...


def policy_logits(policy: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Per-position logits (B, T, V) of ``policy`` on ``input_ids`` (B, T) long.

    Accepts modules returning a tensor or a Hugging Face ``ModelOutput`` with ``.logits``.
    """
    if not callable(policy):
        raise TypeError(f"policy must be a callable torch module, got {type(policy).__name__}")
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        raise TypeError("input_ids must be a torch.LongTensor of token ids")
    out = policy(input_ids)
    logits = getattr(out, "logits", out)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise ValueError(
            "policy must return logits of shape (batch, length, vocab) (or an output with "
            f".logits), got {type(logits).__name__} {tuple(getattr(logits, 'shape', ()))}"
        )
    if logits.shape[:2] != input_ids.shape:
        raise ValueError(
            f"policy logits have shape {tuple(logits.shape)}, expected "
            f"({input_ids.shape[0]}, {input_ids.shape[1]}, vocab)"
        )
    return logits


_PLAIN_LINEAR = (nn.Linear, nn.modules.linear.NonDynamicallyQuantizableLinear)


class TinyMaskedDenoiser(nn.Module):
    """A small bidirectional transformer denoiser (LLaDA-style, no time embedding).

    Pre-LN ``nn.TransformerEncoder`` with learned positions and an untied output head; used for
    the toy tasks (``tiny``: d = 64, 2 layers, ~0.1 M parameters). Adapters (peft LoRA through
    :func:`~iclr26.maskgrpo.lora.lora_policy`) on ``self_attn``, ``linear1``, ``linear2``,
    ``head`` or ``tok`` are honoured in every mode (the fused inference kernel is used only while
    the layers are plain torch modules).

    Args:
        vocab_size: number of token ids, the mask token included.
        max_len: longest sequence accepted.
        d_model, n_layers, n_heads: width, depth, attention heads.
        mask_id: the absorbing mask token id (stored for convenience; default ``vocab_size - 1``).
        pos_std: standard deviation of the initial learned positions (0.02; tasks that route
            information by position, Add-3 and Sudoku-4×4, learn far faster with 1.0, the scale
            of the token embeddings).
    """

    def __init__(
        self,
        vocab_size: int,
        max_len: int,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        mask_id: int | None = None,
        pos_std: float = 0.02,
    ) -> None:
        super().__init__()
        check_int(vocab_size, "vocab_size", low=2)
        check_int(max_len, "max_len", low=1)
        check_int(d_model, "d_model", low=1)
        check_int(n_layers, "n_layers", low=1)
        check_int(n_heads, "n_heads", low=1)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.config = {
            "vocab_size": vocab_size,
            "max_len": max_len,
            "d_model": d_model,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "mask_id": vocab_size - 1 if mask_id is None else mask_id,
        }
        check_range(pos_std, "pos_std", low=0.0, low_inclusive=False)
        if pos_std != 0.02:  # the default is left out so older files keep their exact metadata
            self.config["pos_std"] = float(pos_std)
        check_int(self.config["mask_id"], "mask_id", low=0, high=vocab_size - 1)
        self.mask_id = self.config["mask_id"]
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * pos_std)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) over the clean token at every position of ``input_ids`` (B, T)."""
        if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
            raise TypeError("input_ids must be a torch.LongTensor of token ids")
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (batch, length), got {tuple(input_ids.shape)}")
        if input_ids.shape[1] > self.config["max_len"]:
            raise ValueError(
                f"input_ids has length {input_ids.shape[1]}, longer than the model's context "
                f"max_len={self.config['max_len']}"
            )
        if input_ids.numel() and (
            int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config["vocab_size"]
        ):
            raise ValueError(f"input_ids must lie in [0, {self.config['vocab_size']})")
        h = self.tok(input_ids) + self.pos[: input_ids.shape[1]]
        if self._native_layers():
            # torch's fused encoder-layer kernel (eval, no grad) or its plain path (training)
            return self.head(self.norm(self.encoder(h)))
        # Adapters (peft LoRA) replaced some sub-modules: torch's fused fast path reads the
        # layers' weights directly and would silently skip them, so the layer is composed of
        # module calls here (the same pre-LN computation as nn.TransformerEncoderLayer).
        for layer in self.encoder.layers:
            a = layer.norm1(h)
            h = h + layer.self_attn(a, a, a, need_weights=False)[0]
            h = h + layer.linear2(layer.activation(layer.linear1(layer.norm2(h))))
        return self.head(self.norm(h))

    def _native_layers(self) -> bool:
        native = True
        for layer in self.encoder.layers:
            attn = layer.self_attn
            if type(attn) is nn.MultiheadAttention and type(attn.out_proj) not in _PLAIN_LINEAR:
                raise ValueError(
                    "an adapter wraps self_attn.out_proj alone, but nn.MultiheadAttention never "
                    "calls out_proj's forward (it reads its weight), so the adapter would be "
                    "ignored: target 'self_attn' (in and out projections) instead"
                )
            native = native and (
                type(attn) is nn.MultiheadAttention
                and type(layer.linear1) in _PLAIN_LINEAR
                and type(layer.linear2) in _PLAIN_LINEAR
                and type(layer.norm1) is nn.LayerNorm
                and type(layer.norm2) is nn.LayerNorm
            )
        return native


def save_denoiser(model: TinyMaskedDenoiser, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` as safetensors (float32) with its config in the metadata."""
    from safetensors.torch import save_file

    if not isinstance(model, TinyMaskedDenoiser):
        raise TypeError(f"model must be a TinyMaskedDenoiser, got {type(model).__name__}")
    path = Path(path)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"config": json.dumps(model.config)})
    return path


def load_denoiser(
    path: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> TinyMaskedDenoiser:
    """Load a :class:`TinyMaskedDenoiser` written by :func:`save_denoiser`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise OSError(f"path {path} is not a file")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        state = load_file(str(path), device=str(device))
    except Exception as err:  # safetensors raises its own error types on corrupt files
        raise ValueError(f"path {path} is not a readable safetensors file ({err})") from None
    if "config" not in meta:
        raise ValueError(f"path {path} lacks the denoiser config in its metadata")
    model = TinyMaskedDenoiser(**json.loads(meta["config"]))
    model.load_state_dict(state)
    return model.to(device)
