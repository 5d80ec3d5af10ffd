"""iclr26-elvis: ELViS — efficient visual similarity from local descriptors (ICLR 2026).

Cosine similarities of local descriptors → entropic optimal transport with per-descriptor,
data-dependent dustbin gains → a tiny learned vote over each descriptor's best correspondence,
fused with the global score to re-rank a shortlist.
"""

from importlib.metadata import version as _version

from iclr26.elvis.baselines import AMESLite, mnn_count, ratio_magsac_inliers, sum_max_similarity
from iclr26.elvis.calibration import calibrate_temperature
from iclr26.elvis.data import (
    DOCS,
    PHOTO,
    SCIENCE,
    SHIFTS,
    TEXTURES,
    RetrievalSet,
    load_image,
    make_retrieval_set,
    make_training_pairs,
    stereo_pair,
)
from iclr26.elvis.features import (
    LocalFeatures,
    extract_daisy,
    extract_orb,
    extract_sift,
    pad_batch,
)
from iclr26.elvis.global_desc import VLAD, gem
from iclr26.elvis.io import read_official_h5, write_official_h5
from iclr26.elvis.metrics import (
    REVISITED_PROTOCOLS,
    average_precision,
    map_at_k,
    mean_average_precision,
    revisited_ground_truth,
    revisited_map,
)
from iclr26.elvis.model import (
    OFFICIAL_KEY_MAP,
    ELViS,
    ELViSExplanation,
    load_official_checkpoint,
)
from iclr26.elvis.ot import dustbin_transport, exp_sinkhorn, log_sinkhorn
from iclr26.elvis.rerank import fuse, rerank
from iclr26.elvis.train import FitHistory, TripletSampler, fit, warmup_cosine

__version__ = _version("iclr26-elvis")

__all__ = [
    "DOCS",
    "OFFICIAL_KEY_MAP",
    "PHOTO",
    "REVISITED_PROTOCOLS",
    "SCIENCE",
    "SHIFTS",
    "TEXTURES",
    "VLAD",
    "AMESLite",
    "ELViS",
    "ELViSExplanation",
    "FitHistory",
    "LocalFeatures",
    "RetrievalSet",
    "TripletSampler",
    "__version__",
    "average_precision",
    "calibrate_temperature",
    "dustbin_transport",
    "exp_sinkhorn",
    "extract_daisy",
    "extract_orb",
    "extract_sift",
    "fit",
    "fuse",
    "gem",
    "load_image",
    "load_official_checkpoint",
    "log_sinkhorn",
    "make_retrieval_set",
    "make_training_pairs",
    "map_at_k",
    "mean_average_precision",
    "mnn_count",
    "pad_batch",
    "ratio_magsac_inliers",
    "read_official_h5",
    "rerank",
    "revisited_ground_truth",
    "revisited_map",
    "stereo_pair",
    "sum_max_similarity",
    "warmup_cosine",
    "write_official_h5",
]
