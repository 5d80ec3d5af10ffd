"""Registration and construction: ``make`` / ``make_vec`` and the gymnasium ids.

Importing this module registers every ``MikasaLite/...`` id with ``gymnasium.register`` (with
``max_episode_steps = T``); ``gym.make("iclr26.mikasa.envs:MikasaLite/ShellGameTouch-v0")`` imports
it for you. The tabletop ids take ``backend="mujoco" | "kinematic"``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from iclr26.mikasa.kinematic import AUTORESET_MODES, KinematicEnv, KinematicVectorEnv, check_seed
from iclr26.mikasa.spatial import SPATIAL_TASKS
from iclr26.mikasa.tasks import NAMESPACE, TASKS, get_spec

__all__ = ["BACKENDS", "CLASSIC_IDS", "all_ids", "make", "make_vec"]

BACKENDS = ("mujoco", "kinematic")
#: every tabletop task: the touch tasks, then the moving-object tasks
TABLETOP = {**TASKS, **SPATIAL_TASKS}
CLASSIC_IDS = (f"{NAMESPACE}/TMaze-v0", f"{NAMESPACE}/MemoryLength-v0")


def _tabletop(backend: str = "mujoco", **kwargs: Any) -> gym.Env:
    # The registered kwargs name the task by id (JSON-friendly), so an ``EnvSpec`` serialises
    # and a dataset can recreate its environment (``minari`` ``recover_environment``).
    spec = kwargs.pop("task_spec", None) or TABLETOP[kwargs.pop("task_id")]
    delta_time = kwargs.pop("delta_time", None)
    if delta_time is not None:
        if spec.family != "remember":
            raise ValueError(f"delta_time applies to the Remember* tasks, not {spec.name}")
        if isinstance(delta_time, bool) or not isinstance(delta_time, int) or delta_time < 1:
            raise ValueError(f"delta_time must be an int >= 1, got {delta_time!r}")
        if 5 + delta_time >= spec.T:
            raise ValueError(f"delta_time must leave steps to act: 5 + delta_time < T = {spec.T}")
        spec = spec.with_delay(delta_time)
    if backend == "kinematic":
        return KinematicEnv(spec, **kwargs)
    if backend == "mujoco":
        from iclr26.mikasa.physics import make_mujoco_env

        return make_mujoco_env(spec, **kwargs)
    raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")


def _register() -> None:
    for env_id, spec in TABLETOP.items():
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point="iclr26.mikasa.envs:_tabletop",
                max_episode_steps=spec.T,
                kwargs={"task_id": env_id},
            )
    for env_id, entry in zip(
        CLASSIC_IDS,
        ("iclr26.mikasa.classic:TMaze", "iclr26.mikasa.classic:MemoryLength"),
        strict=True,
    ):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry)


_register()


def all_ids() -> list[str]:
    """Every registered id: the touch tasks, the moving-object tasks, then TMaze and MemoryLength."""
    return [*TABLETOP, *CLASSIC_IDS]


def _check_id(env_id: Any) -> str:
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a str, got {type(env_id).__name__}")
    if env_id in TABLETOP or env_id in CLASSIC_IDS:
        return env_id
    lite = f"{NAMESPACE}/{env_id}"
    if lite in TABLETOP or lite in CLASSIC_IDS:
        return lite
    raise ValueError(f"unknown env_id {env_id!r}; valid ids: {', '.join(all_ids())}")


def make(
    env_id: str,
    *,
    obs_mode: str = "memory",
    reward_mode: str = "normalized_dense",
    backend: str = "mujoco",
    render_mode: str | None = None,
    seed: int | None = None,
    **task_kwargs: Any,
) -> gym.Env:
    """Make a registered environment (``gym.make`` with the package's checks).

    Args:
        env_id: ``MikasaLite/<Task>-v0`` (the ``MikasaLite/`` prefix may be left out; official
            ids such as ``RememberColor3-v0`` map to ours).
        obs_mode: ``memory`` (default, no oracle information), ``state`` (oracle MDP) or ``rgb``
            (MuJoCo cameras).
        reward_mode: ``sparse``, ``dense`` or ``normalized_dense`` (default).
        backend: ``mujoco`` (default) or ``kinematic`` (numpy, exact, fast).
        render_mode: ``None`` or ``"rgb_array"`` (MuJoCo backend).
        seed: if given, the environment is reset once with it.
        **task_kwargs: ``delta_time`` (Remember*), ``hold_until_act``, ``terminate_on_success``,
            ``control_dt``; TMaze: ``corridor_length``, ``episode_length``; MemoryLength:
            ``memory_length``, ``num_bits``.
    """
    env_id = _check_id(env_id)
    check_seed(seed)
    if env_id in CLASSIC_IDS:
        env = gym.make(env_id, **task_kwargs)
    else:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
        env = gym.make(
            env_id, obs_mode=obs_mode, reward_mode=reward_mode, backend=backend,
            render_mode=render_mode, **task_kwargs,
        )  # fmt: skip
    if seed is not None:
        env.reset(seed=seed)
    return env


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    backend: str = "kinematic",
    obs_mode: str = "memory",
    reward_mode: str = "normalized_dense",
    autoreset_mode: str = "next_step",
    **task_kwargs: Any,
) -> gym.vector.VectorEnv:
    """``num_envs`` copies of a tabletop task as a ``gymnasium.vector.VectorEnv``.

    The kinematic backend returns the native batched :class:`KinematicVectorEnv`; the MuJoCo
    backend a ``SyncVectorEnv`` of :class:`MujocoEnv`. See :mod:`iclr26.mikasa.kinematic` for the
    two autoreset modes.
    """
    env_id = _check_id(env_id)
    if env_id in CLASSIC_IDS:
        raise ValueError(
            f"make_vec supports the tabletop tasks; use gymnasium.make_vec for {env_id}"
        )
    if autoreset_mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {AUTORESET_MODES}; got {autoreset_mode!r}")
    spec = get_spec(env_id)
    delta_time = task_kwargs.pop("delta_time", None)
    if delta_time is not None:
        _tabletop("kinematic", task_spec=spec, delta_time=delta_time)  # validates it
        spec = spec.with_delay(delta_time)
    if backend == "kinematic":
        return KinematicVectorEnv(
            spec, num_envs, obs_mode=obs_mode, reward_mode=reward_mode,
            autoreset_mode=autoreset_mode, **task_kwargs,
        )  # fmt: skip
    if backend != "mujoco":
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}")
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    from iclr26.mikasa.physics import make_mujoco_env

    mode = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
    return SyncVectorEnv(
        [
            lambda: gym.wrappers.TimeLimit(
                make_mujoco_env(spec, obs_mode=obs_mode, reward_mode=reward_mode, **task_kwargs),
                spec.T,
            )
            for _ in range(num_envs)
        ],
        autoreset_mode=mode[autoreset_mode],
    )
