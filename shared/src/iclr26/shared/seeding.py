"""One call that seeds every random number generator a package may touch."""

from __future__ import annotations

import importlib.util
import os
import random
import sys

import numpy as np

from iclr26.shared.validation import check_int

__all__ = ["seed_everything"]

_MAX_SEED = 2**32 - 1


def _installed(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's legacy global state and, where installed, torch.

    torch is imported (and seeded on every device through ``torch.manual_seed``) only when it is
    installed, so a package without torch pays nothing. JAX has no global generator: JAX code
    takes an explicit ``jax.random.key(seed)``, which is why this function returns a generator
    instead of relying on hidden state. ``PYTHONHASHSEED`` is set for child processes; it cannot
    change the hash seed of the running interpreter.

    Args:
        seed: integer in ``[0, 2**32 - 1]``.

    Returns:
        A fresh ``numpy.random.Generator`` seeded with ``seed``; pass it on explicitly.

    Raises:
        TypeError: if ``seed`` is not an integer.
        ValueError: if ``seed`` is outside ``[0, 2**32 - 1]``.
    """
    check_int(seed, "seed", low=0, high=_MAX_SEED)
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - third-party code still reads the legacy global state
    os.environ["PYTHONHASHSEED"] = str(seed)
    if _installed("torch"):
        import torch

        torch.manual_seed(seed)
    return np.random.default_rng(seed)
