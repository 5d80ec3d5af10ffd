"""Mapping from the official MIKASA-Robo / MIKASA-Base ids to this package's ids.

Official ids that have no counterpart here yet (ShellGamePick, InterceptGrab*, Rotate*; they need
a grasp and a yaw joint) map to ``None``; :data:`MISSING` lists them.
"""

from __future__ import annotations

from iclr26.mikasa.spatial import SPATIAL_TASKS
from iclr26.mikasa.tasks import NAMESPACE, TASKS

__all__ = ["MISSING", "OFFICIAL_TO_LITE", "lite_id"]

_NOT_YET = [
    "ShellGamePick-v0",
    *(f"InterceptGrab{s}-v0" for s in ("Slow", "Medium", "Fast")),
    *(f"Rotate{a}{b}-v0" for a in ("Lenient", "Strict") for b in ("Pos", "PosNeg")),
]  # fmt: skip

#: official id -> our id (``None``: not re-implemented yet). MIKASA-Base's T-Maze and
#: MemoryLength map to the native classics.
OFFICIAL_TO_LITE: dict[str, str | None] = {
    **{s.official_id: s.env_id for s in TASKS.values() if s.official_id},
    **{s.official_id: s.env_id for s in SPATIAL_TASKS.values() if s.official_id},
    **dict.fromkeys(_NOT_YET),
    "T-Maze-v0": f"{NAMESPACE}/TMaze-v0",
    **{f"MemoryLength{d}-v0": f"{NAMESPACE}/MemoryLength-v0" for d in ("Easy", "Medium", "Hard")},
}
#: official ids without a counterpart here
MISSING: tuple[str, ...] = tuple(k for k, v in OFFICIAL_TO_LITE.items() if v is None)


def lite_id(official_id: str) -> str:
    """Our id for an official one; ``ValueError`` if unknown or not re-implemented."""
    if official_id not in OFFICIAL_TO_LITE:
        raise ValueError(
            f"official_id {official_id!r} is not a MIKASA id; known: {', '.join(OFFICIAL_TO_LITE)}"
        )
    lite = OFFICIAL_TO_LITE[official_id]
    if lite is None:
        raise ValueError(f"official_id {official_id!r} is not re-implemented in this version")
    return lite
