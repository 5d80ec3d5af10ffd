"""LoRA adapters on a masked-diffusion policy through peft (extra ``[peft]``).

MaskGRPO trains LoRA adapters (r 128, α 64, dropout 0.05 in the release) on a frozen LLaDA /
MMaDA base, and its KL reference is the same base with the adapters disabled (spec §2.5). Here
:func:`lora_policy` wraps any torch denoiser (the package's :class:`TinyMaskedDenoiser`, a
Hugging Face masked LM, or your own module with named ``nn.Linear`` layers) with peft's
``LoraConfig``/``get_peft_model``; :class:`~iclr26.maskgrpo.MaskGRPOTrainer` recognises the
result, optimises only the adapter parameters and uses the adapter-disabled base as its
reference, so no second copy of the base is held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from iclr26.shared import check_int, check_range

__all__ = ["TINY_LORA_TARGETS", "is_adapter_policy", "lora_policy"]

#: Default LoRA targets of :class:`~iclr26.maskgrpo.TinyMaskedDenoiser`: both MLP projections
#: of every layer. ``"self_attn"`` may be added: peft adapts ``nn.MultiheadAttention`` by merging
#: the adapter into the frozen in/out projections before each forward and subtracting it after,
#: so those frozen weights drift by float rounding (they stay equal only to ~1e-7, not bit for bit).
TINY_LORA_TARGETS = ("linear1", "linear2")


def is_adapter_policy(policy: Any) -> bool:
    """Whether ``policy`` is a peft model whose adapters can be switched off (``disable_adapter``)."""
    return callable(getattr(policy, "disable_adapter", None)) and hasattr(policy, "peft_config")


def lora_policy(
    policy: nn.Module,
    *,
    r: int = 128,
    lora_alpha: float = 64,
    lora_dropout: float = 0.05,
    target_modules: Sequence[str] | str | None = None,
) -> nn.Module:
    """Wrap ``policy`` with fresh LoRA adapters (peft ``get_peft_model``); the base is frozen.

    Each targeted weight W becomes W + (α/r)·B·A with A (r × d_in) random and B (d_out × r) zero,
    so the wrapped policy computes exactly the base policy's logits until it is trained.

    Args:
        policy: a torch denoiser (``TinyMaskedDenoiser``, a Hugging Face masked LM, any module).
        r, lora_alpha, lora_dropout: rank, scale α and dropout (the release: 128, 64, 0.05; use
            a rank below the model width for tiny models).
        target_modules: module names (or a peft regex) to adapt. Default:
            :data:`TINY_LORA_TARGETS` for a ``TinyMaskedDenoiser``; peft's per-architecture
            default for a Hugging Face model (``config.model_type``); required otherwise.

    Returns:
        the peft ``PeftModel`` (call it like the policy; ``disable_adapter()`` gives the base).
    """
    from iclr26.maskgrpo.policy import TinyMaskedDenoiser
    from iclr26.shared import import_optional

    peft = import_optional("peft", dist="iclr26-maskgrpo", extra="peft", purpose="lora_policy")
    if not isinstance(policy, nn.Module):
        raise TypeError(f"policy must be a torch.nn.Module, got {type(policy).__name__}")
    if is_adapter_policy(policy):
        raise ValueError("policy already carries peft adapters")
    check_int(r, "r", low=1)
    check_range(lora_alpha, "lora_alpha", low=0.0, low_inclusive=False)
    check_range(lora_dropout, "lora_dropout", low=0.0, high=1.0, high_inclusive=False)
    if target_modules is None:
        if isinstance(policy, TinyMaskedDenoiser):
            target_modules = list(TINY_LORA_TARGETS)
        elif getattr(getattr(policy, "config", None), "model_type", None) is None:
            raise ValueError(
                f"target_modules is required for a {type(policy).__name__} policy (names of its "
                "nn.Linear layers to adapt)"
            )
    elif isinstance(target_modules, str):
        pass  # a peft regex over module names
    else:
        target_modules = list(target_modules)
        if not target_modules or not all(isinstance(t, str) for t in target_modules):
            raise ValueError("target_modules must be a non-empty list of module names")
        if any(t == "out_proj" or t.endswith(".out_proj") for t in target_modules) and any(
            isinstance(m, nn.MultiheadAttention) for m in policy.modules()
        ):
            raise ValueError(
                "target_modules names out_proj of an nn.MultiheadAttention, whose forward never "
                "calls it: target the attention module itself (e.g. 'self_attn')"
            )
    config = peft.LoraConfig(
        r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout, target_modules=target_modules
    )
    try:
        return peft.get_peft_model(policy, config)
    except ValueError as err:  # peft: no default targets for this architecture, no match, ...
        raise ValueError(f"target_modules: {err}") from None
