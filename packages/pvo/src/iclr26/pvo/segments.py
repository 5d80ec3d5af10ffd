"""Segments that never cross episodes, pairs of them, and the teachers that label pairs.

Label convention (IPL's and this package's): ``label = 1`` means segment 1 (``obs1``/``act1``)
is preferred, ``0`` segment 0, ``0.5`` a tie. Every segment has ``L`` actions and ``L + 1``
observations, so ``V(s_{L+1})`` exists; Pendulum episodes end by truncation, so no segment
holds a terminal step and masks are all ones (the ``done`` field is kept for data that has them).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.shared import check_array, check_int, check_range

__all__ = ["TEACHERS", "SegmentPairs", "label_pairs", "sample_segment_pairs", "segment_returns"]

TEACHERS = ("script", "bt", "mistake")


class SegmentPairs(NamedTuple):
    """A batch of segment pairs: obs (M, L+1, d), act (M, L, k), done (M, L), label (M,)."""

    obs0: np.ndarray
    act0: np.ndarray
    done0: np.ndarray
    obs1: np.ndarray
    act1: np.ndarray
    done1: np.ndarray
    label: np.ndarray

    @property
    def size(self) -> int:
        return int(self.label.shape[0])

    def take(self, idx: np.ndarray) -> SegmentPairs:
        """The pairs at ``idx`` (a subset or a resample)."""
        return SegmentPairs(*(np.asarray(x)[idx] for x in self))


def _check_episodes(obs: np.ndarray, act: np.ndarray) -> tuple[int, int]:
    check_array(obs, "obs", ndim=3)
    check_array(act, "act", ndim=3)
    if obs.shape[0] != act.shape[0] or obs.shape[1] != act.shape[1] + 1:
        raise ValueError(
            "episodes need obs (E, T+1, d) and act (E, T, k) with the same E and T; "
            f"got obs {obs.shape} and act {act.shape}"
        )
    return obs.shape[0], act.shape[1]


def sample_segment_pairs(
    obs: np.ndarray,
    act: np.ndarray,
    n_pairs: int,
    *,
    length: int = 25,
    seed: int = 0,
    done: np.ndarray | None = None,
) -> SegmentPairs:
    """Sample ``n_pairs`` pairs of length-``length`` segments from episodes, never crossing one.

    Args:
        obs: (E, T+1, d) observations of E episodes of T steps.
        act: (E, T, k) actions.
        n_pairs: number of pairs M.
        length: segment length L (paper: 25), at most T.
        seed: sampling seed.
        done: optional (E, T) termination flags (1 where the step ends the episode for real).

    Returns:
        :class:`SegmentPairs` with ``label`` set to NaN (unlabelled; see :func:`label_pairs`).
    """
    n_ep, horizon = _check_episodes(np.asarray(obs), np.asarray(act))
    check_int(n_pairs, "n_pairs", low=1)
    check_int(length, "length", low=1, high=horizon)
    done = np.zeros(act.shape[:2], np.float32) if done is None else np.asarray(done, np.float32)
    check_array(done, "done", shape=act.shape[:2])
    rng = np.random.default_rng(seed)
    ep = rng.integers(0, n_ep, size=(2, n_pairs))
    start = rng.integers(0, horizon - length + 1, size=(2, n_pairs))
    steps = start[..., None] + np.arange(length)
    o = obs[ep[..., None], start[..., None] + np.arange(length + 1)]
    a = act[ep[..., None], steps]
    d = done[ep[..., None], steps]
    nan = np.full(n_pairs, np.nan, np.float32)
    return SegmentPairs(o[0], a[0], d[0], o[1], a[1], d[1], nan)


def segment_returns(pairs: SegmentPairs, reward_fn) -> tuple[np.ndarray, np.ndarray]:
    """Hidden returns (R⁰, R¹) of each pair under ``reward_fn(obs, act) -> (...)``."""
    r0 = np.asarray(reward_fn(jnp.asarray(pairs.obs0[:, :-1]), jnp.asarray(pairs.act0))).sum(-1)
    r1 = np.asarray(reward_fn(jnp.asarray(pairs.obs1[:, :-1]), jnp.asarray(pairs.act1))).sum(-1)
    return r0, r1


def label_pairs(
    pairs: SegmentPairs,
    reward_fn,
    *,
    teacher: str = "script",
    beta: float = 1.0,
    mistake_prob: float = 0.0,
    ties: str = "half",
    seed: int = 0,
) -> SegmentPairs:
    """Label pairs by a teacher that sees the hidden returns (after B-Pref, Lee et al. 2021).

    Args:
        pairs: unlabelled pairs.
        reward_fn: the hidden reward, ``(obs, act) -> reward``.
        teacher: ``"script"`` (1[R¹ > R⁰]), ``"bt"`` (Bernoulli(σ(β (R¹ − R⁰) / scale)), scale
            the mean |R¹ − R⁰|), or ``"mistake"`` (script labels flipped with ``mistake_prob``).
        beta: BT rationality; as β → ∞ BT equals the script teacher.
        mistake_prob: flip probability of the ``"mistake"`` teacher, in [0, 1].
        ties: ``"half"`` labels equal returns 0.5; ``"drop"`` removes those pairs.
        seed: teacher randomness.
    """
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {TEACHERS}, got {teacher!r}")
    if ties not in ("half", "drop"):
        raise ValueError(f"ties must be 'half' or 'drop', got {ties!r}")
    check_range(beta, "beta", low=0, low_inclusive=False)
    check_range(mistake_prob, "mistake_prob", low=0, high=1)
    r0, r1 = segment_returns(pairs, reward_fn)
    rng = np.random.default_rng(seed)
    diff = r1 - r0
    tie = np.isclose(r0, r1, rtol=0, atol=1e-6)
    label = np.where(diff > 0, 1.0, 0.0)
    if teacher == "bt":
        scale = np.mean(np.abs(diff)) + 1e-12
        label = (rng.random(diff.shape) < 1 / (1 + np.exp(-beta * diff / scale))).astype(float)
    elif teacher == "mistake":
        flip = rng.random(diff.shape) < mistake_prob
        label = np.where(flip, 1.0 - label, label)
    label = np.where(tie, 0.5, label).astype(np.float32)
    out = pairs._replace(label=label)
    if ties == "drop":
        out = out.take(np.flatnonzero(~tie))
    return out


def check_labels(label: np.ndarray) -> np.ndarray:
    """Labels must be 0, 0.5 or 1 (no NaN: unlabelled pairs cannot train a reward model)."""
    label = np.asarray(label)
    bad = ~np.isin(label, (0.0, 0.5, 1.0))
    if bad.any():
        raise ValueError(
            f"preference labels must be 0, 0.5 or 1; {int(bad.sum())} of {label.size} are not "
            f"(first: {label[bad][0]!r})"
        )
    return label.astype(np.float32)


def stack_pairs(pairs: SegmentPairs) -> dict[str, jax.Array]:
    """Pairs as a dict of device arrays, for jitted updates."""
    return {k: jnp.asarray(v) for k, v in pairs._asdict().items()}
