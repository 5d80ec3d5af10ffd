"""Export collected episodes (oracle or BC rollouts) as a Minari offline-RL dataset.

Minari (Farama) is the gymnasium ecosystem's format for offline datasets (the successor of D4RL).
:func:`to_minari` writes the episodes of :func:`iclr26.mikasa.collect_demos` step for step:
observations (T + 1 per episode: the T observations the policy acted on and the final one),
actions, rewards, terminations, truncations and ``info["success"]``, with the ``EnvSpec`` of the
environment that produced them, so ``dataset.recover_environment()`` rebuilds it (on the
kinematic backend, in the same observation and reward modes) and ``env.reset(seed=seed + e)``
reproduces episode e's first observation.

Needs the extra ``[minari]`` (``minari`` with its HDF5 storage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.mikasa.data import DEMO_FIELDS, EXPORT_FIELDS

__all__ = ["check_dataset_id", "to_minari"]


@contextlib.contextmanager
def _datasets_root(root: str | os.PathLike[str] | None) -> Iterator[None]:
    """Minari reads its datasets folder from ``MINARI_DATASETS_PATH``; set it for one call."""
    if root is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(root).resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def check_dataset_id(dataset_id: Any, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder a new Minari dataset ``dataset_id`` will be written to, after checking that the
    id is well formed (``[namespace/]name-v<version>``) and not taken under ``root``.

    Raises ValueError naming ``dataset_id`` otherwise (cheap: call it before collecting).
    """
    from iclr26.shared import import_optional

    import_optional("minari", dist="iclr26-mikasa", extra="minari", purpose="Minari export")
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.storage import get_dataset_path

    if not isinstance(dataset_id, str) or not dataset_id:
        raise ValueError(f"dataset_id must be a non-empty str, got {dataset_id!r}")
    try:
        parse_dataset_id(dataset_id)
    except (ValueError, TypeError):
        raise ValueError(
            f"dataset_id {dataset_id!r} is not of the form [namespace/]name-v<version>, e.g. "
            "'mikasa/ShellGameTouch-memory-v0'"
        ) from None
    with _datasets_root(root):
        path = Path(get_dataset_path(dataset_id))
    if path.exists():
        raise ValueError(f"dataset_id {dataset_id!r} already exists at {path}; choose another id")
    return path


def _check_demos(demos: Any, dim: int) -> dict[str, np.ndarray]:
    if not isinstance(demos, Mapping):
        raise TypeError(f"demos must be a mapping of arrays, got {type(demos).__name__}")
    missing = [k for k in (*DEMO_FIELDS, *EXPORT_FIELDS) if k not in demos]
    if missing:
        raise ValueError(
            f"demos lacks fields {missing}: export the output of collect_demos (which records "
            "final_obs, terminated and truncated)"
        )
    d = {k: np.asarray(demos[k]) for k in (*DEMO_FIELDS, *EXPORT_FIELDS)}
    obs = d["obs"]
    if obs.ndim != 3 or obs.shape[0] < 1 or obs.shape[1] < 1:
        raise ValueError(
            f"demos['obs'] must have shape (episodes >= 1, T >= 1, dim), got {obs.shape}"
        )
    E, T = obs.shape[:2]
    if obs.shape[2] != dim:
        raise ValueError(
            f"demos['obs'] has {obs.shape[2]} features but the environment observes {dim}: "
            "pass the obs_mode the episodes were collected in"
        )
    want = {
        "action": (E, T, 3),
        "reward": (E, T),
        "success": (E, T),
        "done": (E, T),
        "terminated": (E, T),
        "truncated": (E, T),
        "final_obs": (E, dim),
    }
    for k, shape in want.items():
        if d[k].shape != shape:
            raise ValueError(f"demos[{k!r}] must have shape {shape}, got {d[k].shape}")
    for k in ("obs", "final_obs", "action", "reward"):
        if d[k].dtype.kind not in "fiu":
            raise TypeError(f"demos[{k!r}] must be numeric, got dtype {d[k].dtype}")
        if not np.isfinite(d[k]).all():
            raise ValueError(f"demos[{k!r}] contains NaN or inf")
    for k in ("success", "done", "terminated", "truncated"):
        if d[k].dtype != bool:
            raise TypeError(f"demos[{k!r}] must be boolean, got dtype {d[k].dtype}")
    ended = d["terminated"] | d["truncated"]
    if (ended != d["done"]).any():
        raise ValueError("demos['done'] must equal terminated | truncated")
    if ended[:, :-1].any() or not ended[:, -1].all():
        raise ValueError(
            "every episode must end exactly at its last step (collected with "
            "terminate_on_success=True, an episode that ends early continues as a new one in the "
            "same row; collect with the default terminate_on_success=False)"
        )
    return d


def to_minari(
    demos: Mapping[str, np.ndarray],
    dataset_id: str,
    *,
    env_id: str,
    obs_mode: str = "memory",
    seed: int = 0,
    root: str | os.PathLike[str] | None = None,
    algorithm_name: str | None = None,
    author: str | None = None,
    description: str | None = None,
    **env_kwargs: Any,
):
    """Write ``demos`` as the Minari dataset ``dataset_id`` and return it (a ``MinariDataset``).

    Args:
        demos: the output of :func:`iclr26.mikasa.collect_demos` (or :func:`load_demos` of a file
            it saved): :data:`~iclr26.mikasa.data.DEMO_FIELDS` plus ``final_obs``,
            ``terminated``, ``truncated``; E episodes of T steps, each ending at its last step.
        dataset_id: Minari id, ``[namespace/]name-v<version>``, e.g.
            ``"mikasa/ShellGameTouch-memory-oracle-v0"``; an existing id is refused.
        env_id: the task the episodes come from (recorded as the dataset's environment).
        obs_mode: the observation mode they were collected in (``memory`` or ``state``).
        seed: the ``seed`` given to ``collect_demos`` (episode e was reset with ``seed + e``;
            stored as each episode's seed).
        root: datasets folder (default: Minari's, ``MINARI_DATASETS_PATH`` or ``~/.minari``);
            ``minari.load_dataset`` finds the dataset there when ``MINARI_DATASETS_PATH`` is set
            to it.
        algorithm_name, author, description: Minari metadata.
        **env_kwargs: the environment options used when collecting (``delta_time``,
            ``hold_until_act``), recorded in the environment spec.

    Episode e holds ``observations`` (T + 1, dim) float32 (``obs[e]`` then ``final_obs[e]``),
    ``actions`` (T, 3), ``rewards`` (T,) (``normalized_dense``), ``terminations`` and
    ``truncations`` (T,), and ``infos["success"]`` (T + 1,; False at reset).
    """
    from iclr26.shared import import_optional

    minari = import_optional("minari", dist="iclr26-mikasa", extra="minari", purpose="to_minari")
    import gymnasium as gym

    from iclr26.mikasa.envs import CLASSIC_IDS, make
    from iclr26.mikasa.kinematic import check_seed
    from iclr26.mikasa.tasks import get_spec

    check_dataset_id(dataset_id, root)
    seed = check_seed(seed) or 0
    if obs_mode not in ("memory", "state"):
        raise ValueError(f"obs_mode must be 'memory' or 'state'; got {obs_mode!r}")
    spec = get_spec(env_id)  # unknown ids fail here with the list of valid ones
    if spec.env_id in CLASSIC_IDS:
        raise ValueError(f"env_id must be a tabletop task, got {env_id!r}")
    env = make(spec.env_id, backend="kinematic", obs_mode=obs_mode, **env_kwargs)
    d = _check_demos(demos, int(env.observation_space.shape[0]))
    E, T = d["obs"].shape[:2]
    if spec.T != T:
        raise ValueError(f"demos have T = {T} steps but {spec.name} runs {spec.T}")
    buffers = []
    for e in range(E):
        success = np.concatenate([[False], d["success"][e]])
        buffers.append(
            minari.data_collector.EpisodeBuffer(
                id=e,
                seed=seed + e,
                observations=np.concatenate([d["obs"][e], d["final_obs"][e][None]]).astype(
                    np.float32
                ),
                actions=d["action"][e].astype(np.float32),
                rewards=d["reward"][e].astype(np.float64).tolist(),
                terminations=d["terminated"][e].tolist(),
                truncations=d["truncated"][e].tolist(),
                infos={"success": success},
            )
        )
    # the registered spec with the make() arguments (JSON-serialisable: the dataset stores it)
    registered = gym.spec(spec.env_id)
    env_spec = dataclasses.replace(registered, kwargs={**registered.kwargs, **env.spec.kwargs})
    env.close()
    with _datasets_root(root):
        return minari.create_dataset_from_buffers(
            dataset_id=dataset_id,
            buffer=buffers,
            env=env_spec,
            algorithm_name=algorithm_name,
            author=author,
            code_permalink=None,
            description=description
            or f"{spec.name} episodes ({E} x {T} steps, {obs_mode} observations, kinematic "
            "backend of iclr26-mikasa)",
            requirements=["iclr26-mikasa"],
            data_format="hdf5",
        )
