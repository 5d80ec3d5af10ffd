"""iclr26-elvis: ELViS — efficient visual similarity from local descriptors (ICLR 2026).

Cosine similarities of local descriptors → entropic optimal transport with per-descriptor,
data-dependent dustbin gains → a tiny learned vote over each descriptor's best correspondence,
fused with the global score to re-rank a shortlist.

Submodules load on first use (``lazy_loader``), so ``import iclr26.elvis`` does not import torch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-elvis")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "baselines": ["AMESLite", "mnn_count", "ratio_magsac_inliers", "sum_max_similarity"],
        "calibration": ["calibrate_temperature"],
        "data": [
            "DOCS",
            "PHOTO",
            "SCIENCE",
            "SHIFTS",
            "TEXTURES",
            "RetrievalSet",
            "load_image",
            "make_retrieval_set",
            "make_training_pairs",
            "stereo_pair",
        ],
        "features": ["LocalFeatures", "extract_daisy", "extract_orb", "extract_sift", "pad_batch"],
        "global_desc": ["VLAD", "gem"],
        "io": ["read_official_h5", "write_official_h5"],
        "metrics": [
            "REVISITED_PROTOCOLS",
            "average_precision",
            "map_at_k",
            "mean_average_precision",
            "revisited_ground_truth",
            "revisited_map",
        ],
        "model": ["OFFICIAL_KEY_MAP", "ELViS", "ELViSExplanation", "load_official_checkpoint"],
        "ot": ["dustbin_transport", "exp_sinkhorn", "log_sinkhorn"],
        "rerank": ["fuse", "rerank"],
        "train": ["FitHistory", "TripletSampler", "fit", "warmup_cosine"],
    },
)
__all__ += ["__version__"]
