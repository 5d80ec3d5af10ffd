"""Native MIKASA-Base-style classics: the passive T-maze and bsuite's memory chain.

* :class:`TMaze` (MIKASA-Base ``T-Maze-v0``, after Bakker 2001 / Ni et al. 2023's passive
  T-maze): at t = 0 the agent sees a cue (up or down); it walks a corridor of ``corridor_length``
  cells and must turn toward the cued side at the junction. Reward 1 for the right turn, 0 for the
  wrong one, and the episode ends there; an episode also ends after ``episode_length`` steps.
  Observation: (cue up, cue down, at junction, position / corridor_length); the cue entries are
  zero after t = 0. Actions: 0 right (forward), 1 up, 2 down, 3 left.
* :class:`MemoryLength` (MIKASA-Base ``MemoryLength*-v0`` = bsuite ``memory_chain``): ``num_bits``
  context bits are shown at t = 0, then ``memory_length`` steps of a countdown; at the last step a
  query names one bit and the action (0/1) must equal it: reward +1, else -1.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np

from iclr26.mikasa.kinematic import check_seed

__all__ = ["MemoryLength", "TMaze"]


def _check_positive(value: int, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


class TMaze(gym.Env):
    """Passive T-maze; see the module docstring. Chance success of a cue-blind agent: 1/2."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, corridor_length: int = 10, episode_length: int | None = None) -> None:
        self.corridor_length = _check_positive(corridor_length, "corridor_length")
        if episode_length is None:
            episode_length = self.corridor_length + 1
        self.episode_length = _check_positive(episode_length, "episode_length")
        if self.episode_length < self.corridor_length + 1:
            raise ValueError(
                f"episode_length must be >= corridor_length + 1 = {self.corridor_length + 1}, "
                f"got {episode_length}"
            )
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self._done = True

    def _obs(self) -> np.ndarray:
        cue = np.zeros(2, np.float32)
        if self._t == 0:
            cue[self._cue] = 1.0
        at_junction = float(self._pos == self.corridor_length)
        return np.array([*cue, at_junction, self._pos / self.corridor_length], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_seed(seed)
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(2))
        self._pos, self._t, self._done = 0, 0, False
        return self._obs(), {"oracle_info": self._cue, "success": False}

    def step(self, action):
        if self._done:
            raise gym.error.ResetNeeded("step() after the episode ended: call reset() first")
        if not self.action_space.contains(int(action) if np.ndim(action) == 0 else action):
            raise ValueError(f"action must be in {{0, 1, 2, 3}}, got {action!r}")
        action = int(action)
        self._t += 1
        reward, terminated, success = 0.0, False, False
        if self._pos == self.corridor_length and action in (1, 2):
            success = (action - 1) == self._cue
            reward, terminated = float(success), True
        elif action == 0:
            self._pos = min(self._pos + 1, self.corridor_length)
        elif action == 3:
            self._pos = max(self._pos - 1, 0)
        truncated = not terminated and self._t >= self.episode_length
        self._done = terminated or truncated
        info = {"oracle_info": self._cue, "success": success}
        return self._obs(), reward, terminated, truncated, info


class MemoryLength(gym.Env):
    """bsuite memory chain; see the module docstring. Chance success: 1/2."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, memory_length: int = 10, num_bits: int = 1) -> None:
        self.memory_length = _check_positive(memory_length, "memory_length")
        self.num_bits = _check_positive(num_bits, "num_bits")
        # obs: countdown, query flag, context bits (t = 0), query one-hot (last step)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2 + 2 * self.num_bits,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._done = True

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.observation_space.shape, np.float32)
        obs[0] = 1.0 - self._t / self.memory_length
        if self._t == 0:
            obs[2 : 2 + self.num_bits] = 2.0 * self._context - 1.0
        if self._t == self.memory_length:
            obs[1] = 1.0
            obs[2 + self.num_bits + self._query] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_seed(seed)
        super().reset(seed=seed)
        self._context = self.np_random.integers(2, size=self.num_bits)
        self._query = int(self.np_random.integers(self.num_bits))
        self._t, self._done = 0, False
        return self._obs(), {"oracle_info": int(self._context[self._query]), "success": False}

    def step(self, action):
        if self._done:
            raise gym.error.ResetNeeded("step() after the episode ended: call reset() first")
        if not self.action_space.contains(int(action) if np.ndim(action) == 0 else action):
            raise ValueError(f"action must be 0 or 1, got {action!r}")
        reward, terminated, success = 0.0, False, False
        if self._t == self.memory_length:
            success = int(action) == int(self._context[self._query])
            reward, terminated = (1.0 if success else -1.0), True
        else:
            self._t += 1
        self._done = terminated
        info = {"oracle_info": int(self._context[self._query]), "success": success}
        return self._obs(), reward, terminated, False, info
