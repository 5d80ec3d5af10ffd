"""D4RL-like Pendulum datasets from scripted behaviour policies, reference returns, IPL/PT-style
``.npz`` preference files and local minari datasets, for users who bring their own data."""

from __future__ import annotations

import functools
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from iclr26.pvo.envs import REWARDS, collect_episodes, hidden_reward
from iclr26.pvo.segments import SegmentPairs, check_labels
from iclr26.shared import check_array, check_choice, check_int, check_range

__all__ = [
    "DATASETS",
    "OfflineDataset",
    "load_minari",
    "load_npz_pairs",
    "make_dataset",
    "reference_returns",
    "save_minari",
    "save_npz_pairs",
]

log = logging.getLogger(__name__)

DATASETS = ("expert", "medium", "medium_replay", "random", "mixed")


@dataclass(frozen=True)
class OfflineDataset:
    """Episodes of equal length: obs (E, T+1, d), act (E, T, k), done (E, T) and the dense
    environment reward (E, T), which learners other than the oracle never see."""

    name: str
    obs: np.ndarray
    act: np.ndarray
    done: np.ndarray
    reward: np.ndarray

    def __post_init__(self) -> None:
        check_array(self.obs, "obs", ndim=3)
        check_array(self.act, "act", ndim=3)
        e, t = self.act.shape[:2]
        if self.obs.shape[:2] != (e, t + 1):
            raise ValueError(
                f"obs must be (E, T+1, d) for act {self.act.shape}, got {self.obs.shape}"
            )
        check_array(self.done, "done", shape=(e, t))
        check_array(self.reward, "reward", shape=(e, t))

    @property
    def n_transitions(self) -> int:
        return int(self.act.shape[0] * self.act.shape[1])

    def transitions(self, reward: str = "dense") -> dict[str, np.ndarray]:
        """Flat transitions with the hidden reward of kind ``reward`` (for the oracle agent)."""
        check_choice(reward, "reward", REWARDS)
        d, k = self.obs.shape[-1], self.act.shape[-1]
        r = np.asarray(hidden_reward(self.obs[:, :-1], self.act, reward))
        return {
            "obs": self.obs[:, :-1].reshape(-1, d),
            "act": self.act.reshape(-1, k),
            "reward": r.reshape(-1).astype(np.float32),
            "next_obs": self.obs[:, 1:].reshape(-1, d),
            "done": self.done.reshape(-1).astype(np.float32),
        }


def make_dataset(
    kind: str = "medium_replay", n_episodes: int = 100, *, expert_ratio: float = 0.3, seed: int = 0
) -> OfflineDataset:
    """A Pendulum dataset from scripted policies (spec §4.2).

    ``expert``: the energy-shaping controller + N(0, 0.1²) noise; ``medium``: 30 % uniform random
    actions; ``random``: uniform actions; ``medium_replay``: a gain schedule from 0.2 to 1 with a
    falling share of random actions, like a replay buffer of an improving learner; ``mixed``:
    ``expert_ratio`` expert episodes, the rest random (the paper's dial-turn mixing study).
    """
    check_choice(kind, "kind", DATASETS)
    check_int(n_episodes, "n_episodes", low=1)
    check_range(expert_ratio, "expert_ratio", low=0, high=1)
    key = jax.random.key(seed)
    if kind == "expert":
        ep = collect_episodes(key, n_episodes)
    elif kind == "medium":
        ep = collect_episodes(key, n_episodes, random_prob=0.3)
    elif kind == "random":
        ep = collect_episodes(key, n_episodes, random_prob=1.0, noise=0.0)
    elif kind == "medium_replay":
        progress = np.linspace(0.0, 1.0, n_episodes)
        ep = collect_episodes(
            key, n_episodes, gain=0.2 + 0.8 * progress, random_prob=0.6 * (1 - progress)
        )
    else:
        is_expert = np.random.default_rng(seed).random(n_episodes) < expert_ratio
        ep = collect_episodes(key, n_episodes, random_prob=np.where(is_expert, 0.0, 1.0))
    done = np.zeros(ep["act"].shape[:2], np.float32)
    return OfflineDataset(kind, ep["obs"], ep["act"], done, ep["reward"])


@functools.cache
def reference_returns(
    reward: str = "dense", n_episodes: int = 50, seed: int = 12345
) -> tuple[float, float]:
    """(random, expert) mean episode returns under the hidden reward, for normalised scores
    ``100 (R − R_random) / (R_expert − R_random)`` (D4RL's ``ref_min_score``/``ref_max_score``)."""
    check_choice(reward, "reward", REWARDS)
    out = []
    for kind in ("random", "expert"):
        ds = make_dataset(kind, n_episodes, seed=seed)
        r = np.asarray(hidden_reward(ds.obs[:, :-1], ds.act, reward)).sum(-1)
        out.append(float(r.mean()))
    return out[0], out[1]


# IPL / Preference-Transformer feedback files: obs_1, obs_2 (M, L(+1), d), action_1, action_2
# (M, L, k), label (M,) with 1 meaning the second segment is preferred — our segment 1.
_NPZ_KEYS = ("obs_1", "obs_2", "action_1", "action_2", "label")


def save_npz_pairs(pairs: SegmentPairs, path: str | os.PathLike[str]) -> Path:
    """Write labelled pairs in the IPL/PT ``.npz`` schema (plus ``done_1``/``done_2``)."""
    check_labels(pairs.label)
    path = Path(path)
    np.savez_compressed(
        path,
        obs_1=pairs.obs0, obs_2=pairs.obs1, action_1=pairs.act0, action_2=pairs.act1,
        done_1=pairs.done0, done_2=pairs.done1, label=pairs.label,
    )  # fmt: skip
    return path


def load_npz_pairs(path: str | os.PathLike[str]) -> SegmentPairs:
    """Read labelled pairs from an IPL/PT-style ``.npz``; observations need L + 1 steps.

    Raises ``ValueError`` for missing keys, mismatched shapes, NaN/inf values or labels outside
    {0, 0.5, 1}; the file is never unpickled.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ValueError(f"{path} is not a NumPy .npz file ({err})") from err
    missing = [k for k in _NPZ_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path} lacks key(s) {missing}; expected {list(_NPZ_KEYS)}")
    o0, o1, a0, a1 = (np.asarray(data[k], np.float32) for k in _NPZ_KEYS[:4])
    for name, x in (("obs_1", o0), ("obs_2", o1), ("action_1", a0), ("action_2", a1)):
        check_array(x, f"{path.name}:{name}", ndim=3)
    if (
        o0.shape != o1.shape
        or a0.shape != a1.shape
        or o0.shape[:2] != (a0.shape[0], a0.shape[1] + 1)
    ):
        raise ValueError(
            f"{path}: need obs (M, L+1, d) and actions (M, L, k) for both segments, got "
            f"obs {o0.shape}/{o1.shape}, actions {a0.shape}/{a1.shape}"
        )
    label = check_labels(np.asarray(data["label"], np.float32).reshape(-1))
    if label.shape[0] != o0.shape[0]:
        raise ValueError(f"{path}: {label.shape[0]} labels for {o0.shape[0]} pairs")
    zeros = np.zeros(a0.shape[:2], np.float32)
    d0 = np.asarray(data["done_1"], np.float32) if "done_1" in data else zeros
    d1 = np.asarray(data["done_2"], np.float32) if "done_2" in data else zeros
    return SegmentPairs(o0, a0, d0, o1, a1, d1, label)


# --- minari (the Farama successor of D4RL's format), `[minari]` extra -----------------------------

PENDULUM_SPACES = {"obs": 3, "act": 1}  # what the agents are evaluated on (Pendulum-v1)


def _minari():
    from iclr26.shared import import_optional

    for module in ("h5py", "PIL"):  # minari's HDF5 storage imports both
        import_optional(module, dist="iclr26-pvo", extra="minari", purpose="minari datasets")
    return import_optional("minari", dist="iclr26-pvo", extra="minari", purpose="minari datasets")


class _DatasetsPath:
    """Point minari at ``root`` (its ``MINARI_DATASETS_PATH``) for the duration of a call."""

    def __init__(self, root: str | os.PathLike[str] | None):
        self.root, self.old = root, None

    def __enter__(self):
        if self.root is not None:
            self.old = os.environ.get("MINARI_DATASETS_PATH")
            os.environ["MINARI_DATASETS_PATH"] = str(Path(self.root).resolve())

    def __exit__(self, *exc):
        if self.root is not None:
            if self.old is None:
                os.environ.pop("MINARI_DATASETS_PATH", None)
            else:
                os.environ["MINARI_DATASETS_PATH"] = self.old


def save_minari(
    dataset: OfflineDataset,
    dataset_id: str,
    *,
    root: str | os.PathLike[str] | None = None,
    author: str | None = None,
    author_email: str | None = None,
) -> Path:
    """Write ``dataset`` as a local minari dataset ``dataset_id`` (``"namespace/name-v0"``) for
    Pendulum-v1, with D4RL-style reference scores of the dense reward; returns its folder.

    ``root`` is the minari datasets folder (default: minari's own, ``MINARI_DATASETS_PATH`` or
    ``~/.minari/datasets``). An existing id is refused; nothing is written before the
    dependencies are known to import.
    """
    if not isinstance(dataset, OfflineDataset):
        raise TypeError(f"dataset must be an OfflineDataset, got {type(dataset).__name__}")
    if not isinstance(dataset_id, str) or not dataset_id.rsplit("-v", 1)[-1].isdigit():
        raise ValueError(f"dataset_id must look like 'namespace/name-v0', got {dataset_id!r}")
    minari = _minari()
    from minari.data_collector import EpisodeBuffer

    with _DatasetsPath(root):
        if dataset_id in minari.list_local_datasets():
            raise ValueError(f"minari dataset {dataset_id!r} already exists; choose another id")
        buffers = []
        for e in range(dataset.act.shape[0]):
            term = dataset.done[e] > 0
            trunc = np.zeros_like(term)
            trunc[-1] = not term[-1]
            buffers.append(
                EpisodeBuffer(
                    id=e,
                    observations=dataset.obs[e].astype(np.float32),
                    actions=dataset.act[e].astype(np.float32),
                    rewards=dataset.reward[e].astype(np.float64),
                    terminations=term,
                    truncations=trunc,
                )
            )
        lo, hi = reference_returns("dense")
        with warnings.catch_warnings():  # minari's "author is recommended" notes, not problems
            warnings.filterwarnings("ignore", message=r"`author", category=UserWarning)
            ds = minari.create_dataset_from_buffers(
                dataset_id, buffers, env="Pendulum-v1", eval_env="Pendulum-v1",
                algorithm_name=f"iclr26-pvo scripted {dataset.name}", author=author,
                author_email=author_email, ref_min_score=lo, ref_max_score=hi,
                description=f"Pendulum-v1 {dataset.name} data from iclr26-pvo's scripted policies",
            )  # fmt: skip
        return Path(ds.spec.data_path).parent


def load_minari(
    source: str | os.PathLike[str],
    *,
    episode_length: int | None = None,
    root: str | os.PathLike[str] | None = None,
) -> OfflineDataset:
    """Read a *local* minari dataset (an id such as ``"pendulum/expert-v0"`` or its folder) into
    an :class:`OfflineDataset`; nothing is downloaded.

    Episodes must share one length, or ``episode_length`` crops longer ones and drops shorter
    ones (with a log line). Observations and actions must fit Pendulum-v1 (3 and 1 dims), the
    environment policies are evaluated in; rewards must be finite.
    """
    minari = _minari()
    path = Path(source)
    with _DatasetsPath(root):
        if path.is_dir():
            data = path / "data" if (path / "data").is_dir() else path
            if not (data / "metadata.json").is_file():
                raise ValueError(f"{path} is not a minari dataset folder (no metadata.json)")
            ds = minari.MinariDataset(str(data))
        else:
            local = minari.list_local_datasets()
            if str(source) not in local:
                raise ValueError(
                    f"no local minari dataset {str(source)!r} (nothing is downloaded); "
                    f"local ids: {sorted(local) or 'none'}"
                )
            ds = minari.load_dataset(str(source), download=False)
        episodes = list(ds.iterate_episodes())
    if not episodes:
        raise ValueError(f"minari dataset {str(source)!r} has no episodes")
    lengths = np.array([len(ep.actions) for ep in episodes])
    if episode_length is None:
        if len(set(lengths.tolist())) > 1:
            raise ValueError(
                f"episodes have lengths {sorted(set(lengths.tolist()))}; pass episode_length= to "
                "crop longer episodes and drop shorter ones"
            )
        episode_length = int(lengths[0])
    check_int(episode_length, "episode_length", low=1)
    keep = [ep for ep, n in zip(episodes, lengths, strict=True) if n >= episode_length]
    if len(keep) < len(episodes):
        log.info("dropped %d of %d episodes shorter than %d steps", len(episodes) - len(keep),
                 len(episodes), episode_length)  # fmt: skip
    if not keep:
        raise ValueError(f"no episode has {episode_length} steps (longest: {lengths.max()})")
    t = episode_length
    obs = np.stack([np.asarray(ep.observations)[: t + 1] for ep in keep]).astype(np.float32)
    act = np.stack([np.asarray(ep.actions)[:t] for ep in keep]).astype(np.float32)
    if obs.ndim != 3 or act.ndim != 3:
        raise ValueError(
            "only flat Box observations and continuous Box actions are supported, got "
            f"observations {obs.shape[1:]} and actions {act.shape[1:]} per episode"
        )
    if (obs.shape[-1], act.shape[-1]) != (PENDULUM_SPACES["obs"], PENDULUM_SPACES["act"]):
        raise ValueError(
            f"the dataset has observation dim {obs.shape[-1]} and action dim {act.shape[-1]}; "
            f"Pendulum-v1, which policies are evaluated in, has {PENDULUM_SPACES['obs']} and "
            f"{PENDULUM_SPACES['act']}"
        )
    reward = np.stack([np.asarray(ep.rewards)[:t] for ep in keep]).astype(np.float32)
    if not np.isfinite(reward).all():
        raise ValueError(f"minari dataset {str(source)!r} has NaN or infinite rewards")
    done = np.stack([np.asarray(ep.terminations)[:t] for ep in keep]).astype(np.float32)
    name = str(source) if not path.is_dir() else path.name
    return OfflineDataset(name, obs, act, done, reward)
