"""Representations of implementations on probe inputs, clean and intervened, and their storage.

The official toy setting uses TransformerLens ``accumulated_resid(apply_ln=True)``: the residual
stream after each layer with the final LayerNorm applied, averaged over positions and concatenated
across layers — one vector per input. :func:`representations` computes that (and variants: other
sites, ``"last"`` position pooling, no LayerNorm). :func:`intervened_representations` gives the
"co-interpretive" samples: the same model's representations while its aligned (circuit) sites are
patched with activations from corrupted inputs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr26.interp_equiv.models import Site
from iclr26.shared import check_choice, check_int

__all__ = [
    "default_sites",
    "intervened_representations",
    "load_representations",
    "representations",
    "save_representations",
]

POOLS = ("mean", "last", "flatten")


def default_sites(model: Any) -> list[Site]:
    """Every ``resid_post`` hook (TinyTransformer) or every hidden layer (TinyMLP)."""
    names = [
        h for h in model.hook_names if h.endswith("hook_resid_post") or h.startswith("hidden.")
    ]
    if not names:
        raise ValueError(
            f"model has no resid_post/hidden hooks; pass sites= from {list(model.hook_names)[:20]}"
        )
    return [Site(h) for h in names]


def _pool(act: torch.Tensor, pool: str) -> torch.Tensor:
    if act.ndim == 2:
        return act
    if act.ndim == 4:  # (B, L, H, d_head)
        act = act.flatten(2)
    if act.ndim == 3:
        if pool == "mean":
            return act.mean(1)
        if pool == "last":
            return act[:, -1]
        return act.flatten(1)
    return act.flatten(1)


def _check_tokens(tokens: Any, name: str) -> torch.Tensor:
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of inputs, got {type(tokens).__name__}")
    if tokens.dtype == torch.bool or tokens.is_complex():
        raise TypeError(
            f"{name} must hold token ids (integers) or real features, got {tokens.dtype}"
        )
    if tokens.ndim < 2 or tokens.shape[0] == 0:
        raise ValueError(f"{name} must have shape (n > 0, ...), got {tuple(tokens.shape)}")
    if tokens.dtype.is_floating_point:
        if not torch.isfinite(tokens).all():
            raise ValueError(f"{name} contains NaN or inf")
        return tokens  # real-valued inputs of a generic module (ModuleHooks)
    return tokens.long()


@torch.no_grad()
def _collect(
    model: Any,
    tokens: torch.Tensor,
    sites: list[Site],
    pool: str,
    apply_ln: bool,
    batch: int,
    patches_fn: Any = None,
) -> np.ndarray:
    dev = next(iter(model.parameters())).device
    ln = getattr(model, "ln_final", None) if apply_ln else None
    chunks = []
    for start in range(0, tokens.shape[0], batch):
        tok = tokens[start : start + batch].to(dev)
        if patches_fn is None:
            _, cache = model.run_with_cache(tok, sites=sites)
        else:
            with model.patched(patches_fn(start, tok.shape[0])):
                _, cache = model.run_with_cache(tok, sites=sites)
        parts = []
        for s in sites:
            act = cache[s]
            if ln is not None and s.hook.endswith("resid_post") and s.dims is None:
                act = ln(act)
            parts.append(_pool(act, pool).float())
        chunks.append(torch.cat(parts, 1).cpu())
    return torch.cat(chunks).numpy()


def representations(
    model: Any,
    tokens: torch.Tensor,
    *,
    sites: Iterable[Site | str] | None = None,
    pool: str = "mean",
    apply_ln: bool = True,
    batch: int = 1024,
) -> np.ndarray:
    """One vector per input: the chosen sites' activations, pooled over positions, concatenated.

    Args:
        model: a hook-protocol model (:class:`TinyTransformer`, :class:`TinyMLP`, :class:`ModuleHooks`).
        tokens: ``(n, seq_len)`` integer inputs (the shared probe set); real-valued ``(n, ...)``
            inputs are passed through for generic modules wrapped in :class:`ModuleHooks`.
        sites: activations to use (default: every residual stream after a block / every hidden layer).
        pool: ``"mean"`` over positions (official), ``"last"`` position, or ``"flatten"``.
        apply_ln: apply the model's final LayerNorm to residual-stream sites (official
            ``accumulated_resid(apply_ln=True)``).
        batch: inputs per forward pass.

    Returns:
        float32 array ``(n, D)``.
    """
    tokens = _check_tokens(tokens, "tokens")
    check_choice(pool, "pool", POOLS)
    check_int(batch, "batch", low=1)
    chosen = default_sites(model) if sites is None else model._check_sites(list(sites))
    if not chosen:
        raise ValueError("sites must not be empty")
    return _collect(model, tokens, chosen, pool, apply_ln, batch)


def intervened_representations(
    model: Any,
    base: torch.Tensor,
    source: torch.Tensor,
    patch_sites: Sequence[Site | str],
    *,
    sites: Iterable[Site | str] | None = None,
    pool: str = "mean",
    apply_ln: bool = True,
    batch: int = 1024,
) -> np.ndarray:
    """Representations of ``base`` inputs while ``patch_sites`` carry activations from ``source``.

    This is the activation-patching route to "co-interpretive" implementations: the patched
    model is another member of the interpretation's implementation class when the patched sites
    are its circuit (aligned sites), so its representations join the group.

    Args:
        base: ``(n, seq_len)`` probe inputs (the same as the clean representations').
        source: ``(n, seq_len)`` corrupted inputs, row ``i`` patched into row ``i`` of ``base``.
        patch_sites: sites to patch (e.g. ``list(implementation.alignment.values())``).
    """
    base = _check_tokens(base, "base")
    source = _check_tokens(source, "source")
    if base.shape != source.shape:
        raise ValueError(
            f"base and source must have the same shape, got {tuple(base.shape)} and {tuple(source.shape)}"
        )
    check_choice(pool, "pool", POOLS)
    check_int(batch, "batch", low=1)
    patch = model._check_sites(list(patch_sites))
    if not patch:
        raise ValueError("patch_sites must not be empty")
    chosen = default_sites(model) if sites is None else model._check_sites(list(sites))
    dev = next(iter(model.parameters())).device
    with torch.no_grad():
        src_acts = []
        for start in range(0, source.shape[0], batch):
            _, cache = model.run_with_cache(source[start : start + batch].to(dev), sites=patch)
            src_acts.append({s: cache[s] for s in patch})

    def patches_fn(start: int, size: int) -> Mapping[Site, torch.Tensor]:
        return dict(src_acts[start // batch])

    return _collect(model, base, chosen, pool, apply_ln, batch, patches_fn)


def save_representations(path: str | os.PathLike[str], reps: Mapping[str, Any] | Any) -> Path:
    """Save one representation (``.npy``) or a name -> representation mapping (``.safetensors``)."""
    path = Path(path)
    if path.suffix == ".npy":
        arr = np.asarray(reps)
        if arr.ndim != 2:
            raise ValueError(f"a .npy representation must be 2-D, got shape {arr.shape}")
        np.save(path, arr)
    elif path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        if not isinstance(reps, Mapping) or not reps:
            raise TypeError("a .safetensors file stores a non-empty mapping name -> array")
        save_file({str(k): np.ascontiguousarray(np.asarray(v)) for k, v in reps.items()}, str(path))
    else:
        raise ValueError(f"path must end in .npy or .safetensors, got {path.name!r}")
    return path


def load_representations(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load representations: a ``.npy`` file, a ``.safetensors`` file, or a folder of them.

    Returns:
        ``name -> (n, d)`` array (file stem for ``.npy``; ``file:key`` inside folders of safetensors).
    """
    path = Path(path)
    if path.is_dir():
        out: dict[str, np.ndarray] = {}
        files = sorted(p for p in path.iterdir() if p.suffix in (".npy", ".safetensors"))
        if not files:
            raise ValueError(f"{path} holds no .npy or .safetensors representations")
        for f in files:
            for k, v in load_representations(f).items():
                out[k if f.suffix == ".npy" else f"{f.stem}:{k}"] = v
        return out
    if not path.is_file():
        raise OSError(f"no such file or folder: {path}")
    if path.suffix == ".npy":
        arr = np.load(path, allow_pickle=False)
        if arr.ndim != 2:
            raise ValueError(f"{path} holds an array of shape {arr.shape}, expected (n, d)")
        return {path.stem: arr}
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return dict(load_file(str(path)))
    raise ValueError(f"{path} is not a .npy or .safetensors file")
