"""iclr26-bregman-fw: Frank–Wolfe with adaptive Bregman step sizes (Takahashi, Pokutta & Takeda,
ICLR 2026) in JAX.

Importing this package switches JAX to float64 (``jax_enable_x64``): the adaptive step's
acceptance test subtracts nearly equal objective values, which float32 cannot resolve. The
submodules (and JAX) load lazily, on first use of a name, so the command line starts fast.
"""

import os as _os
import sys as _sys
from importlib.metadata import version as _version

import lazy_loader as _lazy

if "jax" in _sys.modules:  # already imported by the caller: switch it now
    _sys.modules["jax"].config.update("jax_enable_x64", True)
else:  # read by JAX when it is first imported (every submodule also switches it)
    _os.environ["JAX_ENABLE_X64"] = "1"

__version__ = _version("iclr26-bregman-fw")

__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submodules=[
        "baselines",
        "kernels",
        "lmo",
        "optax_api",
        "precision",
        "problems",
        "solvers",
        "steps",
    ],
    submod_attrs={
        "baselines": ["bregman_proximal_gradient", "mirror_descent", "projected_gradient"],
        "kernels": [
            "Burg",
            "Entropy",
            "Euclidean",
            "Kernel",
            "Power",
            "Quartic",
            "SumKernel",
            "from_function",
        ],
        "lmo": [
            "LMO",
            "Box",
            "KSparse",
            "L1Ball",
            "L2Ball",
            "LpBall",
            "NuclearBall",
            "Product",
            "Simplex",
            "Spectrahedron",
            "TruncatedSimplex",
        ],
        "optax_api": ["FWTransformState", "frank_wolfe_transform"],
        "problems": [
            "Problem",
            "d_optimal",
            "d_optimal_symmetric",
            "kl_regression",
            "lp_regression",
            "phase_retrieval",
            "poisson_inverse",
            "quadratic_simplex",
        ],
        "solvers": ["FWHistory", "FWResult", "away_frank_wolfe", "frank_wolfe"],
        "steps": [
            "AdaptiveBregman",
            "BregmanShortStep",
            "DOptimalStep",
            "EuclideanAdaptive",
            "ExactLineSearch",
            "FWJLAdaptive",
            "OpenLoop",
            "ShortStep",
            "StepInfo",
            "StepRule",
            "StepState",
        ],
    },
)
__all__ += ["__version__"]
