"""The toy token-video model: a small ``LlamaForCausalLM`` trained on moving digits.

``train_toy`` builds the model from a ``LlamaConfig`` (no hub), fits the patch tokenizer and
trains next-token prediction on generated clips; ``save_toy``/``load_toy`` use
``save_pretrained``/``from_pretrained`` (safetensors) plus the codebook. The wheel ships a model
trained by ``iclr26-fastcar train-toy`` (see the README for the exact command).
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from iclr26.fastcar.data import PatchTokenizer, VideoTokens, moving_digits, trajectory

__all__ = [
    "ToyModel",
    "ToyPreset",
    "build_model",
    "encode_videos",
    "load_toy",
    "save_toy",
    "train_toy",
]

log = logging.getLogger(__name__)
SHIPPED = Path(__file__).parent / "weights" / "toy"


@dataclass(frozen=True)
class ToyPreset:
    """Sizes of the toy (the defaults are what the wheel ships and tests use).

    A ``canvas x canvas`` frame cut into ``patch x patch`` tokens: the default 24 x 24 canvas with
    4 x 4 patches gives 36 tokens per frame, of which the 8 x 8 digit covers at most 9, so most
    slots repeat their token from one frame to the next (temporally coherent video).
    ``digit_variants`` sprites per class (``None``: all of scikit-learn's digits) keep the
    video a near-deterministic function of the prompt, which a small model can learn.
    """

    hidden_size: int = 128
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    canvas: int = 24
    patch: int = 4
    codebook_size: int = 64
    num_frames: int = 8
    digit_variants: int | None = 1


@dataclass
class ToyModel:
    """A trained (or random) toy: the HF model, its tokenizer and vocabulary."""

    model: torch.nn.Module
    tokenizer: PatchTokenizer
    vocab: VideoTokens
    preset: ToyPreset
    train_log: dict | None = None


def build_model(preset: ToyPreset, *, seed: int = 0, max_frames: int = 16):
    """A randomly initialised ``LlamaForCausalLM`` for the preset (GQA, SwiGLU, RoPE)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab = VideoTokens(preset.codebook_size, preset.canvas, preset.patch)
    cfg = LlamaConfig(
        vocab_size=vocab.vocab_size, hidden_size=preset.hidden_size,
        num_hidden_layers=preset.num_layers, num_attention_heads=preset.num_heads,
        num_key_value_heads=preset.num_kv_heads, intermediate_size=preset.intermediate_size,
        max_position_embeddings=vocab.prefix_len + max_frames * vocab.tokens_per_frame,
        bos_token_id=vocab.bos, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False,
    )  # fmt: skip
    cfg.fastcar_tokens_per_frame = vocab.tokens_per_frame
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).eval(), vocab


def encode_videos(videos: dict, tokenizer: PatchTokenizer, vocab: VideoTokens) -> np.ndarray:
    """``(V, 5 + F*N)`` token sequences (prompt + row-major frame codes)."""
    codes = tokenizer.encode(videos["frames"])
    prefix = vocab.prefix(videos["label"], videos["velocity"], videos["y0"], videos["x0"])
    return np.concatenate([prefix, codes.reshape(len(codes), -1)], 1)


def train_toy(
    preset: ToyPreset | None = None,
    *,
    num_videos: int = 1600,
    epochs: int = 3,
    batch_size: int = 8,
    lr: float = 2e-3,
    seed: int = 0,
    progress: bool = False,
) -> ToyModel:
    """Train the toy on generated moving digits (next-token cross-entropy, AdamW, cosine lr)."""
    from iclr26.shared import progress as bar

    preset = preset or ToyPreset()
    for name, v in (("num_videos", num_videos), ("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not (isinstance(lr, float | int) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    videos = moving_digits(num_videos, preset.num_frames, preset.canvas, seed=seed,
                           variants=preset.digit_variants)  # fmt: skip
    tok = PatchTokenizer(preset.patch, preset.codebook_size).fit(
        videos["frames"][: min(num_videos, 300)], seed=seed
    )
    model, vocab = build_model(preset, seed=seed)
    seqs = torch.as_tensor(encode_videos(videos, tok, vocab))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = epochs * math.ceil(num_videos / batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seed)
    losses = []
    for epoch in bar(range(epochs), desc="train-toy", enabled=progress):
        perm = torch.randperm(num_videos, generator=g)
        total = 0.0
        for s in range(0, num_videos, batch_size):
            batch = seqs[perm[s : s + batch_size]]
            labels = batch.clone()
            labels[:, : vocab.prefix_len] = -100  # the prompt is given, frames are learned
            loss = model(input_ids=batch, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(batch)
        losses.append(total / num_videos)
        log.info("epoch %d: loss %.4f", epoch, losses[-1])
    model.eval()
    codes = seqs[:, vocab.prefix_len :].reshape(num_videos, preset.num_frames, -1)
    train_log = {
        "num_videos": num_videos, "epochs": epochs, "batch_size": batch_size, "lr": lr,
        "seed": seed, "epoch_loss": losses,
        "same_slot_repeat": float((codes[:, 1:] == codes[:, :-1]).float().mean()),
    }  # fmt: skip
    return ToyModel(model, tok, vocab, preset, train_log)


def save_toy(toy: ToyModel, path: str | os.PathLike[str]) -> Path:
    """Write the model (float16 safetensors), codebook and preset to folder ``path``."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    toy.model.to(torch.float16).save_pretrained(path)
    toy.model.to(torch.float32)
    save_file({"codebook": toy.tokenizer.codebook_}, str(path / "tokenizer.safetensors"))
    (path / "toy.json").write_text(json.dumps(asdict(toy.preset), indent=2) + "\n")
    if toy.train_log is not None:
        (path / "train.json").write_text(json.dumps(toy.train_log, indent=2) + "\n")
    return path


def load_toy(
    path: str | os.PathLike[str] | None = None, *, device: str | torch.device = "cpu"
) -> ToyModel:
    """Load a toy saved by :func:`save_toy` (default: the one shipped in the wheel), float32."""
    from safetensors.numpy import load_file
    from transformers import LlamaForCausalLM

    path = SHIPPED if path is None else Path(path)
    if not (path / "toy.json").is_file() or not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a fastcar toy folder (toy.json, config.json)")
    preset = ToyPreset(**json.loads((path / "toy.json").read_text()))
    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    tok = PatchTokenizer(preset.patch, preset.codebook_size)
    tok.codebook_ = load_file(str(path / "tokenizer.safetensors"))["codebook"]
    vocab = VideoTokens(preset.codebook_size, preset.canvas, preset.patch)
    log_path = path / "train.json"
    train_log = json.loads(log_path.read_text()) if log_path.is_file() else None
    return ToyModel(model, tok, vocab, preset, train_log)


@dataclass
class ToyPrompts:
    """Prompts for the toy model: prefix tokens, digit labels and the true sprite corners."""

    prefix: torch.Tensor
    labels: np.ndarray
    corners: np.ndarray


def toy_prompts(toy: ToyModel, n: int, frames: int, seed: int) -> ToyPrompts:
    """``n`` seeded moving-digit prompts and the ground-truth trajectory over ``frames``."""
    v = moving_digits(n, 1, toy.preset.canvas, seed=seed, variants=toy.preset.digit_variants)
    prefix = torch.as_tensor(toy.vocab.prefix(v["label"], v["velocity"], v["y0"], v["x0"]))
    corners = trajectory(v["y0"], v["x0"], v["velocity"], frames, toy.preset.canvas)
    return ToyPrompts(prefix, v["label"], corners)


def decode_frames(toy: ToyModel, tokens: torch.Tensor, frames: int) -> np.ndarray:
    """Decode generated token rows (prefix included) into ``frames`` images per video."""
    n = toy.vocab.tokens_per_frame
    codes = tokens[:, toy.vocab.prefix_len :].reshape(len(tokens), frames, n).cpu().numpy()
    return toy.tokenizer.decode(codes, toy.preset.canvas)
