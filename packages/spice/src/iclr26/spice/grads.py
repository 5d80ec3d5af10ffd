"""Per-sample gradients of any torch model, restricted to the trainable (e.g. LoRA) parameters,
with a seeded random projector; and the loader for Hugging Face causal LMs with LoRA.

``per_sample_grads`` uses ``torch.func`` (``vmap(grad(...))``, chunked) by default and a plain
loop of single-example backward passes (what the official code does) on request; both give the
same matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.func import functional_call, grad, vmap
from torch.utils._pytree import tree_flatten, tree_map

from iclr26.shared import check_choice, check_int

__all__ = [
    "LoraSettings",
    "RandomProjector",
    "format_example",
    "lm_per_sample_grads",
    "load_causal_lm",
    "per_sample_grads",
    "select_params",
]


def select_params(
    model: torch.nn.Module, params: str | Iterable[str] | Callable[[str], bool] = "trainable"
) -> dict[str, torch.Tensor]:
    """The parameters to differentiate: ``"trainable"`` (``requires_grad``, i.e. LoRA weights in a
    PEFT model), ``"all"``, a collection of names, or a predicate on names."""
    named = dict(model.named_parameters())
    if params == "trainable":
        chosen = {n: p for n, p in named.items() if p.requires_grad}
    elif params == "all":
        chosen = named
    elif callable(params):
        chosen = {n: p for n, p in named.items() if params(n)}
    else:
        wanted = list(params)  # type: ignore[arg-type]
        missing = [n for n in wanted if n not in named]
        if missing:
            raise ValueError(
                f"unknown parameter names {missing[:5]}; the model has e.g. {list(named)[:5]}"
            )
        chosen = {n: named[n] for n in wanted}
    if not chosen:
        raise ValueError(
            "no parameters selected: the model has no trainable parameters (params='trainable')?"
        )
    return chosen


class RandomProjector:
    """Seeded Johnson–Lindenstrauss projection ``R^{d_in} → R^{d_out}``.

    Entries are i.i.d. ``N(0, 1/d_out)`` (``kind="gaussian"``) or ``±1/√d_out``
    (``"rademacher"``), so squared norms and dot products are preserved in expectation. The matrix
    is generated block by block from the seed and never stored whole, so ``d_in`` can be in the
    millions; the same seed gives the same projection on any device.

    Args:
        d_in: input dimension.
        d_out: output dimension (the official code uses 8192).
        seed: seed of the projection.
        kind: ``"gaussian"`` or ``"rademacher"``.
        block_rows: input rows generated at once (memory ``block_rows · d_out`` floats).
        cache_limit: keep the whole matrix after the first call when it has at most this many
            entries (default 2**25, 256 MB in float64); larger ones are regenerated per call.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        *,
        seed: int = 0,
        kind: str = "gaussian",
        block_rows: int | None = None,
        cache_limit: int = 2**25,
    ) -> None:
        self.d_in = check_int(d_in, "d_in", low=1)
        self.d_out = check_int(d_out, "d_out", low=1)
        self.seed = check_int(seed, "seed", low=0)
        self.kind = check_choice(kind, "kind", ("gaussian", "rademacher"))
        self.block_rows = block_rows or max(1, 2**23 // d_out)
        self._cached: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        self._cache = d_in * d_out <= cache_limit

    def _block(self, b: int, rows: int, dtype: torch.dtype) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + b)
        if self.kind == "gaussian":
            block = torch.randn(rows, self.d_out, generator=gen, dtype=torch.float64)
        else:
            block = torch.randint(0, 2, (rows, self.d_out), generator=gen).to(torch.float64) * 2 - 1
        return (block / math.sqrt(self.d_out)).to(dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Project ``(n, d_in)`` to ``(n, d_out)`` on ``x``'s device and dtype."""
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"expected shape (n, {self.d_in}), got {tuple(x.shape)}")
        if self._cache:
            key = (x.dtype, x.device)
            if key not in self._cached:
                blocks = [
                    self._block(b, min(self.block_rows, self.d_in - s), x.dtype)
                    for b, s in enumerate(range(0, self.d_in, self.block_rows))
                ]
                self._cached[key] = torch.cat(blocks).to(x.device)
            return x @ self._cached[key]
        out = torch.zeros(x.shape[0], self.d_out, dtype=x.dtype, device=x.device)
        for b, start in enumerate(range(0, self.d_in, self.block_rows)):
            stop = min(start + self.block_rows, self.d_in)
            out += x[:, start:stop] @ self._block(b, stop - start, x.dtype).to(x.device)
        return out


def _batch_size(batch: Any) -> int:
    leaves, _ = tree_flatten(batch)
    sizes = {leaf.shape[0] for leaf in leaves if isinstance(leaf, torch.Tensor)}
    if len(sizes) != 1:
        raise ValueError(
            f"every tensor in batch must share the first dimension, got sizes {sorted(sizes)}"
        )
    return sizes.pop()


def per_sample_grads(
    model: torch.nn.Module,
    compute_loss: Callable[[Callable[..., Any], Any], torch.Tensor],
    batch: Any,
    *,
    params: str | Iterable[str] | Callable[[str], bool] = "trainable",
    method: str = "vmap",
    chunk_size: int | None = None,
    projector: RandomProjector | None = None,
) -> torch.Tensor:
    """Gradient of each example's loss with respect to the chosen parameters, as an ``(n, d)``
    matrix (rows in batch order, parameters concatenated in ``named_parameters`` order).

    Args:
        model: any ``nn.Module``; put it in ``eval()`` mode for deterministic gradients (vmap
            refuses random ops such as active dropout).
        compute_loss: ``compute_loss(call, sample) -> scalar``: ``call(*args, **kwargs)`` runs the
            model, ``sample`` is one example of ``batch`` with a batch dimension of 1.
        batch: a tensor or pytree (tuple/dict) of tensors sharing the first dimension ``n``.
        params: which parameters, see :func:`select_params`.
        method: ``"vmap"`` (``torch.func``, chunked by ``chunk_size``) or ``"loop"`` (one
            backward per example, the official approach).
        chunk_size: examples per vmapped chunk (memory bound); ``None`` = all at once.
        projector: optional :class:`RandomProjector` applied to the result.
    """
    check_choice(method, "method", ("vmap", "loop"))
    chosen = select_params(model, params)
    names = list(chosen)
    n = _batch_size(batch)
    buffers = dict(model.named_buffers())
    frozen = {k: v.detach() for k, v in model.named_parameters() if k not in chosen}
    if method == "vmap":
        detached = {k: v.detach() for k, v in chosen.items()}

        def loss_of(p: dict[str, torch.Tensor], sample: Any) -> torch.Tensor:
            state = {**frozen, **buffers, **p}

            def call(*args: Any, **kwargs: Any) -> Any:
                return functional_call(model, state, args, kwargs)

            return compute_loss(call, tree_map(lambda t: t.unsqueeze(0), sample))

        grads = vmap(grad(loss_of), in_dims=(None, 0), chunk_size=chunk_size)(detached, batch)
        flat = torch.cat([grads[k].reshape(n, -1) for k in names], dim=1)
    else:
        rows = []
        for i in range(n):
            sample = tree_map(lambda t, i=i: t[i : i + 1], batch)
            loss = compute_loss(model, sample)
            rows.append(
                torch.cat(
                    [g.reshape(-1) for g in torch.autograd.grad(loss, [chosen[k] for k in names])]
                )
            )
        flat = torch.stack(rows)
    return projector(flat) if projector is not None else flat


# ---------------------------------------------------------------- Hugging Face causal LMs


def format_example(instruction: str, response: str) -> str:
    """The official formatter: ``"Instruction:\\n{instruction}\\n\\nResponse:\\n{response}"``."""
    return f"Instruction:\n{instruction}\n\nResponse:\n{response}"


#: LoRA target modules of the official proxy (Qwen2/LLaMA naming).
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA of the official proxy: r=16, α=32, dropout 0.05 on attention and MLP projections."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Sequence[str] = field(default=DEFAULT_TARGETS)


def load_causal_lm(
    path: str | Path,
    *,
    lora: LoraSettings | None = LoraSettings(),
    allow_download: bool = False,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.nn.Module, Any]:
    """Load a causal LM and its tokenizer with ``transformers`` and wrap it with PEFT LoRA.

    Args:
        path: a local model folder (or a hub id when ``allow_download=True``).
        lora: LoRA settings; only the target modules present in the model are used. ``None``
            keeps every parameter trainable.
        allow_download: allow ``transformers`` to fetch from the hub; off by default.
        dtype: parameter dtype.

    Returns:
        ``(model, tokenizer)``, the model in ``eval()`` mode.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local_only = not allow_download
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=local_only, torch_dtype=dtype
    )
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [t for t in lora.target_modules if t in present]
        if not targets:
            raise ValueError(
                f"none of the LoRA target modules {list(lora.target_modules)} exist in the model"
            )
        config = LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=targets,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
    return model.eval(), tokenizer


def lm_per_sample_grads(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: Sequence[tuple[str, str]],
    *,
    max_length: int = 512,
    mask_prompt: bool = False,
    projector: RandomProjector | None = None,
    method: str = "loop",
) -> torch.Tensor:
    """Per-example gradients of the causal-LM loss of formatted ``(instruction, response)`` pairs.

    Matches the official loss: the whole formatted text is the target, only padding is masked
    (``mask_prompt=True`` also masks the instruction part, an option the official code lacks).

    Args:
        model: a causal LM, e.g. from :func:`load_causal_lm`; gradients w.r.t. its trainable
            parameters.
        tokenizer: its tokenizer (needs a pad token).
        examples: ``(instruction, response)`` pairs.
        max_length: truncation length in tokens.
        mask_prompt: exclude the instruction tokens from the loss.
        projector: optional :class:`RandomProjector`.
        method: ``"loop"`` (default; robust for any architecture) or ``"vmap"``.
    """
    if not examples:
        raise ValueError("examples must not be empty")
    texts = [format_example(i, r) for i, r in examples]
    enc = tokenizer(
        texts, return_tensors="pt", padding=True, truncation=True, max_length=max_length
    )
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    if mask_prompt:
        for row, (instruction, _) in enumerate(examples):
            prompt = format_example(instruction, "")
            n_prompt = len(tokenizer(prompt, truncation=True, max_length=max_length)["input_ids"])
            labels[row, :n_prompt] = -100
    batch = {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "labels": labels,
    }

    def compute_loss(call: Callable[..., Any], sample: dict[str, torch.Tensor]) -> torch.Tensor:
        return call(**sample).loss

    return per_sample_grads(model, compute_loss, batch, method=method, projector=projector)
