"""iclr26-spice: SPICE — Submodular Penalized Information–Conflict Selection (ICLR 2026).

Greedy maximisation of the Fisher log-determinant ``log det(I + α Σ g gᵀ)`` over per-sample
gradients, penalised by gradient misalignment, with early stopping and proxy models.

Submodules load on first use (``lazy_loader``), so ``import iclr26.spice`` does not import torch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-spice")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "baselines": [
            "dpp_greedy",
            "facility_location",
            "kcenter_greedy",
            "less_cosine",
            "random_subset",
            "topk_norm",
            "tracin_dot",
        ],
        "conflict": ["conflict_stats"],
        "grads": [
            "KroneckerProjector",
            "LoraSettings",
            "RandomProjector",
            "clear_compiled",
            "format_example",
            "lm_per_sample_grads",
            "load_causal_lm",
            "per_sample_grads",
            "select_params",
        ],
        "objectives": ["MODES", "FisherState", "logdet_utility"],
        "select": ["Selection", "describe", "greedy_logdet", "spice", "topk"],
        "stream": ["PoolRecord", "StreamResult", "stream_select"],
    },
)
__all__ += ["__version__"]
