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
    assert demos["obs"].shape == (4, 40, 151)
    assert evaluate_peer(MEMORY, _Replay(demos["action"]), 4, seed=3) == 1.0
    assert evaluate_peer(MEMORY, _Constant(ACTION_CODES[0]), 4, seed=3) == 0.0  # spins in place


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
