"""The leak probe: can a classifier read the target from observations it should not reveal it in?

A fixed cue-independent policy (zeros or seeded random actions) is rolled out; a multinomial
logistic regression (scikit-learn) is fitted to predict the first target's ``oracle_info`` from
single observations of one phase and scored on held-out *episodes*. In ``memory`` mode,
observations after the cue must carry no more than the chance level (the target is one of the K
visible candidates: 1/K), while cue-phase observations must reveal it (accuracy ≈ 1, so the cue is
really shown) and ``state`` observations must too (so the probe has power). This is the class of
bug the official suite fixed in its commit "showed target position on RGB images".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iclr26.mikasa.kinematic import KinematicVectorEnv, check_seed
from iclr26.mikasa.tasks import CUE_STEPS, get_spec

__all__ = ["leak_probe"]


def leak_probe(
    env_id: str,
    *,
    phase: str = "after_cue",
    obs_mode: str = "memory",
    policy: str | Any = "zeros",
    n_episodes: int = 400,
    steps_per_episode: int = 3,
    test_fraction: float = 0.3,
    seed: int = 0,
    **env_kwargs: Any,
) -> dict[str, float]:
    """Held-out accuracy of predicting the target from one observation of ``phase``.

    Args:
        env_id: a tabletop task id.
        phase: ``"cue"`` (steps t < 5, while the first target is shown) or ``"after_cue"`` (t >= cue_end: delay and act).
        obs_mode: ``memory`` or ``state``.
        policy: ``"zeros"``, ``"random"`` (seeded uniform actions) or an object with
            ``reset(n)`` / ``act(obs)`` (it sees the observations of ``obs_mode``).
        n_episodes: episodes (split by episode into train and test).
        steps_per_episode: observations sampled per episode from the phase.
        test_fraction: share of episodes held out.
        seed: seed of the episodes, the random policy and the sampling.
        **env_kwargs: passed to the kinematic environment (``hold_until_act``, ...).

    Returns:
        ``{"accuracy", "chance", "majority", "n_train", "n_test"}``; ``chance`` is 1/K.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    spec = get_spec(env_id)
    if phase not in ("cue", "after_cue"):
        raise ValueError(f"phase must be 'cue' or 'after_cue'; got {phase!r}")
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 10:
        raise ValueError(f"n_episodes must be an int >= 10, got {n_episodes!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    seed = check_seed(seed) or 0
    rng = np.random.default_rng(seed)
    env = KinematicVectorEnv(spec, n_episodes, obs_mode=obs_mode, **env_kwargs)
    obs, info = env.reset(seed=seed)
    label = info["oracle_info"][:, 0].copy()
    if isinstance(policy, str):
        if policy not in ("zeros", "random"):
            raise ValueError(f"policy must be 'zeros', 'random' or an object; got {policy!r}")
        kind, policy = policy, None
    else:
        kind = "object"
        policy.reset(n_episodes)
    # the first target is shown during the first 5 steps (all tasks, Seq/Chain included)
    lo, hi = (0, CUE_STEPS) if phase == "cue" else (spec.cue_end, spec.T)
    steps = np.sort(
        rng.choice(np.arange(lo, hi), size=min(steps_per_episode, hi - lo), replace=False)
    )
    taken = []
    for t in range(hi):
        if t in steps:
            taken.append(obs.copy())
        if kind == "zeros":
            a = np.zeros((n_episodes, 3))
        elif kind == "random":
            a = rng.uniform(-1, 1, size=(n_episodes, 3))
        else:
            a = policy.act(obs)
        obs, *_ = env.step(a)
    x = np.stack(taken, 1)  # (E, steps, dim)
    n_test = max(1, round(test_fraction * n_episodes))
    order = rng.permutation(n_episodes)
    test, train = order[:n_test], order[n_test:]
    xs = lambda idx: x[idx].reshape(-1, x.shape[-1])  # noqa: E731
    ys = lambda idx: np.repeat(label[idx], x.shape[1])  # noqa: E731
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500, C=1.0))
    clf.fit(xs(train), ys(train))
    acc = float((clf.predict(xs(test)) == ys(test)).mean())
    counts = np.bincount(ys(train))
    majority = float((ys(test) == counts.argmax()).mean())
    return {
        "accuracy": acc,
        "chance": 1.0 / spec.n_candidates,
        "majority": majority,
        "n_train": len(train),
        "n_test": int(n_test),
    }
