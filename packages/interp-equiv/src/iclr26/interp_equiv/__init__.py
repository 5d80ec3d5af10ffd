"""Interpretive equivalence (ICLR 2026): do two models share an algorithm?

Estimate it without writing the algorithm down: compare the representations of sampled
(or intervened, "co-interpretive") implementations with a similarity measure, and test whether
implementations of one interpretation are as close to the other's as to each other.
"""

from importlib.metadata import version as _version

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
    cka,
    cka_permutation_test,
    linear_predictivity,
    procrustes_similarity,
    ridge_r2,
    svcca,
)
from iclr26.interp_equiv.tasks import Algorithm, ModSum, PermutationDetection, Task, Variable

__version__ = _version("iclr26-interp-equiv")

__all__ = [
    "MEASURES",
    "Algorithm",
    "Cache",
    "EquivalenceResult",
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
]
