"""Spec tests 6–7: the variance law of linear synthesis, and the noise wrapper."""

import asyncio

import numpy as np
import pytest

from iclr26.analytica import NoisyGrounder, Proof, Proposition, make_spr_world, synthesize_batch


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_root_variance_matches_sigma2_sum_path_weights2(depth):
    # Away from the clipping bounds (errata): truths in [0.3, 0.7], σ = 0.05.
    w = make_spr_world(1, depth=depth, branching=3, truth_range=(0.3, 0.7), seed=depth)
    sigma = 0.05
    rng = np.random.default_rng(depth)
    draws = np.clip(
        w.leaf_truth[0] + rng.normal(0, sigma, size=(10_000, w.leaf_truth.shape[1])), 0, 1
    )
    vals, ids = synthesize_batch(w.tree, draws)
    measured = vals[:, ids.index("P0")].var(ddof=1)
    predicted = sigma**2 * sum(v**2 for v in w.root_weights().values())
    assert measured == pytest.approx(predicted, rel=0.05)
    # and far below one holistic judgement with the same noise
    assert measured < sigma**2 / 2


class Fixed:
    def __init__(self, p):
        self.p = p

    async def ground(self, prop):
        return Proof(self.p, "fixed")


def ground_many(g, props):
    async def go():
        return [await g.ground(p) for p in props]

    return [p.p_true for p in asyncio.run(go())]


def test_sigma_zero_is_identity():
    props = [Proposition("P1", "x", date="2020-01-01")] * 5
    assert ground_many(NoisyGrounder(Fixed(0.37), 0.0, seed=1), props) == [0.37] * 5


def test_outputs_stay_in_unit_interval_and_are_seeded():
    props = [Proposition(f"P{i}", f"s{i}", date="2020-01-01") for i in range(1, 200)]
    a = ground_many(NoisyGrounder(Fixed(0.95), 0.3, seed=7), props)
    b = ground_many(NoisyGrounder(Fixed(0.95), 0.3, seed=7), props)
    c = ground_many(NoisyGrounder(Fixed(0.95), 0.3, seed=8), props)
    assert a == b
    assert a != c
    assert min(a) >= 0
    assert max(a) <= 1
    assert max(a) == 1.0
    # Unclipped draws have the configured spread.
    mid = ground_many(NoisyGrounder(Fixed(0.5), 0.05, seed=3), props)
    assert np.std(mid) == pytest.approx(0.05, rel=0.15)


def test_draws_do_not_depend_on_completion_order():
    props = [Proposition(f"P{i}", f"s{i}", date="2020-01-01") for i in range(1, 30)]
    g1, g2 = NoisyGrounder(Fixed(0.5), 0.2, seed=2), NoisyGrounder(Fixed(0.5), 0.2, seed=2)
    forward = dict(zip([p.pid for p in props], ground_many(g1, props), strict=True))
    backward = dict(zip([p.pid for p in props[::-1]], ground_many(g2, props[::-1]), strict=True))
    assert forward == backward


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_noise_level_is_validated(bad):
    with pytest.raises(ValueError, match="sigma"):
        NoisyGrounder(Fixed(0.5), bad)
