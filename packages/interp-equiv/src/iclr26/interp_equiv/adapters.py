"""Adapters: the package's hook protocol on TransformerLens models.

:class:`HookedTransformerAdapter` wraps a TransformerLens ``HookedTransformer`` so that
:func:`~iclr26.interp_equiv.reprs.representations`, ``run_with_cache`` and ``patched`` (and so the
estimators and IIT) run on it with its own hook-point names (``blocks.{l}.hook_resid_post``,
``blocks.{l}.attn.hook_z``...). TransformerLens is an optional extra (``pip install
'iclr26-interp-equiv[tl]'``); this module does not import it: any object with the
``HookedTransformer`` attributes (``hook_dict``, ``cfg``, ``ln_final``) is accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from iclr26.interp_equiv.models import ModuleHooks

__all__ = ["HookedTransformerAdapter"]

_OUTPUTS = ("last", "all")


class HookedTransformerAdapter(ModuleHooks):
    """The cache/patch protocol on a TransformerLens ``HookedTransformer``.

    Caching and patching go through PyTorch forward hooks on the model's ``HookPoint`` modules,
    the same modules TransformerLens' own ``run_with_cache``/``run_with_hooks`` hook, so cached
    activations and patched outputs equal TransformerLens' (tested with exact equality).

    Args:
        model: a ``transformer_lens.HookedTransformer``.
        output: ``"last"`` (default) reads the logits at the last position, ``(batch, d_vocab)``,
            as the package's classifiers do; ``"all"`` keeps ``(batch, pos, d_vocab)``; or a
            callable mapping the model's output to logits.
        hooks: hook-point names to expose (default: every name in ``model.hook_dict``).
    """

    def __init__(
        self,
        model: nn.Module,
        output: str | Callable[[Any], torch.Tensor] = "last",
        hooks: Iterable[str] | None = None,
    ) -> None:
        if not isinstance(model, nn.Module) or not isinstance(
            getattr(model, "hook_dict", None), dict
        ):
            raise TypeError(
                "model must be a transformer_lens.HookedTransformer (an nn.Module with hook_dict), "
                f"got {type(model).__name__}"
            )
        if callable(output):
            fn = output
        elif output == "last":
            fn = _last
        elif output == "all":
            fn = _identity
        else:
            raise ValueError(f"output must be one of {_OUTPUTS} or a callable, got {output!r}")
        names = list(model.hook_dict) if hooks is None else list(hooks)
        for n in names:
            if not isinstance(n, str) or n not in model.hook_dict:
                raise ValueError(
                    f"hooks: {n!r} is not a hook point of the model; valid: "
                    f"{', '.join(list(model.hook_dict)[:40])}..."
                )
        super().__init__(model, output=fn, hooks=names)
        self.cfg = model.cfg

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
            raise TypeError("tokens must be an integer torch.Tensor of shape (batch, seq)")
        if tokens.ndim != 2 or tokens.shape[1] > self.cfg.n_ctx:
            raise ValueError(
                f"tokens must have shape (batch, <= {self.cfg.n_ctx}), got {tuple(tokens.shape)}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.cfg.d_vocab):
            raise ValueError(f"token ids must be in [0, {self.cfg.d_vocab})")
        return super().__call__(tokens.long())


def _last(y: torch.Tensor) -> torch.Tensor:
    return y[:, -1]


def _identity(y: torch.Tensor) -> torch.Tensor:
    return y
