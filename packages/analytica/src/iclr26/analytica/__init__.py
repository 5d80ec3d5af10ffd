"""iclr26-analytica."""

from importlib.metadata import version as _version

__version__ = _version("iclr26-analytica")
__all__ = ["__version__"]
