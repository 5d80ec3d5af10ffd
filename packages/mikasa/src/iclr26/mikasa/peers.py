"""Memory baselines on established peers: popgym RepeatPreviousEasy and MiniGrid-MemoryS7.

The same behaviour-cloning policies as on our tasks (:class:`iclr26.mikasa.agents.BC`), trained
on scripted experts of two well-known memory benchmarks, calibrate the memory gap: a memoryless
MLP should sit at chance where a recurrent policy solves the task.

* ``popgym-RepeatPreviousEasy-v0``: one card suit per step (4 values); the action must name the
  suit shown k - 1 = 3 steps earlier (popgym's ``k = 4`` counts the current card). 51 steps;
  score = accuracy over the steps popgym rewards; chance 1/4. A window of 4 observations holds
  the answer, so frame-stack(4) should solve it too.
* ``MiniGrid-MemoryS7-v0``: an object is shown in the start room; at the end of the hallway the
  agent must go to the matching one of two objects. Success = reaching it (reward > 0); a
  navigator without the cue succeeds about half the time. The agent starts facing the hallway
  at a random cell of it, from where the cue (behind it) is in view only at the first cell, so
  the scripted expert first turns left until the cue is in view, then takes the shortest path
  to the matching object: an expert that never looked would demonstrate going to the right
  object without ever having seen the cue, which no policy can imitate.

BC regresses 3-d actions, so a discrete action is taken as a fixed code in [-1, 1]^3 (the
vertices of a tetrahedron, 0.8 in magnitude) and decoded by the nearest code — classification by
regression onto well-separated targets. Needs the extra ``[peers]`` (popgym, minigrid).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from iclr26.mikasa.kinematic import check_seed

__all__ = ["ACTION_CODES", "PEERS", "evaluate_peer", "peer_demos"]

PEERS = ("popgym-RepeatPreviousEasy-v0", "MiniGrid-MemoryS7-v0")
#: codes of discrete actions 0..3 (MiniGrid uses 0 = left, 1 = right, 2 = forward)
ACTION_CODES = 0.8 * np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], np.float32)
_K = 4  # popgym RepeatPreviousEasy
_MG_T = 20  # MiniGrid demonstrations are padded to this many steps (the expert needs <= 12)
_MG_MAX_STEPS = 60  # evaluation step limit on MiniGrid-MemoryS7


def _check(name: Any, n: Any) -> None:
    if name not in PEERS:
        raise ValueError(f"name must be one of {PEERS}; got {name!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_episodes must be an int >= 1, got {n!r}")


def _decode(actions: np.ndarray, n_actions: int) -> np.ndarray:
    d = ((np.asarray(actions)[:, None, :] - ACTION_CODES[None, :n_actions]) ** 2).sum(-1)
    return d.argmin(-1)


def _card_obs(card: int) -> np.ndarray:
    return np.eye(4, dtype=np.float32)[card]


_MG_TYPES = 11  # MiniGrid's OBJECT_TO_IDX: unseen, empty, wall, ..., key = 5, ball = 6, ...
_MG_DIM = 7 * 7 * _MG_TYPES + 4


def _grid_obs(obs: dict) -> np.ndarray:
    """The 7×7 view as a one-hot object type per cell, and the direction one-hot (543 values).

    (Colour and state are left out: every object of MemoryS7 is green, and it has no doors.) A
    one-hot type keeps a key and a ball as far apart as any two types; scaled type indices put
    them 0.1 apart.
    """
    hot = np.eye(_MG_TYPES, dtype=np.float32)[obs["image"][..., 0].ravel()]
    return np.concatenate([hot.ravel(), np.eye(4, dtype=np.float32)[obs["direction"]]])


def _cue_in_view(env: Any) -> bool:
    """Whether the agent sees the start-room object (the cue, at (1, height // 2 - 1))."""
    u = env.unwrapped
    return bool(u.agent_sees(1, u.height // 2 - 1))


def _minigrid_env():
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the MiniGrid ids)

    return gym.make("MiniGrid-MemoryS7-v0", max_steps=_MG_MAX_STEPS)


def _expert_path(env: Any) -> list[int]:
    """Shortest left/right/forward action sequence to the matching object's cell (BFS)."""
    u = env.unwrapped
    start = (*map(int, u.agent_pos), int(u.agent_dir))
    goal = tuple(map(int, u.success_pos))
    dirs = ((1, 0), (0, 1), (-1, 0), (0, -1))  # MiniGrid's DIR_TO_VEC
    prev: dict[tuple, tuple | None] = {start: None}
    queue = deque([start])
    while queue:
        x, y, d = s = queue.popleft()
        if (x, y) == goal:
            path = []
            while prev[s] is not None:
                s, a = prev[s]
                path.append(a)
            return path[::-1]
        nx, ny = x + dirs[d][0], y + dirs[d][1]
        cell = u.grid.get(nx, ny)
        moves = [((x, y, (d - 1) % 4), 0), ((x, y, (d + 1) % 4), 1)]
        if (nx, ny) == goal or cell is None or cell.can_overlap():
            moves.append(((nx, ny, d), 2))
        for nxt, a in moves:
            if nxt not in prev:
                prev[nxt] = (s, a)
                queue.append(nxt)
    raise RuntimeError("MiniGrid-MemoryS7: no path to the goal")  # never for this layout


def peer_demos(name: str, n_episodes: int, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Scripted-expert episodes of a peer task: ``obs`` (E, T, D), ``action`` (E, T, 3) codes.

    Episode e uses seed ``seed + e``. RepeatPrevious: T = 51, D = 4 (one-hot suit), the expert
    names the suit shown 3 steps earlier (action 0 before that, unscored). MiniGrid: D = 543
    (the 7×7 view as one-hot object types and the direction one-hot), the shortest path to the
    matching object after turning left until the cue is in view, padded with zeros to T = 40
    (after the episode; causal policies never see the padding before it).
    """
    _check(name, n_episodes)
    seed = check_seed(seed) or 0
    obs_all, act_all, mask_all = [], [], []
    if name == PEERS[0]:
        from popgym.envs.repeat_previous import RepeatPreviousEasy

        env = RepeatPreviousEasy()
        for e in range(n_episodes):
            card, _ = env.reset(seed=seed + e)
            cards, acts, done = [int(card)], [], False
            while not done:
                a = cards[-_K] if len(cards) >= _K else 0
                acts.append(a)
                card, _, done, _, _ = env.step(a)
                if not done:
                    cards.append(int(card))
            obs_all.append(np.stack([_card_obs(c) for c in cards[: len(acts)]]))
            act_all.append(ACTION_CODES[acts])
        return {"obs": np.stack(obs_all), "action": np.stack(act_all)}
    env = _minigrid_env()
    for e in range(n_episodes):
        obs, _ = env.reset(seed=seed + e)
        look = 0
        while not _cue_in_view(env):  # turn left until the cue is in view
            if look == 3:
                raise RuntimeError("the MiniGrid expert did not find the cue")  # a bug if raised
            obs, _, _, _, _ = env.step(0)
            look += 1
        path = [0] * look + _expert_path(env)
        if len(path) > _MG_T:
            raise RuntimeError("the MiniGrid expert path is longer than expected")  # a bug
        obs, _ = env.reset(seed=seed + e)  # replay from the start, recording what it sees
        o = np.zeros((_MG_T, _MG_DIM), np.float32)
        a = np.repeat(ACTION_CODES[2:3], _MG_T, 0)
        m = np.zeros(_MG_T, bool)
        m[: len(path)] = True
        for t, act in enumerate(path):
            o[t] = _grid_obs(obs)
            a[t] = ACTION_CODES[act]
            obs, reward, _, _, _ = env.step(act)
        if not reward > 0:
            raise RuntimeError("the MiniGrid expert did not reach the goal")  # a bug if raised
        obs_all.append(o)
        act_all.append(a)
        mask_all.append(m)
    env.close()
    return {"obs": np.stack(obs_all), "action": np.stack(act_all), "mask": np.stack(mask_all)}


def evaluate_peer(name: str, policy: Any, n_episodes: int = 100, *, seed: int = 0) -> float:
    """Score of ``policy`` (``reset(n)``/``act(obs)`` returning 3-d codes) on a peer task.

    RepeatPrevious: mean accuracy over the scored steps (chance 0.25). MiniGrid-MemoryS7: the
    fraction of episodes that reach the matching object within 60 steps. Episodes run one at a
    time with seeds ``seed + e``.
    """
    _check(name, n_episodes)
    seed = check_seed(seed) or 0
    scores = []
    if name == PEERS[0]:
        from popgym.envs.repeat_previous import RepeatPreviousEasy

        env = RepeatPreviousEasy()
        for e in range(n_episodes):
            card, _ = env.reset(seed=seed + e)
            policy.reset(1)
            right = total = 0
            done = False
            while not done:
                a = int(_decode(policy.act(_card_obs(int(card))[None]), 4)[0])
                card, reward, done, _, _ = env.step(a)
                if reward != 0:
                    total += 1
                    right += reward > 0
            scores.append(right / total)
        return float(np.mean(scores))
    env = _minigrid_env()
    for e in range(n_episodes):
        obs, _ = env.reset(seed=seed + e)
        policy.reset(1)
        done, reward = False, 0.0
        while not done:
            a = int(_decode(policy.act(_grid_obs(obs)[None]), 3)[0])
            obs, reward, term, trunc, _ = env.step(a)
            done = term or trunc
        scores.append(float(reward > 0))
    env.close()
    return float(np.mean(scores))
