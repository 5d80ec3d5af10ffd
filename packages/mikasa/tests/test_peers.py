"""Scripted experts and scoring on the peer memory benchmarks (popgym, MiniGrid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("popgym")
pytest.importorskip("minigrid")

from iclr26.mikasa.peers import ACTION_CODES, PEERS, evaluate_peer, peer_demos

REPEAT, MEMORY = PEERS


class _Replay:
    """Plays recorded action codes, one episode after the other (seeds in the same order)."""

    def __init__(self, actions):
        self.actions, self.e = actions, -1

    def reset(self, n):
        self.e, self.t = self.e + 1, 0

    def act(self, obs):
        a = self.actions[self.e, self.t]
        self.t += 1
        return a[None]


class _Constant:
    def __init__(self, code):
        self.code = code

    def reset(self, n):
        pass

    def act(self, obs):
        return self.code[None]


def test_repeat_previous_expert_names_the_card_three_steps_back():
    demos = peer_demos(REPEAT, 3, seed=7)
    assert demos["obs"].shape == (3, 51, 4)
    cards = demos["obs"].argmax(-1)
    codes = ((demos["action"][..., None, :] - ACTION_CODES) ** 2).sum(-1).argmin(-1)
    np.testing.assert_array_equal(codes[:, 3:], cards[:, :-3])
    assert evaluate_peer(REPEAT, _Replay(demos["action"]), 3, seed=7) == 1.0


def test_repeat_previous_memoryless_scores_chance():
    # naming the current card is right only when it repeats the one 3 steps back (~1/4)
    class Echo:
        def reset(self, n):
            pass

        def act(self, obs):
            return ACTION_CODES[[int(obs[0].argmax())]]

    score = evaluate_peer(REPEAT, Echo(), 40, seed=0)
    assert 0.19 < score < 0.31  # 40 x 48 scored steps: chance 0.25 ± 3 standard errors


def test_minigrid_expert_reaches_the_matching_object():
    demos = peer_demos(MEMORY, 4, seed=3)  # raises if the expert misses
    assert demos["obs"].shape == (4, 20, 7 * 7 * 11 + 4)
    assert demos["mask"].shape == (4, 20)
    assert demos["mask"][:, 0].all()
    assert evaluate_peer(MEMORY, _Replay(demos["action"]), 4, seed=3) == 1.0
    assert evaluate_peer(MEMORY, _Constant(ACTION_CODES[0]), 4, seed=3) == 0.0  # spins in place


def test_minigrid_expert_looks_at_the_cue_before_it_goes():
    # the agent starts facing the hallway; from every start cell but the first the cue is
    # behind it, so the expert turns left (action 0) until the start-room object is in view
    import gymnasium as gym
    import minigrid  # noqa: F401

    demos = peer_demos(MEMORY, 24, seed=0)
    env = gym.make("MiniGrid-MemoryS7-v0")
    codes = ((demos["action"][..., None, :] - ACTION_CODES[:3]) ** 2).sum(-1).argmin(-1)
    turned = 0
    for e in range(24):
        env.reset(seed=e)
        u = env.unwrapped
        cue = type(u.grid.get(1, u.height // 2 - 1)).__name__.lower()  # "key" or "ball"
        seen_at_start = bool(u.agent_sees(1, u.height // 2 - 1))
        n = int(demos["mask"][e].sum())
        # the cue's type is in view at some step the demonstration records
        types = demos["obs"][e, :n, : 7 * 7 * 11].reshape(n, 49, 11).argmax(-1)
        seen = False
        for t in range(n):
            env.reset(seed=e)
            for a in codes[e, :t]:
                env.step(int(a))
            seen |= bool(env.unwrapped.agent_sees(1, u.height // 2 - 1))
        assert seen, e
        assert ({"key": 5, "ball": 6}[cue] == types).any()
        if not seen_at_start:  # then the first action is a left turn
            turned += 1
            assert codes[e, 0] == 0
    assert turned > 0


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: peer_demos("CartPole-v1", 2), "name"),
        (lambda: peer_demos(REPEAT, 0), "n_episodes"),
        (lambda: evaluate_peer(MEMORY, _Constant(ACTION_CODES[0]), 2.0), "n_episodes"),
        (lambda: peer_demos(REPEAT, 2, seed=-1), "seed"),
    ],
)
def test_peer_bad_input(call, needle):
    with pytest.raises((ValueError, TypeError), match=needle):
        call()


@pytest.mark.slow
def test_minigrid_bc_gru_beats_bc_mlp_once_the_expert_looks_at_the_cue():
    """With an expert that looks at the cue, BC-GRU learns MemoryS7 and BC-MLP stays near 0.5."""
    import torch

    from iclr26.mikasa.agents import BC

    torch.set_num_threads(1)
    demos = peer_demos(MEMORY, 100, seed=0)
    got = {}
    for kind in ("mlp", "gru"):
        bc = BC(kind, hidden=64, epochs=60, batch_size=16, seed=0).fit(demos)
        got[kind] = evaluate_peer(MEMORY, bc, 60, seed=100_000)
    assert got["gru"] >= got["mlp"] + 0.3
    assert got["mlp"] <= 0.65
