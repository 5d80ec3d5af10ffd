"""Models with stable hook sites: caching and patching of named activations.

Every model here follows one small protocol:

* ``model(tokens) -> logits`` of shape ``(batch, n_classes)``;
* ``model.hook_names``: the activation names that can be cached or patched;
* ``model.run_with_cache(tokens, sites=None) -> (logits, Cache)``;
* ``with model.patched({site: value, ...}):`` replaces activations during the forward pass.

A :class:`Site` selects part of a named activation: a sequence position, an attention head, a
range of feature dimensions. Hook names of :class:`TinyTransformer` follow TransformerLens'
(``blocks.{l}.hook_resid_post``, ``blocks.{l}.attn.hook_z``, ...), and :class:`ModuleHooks` puts the
same protocol on any ``torch.nn.Module`` through forward hooks on named submodules — including a
TransformerLens ``HookedTransformer``, whose hook points are submodules with exactly those names.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["Cache", "ModuleHooks", "Site", "TinyMLP", "TinyTransformer", "weight_correlation"]


@dataclass(frozen=True)
class Site:
    """A part of a named activation.

    Args:
        hook: activation name (one of the model's ``hook_names``).
        pos: sequence position (axis 1) or ``None`` for all positions.
        head: attention head (axis 2 of ``attn.hook_z``) or ``None``.
        dims: ``(start, stop)`` range of the last (feature) axis or ``None`` for all features.
    """

    hook: str
    pos: int | None = None
    head: int | None = None
    dims: tuple[int, int] | None = None

    @staticmethod
    def resid(layer: int, pos: int | None = None, dims: tuple[int, int] | None = None) -> Site:
        """The residual stream after block ``layer``."""
        return Site(f"blocks.{layer}.hook_resid_post", pos=pos, dims=dims)

    def index(self, act: torch.Tensor) -> tuple[Any, ...]:
        """The indexing tuple selecting this site in an activation of shape ``(batch, ...)``."""
        idx: list[Any] = [slice(None)] * act.ndim
        if self.pos is not None:
            if act.ndim < 3:
                raise ValueError(f"site {self} has a position but activation {self.hook} has none")
            if not -act.shape[1] <= self.pos < act.shape[1]:
                raise ValueError(f"site {self}: pos out of range for length {act.shape[1]}")
            idx[1] = self.pos
        if self.head is not None:
            if act.ndim != 4:
                raise ValueError(
                    f"site {self} has a head but activation {self.hook} has no head axis"
                )
            if not 0 <= self.head < act.shape[2]:
                raise ValueError(f"site {self}: head out of range for {act.shape[2]} heads")
            idx[2] = self.head
        if self.dims is not None:
            a, b = self.dims
            if not 0 <= a < b <= act.shape[-1]:
                raise ValueError(f"site {self}: dims out of range for width {act.shape[-1]}")
            idx[-1] = slice(a, b)
        return tuple(idx)


def _as_site(s: Site | str) -> Site:
    if isinstance(s, Site):
        return s
    if isinstance(s, str):
        return Site(s)
    raise TypeError(f"a site must be a Site or a hook name, got {type(s).__name__}")


class Cache(Mapping[Any, torch.Tensor]):
    """Cached activations by hook name; ``cache[Site(...)]`` returns the selected part."""

    def __init__(self, acts: dict[str, torch.Tensor]) -> None:
        self._acts = acts

    def __getitem__(self, key: Site | str) -> torch.Tensor:
        site = _as_site(key)
        if site.hook not in self._acts:
            raise KeyError(f"{site.hook!r} was not cached; cached: {sorted(self._acts)}")
        act = self._acts[site.hook]
        return act[site.index(act)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._acts)

    def __len__(self) -> int:
        return len(self._acts)


Patch = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class _HookState:
    """Cache requests and patches shared by both hook mechanisms."""

    def __init__(self) -> None:
        self.cache: dict[str, torch.Tensor] | None = None
        self.cache_names: set[str] = set()
        self.patches: dict[str, list[tuple[Site, Patch]]] = {}

    def apply(self, name: str, act: torch.Tensor) -> torch.Tensor:
        for site, patch in self.patches.get(name, ()):
            value, mask = patch if isinstance(patch, tuple) else (patch, None)
            idx = site.index(act)
            target = act[idx]
            if value.shape != target.shape:
                raise ValueError(
                    f"patch for {site} has shape {tuple(value.shape)}, the site has "
                    f"{tuple(target.shape)}"
                )
            value = value.to(dtype=act.dtype, device=act.device)
            if mask is not None:
                m = mask.to(device=act.device, dtype=torch.bool).reshape(
                    -1, *([1] * (value.ndim - 1))
                )
                value = torch.where(m, value, target)
            act = act.clone()
            act[idx] = value
        if self.cache is not None and name in self.cache_names:
            self.cache[name] = act
        return act


class _HookProtocol:
    """Mixin giving ``run_with_cache`` and ``patched`` to anything that calls ``self._state.apply``."""

    _state: _HookState
    hook_names: tuple[str, ...]

    def _check_sites(self, sites: Iterable[Site | str]) -> list[Site]:
        out = []
        for s in sites:
            site = _as_site(s)
            if site.hook not in self.hook_names:
                raise ValueError(
                    f"unknown hook site {site.hook!r}; valid sites: {', '.join(self.hook_names)}"
                )
            out.append(site)
        return out

    def run_with_cache(
        self, tokens: torch.Tensor, sites: Iterable[Site | str] | None = None
    ) -> tuple[torch.Tensor, Cache]:
        """Forward pass keeping the activations of ``sites`` (default: every hook)."""
        names = (
            set(self.hook_names)
            if sites is None
            else {s.hook for s in self._check_sites(list(sites))}
        )
        state = self._state
        previous = (state.cache, state.cache_names)
        state.cache, state.cache_names = {}, names
        try:
            logits = self(tokens)  # type: ignore[operator]
            acts = state.cache
        finally:
            state.cache, state.cache_names = previous
        return logits, Cache(acts)

    @contextlib.contextmanager
    def patched(self, patches: Mapping[Site | str, Patch]) -> Iterator[None]:
        """Replace activations while the context is active.

        Args:
            patches: ``site -> value`` with ``value`` shaped like ``cache[site]`` (batch first), or
                ``site -> (value, mask)`` with a boolean ``mask`` of shape ``(batch,)``: only the
                rows where it is true are replaced (per-example interchange interventions).
        """
        if not isinstance(patches, Mapping):
            raise TypeError(
                f"patches must be a mapping site -> tensor, got {type(patches).__name__}"
            )
        checked = self._check_sites(patches.keys())
        added: dict[str, list[tuple[Site, Patch]]] = {}
        for site, value in zip(checked, patches.values(), strict=True):
            v = value[0] if isinstance(value, tuple) else value
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"patch for {site} must be a torch.Tensor, got {type(v).__name__}")
            added.setdefault(site.hook, []).append((site, value))
        state = self._state
        saved = {k: list(v) for k, v in state.patches.items()}
        for k, v in added.items():
            state.patches.setdefault(k, []).extend(v)
        try:
            yield
        finally:
            state.patches = saved


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_mlp: int, attn_only: bool) -> None:
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.o = nn.Linear(d_model, d_model)
        self.attn_only = attn_only
        if not attn_only:
            self.ln2 = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(
                nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model)
            )


class TinyTransformer(_HookProtocol, nn.Module):
    """A small pre-LayerNorm Transformer classifier with TransformerLens-style hook names.

    Attention is bidirectional; the class logits are read from the last position (the task puts a
    classification token there). Hooks: ``hook_embed``, and per block ``l``:
    ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.attn.hook_z`` (``(B, L, H, d_head)``),
    ``blocks.{l}.hook_attn_out``, ``blocks.{l}.hook_mlp_out``, ``blocks.{l}.hook_resid_post``.

    Args:
        vocab: number of token ids.
        seq_len: maximum sequence length.
        n_classes: output classes.
        d_model, n_layers, n_heads, d_mlp: sizes (spec defaults 64, 2, 4, 128).
        attn_only: drop the MLPs.
        final_ln: LayerNorm before the readout (used by ``representations(apply_ln=True)``).
    """

    def __init__(
        self,
        vocab: int,
        seq_len: int,
        n_classes: int,
        *,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_mlp: int = 128,
        attn_only: bool = False,
        final_ln: bool = True,
    ) -> None:
        super().__init__()
        for name, v in (("vocab", vocab), ("seq_len", seq_len), ("n_classes", n_classes),
                        ("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads),
                        ("d_mlp", d_mlp)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.config = {"vocab": vocab, "seq_len": seq_len, "n_classes": n_classes,
                       "d_model": d_model, "n_layers": n_layers, "n_heads": n_heads,
                       "d_mlp": d_mlp, "attn_only": attn_only, "final_ln": final_ln}  # fmt: skip
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(seq_len, d_model) * 0.1)
        self.blocks = nn.ModuleList(
            _Block(d_model, n_heads, d_mlp, attn_only) for _ in range(n_layers)
        )
        self.ln_final = nn.LayerNorm(d_model) if final_ln else nn.Identity()
        self.unembed = nn.Linear(d_model, n_classes)
        names = ["hook_embed"]
        for layer in range(n_layers):
            p = f"blocks.{layer}."
            names += [p + "hook_resid_pre", p + "attn.hook_z", p + "hook_attn_out"]
            if not attn_only:
                names.append(p + "hook_mlp_out")
            names.append(p + "hook_resid_post")
        self.hook_names = tuple(names)
        self._state = _HookState()

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError("tokens must be an integer torch.Tensor of shape (batch, seq)")
        if tokens.ndim != 2 or tokens.shape[1] > self.pos.shape[0]:
            raise ValueError(
                f"tokens must have shape (batch, <= {self.pos.shape[0]}), got {tuple(tokens.shape)}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.embed.num_embeddings):
            raise ValueError(f"token ids must be in [0, {self.embed.num_embeddings})")
        h = self._state.apply
        B, L = tokens.shape
        x = h("hook_embed", self.embed(tokens.long()) + self.pos[:L])
        for layer, blk in enumerate(self.blocks):
            p = f"blocks.{layer}."
            x = h(p + "hook_resid_pre", x)
            q, k, v = blk.qkv(blk.ln1(x)).view(B, L, 3, blk.n_heads, blk.d_head).unbind(2)
            z = nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            ).transpose(1, 2)
            z = h(p + "attn.hook_z", z)
            x = x + h(p + "hook_attn_out", blk.o(z.reshape(B, L, -1)))
            if not blk.attn_only:
                x = x + h(p + "hook_mlp_out", blk.mlp(blk.ln2(x)))
            x = h(p + "hook_resid_post", x)
        return self.unembed(self.ln_final(x[:, -1]))


class TinyMLP(_HookProtocol, nn.Module):
    """A ReLU MLP classifier over one-hot tokens with hooks ``hidden.{k}`` (post-ReLU).

    Args:
        vocab: token ids per position (inputs are one-hot encoded).
        seq_len: number of positions.
        widths: hidden widths, e.g. ``(128, 128)``.
        n_classes: output classes.
    """

    def __init__(self, vocab: int, seq_len: int, widths: Iterable[int], n_classes: int) -> None:
        super().__init__()
        widths = tuple(widths)
        if not widths or any(
            isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths
        ):
            raise ValueError(
                f"widths must be a non-empty sequence of positive ints, got {widths!r}"
            )
        for name, v in (("vocab", vocab), ("seq_len", seq_len), ("n_classes", n_classes)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.config = {
            "vocab": vocab,
            "seq_len": seq_len,
            "widths": list(widths),
            "n_classes": n_classes,
        }
        self.vocab, self.seq_len = vocab, seq_len
        dims = [vocab * seq_len, *widths]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.out = nn.Linear(widths[-1], n_classes)
        self.hook_names = tuple(f"hidden.{k}" for k in range(len(widths)))
        self._state = _HookState()
        self.ln_final = nn.Identity()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError("tokens must be an integer torch.Tensor of shape (batch, seq)")
        if tokens.ndim != 2 or tokens.shape[1] != self.seq_len:
            raise ValueError(
                f"tokens must have shape (batch, {self.seq_len}), got {tuple(tokens.shape)}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab):
            raise ValueError(f"token ids must be in [0, {self.vocab})")
        x = nn.functional.one_hot(tokens.long(), self.vocab).flatten(1).to(self.out.weight.dtype)
        for k, lin in enumerate(self.layers):
            x = self._state.apply(f"hidden.{k}", torch.relu(lin(x)))
        return self.out(x)


class ModuleHooks(_HookProtocol):
    """The cache/patch protocol for any ``torch.nn.Module``, via forward hooks on submodules.

    Hook names are submodule names (``dict(module.named_modules())``); a submodule's output
    tensor is the activation. For a TransformerLens ``HookedTransformer`` these are its hook points
    (``blocks.0.hook_resid_post``...), so sites written for :class:`TinyTransformer` carry over.

    Args:
        module: the model.
        output: maps the module's output to ``(batch, n_classes)`` logits (default: identity;
            e.g. ``lambda y: y[:, -1]`` for a language model's last-token logits).
        hooks: the submodule names to expose (default: every named submodule except the root).
    """

    def __init__(
        self,
        module: nn.Module,
        output: Callable[[Any], torch.Tensor] | None = None,
        hooks: Iterable[str] | None = None,
    ) -> None:
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        self.module = module
        self.output = output or (lambda y: y)
        mods = dict(module.named_modules())
        names = [n for n in mods if n] if hooks is None else list(hooks)
        for n in names:
            if n not in mods:
                raise ValueError(f"module has no submodule {n!r}")
        self.hook_names = tuple(names)
        self._state = _HookState()
        self.ln_final = getattr(module, "ln_final", nn.Identity())
        self._handles = [mods[n].register_forward_hook(self._make_hook(n)) for n in self.hook_names]

    def _make_hook(self, name: str) -> Callable[..., Any]:
        def hook(_mod: nn.Module, _inp: Any, out: Any) -> Any:
            if not isinstance(out, torch.Tensor):
                return None
            if self._state.cache is None and name not in self._state.patches:
                return None
            return self._state.apply(name, out)

        return hook

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.output(self.module(tokens))

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.module.parameters()

    def remove(self) -> None:
        """Detach the forward hooks from the module."""
        for h in self._handles:
            h.remove()
        self._handles = []


def weight_correlation(model_a: nn.Module, model_b: nn.Module) -> float | None:
    """The weight-space baseline: Pearson correlation of two models' weight matrices, flattened
    in parameter order; ``None`` when the architectures differ (no weight correspondence).

    Only parameters with two or more dimensions count: biases and LayerNorm gains start at 0 and 1
    in every model, so including them makes any two same-architecture models look correlated.
    """
    for name, m in (("model_a", model_a), ("model_b", model_b)):
        if not isinstance(m, nn.Module):
            raise TypeError(f"{name} must be a torch.nn.Module, got {type(m).__name__}")
    pa = [p.detach().flatten() for p in model_a.parameters() if p.dim() >= 2]
    pb = [p.detach().flatten() for p in model_b.parameters() if p.dim() >= 2]
    if not pa or [p.shape for p in pa] != [p.shape for p in pb]:
        return None
    a, b = torch.cat(pa).double().cpu(), torch.cat(pb).double().cpu()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("model weights must be finite")
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])
