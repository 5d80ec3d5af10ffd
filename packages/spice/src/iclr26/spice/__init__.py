"""iclr26-spice: SPICE — Submodular Penalized Information–Conflict Selection (ICLR 2026).

Greedy maximisation of the Fisher log-determinant ``log det(I + α Σ g gᵀ)`` over per-sample
gradients, penalised by gradient misalignment, with early stopping and proxy models.
"""

from importlib.metadata import version as _version

from iclr26.spice.baselines import (
    dpp_greedy,
    facility_location,
    kcenter_greedy,
    less_cosine,
    random_subset,
    topk_norm,
    tracin_dot,
)
from iclr26.spice.conflict import conflict_stats
from iclr26.spice.grads import (
    LoraSettings,
    RandomProjector,
    format_example,
    lm_per_sample_grads,
    load_causal_lm,
    per_sample_grads,
    select_params,
)
from iclr26.spice.objectives import MODES, FisherState, logdet_utility
from iclr26.spice.select import Selection, describe, greedy_logdet, spice, topk
from iclr26.spice.stream import PoolRecord, StreamResult, stream_select

__version__ = _version("iclr26-spice")

__all__ = [
    "MODES",
    "FisherState",
    "LoraSettings",
    "PoolRecord",
    "RandomProjector",
    "Selection",
    "StreamResult",
    "__version__",
    "conflict_stats",
    "describe",
    "dpp_greedy",
    "facility_location",
    "format_example",
    "greedy_logdet",
    "kcenter_greedy",
    "less_cosine",
    "lm_per_sample_grads",
    "load_causal_lm",
    "logdet_utility",
    "per_sample_grads",
    "random_subset",
    "select_params",
    "spice",
    "stream_select",
    "topk",
    "topk_norm",
    "tracin_dot",
]
