"""The paper's classification of memory-intensive tasks and the task catalogue.

MIKASA sorts memory tasks into four types inspired by cognitive science: *object* memory (recall
a property of an object no longer seen), *spatial* memory (recall locations, poses or motion),
*sequential* memory (recall the order of events) and memory *capacity* (hold several items at
once). Every registered id carries the official label(s) of its group.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

__all__ = ["MemoryType", "TaskInfo", "list_tasks", "task_info"]


class MemoryType(enum.Enum):
    """The four memory types of the MIKASA classification."""

    OBJECT = "object"
    SPATIAL = "spatial"
    SEQUENTIAL = "sequential"
    CAPACITY = "capacity"


@dataclass(frozen=True)
class TaskInfo:
    """What a task asks of memory and how it is timed.

    Attributes:
        env_id: our gymnasium id (``MikasaLite/...``).
        memory_types: the official label(s) of its group.
        T: episode length (the official timeout; episodes always run to it).
        cue_steps: steps the cue is shown (all items together, or one after another).
        delay_steps: empty steps between cue and acting.
        act_start: first step at which success counts (``cue_steps + delay_steps``).
        n_choices: objects to choose from when acting (0 for continuous tasks).
        chance_success: success of a cue-blind agent that commits once, scored at the end of the
            episode (1/K, 1/C(9, n), 1/P(9, n)); ``None`` where no such level exists.
        official_id: the MIKASA-Robo / MIKASA-Base id it re-implements, if any.
    """

    env_id: str
    memory_types: tuple[MemoryType, ...]
    T: int
    cue_steps: int
    delay_steps: int
    act_start: int
    n_choices: int
    chance_success: float | None
    official_id: str | None


def task_info(env_id: str) -> TaskInfo:
    """The :class:`TaskInfo` of a registered id (``MikasaLite/...``; the official id works too)."""
    from iclr26.mikasa.tasks import get_spec

    spec = get_spec(env_id)
    return TaskInfo(
        env_id=spec.env_id,
        memory_types=spec.memory_types,
        T=spec.T,
        cue_steps=spec.cue_end,
        delay_steps=spec.delay_steps,
        act_start=spec.act_start,
        n_choices=spec.n_candidates,
        chance_success=spec.chance_success,
        official_id=spec.official_id,
    )


def list_tasks(memory_type: MemoryType | str | None = None) -> list[str]:
    """Registered ids, optionally only those labelled with ``memory_type``."""
    from iclr26.mikasa.envs import TABLETOP as TASKS

    if memory_type is None:
        return list(TASKS)
    if isinstance(memory_type, str):
        try:
            memory_type = MemoryType(memory_type.lower())
        except ValueError:
            options = ", ".join(m.value for m in MemoryType)
            raise ValueError(f"memory_type must be one of {options}; got {memory_type!r}") from None
    if not isinstance(memory_type, MemoryType):
        raise TypeError(f"memory_type must be a MemoryType or str, got {type(memory_type)}")
    return [k for k, s in TASKS.items() if memory_type in s.memory_types]


def combinations(n: int, k: int) -> int:
    """C(n, k) (used for the chance level of the capacity tasks)."""
    return math.comb(n, k)
