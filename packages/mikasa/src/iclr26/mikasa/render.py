"""Pictures of an episode: a top-down strip, every frame, an animated GIF.

The kinematic backend is drawn from above with matplotlib (no OpenGL needed); the MuJoCo backend
renders its overhead camera (needs an OpenGL context, e.g. ``MUJOCO_GL=egl``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.mikasa.data import COLORS, SHAPES
from iclr26.mikasa.kinematic import check_seed
from iclr26.mikasa.spatial import PEG_HALF_LENGTH
from iclr26.mikasa.tasks import get_spec

__all__ = ["episode_frames", "episode_strip", "write_gif"]

_MARKERS = {"cube": "s", "sphere": "o", "cylinder": "o", "capsule": "h", "ellipsoid": "8",
            "tetrahedron": "^", "octahedron": "D", "prism": "v", "cross": "P"}  # fmt: skip


def _rollout(spec: Any, policy: Any, seed: int) -> tuple[Any, list]:
    """One kinematic episode of ``policy`` in the mode it acts on: (obs layout, [(obs, info)])."""
    from iclr26.mikasa.kinematic import KinematicVectorEnv

    env = KinematicVectorEnv(spec, 1, obs_mode=getattr(policy, "obs_mode", "memory"))
    obs, info = env.reset(seed=seed)
    policy.reset(1)
    frames = [(obs[0], _first(info))]
    for _ in range(spec.T):
        obs, _, _, _, info = env.step(policy.act(obs))
        frames.append((obs[0], _first(info)))
    return env.batch.layout, frames


def _first(info: dict[str, Any]) -> dict[str, Any]:
    return {"success": bool(info["success"][0]), "phase": str(info["phase"][0])}


def _table_axes(ax: Any) -> None:
    ax.set_xlim(-0.35, 0.35)
    ax.set_ylim(-0.35, 0.35)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def _draw_top_view(ax: Any, spec: Any, lay: Any, frames: list, t: int) -> None:
    """Visible objects at step ``t`` in their colours and shapes, the gripper path so far."""
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
    path = np.array([f[0][:3] for f in frames[: t + 1]])
    ax.plot(path[:, 0], path[:, 1], "k-", lw=0.8, zorder=4)
    ax.scatter(*path[-1, :2], s=30, c="k", marker="x", zorder=5)
    ok = " ✓" if inf["success"] else ""
    ax.set_title(f"t={t} {inf['phase']}{ok}", fontsize=9)


def episode_strip(env_id: str, policy: Any, *, seed: int = 0, steps: list[int] | None = None):
    """Roll out ``policy`` (``reset(n)``/``act(obs)``) on the kinematic backend and draw the
    table from above at ``steps`` (default: start, end of cue, act start, a middle and the last).

    Returns a matplotlib Figure: visible objects in their colours and shapes (cups as large grey
    circles), the gripper path so far, the phase and success in each panel title.
    """
    import matplotlib.pyplot as plt

    spec = get_spec(env_id)
    lay, frames = _rollout(spec, policy, check_seed(seed) or 0)
    if steps is None:
        steps = sorted(
            {0, max(spec.cue_end - 1, 0), spec.act_start, (spec.act_start + spec.T) // 2, spec.T}
        )
    fig, axes = plt.subplots(1, len(steps), figsize=(2.6 * len(steps), 2.9))
    for ax, t in zip(np.atleast_1d(axes), steps, strict=True):
        _table_axes(ax)
        _draw_top_view(ax, spec, lay, frames, t)
    fig.suptitle(f"{spec.name} (seed {seed}), top view", fontsize=10)
    fig.tight_layout()
    return fig


def episode_frames(
    env_id: str,
    policy: Any,
    *,
    seed: int = 0,
    backend: str = "kinematic",
    size: int = 160,
    steps: list[int] | None = None,
) -> np.ndarray:
    """Every frame of one episode of ``policy`` (``reset(n)``/``act(obs)``), for a GIF or video.

    Args:
        env_id: task id.
        policy: an oracle, a fitted BC/PPO policy, or anything with ``reset(n)`` and ``act(obs)``
            (it acts on the observation mode named by its ``obs_mode``, default ``memory``).
        seed: episode seed (the layout is the same on both backends).
        backend: ``kinematic`` draws the table from above with matplotlib (no OpenGL needed);
            ``mujoco`` renders the MuJoCo scene's overhead camera (``render_mode="rgb_array"``;
            needs an OpenGL context, e.g. ``MUJOCO_GL=egl``).
        size: frame height and width in pixels (16–256; MuJoCo's offscreen buffer is 256).
        steps: which steps to draw (0 = after reset, T = after the last step); default all.

    Returns:
        (len(steps), size, size, 3) uint8; by default (T + 1, ...): the first observation, then
        one frame after each step.
    """
    spec = get_spec(env_id)
    seed = check_seed(seed) or 0
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or not 16 <= size <= 256:
        raise ValueError(f"size must be an int in [16, 256], got {size!r}")
    size = int(size)
    if steps is None:
        steps = list(range(spec.T + 1))
    if any(isinstance(t, bool) or not isinstance(t, int | np.integer) for t in steps):
        raise TypeError(f"steps must be ints, got {steps!r}")
    steps = [int(t) for t in steps]
    if not steps or any(not 0 <= t <= spec.T for t in steps):
        raise ValueError(f"steps must be ints in [0, T = {spec.T}] (at least one), got {steps}")
    wanted = set(steps)
    if backend == "mujoco":
        from iclr26.mikasa.physics import make_mujoco_env

        env = make_mujoco_env(
            spec, obs_mode=getattr(policy, "obs_mode", "memory"), render_mode="rgb_array",
            image_size=size,
        )  # fmt: skip
        try:
            obs, _ = env.reset(seed=seed)
            policy.reset(1)
            images = {0: env.render()} if 0 in wanted else {}
            for t in range(1, spec.T + 1):
                obs, *_ = env.step(policy.act(obs[None])[0])
                if t in wanted:
                    images[t] = env.render()
        finally:
            env.close()
        return np.stack([images[t] for t in steps]).astype(np.uint8)
    if backend != "kinematic":
        raise ValueError(f"backend must be 'kinematic' or 'mujoco'; got {backend!r}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lay, frames = _rollout(spec, policy, seed)
    fig = Figure(figsize=(size / 80, size / 80), dpi=80)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.88))
    _table_axes(ax)
    images = []
    for t in steps:
        for artist in [*ax.collections, *ax.lines]:  # cheaper than ax.clear()
            artist.remove()
        _draw_top_view(ax, spec, lay, frames, t)
        canvas.draw()
        images.append(np.asarray(canvas.buffer_rgba())[..., :3].copy())
    return np.stack(images)


def write_gif(frames: np.ndarray, path: str | os.PathLike[str], *, fps: float = 10.0) -> Path:
    """Write (N, H, W, 3) uint8 ``frames`` as an animated GIF (looping) with Pillow."""
    from PIL import Image

    frames = np.asarray(frames)
    if frames.dtype != np.uint8:
        raise TypeError(f"frames must be uint8, got dtype {frames.dtype}")
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) < 1:
        raise ValueError(f"frames must have shape (N >= 1, H, W, 3), got {frames.shape}")
    if isinstance(fps, bool) or not np.isfinite(fps) or not 0 < fps <= 100:
        raise ValueError(f"fps must be a number in (0, 100], got {fps!r}")
    path = Path(path)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(
        path,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=round(1000 / fps),
        loop=0,
    )
    return path
