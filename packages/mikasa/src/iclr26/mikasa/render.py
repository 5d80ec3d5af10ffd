"""A top-down picture strip of an episode (matplotlib; works without OpenGL)."""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26.mikasa.data import COLORS, SHAPES
from iclr26.mikasa.kinematic import KinematicEnv
from iclr26.mikasa.spatial import PEG_HALF_LENGTH
from iclr26.mikasa.tasks import get_spec

__all__ = ["episode_strip"]

_MARKERS = {"cube": "s", "sphere": "o", "cylinder": "o", "capsule": "h", "ellipsoid": "8",
            "tetrahedron": "^", "octahedron": "D", "prism": "v", "cross": "P"}  # fmt: skip


def episode_strip(env_id: str, policy: Any, *, seed: int = 0, steps: list[int] | None = None):
    """Roll out ``policy`` (``reset(n)``/``act(obs)``) on the kinematic backend and draw the
    table from above at ``steps`` (default: start, end of cue, act start, a middle and the last).

    Returns a matplotlib Figure: visible objects in their colours and shapes (cups as large grey
    circles), the gripper path so far, the phase and success in each panel title.
    """
    import matplotlib.pyplot as plt

    spec = get_spec(env_id)
    env = KinematicEnv(spec)
    obs, info = env.reset(seed=seed)
    policy.reset(1)
    lay = env._vec.batch.layout
    frames = [(obs, info)]
    for _ in range(spec.T):
        obs, _, _, _, info = env.step(policy.act(obs[None])[0])
        frames.append((obs, info))
    if steps is None:
        steps = sorted(
            {0, max(spec.cue_end - 1, 0), spec.act_start, (spec.act_start + spec.T) // 2, spec.T}
        )
    fig, axes = plt.subplots(1, len(steps), figsize=(2.6 * len(steps), 2.9))
    path = np.array([f[0][:3] for f in frames])
    for ax, t in zip(np.atleast_1d(axes), steps, strict=True):
        o, inf = frames[t]
        for feat in lay.split_objects(o[None])[0]:
            if feat[0] < 0.5:
                continue
            colour = feat[4 : 4 + len(COLORS)]
            shape = SHAPES[int(feat[4 + len(COLORS) :].argmax())]
            rgb = COLORS[int(colour.argmax())] if colour.any() else (0.6, 0.6, 0.6)
            cup = spec.family in ("shell_touch", "shell_push", "shell_pick") and shape == "cylinder"
            if spec.family == "rotate":  # the peg: a bar at its current yaw, head marked
                c, s = o[lay.extra][1:3] * PEG_HALF_LENGTH
                ax.plot([feat[1] - c, feat[1] + c], [feat[2] - s, feat[2] + s], "-", c=rgb, lw=6)
                ax.scatter(feat[1] + c, feat[2] + s, s=40, c="w", edgecolors="k", zorder=3)
                continue
            ax.scatter(feat[1], feat[2], s=500 if cup else 120, c=[rgb], marker=_MARKERS[shape],
                       edgecolors="k", zorder=2 if cup else 3)  # fmt: skip
        ax.plot(path[: t + 1, 0], path[: t + 1, 1], "k-", lw=0.8, zorder=4)
        ax.scatter(*path[t, :2], s=30, c="k", marker="x", zorder=5)
        ax.set_xlim(-0.35, 0.35)
        ax.set_ylim(-0.35, 0.35)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ok = " ✓" if inf["success"] else ""
        ax.set_title(f"t={t} {inf['phase']}{ok}", fontsize=9)
    fig.suptitle(f"{spec.name} (seed {seed}), top view", fontsize=10)
    fig.tight_layout()
    return fig
