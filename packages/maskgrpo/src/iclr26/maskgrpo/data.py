"""Shipped tiny denoisers, pre-trained on the generated tasks (retrain: ``iclr26-maskgrpo
pretrain-toy --task NAME --out FILE``; the shipped files were made with the defaults there)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import torch

from iclr26.maskgrpo.policy import TinyMaskedDenoiser, load_denoiser
from iclr26.maskgrpo.tasks import TASKS

__all__ = ["PRETRAIN_DEFAULTS", "load_pretrained", "pretrained_path"]

#: Settings of the shipped checkpoints: the first step of one seeded MDLM run at which held-out
#: success (64 prompts × 4 low-confidence rollouts) lies in the spec's 20–50 % headroom band, so
#: that RL has room to improve. Add-3 and Sudoku-4×4 route digits by position and need
#: ``pos_std=1.0`` (with the default 0.02 both stayed at chance for 500–1500 steps).
PRETRAIN_DEFAULTS = {
    "sort8": {"steps": 150, "batch_size": 128, "lr": 2e-3, "seed": 0, "pos_std": 0.02},
    "add3": {"steps": 1000, "batch_size": 128, "lr": 2e-3, "seed": 0, "pos_std": 1.0},
    "sudoku4": {"steps": 116, "batch_size": 128, "lr": 2e-3, "seed": 0, "pos_std": 1.0},
    # Digits-T2I 8×8 and 4×4: the first snapshot, in steps of 25, whose held-out mean reward
    # (class probability of emerge samples) lies in the band (8×8: 0.16 at step 175, 0.39 at 200)
    "digits": {"steps": 200, "batch_size": 128, "lr": 2e-3, "seed": 0, "pos_std": 1.0},
    "digits4": {"steps": 125, "batch_size": 128, "lr": 2e-3, "seed": 0, "pos_std": 1.0},
}
#: Architecture of the shipped checkpoints (the spec's ``tiny`` preset).
TINY = {"d_model": 64, "n_layers": 2, "n_heads": 4}


def pretrained_path(task: str) -> Path:
    """Path of the shipped safetensors file of ``task``."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASKS))}; got {task!r}")
    return Path(str(files("iclr26.maskgrpo") / "weights" / f"{task}.safetensors"))


def load_pretrained(task: str, device: str | torch.device = "cpu") -> TinyMaskedDenoiser:
    """The shipped tiny denoiser of ``task`` (``"sort8"``, ``"add3"``, ``"sudoku4"``,
    ``"digits"``, ``"digits4"``)."""
    path = pretrained_path(task)
    if not path.is_file():
        raise OSError(
            f"no shipped weights for {task!r}; create them with `iclr26-maskgrpo pretrain-toy "
            f"--task {task} --out {path}`"
        )
    return load_denoiser(path, device=device)
