"""iclr26-shared: the thin layer every iclr26 paper package uses.

Seeding, the reproduce/bench :class:`Report`, repeat timing, progress bars, argument validation
and the standard ``iclr26-<folder>`` command line. NumPy is the only hard dependency; torch and
JAX are never imported at import time.
"""

from importlib.metadata import version as _version

from iclr26.shared.cli import make_cli
from iclr26.shared.progress import progress
from iclr26.shared.report import Check, Report, Table, environment, write_summary
from iclr26.shared.seeding import seed_everything
from iclr26.shared.timing import Timing, timeit
from iclr26.shared.validation import (
    check_array,
    check_choice,
    check_finite,
    check_int,
    check_nonempty,
    check_range,
    check_shape,
)

__version__ = _version("iclr26-shared")

__all__ = [
    "Check",
    "Report",
    "Table",
    "Timing",
    "__version__",
    "check_array",
    "check_choice",
    "check_finite",
    "check_int",
    "check_nonempty",
    "check_range",
    "check_shape",
    "environment",
    "make_cli",
    "progress",
    "seed_everything",
    "timeit",
    "write_summary",
]
