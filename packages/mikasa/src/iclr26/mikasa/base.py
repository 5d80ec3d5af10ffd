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

O, S, Q, C = MemoryType.OBJECT, MemoryType.SPATIAL, MemoryType.SEQUENTIAL, MemoryType.CAPACITY


@dataclass(frozen=True)
class BaseEntry:
    """One MIKASA-Base task family: where it comes from and what memory it tests."""

    name: str
    memory_types: tuple[MemoryType, ...]
    source: str  # python module that registers it ("" = native here, None = not installable)
    ids: tuple[str, ...]


CATALOGUE: tuple[BaseEntry, ...] = (
    BaseEntry("T-Maze", (O,), "", ("MikasaLite/TMaze-v0",)),
    BaseEntry("MemoryLength", (O,), "", ("MikasaLite/MemoryLength-v0",)),
    BaseEntry("RepeatFirst", (O,), "popgym", ("popgym-RepeatFirstEasy-v0",)),
    BaseEntry("RepeatPrevious", (Q,), "popgym", ("popgym-RepeatPreviousEasy-v0",)),
    BaseEntry("Autoencode", (Q,), "popgym", ("popgym-AutoencodeEasy-v0",)),
    BaseEntry("CountRecall", (O, C), "popgym", ("popgym-CountRecallEasy-v0",)),
    BaseEntry("PositionOnlyCartPole", (S,), "popgym", ("popgym-PositionOnlyCartPoleEasy-v0",)),
    BaseEntry("MiniGrid-Memory", (O,), "minigrid", ("MiniGrid-MemoryS7-v0", "MiniGrid-MemoryS13-v0")),
    BaseEntry("MemoryCards", (O, C), None, ()),
    BaseEntry("Ballet", (Q, O), None, ()),
    BaseEntry("MemoryMaze", (S,), None, ()),
    BaseEntry("MortarMayhem", (C, Q), None, ()),
    BaseEntry("MysteryPath", (S,), None, ()),
    BaseEntry("ViZDoom-two-colors", (O,), None, ()),
)


def available() -> list[BaseEntry]:
    """Catalogue entries whose environments can be made in this Python environment."""
    out = []
    for e in CATALOGUE:
        if e.source == "" or (e.source and importlib.util.find_spec(e.source) is not None):
            out.append(e)
    return out
