"""Splat and Distill: EMA-teacher features splatted into a novel view, blended, distilled (Sec. 3).

One training step (official ``model_wrapper.py`` / ``dinov2.py``):

1. the teacher encodes the two context images → patch tokens;
2. tokens are upsampled to pixels with the context instance masks (:func:`mask_aware_upsample`),
   attached one-to-one to pixel-aligned Gaussians (:func:`pixel_aligned_gaussians`), and splatted
   into the target camera (:func:`rasterize_features`);
3. the render is blended with its target-instance means (:func:`semantic_blend`, α = 0.5) and
   resized to the student's token grid; pixels nothing landed on are masked out;
4. the student sees only the target image; loss = DINO prototype cross-entropy
   ``−Σ_k softmax(h_t(F_blend)/τ_t)_k log softmax(h_s(F_s)/τ_s)_k`` (τ = 1, no centering);
5. Adam step with gradient clipping; every ``ema_every`` steps ``θ_t ← m θ_t + (1 − m) θ_s``
   (backbone and head).
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr26.splat_distill.depth import DepthNet, load_depth_net, noisy_depth
from iclr26.splat_distill.gaussians import Gaussians, pixel_aligned_gaussians
from iclr26.splat_distill.geometry import Camera
from iclr26.splat_distill.models import DINOHead, add_lora, is_lora, merge_lora
from iclr26.splat_distill.raster import rasterize_features
from iclr26.splat_distill.upsample import mask_aware_upsample, semantic_blend

__all__ = ["SnDConfig", "SplatAndDistill", "dino_ce_loss", "ema_update"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnDConfig:
    """Settings of :class:`SplatAndDistill`; paper/official values unless noted.

    Attributes:
        n_prototypes, head_hidden, head_bottleneck: DINO head (official 65536, 2048, 256;
            scaled down for a 64-d ViT).
        tau_s, tau_t: student/teacher temperatures (official 1.0, 1.0).
        center: subtract a running mean of teacher logits (DINO centering; official: off).
        ema_momentum, ema_every: teacher EMA m = 0.999 applied every 10 optimiser steps;
            ``ema_momentum = 1`` freezes the teacher (ablation D).
        blend_alpha: semantic blending weight α (0.5; 1 disables blending, ablation A).
        upsample: ``"mask_aware"`` or ``"bilinear"`` (ablation B).
        target: ``"novel"`` (splat into the target view) or ``"context"`` (supervise a context
            view, ablation E).
        loss: ``"dino_ce"`` or ``"cosine"`` (ablation C).
        lr, grad_clip: Adam learning rate (official 2e-5 for DINOv2 + LoRA; 1e-4 here for a
            small ViT trained in full) and gradient-norm clip (0.5).
        render_size: side of the splatted target image before resizing to the token grid.
        lift_stride, scale_px, opacity: pixel-aligned lifting (one Gaussian per stride² pixels).
        min_alpha: a token is supervised only where the resized render alpha exceeds this.
        backend: rasteriser backend.
        lora_rank: 0 trains the student in full; r ≥ 1 trains peft LoRA adapters of rank r on
            the modules named in ``lora_targets`` (official: r = 8, α = ``lora_alpha`` = 8,
            dropout ``lora_dropout`` = 0.1, targets ``qkv``, ``proj``; needs the ``lora`` extra).
        depth: where the lifting's context depth comes from: ``"oracle"`` (exact), ``"noisy"``
            (oracle · exp(``depth_noise`` · smooth unit noise), seeded) or ``"learned"`` (the
            :class:`~iclr26.splat_distill.depth.DepthNet` given to the trainer, by default the
            shipped one, predicting depth from the context image).
    """

    n_prototypes: int = 1024
    head_hidden: int = 256
    head_bottleneck: int = 64
    tau_s: float = 1.0
    tau_t: float = 1.0
    center: bool = False
    center_momentum: float = 0.9
    ema_momentum: float = 0.999
    ema_every: int = 10
    blend_alpha: float = 0.5
    upsample: Literal["mask_aware", "bilinear"] = "mask_aware"
    target: Literal["novel", "context"] = "novel"
    loss: Literal["dino_ce", "cosine"] = "dino_ce"
    lr: float = 1e-4
    grad_clip: float = 0.5
    render_size: int = 32
    lift_stride: int = 2
    scale_px: float = 0.75
    opacity: float = 0.95
    min_alpha: float = 0.5
    backend: Literal["torch-dense", "torch-tiled"] = "torch-tiled"
    lora_rank: int = 0
    lora_alpha: float = 8.0
    lora_dropout: float = 0.1
    lora_targets: tuple[str, ...] = ("qkv", "proj")
    depth: Literal["oracle", "noisy", "learned"] = "oracle"
    depth_noise: float = 0.1

    def __post_init__(self) -> None:
        if (
            isinstance(self.lora_rank, bool)
            or not isinstance(self.lora_rank, int)
            or self.lora_rank < 0
        ):
            raise ValueError(f"lora_rank must be an int ≥ 0, got {self.lora_rank!r}")
        if not self.lora_alpha > 0:
            raise ValueError(f"lora_alpha must be positive, got {self.lora_alpha}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if (
            isinstance(self.lora_targets, str)
            or not all(isinstance(t, str) for t in self.lora_targets)
            or not self.lora_targets
        ):
            raise ValueError(
                f"lora_targets must be a non-empty tuple of names, got {self.lora_targets!r}"
            )
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        if not (math.isfinite(self.depth_noise) and self.depth_noise >= 0):
            raise ValueError(f"depth_noise must be a finite number ≥ 0, got {self.depth_noise}")
        for name in (
            "n_prototypes",
            "head_hidden",
            "head_bottleneck",
            "ema_every",
            "render_size",
            "lift_stride",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int ≥ 1, got {v!r}")
        for name in ("tau_s", "tau_t", "lr", "grad_clip", "scale_px"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("ema_momentum", "blend_alpha", "center_momentum", "min_alpha"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0 < self.opacity <= 1:
            raise ValueError(f"opacity must be in (0, 1], got {self.opacity}")
        for name, choices in (
            ("upsample", ("mask_aware", "bilinear")), ("target", ("novel", "context")),
            ("loss", ("dino_ce", "cosine")), ("backend", ("torch-dense", "torch-tiled")),
            ("depth", ("oracle", "noisy", "learned")),
        ):  # fmt: skip
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")


def dino_ce_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    *,
    tau_s: float = 1.0,
    tau_t: float = 1.0,
    center: Tensor | None = None,
    weights: Tensor | None = None,
) -> Tensor:
    """``mean_tokens −Σ_k softmax((t − c)/τ_t)_k log softmax(s/τ_s)_k`` over [M, K] logits.

    The teacher side is detached. ``weights`` [M] ≥ 0 give a weighted mean (e.g. a validity
    mask); all-zero weights give a zero loss (no supervised token), never NaN.
    """
    if student_logits.shape != teacher_logits.shape or student_logits.ndim != 2:
        raise ValueError(
            f"student_logits and teacher_logits must be equal-shape [M, K], got "
            f"{list(student_logits.shape)} and {list(teacher_logits.shape)}"
        )
    t = teacher_logits.detach()
    if center is not None:
        t = t - center
    p_t = F.softmax(t / tau_t, dim=-1)
    ce = -(p_t * F.log_softmax(student_logits / tau_s, dim=-1)).sum(-1)
    if weights is None:
        return ce.mean()
    if weights.shape != ce.shape:
        raise ValueError(f"weights must have shape [{ce.shape[0]}], got {list(weights.shape)}")
    return (
        (ce * weights).sum() / weights.sum().clamp_min(1e-12) if weights.sum() > 0 else ce.sum() * 0
    )


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """``θ_t ← m θ_t + (1 − m) θ_s`` for every parameter and floating buffer (same structure)."""
    if not 0 <= momentum <= 1:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    ps, pt = dict(student.named_parameters()), dict(teacher.named_parameters())
    if ps.keys() != pt.keys():
        raise ValueError("teacher and student must have the same parameters")
    for k, p in pt.items():
        p.mul_(momentum).add_(ps[k].detach(), alpha=1 - momentum)
    bs = dict(student.named_buffers())
    for k, b in teacher.named_buffers():
        if b.is_floating_point() and k in bs:
            b.mul_(momentum).add_(bs[k], alpha=1 - momentum)


def _nearest_down(x: Tensor, size: int) -> Tensor:
    """Nearest subsampling of [..., H, W] to size × size at block centres."""
    H = x.shape[-1]
    idx = ((torch.arange(size, device=x.device) + 0.5) * (H / size)).long().clamp(max=H - 1)
    return x[..., idx, :][..., idx]


class SplatAndDistill(nn.Module):
    """The SnD trainer: a student backbone, its EMA teacher, two DINO heads and an Adam optimiser.

    Args:
        student: any module mapping images [B,3,H,W] to patch tokens [B,C,h,w] (e.g.
            :class:`~iclr26.splat_distill.models.TinyViT`, or a timm ViT wrapped to return
            :class:`~iclr26.splat_distill.models.TimmViT`). Trained in full, or, with
            ``cfg.lora_rank ≥ 1``, wrapped in place with LoRA adapters
            (:func:`~iclr26.splat_distill.models.add_lora`) of which only the adapters train;
            the EMA teacher is then a copy of the LoRA student (adapters and frozen base).
        cfg: :class:`SnDConfig`.
        feature_dim: C; default ``student.embed_dim``.
        lifter: ``(depth [H,W], cam, features [C,H,W], **kw) -> Gaussians`` (default
            :func:`pixel_aligned_gaussians`; replace with a learned reconstructor).
        depth_net: the depth predictor of ``cfg.depth = "learned"`` (default: the shipped
            :func:`~iclr26.splat_distill.depth.load_depth_net`); ignored otherwise.
        seed: seeds the head and LoRA initialisation and the depth noise.
    """

    def __init__(
        self,
        student: nn.Module,
        cfg: SnDConfig | None = None,
        *,
        feature_dim: int | None = None,
        lifter: Callable[..., Gaussians] = pixel_aligned_gaussians,
        depth_net: DepthNet | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(student, nn.Module):
            raise TypeError(f"student must be an nn.Module, got {type(student).__name__}")
        cfg = SnDConfig() if cfg is None else cfg
        if not isinstance(cfg, SnDConfig):
            raise TypeError(f"cfg must be an SnDConfig, got {type(cfg).__name__}")
        C = feature_dim if feature_dim is not None else getattr(student, "embed_dim", None)
        if not isinstance(C, int) or C < 1:
            raise ValueError("feature_dim must be given (student has no int embed_dim)")
        self.cfg = cfg
        self.lifter = lifter
        if cfg.lora_rank > 0:
            student = add_lora(student, rank=cfg.lora_rank, alpha=cfg.lora_alpha,
                               dropout=cfg.lora_dropout, targets=cfg.lora_targets, seed=seed)  # fmt: skip
        self.student = student
        self.teacher = copy.deepcopy(student).requires_grad_(False).eval()
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.head_s = DINOHead(C, cfg.head_hidden, cfg.head_bottleneck, cfg.n_prototypes)
        torch.random.set_rng_state(gen_state)
        self.head_t = copy.deepcopy(self.head_s).requires_grad_(False)
        dev = next(student.parameters()).device
        self.head_s.to(dev)
        self.head_t.to(dev)
        self.register_buffer("center", torch.zeros(cfg.n_prototypes, device=dev))
        self.depth_net: nn.Module | None = None
        if cfg.depth == "learned":
            net = load_depth_net() if depth_net is None else depth_net
            if not isinstance(net, nn.Module):
                raise TypeError(f"depth_net must be an nn.Module, got {type(net).__name__}")
            self.depth_net = net.to(dev).eval().requires_grad_(False)
        self.depth_generator = torch.Generator().manual_seed(seed)
        params = [p for p in [*student.parameters(), *self.head_s.parameters()] if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr)
        self.steps = 0

    # -- targets ---------------------------------------------------------------------------
    @torch.no_grad()
    def context_depth(self, batch: dict[str, Tensor]) -> Tensor:
        """Depth [B, n_ctx, H, W] the context views are lifted with (``cfg.depth``)."""
        if self.cfg.depth == "oracle":
            return batch["ctx_depth"]
        if self.cfg.depth == "noisy":
            return noisy_depth(
                batch["ctx_depth"], self.cfg.depth_noise, generator=self.depth_generator
            )
        rgb = batch["ctx_rgb"]
        dev = next(self.depth_net.parameters()).device
        return self.depth_net(rgb.flatten(0, 1).to(dev)).reshape(*rgb.shape[:2], *rgb.shape[3:])

    @torch.no_grad()
    def splat_targets(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Teacher targets on the student's token grid for a triplet batch (see
        :func:`~iclr26.splat_distill.data.triplet_batch`): ``target`` [B,C,h,w], ``valid``
        [B,h,w] (render alpha > ``min_alpha``), ``image`` [B,3,H,W] the student sees,
        ``render`` [B,C,R,R] and ``alpha`` [B,R,R] before resizing."""
        cfg = self.cfg
        ctx_rgb = batch["ctx_rgb"]
        B, n_ctx, _, H, W = ctx_rgb.shape
        dev = next(self.teacher.parameters()).device
        feats = self.teacher(ctx_rgb.flatten(0, 1).to(dev))
        C, h, w = feats.shape[1:]
        feats = feats.reshape(B, n_ctx, C, h, w)
        K = batch["K"]
        ctx_depth = self.context_depth(batch)
        R = cfg.render_size
        outs, alphas, images = [], [], []
        for b in range(B):
            if cfg.target == "novel":
                tcam = Camera(K, batch["tgt_c2w"][b], H, W)
                tmask, timg = batch["tgt_instance"][b], batch["tgt_rgb"][b]
            else:
                tcam = Camera(K, batch["ctx_c2w"][b, 0], H, W)
                tmask, timg = batch["ctx_instance"][b, 0], batch["ctx_rgb"][b, 0]
            parts = []
            for j in range(n_ctx):
                mask = batch["ctx_instance"][b, j].to(dev)
                if cfg.upsample == "mask_aware":
                    up = mask_aware_upsample(feats[b, j], mask)
                else:
                    up = F.interpolate(
                        feats[b, j][None], size=(H, W), mode="bilinear", align_corners=True
                    )[0]
                cam = Camera(K.to(dev), batch["ctx_c2w"][b, j].to(dev), H, W)
                parts.append(
                    self.lifter(ctx_depth[b, j].to(dev), cam, up, scale_px=cfg.scale_px,
                                opacity=cfg.opacity, stride=cfg.lift_stride)
                )  # fmt: skip
            g = Gaussians.concat(parts)
            r = rasterize_features(g, tcam.to(device=dev).scaled(R, R), backend=cfg.backend)
            f = r["features"]
            if cfg.blend_alpha < 1:
                f = semantic_blend(f, _nearest_down(tmask.to(dev), R), cfg.blend_alpha)
            outs.append(f)
            alphas.append(r["alpha"])
            images.append(timg)
        render = torch.stack(outs)
        alpha = torch.stack(alphas)
        target = F.interpolate(
            render, size=(h, w), mode="bilinear", antialias=True, align_corners=False
        )
        a_tok = F.interpolate(
            alpha[:, None], size=(h, w), mode="bilinear", antialias=True, align_corners=False
        )[:, 0]
        return {
            "target": target, "valid": a_tok > cfg.min_alpha, "image": torch.stack(images).to(dev),
            "render": render, "alpha": alpha,
        }  # fmt: skip

    # -- one step --------------------------------------------------------------------------
    def training_step(
        self, batch: dict[str, Tensor], *, accelerator: Any = None
    ) -> tuple[Tensor, dict[str, float]]:
        """Targets, loss, backward, clipped Adam step and (every ``ema_every`` steps) the EMA.

        Data parallel with a Hugging Face ``accelerate.Accelerator`` (the ``accelerate`` extra):
        every process passes the same whole ``batch`` (same seed), keeps its contiguous shard of
        B / num_processes triplets, weights its loss by its share of the supervised tokens of the
        whole batch, and the gradients are summed over processes (``accelerator.reduce``) before
        the clipped Adam step, so every process takes the step one process would take on the
        whole batch (up to float rounding) and the replicas stay identical. With one process this
        is bit-identical to ``accelerator=None``. The batch size must divide evenly; LoRA dropout
        and ``depth="noisy"`` draw their noise per process, so only deterministic settings match
        the one-process run exactly.
        """
        cfg = self.cfg
        world = 1 if accelerator is None else int(accelerator.num_processes)
        if world > 1:
            B = batch["ctx_rgb"].shape[0]
            if B % world:
                raise ValueError(f"batch size {B} must be divisible by the {world} processes")
            b, r = B // world, int(accelerator.process_index)
            batch = {k: v if k == "K" else v[r * b : (r + 1) * b] for k, v in batch.items()}
        self.student.train()
        tg = self.splat_targets(batch)
        fs = self.student(tg["image"])
        if fs.shape != tg["target"].shape:
            raise ValueError(
                f"student tokens {list(fs.shape)} do not match targets {list(tg['target'].shape)}"
            )
        C = fs.shape[1]
        s_tok = fs.permute(0, 2, 3, 1).reshape(-1, C)
        t_tok = tg["target"].permute(0, 2, 3, 1).reshape(-1, C)
        wts = tg["valid"].reshape(-1).to(fs.dtype)
        w_sum = wts.sum()
        if accelerator is not None:
            w_all = accelerator.reduce(w_sum.detach().clone(), reduction="sum")
            share = w_sum / w_all if w_all > 0 else w_sum.new_tensor(1.0 / world)
        logs: dict[str, float] = {"valid_frac": float(wts.mean())}
        if cfg.loss == "dino_ce":
            s_logits = self.head_s(s_tok)
            with torch.no_grad():
                t_logits = self.head_t(t_tok)
            loss = dino_ce_loss(
                s_logits, t_logits, tau_s=cfg.tau_s, tau_t=cfg.tau_t,
                center=self.center if cfg.center else None, weights=wts,
            )  # fmt: skip
            with torch.no_grad():
                p = F.softmax(t_logits / cfg.tau_t, -1)
                logs["teacher_entropy"] = float(-(p * p.clamp_min(1e-12).log()).sum(-1).mean())
                if cfg.center:
                    c = t_logits.mean(0)
                    if world > 1:
                        c = accelerator.reduce(c.contiguous(), reduction="mean")
                    self.center.mul_(cfg.center_momentum).add_(c, alpha=1 - cfg.center_momentum)
        else:
            cos = F.cosine_similarity(s_tok, t_tok, dim=-1)
            loss = ((1 - cos) * wts).sum() / wts.sum().clamp_min(1e-12)
        if accelerator is not None:
            loss = loss * share  # this process's part of the whole batch's weighted mean
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if world > 1:
            for p in params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad.copy_(accelerator.reduce(p.grad.contiguous(), reduction="sum"))
            loss = accelerator.reduce(loss.detach().clone(), reduction="sum")
            logs["valid_frac"] = float(w_all) / (wts.numel() * world)
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        self.optimizer.step()
        self.steps += 1
        if self.steps % cfg.ema_every == 0:
            self.ema_update()
        logs["loss"] = float(loss.detach())
        return loss.detach(), logs

    def ema_update(self, momentum: float | None = None) -> None:
        """Teacher ← EMA of student (backbone and head), momentum ``cfg.ema_momentum`` by default."""
        m = self.cfg.ema_momentum if momentum is None else momentum
        ema_update(self.teacher, self.student, m)
        ema_update(self.head_t, self.head_s, m)

    # -- state -----------------------------------------------------------------------------
    def export_backbone(
        self, which: Literal["student", "teacher"] = "student"
    ) -> dict[str, Tensor]:
        """Plain state dict (keys as in the backbone module, cloned, CPU) of the student or teacher.

        A LoRA backbone is exported merged (``W + (α/r)·B A``, :func:`merge_lora`): the keys are
        the original module's, so it loads strictly into a fresh backbone of the same config."""
        if which not in ("student", "teacher"):
            raise ValueError(f"which must be 'student' or 'teacher', got {which!r}")
        mod = self.backbone(which)
        return {k: v.detach().cpu().clone() for k, v in mod.state_dict().items()}

    def backbone(self, which: Literal["student", "teacher"] = "student") -> nn.Module:
        """The student or teacher as a plain backbone module (LoRA merged into a copy; without
        LoRA the module itself)."""
        if which not in ("student", "teacher"):
            raise ValueError(f"which must be 'student' or 'teacher', got {which!r}")
        mod = self.student if which == "student" else self.teacher
        return merge_lora(mod) if is_lora(mod) else mod

    def checkpoint(self) -> dict[str, Any]:
        """Everything needed to resume exactly: modules (a LoRA student with its adapters),
        optimiser, step count, config, the depth-noise generator and the global torch RNG state
        (LoRA dropout draws from it)."""
        return {
            "student": self.student.state_dict(), "teacher": self.teacher.state_dict(),
            "head_s": self.head_s.state_dict(), "head_t": self.head_t.state_dict(),
            "center": self.center.clone(), "optimizer": self.optimizer.state_dict(),
            "steps": self.steps, "cfg": asdict(self.cfg),
            "depth_rng": self.depth_generator.get_state(), "torch_rng": torch.random.get_rng_state(),
        }  # fmt: skip

    def load_checkpoint(self, ckpt: dict[str, Any]) -> None:
        """Restore :meth:`checkpoint` output (the config must match); also restores the global
        torch RNG state saved with it, so dropout continues as in the original run."""
        if not isinstance(ckpt, dict):
            raise TypeError(f"ckpt must be a dict from checkpoint(), got {type(ckpt).__name__}")
        saved = dict(ckpt.get("cfg") or {})
        if isinstance(saved.get("lora_targets"), list):
            saved["lora_targets"] = tuple(saved["lora_targets"])
        if saved != asdict(self.cfg):
            raise ValueError("checkpoint was written with a different SnDConfig")
        self.student.load_state_dict(ckpt["student"])
        self.teacher.load_state_dict(ckpt["teacher"])
        self.head_s.load_state_dict(ckpt["head_s"])
        self.head_t.load_state_dict(ckpt["head_t"])
        self.center.copy_(ckpt["center"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.steps = int(ckpt["steps"])
        if "depth_rng" in ckpt:
            self.depth_generator.set_state(ckpt["depth_rng"])
        if "torch_rng" in ckpt:
            torch.random.set_rng_state(ckpt["torch_rng"])
