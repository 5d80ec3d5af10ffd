"""Schedule, re-masking statistics and seed sharing of the MaskGRPO estimator (spec §5.5)."""

import itertools
import math

import pytest
import torch

from iclr26.maskgrpo import (
    MaskGRPOConfig,
    ar_like_keep_probs,
    ar_like_remask,
    build_estimator_inputs,
    d1_perturb,
    iteration_seed,
    kappa,
    mask_ratio_schedule,
    random_remask,
)

MASK = 12


@pytest.mark.parametrize(
    ("m", "t_min", "expected"),
    [
        (4, 0.6, [0.7, 0.8, 0.9, 0.999]),
        (1, 0.6, [0.999]),
        (2, 0.5, [0.75, 0.999]),
        (12, 0.6, [0.6 + 0.4 * (i + 1) / 12 for i in range(11)] + [0.999]),
        (3, 0.3, [0.3 + 0.7 / 3, 0.3 + 1.4 / 3, 0.999]),
    ],
)
def test_mask_ratio_schedule_values(m, t_min, expected):
    got = [mask_ratio_schedule(i, m, t_min) for i in range(m)]
    assert got == pytest.approx(expected, abs=1e-12)
    assert all(t > t_min for t in got)  # truncated: never at or below t_min (code's (μ+1)/M)
    assert got == sorted(got)


def test_kappa_cosine_and_linear():
    assert kappa(0, 12) == 1.0
    assert kappa(12, 12) == 0.0
    assert kappa(6, 12) == pytest.approx(math.cos(math.pi / 4))
    assert kappa(3, 4, "linear") == pytest.approx(0.25)


def _seqs(b, p=5, n=8):
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 10, (b, p + n), generator=g)


@pytest.mark.parametrize("t", [0.5, 0.6, 0.8, 0.95])
def test_ar_like_remask_statistics(t):
    n_draws, p, n = 10_000, 5, 8
    seqs = _seqs(n_draws, p, n)
    noised, mask = ar_like_remask(seqs, p, t, MASK, generator=1)
    # prompt never masked, masked completion tokens are exactly the mask
    assert torch.equal(noised[:, :p], seqs[:, :p])
    assert torch.equal(noised[:, p:] == MASK, mask)
    assert torch.equal(noised[:, p:][~mask], seqs[:, p:][~mask])
    # expected masked fraction t (no clamping for t >= 0.5), within 3 sigma
    q = ar_like_keep_probs(n, t)
    var = float((q * (1 - q)).sum()) / (n**2 * n_draws)
    frac = mask.double().mean().item()
    assert abs(frac - t) < 3 * math.sqrt(var) + 1e-12
    # per-position probabilities non-decreasing in position, and matched empirically
    want = (1 - q).numpy()
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(want))
    emp = mask.double().mean(0).numpy()
    sd = (want * (1 - want) / n_draws) ** 0.5
    assert (abs(emp - want) <= 4 * sd + 1e-9).all()
    assert emp[-1] == 1.0  # the last token is always masked


def test_ar_like_clamps_below_half():
    q = ar_like_keep_probs(8, 0.2)
    assert q.max() == 1.0  # clamped keep probabilities: more is masked than t asks for
    assert (1 - q).mean() > 0.2


def test_random_remask_and_d1_rates():
    seqs = _seqs(20_000, 6, 4)
    _, mask = random_remask(seqs, 6, 0.3, MASK, generator=3)
    assert abs(mask.double().mean().item() - 0.3) < 4 * math.sqrt(0.21 / mask.numel())
    noised, mask = d1_perturb(seqs, 6, 0.15, MASK, generator=4)
    assert mask.all()
    assert (noised[:, 6:] == MASK).all()  # completion fully masked
    rate = (noised[:, :6] == MASK).double().mean().item()
    assert abs(rate - 0.15) < 4 * math.sqrt(0.15 * 0.85 / (20_000 * 6))
    kept = noised[:, :6] != MASK
    assert torch.equal(noised[:, :6][kept], seqs[:, :6][kept])


def test_same_seed_same_mask_on_any_batch_position():
    seqs = _seqs(64)
    a = ar_like_remask(seqs, 5, 0.7, MASK, generator=123)
    b = ar_like_remask(seqs, 5, 0.7, MASK, generator=torch.Generator().manual_seed(123))
    assert torch.equal(a[0], b[0])
    c = ar_like_remask(seqs, 5, 0.7, MASK, generator=124)
    assert not torch.equal(a[1], c[1])


@pytest.mark.parametrize("estimator", ["maskgrpo", "uniform", "d1"])
def test_seed_sharing_across_passes_and_iterations(estimator):
    seqs = _seqs(32)
    cfg = MaskGRPOConfig(estimator=estimator, num_iterations=4, seed=7)
    per_iter = []
    for mu in range(4):
        old = build_estimator_inputs(seqs, 5, MASK, cfg, step=3, iteration=mu, pass_index=0)
        ref = build_estimator_inputs(seqs, 5, MASK, cfg, step=3, iteration=mu, pass_index=1)
        cur = build_estimator_inputs(seqs, 5, MASK, cfg, step=3, iteration=mu, pass_index=2)
        assert torch.equal(old[0], ref[0])
        assert torch.equal(old[0], cur[0])
        per_iter.append(hash(old[0].numpy().tobytes()))
    assert len(set(per_iter)) == 4  # different iterations see different masks
    other_step = build_estimator_inputs(seqs, 5, MASK, cfg, step=4, iteration=0)
    assert not torch.equal(other_step[0], build_estimator_inputs(seqs, 5, MASK, cfg, 3, 0)[0])


def test_unfixed_seeds_differ_across_passes():
    seqs = _seqs(32)
    cfg = MaskGRPOConfig(fixed_mask_seeds=False)
    a = build_estimator_inputs(seqs, 5, MASK, cfg, 0, 1, pass_index=0)
    b = build_estimator_inputs(seqs, 5, MASK, cfg, 0, 1, pass_index=1)
    assert not torch.equal(a[1], b[1])


def test_maskgrpo_estimator_follows_schedule():
    seqs = _seqs(4000)
    cfg = MaskGRPOConfig(num_iterations=4, min_mask_rate=0.6)
    for mu, t in enumerate([0.7, 0.8, 0.9, 0.999]):
        _, mask = build_estimator_inputs(seqs, 5, MASK, cfg, 0, mu)
        assert abs(mask.double().mean().item() - t) < 0.02


def test_iteration_seed_is_deterministic_and_distinct():
    assert iteration_seed(0, 1, 2) == iteration_seed(0, 1, 2)
    seeds = {iteration_seed(0, s, mu) for s in range(10) for mu in range(10)}
    assert len(seeds) == 100
