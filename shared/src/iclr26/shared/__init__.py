"""iclr26-shared: the thin layer every iclr26 paper package uses.

Seeding, the reproduce/bench :class:`Report`, repeat timing, progress bars, argument validation,
JSON/JSONL I/O, optional-dependency imports and the standard ``iclr26-<folder>`` command line.
NumPy and lazy-loader are the only hard dependencies; names load on first use, so the CLI helpers
never import NumPy, and torch and JAX are never imported at import time.
"""

from importlib.metadata import version as _version

import lazy_loader as _lazy

__version__ = _version("iclr26-shared")

# Lazy: `iclr26-<folder> --help` imports only the CLI helpers it names, never NumPy.
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submod_attrs={
        "cli": [
            "existing_file",
            "float_arg",
            "int_arg",
            "int_list_arg",
            "make_cli",
            "prepare_output_dir",
            "prepare_output_file",
        ],
        "embed": ["encode_sentences", "load_sentence_transformer", "minilm_path"],
        "jsonio": ["JsonlAppender", "dumps_json", "read_jsonl", "to_jsonable", "write_json"],
        "optional": ["MissingDependencyError", "import_optional"],
        "progress": ["progress"],
        "report": ["Check", "Report", "Table", "environment", "write_summary"],
        "seeding": ["seed_everything"],
        "timing": ["Timing", "timeit"],
        "validation": [
            "check_array",
            "check_choice",
            "check_finite",
            "check_int",
            "check_nonempty",
            "check_range",
            "check_shape",
        ],
    },
)
__all__ += ["__version__"]
