"""Mapping from the official MIKASA-Robo / MIKASA-Base ids to this package's ids.

Every one of the 32 official MIKASA-Robo ids has a counterpart here; an official id without one
would map to ``None`` and be listed in :data:`MISSING` (empty since 0.3.0).
"""

from __future__ import annotations

from iclr26.mikasa.spatial import SPATIAL_TASKS
from iclr26.mikasa.tasks import NAMESPACE, TASKS

__all__ = ["MISSING", "OFFICIAL_TO_LITE", "lite_id"]

#: official id -> our id (``None``: not re-implemented yet). MIKASA-Base's T-Maze and
#: MemoryLength map to the native classics.
OFFICIAL_TO_LITE: dict[str, str | None] = {
    **{s.official_id: s.env_id for s in TASKS.values() if s.official_id},
    **{s.official_id: s.env_id for s in SPATIAL_TASKS.values() if s.official_id},
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
