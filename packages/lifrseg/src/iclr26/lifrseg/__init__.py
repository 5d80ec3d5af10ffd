"""iclr26-lifrseg: LiFR-Seg — anytime interframe semantic segmentation from one RGB frame and an
event stream (ICLR 2026).

Event streams, DSEC voxel grids and DSEC-layout HDF5 I/O, an ESIM-style event simulator and the
SHF-Shapes synthetic world, pure-PyTorch softmax splatting, a tiny SegFormer / E-RAFT-lite /
ScoreNet / memory model with its training stages, the paper's baselines and anytime evaluation.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-lifrseg")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "events": [
            "EventStream", "event_count_frame", "read_dsec_h5", "voxel_grid",
            "voxel_grid_reference", "write_dsec_h5",
        ],
        "simulator": ["EsimSimulator", "simulate_from_frames"],
        "data": [
            "CLASSES", "AnytimeSegDataset", "Sequence", "ShapesWorld", "collate_anytime",
            "make_sequence", "make_split", "night_degrade",
        ],
        "splat": [
            "backward_warp", "resize_flow", "softmax_splat", "softmax_splat_with_coverage",
            "splat_sum", "splat_sum_reference",
        ],
        "losses": ["flow_epe", "laplace_nll", "ohem_cross_entropy"],
        "metrics": ["confusion_matrix", "mean_iou"],
        "models": [
            "AllMLPDecoder", "ERaftLite", "MemoryBank", "RefineNet", "ScoreNet", "Segmenter",
            "TemporalMemoryAttention", "TinyMiT",
        ],
        "lifrseg": ["FlowCache", "FrameEncoding", "LiFRSeg", "LiFRSegConfig"],
        "baselines": ["EarlyFusionSeg", "HFROracle", "HoldLast", "LiFRMethod", "anytime_curve"],
        "train": [
            "FLOW_PRETRAIN_DEFAULTS", "TrainConfig", "fit_early_fusion", "fit_flow",
            "fit_lifrseg", "fit_segmenter", "load_lifrseg", "load_pretrained_flow",
            "pretrain_flow", "pretrained_flow_path", "save_lifrseg",
        ],
    },
)  # fmt: skip
__all__ += ["__version__"]
