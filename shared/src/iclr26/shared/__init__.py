"""iclr26-shared: the thin layer every iclr26 paper package uses.

Seeding, the reproduce/bench :class:`Report`, repeat timing, progress bars, argument validation,
JSON/JSONL I/O, optional-dependency imports and the standard ``iclr26-<folder>`` command line. NumPy is the only hard dependency; torch and
JAX are never imported at import time.
"""

from importlib.metadata import version as _version

from iclr26.shared.cli import (
    existing_file,
    float_arg,
    int_arg,
    int_list_arg,
    make_cli,
    prepare_output_dir,
    prepare_output_file,
)
from iclr26.shared.jsonio import JsonlAppender, dumps_json, read_jsonl, to_jsonable, write_json
from iclr26.shared.optional import MissingDependencyError, import_optional
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
    "JsonlAppender",
    "MissingDependencyError",
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
    "dumps_json",
    "environment",
    "existing_file",
    "float_arg",
    "import_optional",
    "int_arg",
    "int_list_arg",
    "make_cli",
    "prepare_output_dir",
    "prepare_output_file",
    "progress",
    "read_jsonl",
    "seed_everything",
    "timeit",
    "to_jsonable",
    "write_json",
    "write_summary",
]
