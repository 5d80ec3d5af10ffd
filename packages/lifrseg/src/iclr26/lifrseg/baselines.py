"""The paradigms LiFR-Seg is compared with, and the anytime evaluation.

Every method maps a batch of :class:`~iclr26.lifrseg.data.AnytimeSegDataset` items to logits
``[N, K, classes, H, W]`` for the K query times of each frame:

* :class:`HFROracle` — segments the true frame at ``t + δt`` (the paper's "HFR ideal").
* :class:`HoldLast` — reuses the segmentation of ``I_t`` (LFR hold-last).
* :class:`LiFRMethod` — a :class:`~iclr26.lifrseg.lifrseg.LiFRSeg` (or a variant of it: feature
  warp without confidence, image warp, label warp), queries processed in order with memory.
* :class:`EarlyFusionSeg` — RGB and both voxel grids concatenated at the input of one
  segmenter (a CMNeXt/EISNet-style fusion analogue without explicit motion).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from iclr26.lifrseg.lifrseg import FlowCache, LiFRSeg
from iclr26.lifrseg.metrics import confusion_matrix
from iclr26.lifrseg.models import MemoryBank, Segmenter

__all__ = ["EarlyFusionSeg", "HFROracle", "HoldLast", "LiFRMethod", "anytime_curve"]

Batch = dict[str, torch.Tensor]


def _check_batch(batch: object, keys: Sequence[str]) -> Batch:
    if not isinstance(batch, dict):
        raise TypeError(f"batch must be a dict of tensors, got {type(batch).__name__}")
    missing = [k for k in keys if k not in batch]
    if missing:
        raise ValueError(f"batch lacks {missing}")
    return batch


class HFROracle:
    """Segment the target frame ``I_{t+δt}`` directly (needs the frame: an upper bound)."""

    def __init__(self, segmenter: Segmenter) -> None:
        self.segmenter = segmenter

    def __call__(self, batch: Batch) -> torch.Tensor:
        b = _check_batch(batch, ["target_image"])
        n, k = b["target_image"].shape[:2]
        logits = self.segmenter(b["target_image"].flatten(0, 1))
        return logits.view(n, k, *logits.shape[1:])


class HoldLast:
    """Reuse the segmentation of the last RGB frame ``I_t`` for every query."""

    def __init__(self, segmenter: Segmenter) -> None:
        self.segmenter = segmenter

    def __call__(self, batch: Batch) -> torch.Tensor:
        b = _check_batch(batch, ["image", "ev_query"])
        k = b["ev_query"].shape[1]
        return self.segmenter(b["image"]).unsqueeze(1).expand(-1, k, -1, -1, -1)


class LiFRMethod:
    """Run a :class:`LiFRSeg` over each frame's query chain, in order, with a fresh memory bank per
    frame (``use_memory=False``: no memory; ``gt_flow=True``: the batch's analytic flow replaces the
    estimated one, an upper reference that isolates the propagation from the flow quality;
    ``flow_cache``: a :class:`~iclr26.lifrseg.lifrseg.FlowCache` of the model's flow network,
    shared with other methods on the same samples, so each query's flow is computed once;
    ``traced``: ``LiFRSeg``'s optimised inference path, see ``LiFRSeg.forward``)."""

    def __init__(
        self,
        model: LiFRSeg,
        use_memory: bool = True,
        *,
        gt_flow: bool = False,
        flow_cache: FlowCache | None = None,
        traced: bool = False,
    ) -> None:
        if not isinstance(traced, bool):
            raise TypeError(f"traced must be a bool, got {type(traced).__name__}")
        if not isinstance(model, LiFRSeg):
            raise TypeError(f"model must be a LiFRSeg, got {type(model).__name__}")
        if flow_cache is not None:
            if not isinstance(flow_cache, FlowCache):
                raise TypeError(f"flow_cache must be a FlowCache, got {type(flow_cache).__name__}")
            flow_cache.check(model.flownet)
        self.model, self.use_memory, self.gt_flow = model, use_memory, gt_flow
        self.flow_cache, self.traced = flow_cache, traced

    def __call__(self, batch: Batch) -> torch.Tensor:
        b = _check_batch(batch, ["image", "ev_past", "ev_query"])
        mem = (
            MemoryBank(self.model.config.memory_len)
            if self.use_memory and self.model.config.use_memory
            else None
        )
        if self.gt_flow:
            _check_batch(b, ["flow"])
        # the frame's features and the past grid's flow features are shared by its queries
        frame = self.model.encode_frame(
            b["image"], b["ev_past"], flow_features=self.flow_cache is None, traced=self.traced
        )
        outs = [
            self.model(
                b["image"], b["ev_past"], b["ev_query"][:, k], mem,
                flow=b["flow"][:, k] if self.gt_flow else None, frame=frame,
                flow_cache=self.flow_cache, traced=self.traced,
            )["logits"]
            for k in range(b["ev_query"].shape[1])
        ]  # fmt: skip
        return torch.stack(outs, 1)


class EarlyFusionSeg(nn.Module):
    """One segmenter on ``concat(I_t, past voxel grid, query voxel grid)``."""

    def __init__(
        self, num_classes: int, num_bins: int, dims: Sequence[int] = (16, 32, 64, 128)
    ) -> None:
        super().__init__()
        self.num_bins = num_bins
        self.net = Segmenter(num_classes, dims, in_chans=3 + 2 * num_bins)

    def forward(
        self, image: torch.Tensor, ev_past: torch.Tensor, ev_query: torch.Tensor
    ) -> torch.Tensor:
        return self.net(torch.cat([image, ev_past, ev_query], 1))

    def __call__(self, *args, **kwargs):  # a batch dict -> [N, K, ...] as the other methods
        call = super().__call__
        if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
            b = _check_batch(args[0], ["image", "ev_past", "ev_query"])
            k = b["ev_query"].shape[1]
            return torch.stack(
                [call(b["image"], b["ev_past"], b["ev_query"][:, q]) for q in range(k)], 1
            )
        return call(*args, **kwargs)


@torch.no_grad()
def anytime_curve(
    method: Callable[[Batch], torch.Tensor],
    dataset: torch.utils.data.Dataset,
    num_classes: int,
    *,
    batch_size: int = 16,
) -> tuple[list[float], list[float]]:
    """``(deltas, mIoU per δt)`` of ``method`` on an :class:`AnytimeSegDataset` (confusion
    matrices accumulated over the whole dataset per δt)."""
    from iclr26.lifrseg.data import AnytimeSegDataset, collate_anytime

    if not isinstance(dataset, AnytimeSegDataset):
        raise TypeError(f"dataset must be an AnytimeSegDataset, got {type(dataset).__name__}")
    for m in (getattr(method, "model", None), getattr(method, "segmenter", None), method):
        if isinstance(m, nn.Module):
            m.eval()
    k = len(dataset.deltas)
    cms = [torch.zeros(num_classes, num_classes, dtype=torch.long) for _ in range(k)]
    for i in range(0, len(dataset), batch_size):
        batch = collate_anytime([dataset[j] for j in range(i, min(i + batch_size, len(dataset)))])
        pred = method(batch).argmax(2)
        for q in range(k):
            cms[q] += confusion_matrix(pred[:, q], batch["label"][:, q], num_classes)
    out = []
    for cm in cms:
        diag = cm.diag().double()
        union = cm.sum(0) + cm.sum(1) - cm.diag()
        present = union > 0
        out.append(float((diag[present] / union[present]).mean()))
    return list(dataset.deltas), out
