"""Interpretive equivalence (ICLR 2026): do two models share an algorithm?

Estimate it without writing the algorithm down: compare the representations of sampled
(or intervened, "co-interpretive") implementations with a similarity measure, and test whether
implementations of one interpretation are as close to the other's as to each other.
"""

import importlib
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from iclr26.interp_equiv.adapters import HookedTransformerAdapter
    from iclr26.interp_equiv.estimator import (
        MEASURES,
        EquivalenceResult,
        PermutationResult,
        PointTest,
        Selectivity,
        equivalence_test,
        permutation_test,
        point_test,
        post_intervention,
        selectivity_matrix,
        similarity_matrix,
    )
    from iclr26.interp_equiv.iit import (
        Implementation,
        accuracy,
        gate,
        interchange_accuracy,
        load_implementation,
        save_implementation,
        train_implementation,
    )
    from iclr26.interp_equiv.models import Cache, ModuleHooks, Site, TinyMLP, TinyTransformer
    from iclr26.interp_equiv.reprs import (
        intervened_representations,
        load_representations,
        representations,
        save_representations,
    )
    from iclr26.interp_equiv.similarity import (
        CKAStats,
        cka,
        cka_permutation_test,
        linear_predictivity,
        procrustes_similarity,
        ridge_r2,
        svcca,
    )
    from iclr26.interp_equiv.tasks import Algorithm, ModSum, PermutationDetection, Task, Variable

# Public name -> submodule. Submodules import torch, so they are loaded on first use: the
# command line's --help and --version stay free of torch.
_EXPORTS = {
    "Algorithm": "tasks",
    "CKAStats": "similarity",
    "Cache": "models",
    "EquivalenceResult": "estimator",
    "Implementation": "iit",
    "MEASURES": "estimator",
    "ModSum": "tasks",
    "HookedTransformerAdapter": "adapters",
    "ModuleHooks": "models",
    "PermutationDetection": "tasks",
    "PermutationResult": "estimator",
    "PointTest": "estimator",
    "Selectivity": "estimator",
    "Site": "models",
    "Task": "tasks",
    "TinyMLP": "models",
    "TinyTransformer": "models",
    "Variable": "tasks",
    "accuracy": "iit",
    "cka": "similarity",
    "cka_permutation_test": "similarity",
    "equivalence_test": "estimator",
    "gate": "iit",
    "interchange_accuracy": "iit",
    "intervened_representations": "reprs",
    "linear_predictivity": "similarity",
    "load_implementation": "iit",
    "load_representations": "reprs",
    "permutation_test": "estimator",
    "point_test": "estimator",
    "post_intervention": "estimator",
    "procrustes_similarity": "similarity",
    "representations": "reprs",
    "ridge_r2": "similarity",
    "save_implementation": "iit",
    "save_representations": "reprs",
    "selectivity_matrix": "estimator",
    "similarity_matrix": "estimator",
    "svcca": "similarity",
    "train_implementation": "iit",
    "weight_correlation": "models",
}

__version__ = _version("iclr26-interp-equiv")


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'iclr26.interp_equiv' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"iclr26.interp_equiv.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "MEASURES",
    "Algorithm",
    "CKAStats",
    "Cache",
    "EquivalenceResult",
    "HookedTransformerAdapter",
    "Implementation",
    "ModSum",
    "ModuleHooks",
    "PermutationDetection",
    "PermutationResult",
    "PointTest",
    "Selectivity",
    "Site",
    "Task",
    "TinyMLP",
    "TinyTransformer",
    "Variable",
    "__version__",
    "accuracy",
    "cka",
    "cka_permutation_test",
    "equivalence_test",
    "gate",
    "interchange_accuracy",
    "intervened_representations",
    "linear_predictivity",
    "load_implementation",
    "load_representations",
    "permutation_test",
    "point_test",
    "post_intervention",
    "procrustes_similarity",
    "representations",
    "ridge_r2",
    "save_implementation",
    "save_representations",
    "selectivity_matrix",
    "similarity_matrix",
    "svcca",
    "train_implementation",
    "weight_correlation",
]
