"""iclr26-git-bo: GIT-BO (ICLR 2026), high-dimensional Bayesian optimisation in the
gradient-informed subspace of an in-context surrogate.

Each iteration conditions a surrogate on the observations, averages the outer products of its
predictive-mean gradients into ``H``, samples candidates in the span of ``H``'s top eigenvectors
around an origin, and evaluates the UCB-best one.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-git-bo")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "acquisition": [
            "acquisition_values",
            "expected_improvement",
            "gp_ucb_beta",
            "thompson",
            "ucb",
        ],
        "optimizer": ["GITBO", "Result", "minimize", "read_history"],
        "pfn": ["InContextPFN", "load_pfn", "save_pfn", "train_pfn", "sample_prior_batch"],
        "problems": [
            "Embedded",
            "LassoSynthetic",
            "MujocoPolicy",
            "Rover",
            "SVMDigits",
            "UnitCube",
            "load_objective",
        ],
        "subspace": [
            "Subspace",
            "active_subspace",
            "captured_fraction",
            "gradient_outer_product",
            "random_subspace",
            "sample_subspace",
        ],
        "surrogates": [
            "CheckpointMissing",
            "GPSurrogate",
            "PFNSurrogate",
            "RFFSurrogate",
            "Surrogate",
            "TabPFNSurrogate",
            "make_surrogate",
        ],
    },
)
__all__ += ["__version__"]
