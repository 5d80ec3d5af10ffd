"""Task definitions (official timing constants and thresholds) and the seeded layout sampler.

Each MIKASA-Robo group is a :class:`TaskSpec`: its episode length T, the cue and delay timing,
the touch threshold and the dense-reward maximum of the official source. :func:`sample_layout`
draws one episode's scene (object positions, colours, shapes, the target and its order) from a
NumPy generator *before any physics*, so both backends see the same scene for the same seed.

Scene geometry (metres, table top at z = 0, region |x|, |y| <= 0.3):

* cubes and shapes: half-size 0.02 (centre z = 0.02); ShellGame cups: cylinders of radius 0.04 and
  half-height 0.05 (centre z = 0.05), 0.2 m apart with a shared xy offset in ±0.1; the ball
  (radius 0.02) sits in the target cup's slot during the cue.
* act-phase candidates sit on a jittered grid in random cells and random order, so neither the
  slot order nor the position of an object tells which one is the target.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from iclr26.mikasa.data import COLORS, SHAPES
from iclr26.mikasa.taxonomy import MemoryType

__all__ = ["TASKS", "Layout", "TaskSpec", "get_spec", "sample_layout"]

NAMESPACE = "MikasaLite"
CUBE_HALF = 0.02
CUP_RADIUS, CUP_HALF_HEIGHT = 0.04, 0.05
BALL_RADIUS = 0.02
TCP_RADIUS = 0.01
TCP_START = (0.0, 0.0, 0.15)
WORKSPACE_LOW = np.array([-0.35, -0.35, TCP_RADIUS])
WORKSPACE_HIGH = np.array([0.35, 0.35, 0.3])
CUE_STEPS = 5
N_FEATURES = 4 + len(COLORS) + len(SHAPES)  # visible, x, y, z, colour one-hot, shape one-hot


@dataclass(frozen=True)
class TaskSpec:
    """One registered tabletop task.

    Attributes:
        name: short name (``RememberColor3``); ``env_id`` is ``MikasaLite/<name>-v0``.
        family: ``shell_touch``, ``remember``, ``bunch``, ``seq`` or ``chain``.
        T: episode length (official timeout).
        n_candidates: objects on the table when acting (K).
        n_targets: objects to touch (1, or n for Bunch/Seq/Chain).
        attribute: what identifies the target: ``cup``, ``color``, ``shape`` or ``shape_color``.
        n_shapes, n_colors: the shape × colour grid of RememberShapeAndColor.
        delay_steps: empty steps between cue and acting (``delta_time`` upstream).
        touch_threshold: success distance from the touch point (0.08 cups, 0.05 cubes, 0.02 for
            the capacity tasks' "touch").
        touch_offset: height of the touch point above the object centre (0.025 for Bunch/Seq/
            Chain, as upstream).
        dense_max: maximum of the dense reward (3 or 100 upstream).
    """

    name: str
    family: str
    memory_types: tuple[MemoryType, ...]
    T: int
    n_candidates: int
    n_targets: int = 1
    attribute: str = "color"
    n_shapes: int = 1
    n_colors: int = 1
    delay_steps: int = 5
    touch_threshold: float = 0.05
    touch_offset: float = 0.0
    dense_max: float = 3.0
    official: bool = True
    kwargs: dict = field(default_factory=dict, compare=False)

    @property
    def env_id(self) -> str:
        return f"{NAMESPACE}/{self.name}-v0"

    @property
    def official_id(self) -> str | None:
        return f"{self.name}-v0" if self.official else None

    @property
    def cue_items(self) -> int:
        """Cue frames: one per item for Seq/Chain (shown one at a time), else one."""
        return self.n_targets if self.family in ("seq", "chain") else 1

    @property
    def cue_end(self) -> int:
        return CUE_STEPS * self.cue_items

    @property
    def act_start(self) -> int:
        return self.cue_end + self.delay_steps

    @property
    def n_frames(self) -> int:
        """Distinct visibility frames: cue frame(s), the empty delay (if any) and the act frame."""
        return self.cue_items + (1 if self.delay_steps > 0 else 0) + 1

    @property
    def n_values(self) -> int:
        """Number of values ``oracle_info`` can take per target."""
        return {
            "cup": 3,
            "color": len(COLORS),
            "shape": len(SHAPES),
            "shape_color": self.n_shapes * self.n_colors,
        }[self.attribute]

    @property
    def n_cue_objects(self) -> int:
        return self.n_targets if self.family in ("bunch", "seq", "chain") else 1

    @property
    def n_objects(self) -> int:
        return self.n_cue_objects + self.n_candidates

    @property
    def n_slots(self) -> int:
        """Observation slots: the most objects visible at once."""
        return max(self.n_candidates, self.n_cue_objects)

    @property
    def memory_steps(self) -> int:
        return self.act_start

    @property
    def chance_success(self) -> float:
        """Success of a cue-blind agent that commits to one choice (scored at the end)."""
        k, n = self.n_candidates, self.n_targets
        if self.family == "chain":
            return 1.0 / math.perm(k, n)
        if self.family in ("bunch", "seq"):
            return 1.0 / math.comb(k, n)
        return 1.0 / k

    def frame_index(self, t: np.ndarray | int) -> np.ndarray:
        """Visibility frame shown at step ``t`` (0-based count of steps taken)."""
        t = np.asarray(t)
        cue = np.minimum(t // CUE_STEPS, self.cue_items - 1)
        delay = self.cue_items  # the empty frame (unused when there is no delay)
        act = self.n_frames - 1
        return np.where(t < self.cue_end, cue, np.where(t < self.act_start, delay, act))

    def phase(self, t: int) -> str:
        """``"cue"``, ``"delay"`` or ``"act"`` at step ``t``."""
        if t < self.cue_end:
            return "cue"
        return "delay" if t < self.act_start else "act"

    def with_delay(self, delta_time: int) -> TaskSpec:
        """The same task with another cue-to-act delay (``delta_time`` of RememberColor)."""
        from dataclasses import replace

        return replace(self, delay_steps=int(delta_time))


@dataclass(frozen=True)
class Layout:
    """One episode's scene, sampled before any physics.

    Attributes:
        objects: (M, 5) float — x, y, z, colour index (-1 none), shape index per object; the
            first ``spec.n_cue_objects`` rows are the cue objects, the rest the candidates.
        frames: (n_frames, n_slots) int — object shown in each observation slot per frame, -1
            for an empty slot.
        targets: (n_targets,) int — candidate indices (0..K-1) to touch, in the shown order.
        oracle_info: (n_targets,) int — the official ``oracle_info`` value per target (cup index,
            colour index, shape index, or shape * n_colors + colour).
    """

    objects: np.ndarray
    frames: np.ndarray
    targets: np.ndarray
    oracle_info: np.ndarray


@functools.cache
def _grid(nx: int, ny: int, spacing: float) -> np.ndarray:
    xs = (np.arange(nx) - (nx - 1) / 2) * spacing
    ys = (np.arange(ny) - (ny - 1) / 2) * spacing
    return np.stack(np.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)


@functools.cache
def _others(n_values: int) -> np.ndarray:
    """(n_values, n_values - 1): row v lists every value but v, in order."""
    every = np.arange(n_values)
    return np.stack([every[every != v] for v in range(n_values)])


def _candidate_xy(k: int, rng: np.random.Generator) -> np.ndarray:
    """K positions in random cells of a jittered grid (3×3 up to 9 objects, else 5×3)."""
    if k <= 9:
        cells, jitter = _grid(3, 3, 0.12), 0.02
    else:
        cells, jitter = _grid(5, 3, 0.11), 0.015
    chosen = rng.permutation(len(cells))[:k]
    return cells[chosen] + rng.uniform(-jitter, jitter, size=(k, 2))


def sample_layout(spec: TaskSpec, rng: np.random.Generator) -> Layout:
    """Draw one episode's scene for ``spec`` from ``rng`` (same generator state, same scene)."""
    n_cue, k = spec.n_cue_objects, spec.n_candidates
    objects = np.zeros((n_cue + k, 5))
    objects[:, 3] = -1
    z_cube = CUBE_HALF
    if spec.family == "shell_touch":
        offset = rng.uniform(-0.1, 0.1, size=2)
        target = int(rng.integers(3))
        slots = np.array([[-0.2, 0.0], [0.0, 0.0], [0.2, 0.0]]) + offset
        objects[0] = [*slots[target], BALL_RADIUS, 0, SHAPES.index("sphere")]
        objects[1:, :2] = slots
        objects[1:, 2] = CUP_HALF_HEIGHT
        objects[1:, 4] = SHAPES.index("cylinder")
        targets = np.array([target])
        oracle = np.array([target])
        props = None
    elif spec.family == "remember":
        if spec.attribute == "shape_color":
            combos = np.array([(s, c) for s in range(spec.n_shapes) for c in range(spec.n_colors)])
            props = combos[rng.permutation(len(combos))]
            target = int(rng.integers(k))
            oracle_value = int(props[target, 0] * spec.n_colors + props[target, 1])
        else:
            n_values = spec.n_values
            value = int(rng.integers(n_values))
            values = np.empty(k, np.int64)
            values[0] = value
            values[1:] = rng.permutation(_others(n_values)[value])[: k - 1]
            order = rng.permutation(k)
            values = values[order]
            target = int(order.argmin())  # where value (index 0) went
            oracle_value = value
            props = np.zeros((k, 2), np.int64)
            if spec.attribute == "color":
                props[:, 1] = values  # cubes of k colours
            else:
                props[:, 0] = values  # blue objects of k shapes
                props[:, 1] = 2
        targets = np.array([target])
        oracle = np.array([oracle_value])
        objects[0] = [0.0, 0.0, z_cube, props[target, 1], props[target, 0]]
    else:  # bunch, seq, chain: n of the 9 colours shown, then all 9 cubes
        n = spec.n_targets
        shown = rng.permutation(len(COLORS))[:n]
        colour_of_candidate = rng.permutation(len(COLORS))
        props = np.stack([np.zeros(k, int), colour_of_candidate], -1)
        targets = np.array([int(np.flatnonzero(colour_of_candidate == c)[0]) for c in shown])
        oracle = shown.astype(int)
        if spec.family == "bunch":
            xs = (np.arange(n) - (n - 1) / 2) * 0.08
            cue_xy = np.stack([xs, np.zeros(n)], -1)[rng.permutation(n)]
        else:
            cue_xy = np.zeros((n, 2))  # one at a time, at the centre
        objects[:n, :2] = cue_xy
        objects[:n, 2] = z_cube
        objects[:n, 3] = shown
        objects[:n, 4] = 0
    if spec.family != "shell_touch":
        objects[n_cue:, :2] = _candidate_xy(k, rng)
        objects[n_cue:, 2] = z_cube
        objects[n_cue:, 3] = props[:, 1]
        objects[n_cue:, 4] = props[:, 0]

    frames = np.full((spec.n_frames, spec.n_slots), -1)
    if spec.family in ("seq", "chain"):
        for i in range(spec.n_targets):
            frames[i, 0] = i
    else:
        frames[0, :n_cue] = np.arange(n_cue)
    frames[-1, :k] = n_cue + np.arange(k)
    return Layout(objects, frames, targets, oracle)


def _specs() -> dict[str, TaskSpec]:
    obj, spa, seq, cap = (
        MemoryType.OBJECT,
        MemoryType.SPATIAL,
        MemoryType.SEQUENTIAL,
        MemoryType.CAPACITY,
    )
    specs = [
        TaskSpec(
            "ShellGameTouch", "shell_touch", (obj,), T=90, n_candidates=3, attribute="cup",
            delay_steps=0, touch_threshold=0.08,
        ),
        *(TaskSpec(f"RememberColor{k}", "remember", (obj,), T=60, n_candidates=k) for k in (3, 5, 9)),
        *(
            TaskSpec(f"RememberShape{k}", "remember", (obj,), T=60, n_candidates=k, attribute="shape")
            for k in (3, 5, 9)
        ),
        *(
            # upstream's "AxB" is A colours × B shapes (3x2 = 2 shapes × 3 colours)
            TaskSpec(
                f"RememberShapeAndColor{c}x{s}", "remember", (obj,), T=60, n_candidates=s * c,
                attribute="shape_color", n_shapes=s, n_colors=c,
            )
            for c, s in ((3, 2), (3, 3), (5, 3))
        ),
    ]  # fmt: skip
    for family, name, types in (
        ("bunch", "BunchOfColors", (cap,)),
        ("seq", "SeqOfColors", (cap,)),
        ("chain", "ChainOfColors", (seq,)),
    ):
        specs += [
            TaskSpec(
                f"{name}{n}", family, types, T=120, n_candidates=9, n_targets=n,
                touch_threshold=0.02, touch_offset=0.025, dense_max=100.0,
            )
            for n in (3, 5, 7)
        ]  # fmt: skip
    del spa
    return {s.env_id: s for s in specs}


#: Every tabletop task, by id.
TASKS: dict[str, TaskSpec] = _specs()


def get_spec(env_id: str) -> TaskSpec:
    """The spec of ``env_id`` (ours, or an official id such as ``RememberColor3-v0``).

    The moving-object tasks (ShellGamePush, Intercept*, TakeItBack) return a
    :class:`iclr26.mikasa.spatial.SpatialSpec`; every other tabletop task a :class:`TaskSpec`.

    Raises:
        ValueError: unknown id; the message lists the valid ones.
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a str, got {type(env_id).__name__}")
    from iclr26.mikasa.spatial import SPATIAL_TASKS

    every = {**TASKS, **SPATIAL_TASKS}
    if env_id in every:
        return every[env_id]
    lite = f"{NAMESPACE}/{env_id}"
    if lite in every:
        return every[lite]
    raise ValueError(f"env_id {env_id!r} is not a tabletop task; valid ids: {', '.join(every)}")
