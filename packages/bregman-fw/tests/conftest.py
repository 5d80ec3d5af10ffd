"""Test-only XLA settings (read when JAX is first imported, before any test module loads it).

The tests compile several dozen small ``while_loop`` solvers; their run time is dominated by
XLA's LLVM optimisation passes, not by the loops. A lower backend optimisation level compiles
them faster (about a fifth less CPU time measured over the active-set tests) with the same
semantics: results are compared against NumPy references and across paths within tolerances
far above float64 round-off. Users' runs keep XLA's defaults. Set ``XLA_FLAGS`` to override.
"""

import os

os.environ.setdefault(
    "XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
)
