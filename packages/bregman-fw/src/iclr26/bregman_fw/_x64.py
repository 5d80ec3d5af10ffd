"""Switch JAX to float64 (imported by every module of the package that uses JAX).

The adaptive step's acceptance test subtracts nearly equal objective values, which float32 cannot
resolve (backtracking then loops to its cap).
"""

import jax

jax.config.update("jax_enable_x64", True)
