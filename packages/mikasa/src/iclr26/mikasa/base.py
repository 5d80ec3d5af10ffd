"""MIKASA-Base as a catalogue: established memory tasks, their memory types and installable ids.

MIKASA-Base unifies existing memory environments under one Gymnasium API and tags each with the
taxonomy. Its heavy members (ViZDoom, Memory Maze, dm_control rendering) need downloads or
OpenGL; this catalogue names them and points at the ones that install from PyPI (popgym,
minigrid — the ``[peers]`` extra) or are native here (T-maze, memory chain).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from iclr26.mikasa.taxonomy import MemoryType

__all__ = ["CATALOGUE", "BaseEntry", "available"]

OBJ, SPA, SEQ, CAP = (
    MemoryType.OBJECT,
    MemoryType.SPATIAL,
    MemoryType.SEQUENTIAL,
    MemoryType.CAPACITY,
)


@dataclass(frozen=True)
class BaseEntry:
    """One MIKASA-Base task family: where it comes from and what memory it tests."""

    name: str
    memory_types: tuple[MemoryType, ...]
    source: str  # python module that registers it ("" = native here, None = not installable)
    ids: tuple[str, ...]


CATALOGUE: tuple[BaseEntry, ...] = (
    BaseEntry("T-Maze", (OBJ,), "", ("MikasaLite/TMaze-v0",)),
    BaseEntry("MemoryLength", (OBJ,), "", ("MikasaLite/MemoryLength-v0",)),
    BaseEntry("RepeatFirst", (OBJ,), "popgym", ("popgym-RepeatFirstEasy-v0",)),
    BaseEntry("RepeatPrevious", (SEQ,), "popgym", ("popgym-RepeatPreviousEasy-v0",)),
    BaseEntry("Autoencode", (SEQ,), "popgym", ("popgym-AutoencodeEasy-v0",)),
    BaseEntry("CountRecall", (OBJ, CAP), "popgym", ("popgym-CountRecallEasy-v0",)),
    BaseEntry("PositionOnlyCartPole", (SPA,), "popgym", ("popgym-PositionOnlyCartPoleEasy-v0",)),
    BaseEntry(
        "MiniGrid-Memory", (OBJ,), "minigrid", ("MiniGrid-MemoryS7-v0", "MiniGrid-MemoryS13-v0")
    ),
    BaseEntry("MemoryCards", (OBJ, CAP), None, ()),
    BaseEntry("Ballet", (SEQ, OBJ), None, ()),
    BaseEntry("MemoryMaze", (SPA,), None, ()),
    BaseEntry("MortarMayhem", (CAP, SEQ), None, ()),
    BaseEntry("MysteryPath", (SPA,), None, ()),
    BaseEntry("ViZDoom-two-colors", (OBJ,), None, ()),
)


def available() -> list[BaseEntry]:
    """Catalogue entries whose environments can be made in this Python environment."""
    out = []
    for e in CATALOGUE:
        if e.source == "" or (e.source and importlib.util.find_spec(e.source) is not None):
            out.append(e)
    return out
