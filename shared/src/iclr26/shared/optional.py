"""Optional dependencies: import them where they are needed, or say which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingDependencyError", "import_optional"]


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message says how to install it.

    The standard CLI prints it as one line and exits 2.
    """


def import_optional(
    module: str, *, dist: str, extra: str, purpose: str | None = None
) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra to install.

    Args:
        module: the module to import, e.g. ``"sentence_transformers"``.
        dist: the distribution whose extra provides it, e.g. ``"iclr26-compactds"``.
        extra: the extra's name, e.g. ``"embed"``.
        purpose: what needs it, shown first in the message (e.g. ``"--encoder minilm"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        what = f"{purpose} needs" if purpose else "this needs"
        raise MissingDependencyError(
            f"{what} {module!r}, which cannot be imported ({err}): pip install '{dist}[{extra}]'"
        ) from err
