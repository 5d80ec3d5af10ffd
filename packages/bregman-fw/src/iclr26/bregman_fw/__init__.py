"""iclr26-bregman-fw: Frank–Wolfe with adaptive Bregman step sizes (Takahashi, Pokutta & Takeda,
ICLR 2026) in JAX.

Importing this package switches JAX to float64 (``jax.config.update("jax_enable_x64", True)``):
the adaptive step's acceptance test subtracts nearly equal objective values, which float32
cannot resolve. The solvers also refuse non-float64 starting points.
"""

from importlib.metadata import version as _version

import jax as _jax

_jax.config.update("jax_enable_x64", True)

from iclr26.bregman_fw.baselines import (  # noqa: E402
    bregman_proximal_gradient,
    mirror_descent,
    projected_gradient,
)
from iclr26.bregman_fw.kernels import (  # noqa: E402
    Burg,
    Entropy,
    Euclidean,
    Kernel,
    Power,
    Quartic,
    SumKernel,
    from_function,
)
from iclr26.bregman_fw.lmo import (  # noqa: E402
    LMO,
    Box,
    KSparse,
    L1Ball,
    L2Ball,
    LpBall,
    NuclearBall,
    Product,
    Simplex,
    Spectrahedron,
    TruncatedSimplex,
)
from iclr26.bregman_fw.optax_api import FWTransformState, frank_wolfe_transform  # noqa: E402
from iclr26.bregman_fw.problems import (  # noqa: E402
    Problem,
    d_optimal,
    d_optimal_symmetric,
    kl_regression,
    lp_regression,
    phase_retrieval,
    poisson_inverse,
    quadratic_simplex,
)
from iclr26.bregman_fw.solvers import FWHistory, FWResult, away_frank_wolfe, frank_wolfe  # noqa: E402
from iclr26.bregman_fw.steps import (  # noqa: E402
    AdaptiveBregman,
    BregmanShortStep,
    EuclideanAdaptive,
    ExactLineSearch,
    FWJLAdaptive,
    OpenLoop,
    ShortStep,
    StepInfo,
    StepRule,
    StepState,
)

__version__ = _version("iclr26-bregman-fw")

__all__ = [
    "LMO",
    "AdaptiveBregman",
    "Box",
    "BregmanShortStep",
    "Burg",
    "Entropy",
    "Euclidean",
    "EuclideanAdaptive",
    "ExactLineSearch",
    "FWHistory",
    "FWJLAdaptive",
    "FWResult",
    "FWTransformState",
    "KSparse",
    "Kernel",
    "L1Ball",
    "L2Ball",
    "LpBall",
    "NuclearBall",
    "OpenLoop",
    "Power",
    "Problem",
    "Product",
    "Quartic",
    "ShortStep",
    "Simplex",
    "Spectrahedron",
    "StepInfo",
    "StepRule",
    "StepState",
    "SumKernel",
    "TruncatedSimplex",
    "__version__",
    "away_frank_wolfe",
    "bregman_proximal_gradient",
    "d_optimal",
    "d_optimal_symmetric",
    "frank_wolfe",
    "frank_wolfe_transform",
    "from_function",
    "kl_regression",
    "lp_regression",
    "mirror_descent",
    "phase_retrieval",
    "poisson_inverse",
    "projected_gradient",
    "quadratic_simplex",
]
