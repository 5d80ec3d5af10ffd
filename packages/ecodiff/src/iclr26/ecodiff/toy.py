"""Tiny class-conditional diffusers models on 8×8 digits: a ``DiTTransformer2DModel`` trained
with DDPM ε-prediction or with flow matching (rectified flow), and a ``UNet2DConditionModel``
(GEGLU FFNs, self- and cross-attention; the SDXL analogue) trained with DDPM ε-prediction and
conditioned on a learned 4-token "prompt" per class through ``encoder_hidden_states``. Trained here
on the digits scikit-learn ships; the weights in ``weights/`` were written by
``iclr26-ecodiff train-toy`` (``--regime ddpm|flow|unet``).
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

import torch
from torch import nn

__all__ = [
    "REGIMES",
    "load_toy",
    "load_toy_unet",
    "save_toy",
    "save_toy_unet",
    "tiny_dit",
    "tiny_flux",
    "tiny_unet",
    "toy_scheduler",
    "train_toy",
    "train_toy_unet",
]

log = logging.getLogger(__name__)

REGIMES = ("ddpm", "flow")
NUM_CLASSES = 10
PROMPT_TOKENS = 4
PROMPT_DIM = 32


def tiny_dit(seed: int = 0) -> nn.Module:
    """A 4-layer, 4-head (16 dims each) DiT on 8×8×1 inputs with 2×2 patches (16 tokens),
    class-conditional over 10 labels (random init)."""
    from diffusers import DiTTransformer2DModel

    torch.manual_seed(seed)
    return DiTTransformer2DModel(
        num_attention_heads=4, attention_head_dim=16, in_channels=1, num_layers=4,
        sample_size=8, patch_size=2, num_embeds_ada_norm=NUM_CLASSES, norm_num_groups=1,
        activation_fn="gelu-approximate",
    )  # fmt: skip


def tiny_unet(seed: int = 0) -> nn.Module:
    """A tiny ``UNet2DConditionModel`` (GEGLU FFNs, ``attn1``/``attn2``) on 8×8×1, random init,
    conditioned through ``encoder_hidden_states`` of width 32: channels (32, 32), one layer per
    block, 4 heads of 8 dims in each of its 4 transformer blocks (0.36 M parameters)."""
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    return UNet2DConditionModel(
        sample_size=8, in_channels=1, out_channels=1, block_out_channels=(32, 32),
        layers_per_block=1, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=PROMPT_DIM,
        attention_head_dim=4, norm_num_groups=8,
    )  # fmt: skip


def tiny_flux(seed: int = 0) -> nn.Module:
    """A random-init ``FluxTransformer2DModel`` with one double- and two single-stream blocks."""
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(seed)
    return FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=16,
        axes_dims_rope=(4, 6, 6),
    )  # fmt: skip


def toy_scheduler(regime: str):
    """The scheduler the toy of ``regime`` was trained with (DDIM sampling / flow Euler)."""
    if regime == "ddpm":
        from diffusers import DDIMScheduler

        return DDIMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2",
                             clip_sample=False)  # fmt: skip
    if regime == "flow":
        from diffusers import FlowMatchEulerDiscreteScheduler

        return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=1.0)
    raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")


def train_toy(
    regime: str = "ddpm",
    *,
    steps: int = 3000,
    batch_size: int = 128,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = False,
) -> nn.Module:
    """Train the tiny DiT on all 1,797 digits (DDPM ε-prediction or rectified-flow velocity)."""
    from iclr26.ecodiff.data import digits
    from iclr26.shared import progress as bar

    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    _check_steps(steps)
    x, y = digits()
    model = tiny_dit(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    gen = torch.Generator().manual_seed(seed)
    ac = None
    if regime == "ddpm":
        ac = toy_scheduler("ddpm").alphas_cumprod.float()
    for _ in bar(range(steps), enabled=progress, desc=f"training toy DiT ({regime})"):
        idx = torch.randint(0, len(y), (batch_size,), generator=gen)
        x0, c = x[idx], y[idx]
        noise = torch.randn(x0.shape, generator=gen)
        if regime == "ddpm":
            t = torch.randint(0, 1000, (batch_size,), generator=gen)
            a = ac[t].view(-1, 1, 1, 1)
            xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
            target = noise
            tt = t
        else:
            s = torch.rand(batch_size, generator=gen)
            sv = s.view(-1, 1, 1, 1)
            xt = (1 - sv) * x0 + sv * noise
            target = noise - x0
            tt = s * 1000
        out = model(xt, tt, class_labels=c, return_dict=False)[0]
        loss = (out - target).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return model


def _weights_dir() -> Path:
    return Path(str(resources.files("iclr26.ecodiff") / "weights"))


def save_toy(model: nn.Module, regime: str, folder: str | Path | None = None) -> Path:
    """Write the toy's weights as float16 safetensors (< 1 MB)."""
    from safetensors.torch import save_file

    folder = _weights_dir() if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"toy_dit_{regime}.safetensors"
    save_file({k: v.detach().half().contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def load_toy(regime: str = "ddpm", *, trained: bool = True, seed: int = 0) -> nn.Module:
    """The tiny DiT of ``regime``: shipped trained weights (``trained=True``) or random init."""
    if regime not in REGIMES:
        raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
    model = tiny_dit(seed)
    if trained:
        from safetensors.torch import load_file

        path = _weights_dir() / f"toy_dit_{regime}.safetensors"
        if not path.is_file():
            raise OSError(f"no shipped weights {path.name}; run `iclr26-ecodiff train-toy`")
        state = {k: v.float() for k, v in load_file(str(path)).items()}
        model.load_state_dict(state)
    return model.eval()


def _check_steps(steps: object) -> None:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")


def train_toy_unet(
    *,
    steps: int = 600,
    batch_size: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = False,
) -> tuple[nn.Module, torch.Tensor]:
    """Train :func:`tiny_unet` on all digits with DDPM ε-prediction, jointly with a learned
    ``(10, 4, 32)`` table of class "prompt" embeddings fed as ``encoder_hidden_states``.

    Returns ``(unet, prompts)``; condition on class ``y`` with ``prompts[y]``.
    """
    from iclr26.ecodiff.data import digits
    from iclr26.shared import progress as bar

    _check_steps(steps)
    _check_steps(batch_size)
    x, y = digits()
    model = tiny_unet(seed)
    model.train()
    gen = torch.Generator().manual_seed(seed)
    prompts = nn.Parameter(torch.randn(NUM_CLASSES, PROMPT_TOKENS, PROMPT_DIM, generator=gen))
    opt = torch.optim.AdamW([*model.parameters(), prompts], lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    ac = toy_scheduler("ddpm").alphas_cumprod.float()
    for _ in bar(range(steps), enabled=progress, desc="training toy U-Net (ddpm)"):
        idx = torch.randint(0, len(y), (batch_size,), generator=gen)
        x0, c = x[idx], y[idx]
        noise = torch.randn(x0.shape, generator=gen)
        t = torch.randint(0, 1000, (batch_size,), generator=gen)
        a = ac[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        out = model(xt, t, encoder_hidden_states=prompts[c], return_dict=False)[0]
        loss = (out - noise).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return model, prompts.detach().clone()


def save_toy_unet(
    model: nn.Module, prompts: torch.Tensor, folder: str | Path | None = None
) -> Path:
    """Write the toy U-Net and its prompt table as float16 safetensors (< 1 MB)."""
    from safetensors.torch import save_file

    if tuple(prompts.shape) != (NUM_CLASSES, PROMPT_TOKENS, PROMPT_DIM):
        raise ValueError(
            f"prompts must have shape {(NUM_CLASSES, PROMPT_TOKENS, PROMPT_DIM)}, "
            f"got {tuple(prompts.shape)}"
        )
    folder = _weights_dir() if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toy_unet_ddpm.safetensors"
    state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()}
    state["prompt_embeddings"] = prompts.detach().half().contiguous()
    save_file(state, str(path))
    return path


def load_toy_unet(*, trained: bool = True, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The tiny U-Net and its ``(10, 4, 32)`` class-prompt table: shipped trained weights
    (``trained=True``) or random init (prompts drawn from a seeded normal)."""
    model = tiny_unet(seed)
    if not trained:
        gen = torch.Generator().manual_seed(seed)
        return model.eval(), torch.randn(NUM_CLASSES, PROMPT_TOKENS, PROMPT_DIM, generator=gen)
    from safetensors.torch import load_file

    path = _weights_dir() / "toy_unet_ddpm.safetensors"
    if not path.is_file():
        raise OSError(
            f"no shipped weights {path.name}; run `iclr26-ecodiff train-toy --regime unet`"
        )
    state = {k: v.float() for k, v in load_file(str(path)).items()}
    prompts = state.pop("prompt_embeddings")
    model.load_state_dict(state)
    return model.eval(), prompts
