"""Embedded data: the official colour palette and shape set, and the demonstration file layout.

The palette is the nine colours of the official RememberColor / BunchOfColors tasks, in their
order (index = ``oracle_info``); the official "olive" is RGB (255, 128, 0), an orange, and keeps
its name. Shapes are MuJoCo primitives plus inline convex meshes (no mesh files are needed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = [
    "COLORS",
    "COLOR_NAMES",
    "DEMO_FIELDS",
    "EXPORT_FIELDS",
    "SHAPES",
    "load_demos",
    "save_demos",
]

COLOR_NAMES: tuple[str, ...] = (
    "red", "lime", "blue", "yellow", "magenta", "cyan", "maroon", "olive", "teal",
)  # fmt: skip
#: RGB in [0, 1], same order as :data:`COLOR_NAMES`.
COLORS = (
    np.array(
        [
            [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [255, 0, 255],
            [0, 255, 255], [128, 0, 0], [255, 128, 0], [0, 128, 128],
        ],
        dtype=np.float64,
    )
    / 255.0
)  # fmt: skip
#: Shape names; index = ``oracle_info`` of RememberShape. ``cylinder`` is also the ShellGame cup
#: and ``sphere`` its ball.
SHAPES: tuple[str, ...] = (
    "cube", "sphere", "cylinder", "capsule", "ellipsoid", "tetrahedron", "octahedron",
    "prism", "cross",
)  # fmt: skip

#: Fields of one demonstration episode, as in the official dataset layout (``joints`` ->
#: ``proprio``, ``rgb`` only when rendered). Arrays have the episode length T as first axis.
DEMO_FIELDS = ("obs", "proprio", "action", "reward", "success", "done")
#: Extra fields that :func:`iclr26.mikasa.collect_demos` adds so an export keeps every step:
#: ``final_obs`` (episodes, dim), the observation after the last action, and ``terminated`` /
#: ``truncated`` (episodes, T), the two halves of ``done``.
EXPORT_FIELDS = ("final_obs", "terminated", "truncated")


def save_demos(path: str | os.PathLike[str], demos: Mapping[str, np.ndarray]) -> Path:
    """Write demonstrations (fields of :data:`DEMO_FIELDS`, shape (episodes, T, ...)) as .npz."""
    missing = [k for k in DEMO_FIELDS if k not in demos]
    if missing:
        raise ValueError(f"demos lacks fields {missing}")
    lengths = {k: np.asarray(demos[k]).shape[:2] for k in DEMO_FIELDS}
    lengths.update({k: np.asarray(demos[k]).shape[:2] for k in EXPORT_FIELDS[1:] if k in demos})
    if len(set(lengths.values())) != 1:
        raise ValueError(f"demos fields disagree on (episodes, T): {lengths}")
    path = Path(path)
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in demos.items()})
    return path


def load_demos(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a file written by :func:`save_demos` (or by ``collect_demos(..., path=)``)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as err:
        raise ValueError(f"path {path} is not a readable .npz demo file ({err})") from None
    missing = [k for k in DEMO_FIELDS if k not in data]
    if missing:
        raise ValueError(f"path {path} lacks demo fields {missing}")
    return data
