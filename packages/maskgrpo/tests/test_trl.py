"""Parity with TRL's GRPOTrainer loss and the TRL reward plug-in (extra ``[trl]``)."""

import pytest
import torch

pytest.importorskip("trl")

from iclr26.maskgrpo import Add3, Sort8, clipped_surrogate
from iclr26.maskgrpo.trl_adapter import (
    decode_ids,
    encode_text,
    task_reward_func,
    trl_grpo_loss,
)


def _inputs(seed, b=6, length=8):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, length, generator=g, dtype=torch.float64) * 3
    # ratios on both sides of the clip range, so clipping binds for some tokens
    logps = (old + 0.6 * torch.randn(b, length, generator=g, dtype=torch.float64)).requires_grad_()
    ref = old + 0.3 * torch.randn(b, length, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    mask = torch.rand(b, length, generator=g) < 0.5
    mask[:, 0] = True  # every sequence has a credited token (TRL's "grpo" averages all rows)
    return logps, old, ref, adv, mask


@pytest.mark.parametrize("loss_agg", ["token_mean", "seq_mean"])
@pytest.mark.parametrize(("epsilon", "epsilon_high", "beta"), [(0.2, None, 0.0), (0.2, 0.28, 0.04)])
def test_loss_and_gradient_match_trl(loss_agg, epsilon, epsilon_high, beta):
    for seed in range(3):
        logps, old, ref, adv, mask = _inputs(seed)
        kw = {"epsilon": epsilon, "epsilon_high": epsilon_high, "beta": beta, "loss_agg": loss_agg}
        ours, s1 = clipped_surrogate(logps, old, adv, mask, ref_logps=ref, **kw)
        (g_ours,) = torch.autograd.grad(ours, logps)
        theirs, s2 = trl_grpo_loss(logps, old, adv, mask, ref_logps=ref, **kw)
        (g_theirs,) = torch.autograd.grad(theirs, logps)
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g_ours, g_theirs, rtol=1e-12, atol=1e-12)
        assert s1["clip_frac"] > 0
        assert s1["clip_frac"] == pytest.approx(s2["clip_frac"])
        assert s1["kl"] == pytest.approx(s2["kl"])
        # masked-only credit survives TRL's code path: zero gradient off the mask
        assert (g_theirs[~mask] == 0).all()


def test_trl_loss_differs_when_mask_ignored():
    """The parity above is not vacuous: TRL's all-token loss (d1-style credit) differs."""
    logps, old, _, adv, mask = _inputs(0)
    ours, _ = clipped_surrogate(logps, old, adv, mask)
    all_tokens, _ = trl_grpo_loss(logps, old, adv, torch.ones_like(mask))
    assert not torch.isclose(ours, all_tokens)


def test_text_round_trip_and_reward_func():
    task = Sort8()
    prompts = task.sample_prompts(4, 0)
    texts = [decode_ids(p) for p in prompts]
    assert all(t.endswith("|") and len(t) == 9 for t in texts)
    assert torch.equal(torch.stack([encode_text(t) for t in texts]), prompts)
    sols = [decode_ids(s) for s in task.solutions(prompts)]
    wrong = sols[1][::-1] if sols[1] != sols[1][::-1] else "9" * 8
    completions = [sols[0], wrong, sols[2][:-1], " ".join(sols[3])]
    reward = task_reward_func(task)
    assert reward(texts, completions, completion_ids=None) == [1.0, 0.0, 0.0, 1.0]
    score = task_reward_func(task, partial=True)(texts, completions)
    assert score[0] == 1.0
    assert 0.0 <= score[1] < 1.0
    assert score[2] == 0.0
    add = Add3()
    p = add.sample_prompts(1, 0)
    assert task_reward_func(add)([decode_ids(p[0])], [decode_ids(add.solutions(p)[0])]) == [1.0]


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda: decode_ids([12]), ValueError),
        (lambda: decode_ids(torch.tensor([1.0])), TypeError),
        (lambda: encode_text("12a"), ValueError),
        (lambda: encode_text(12), TypeError),
        (lambda: task_reward_func("sort8"), TypeError),
        (lambda: task_reward_func(Sort8())(["1|"], ["1"]), ValueError),
        (lambda: task_reward_func(Sort8())(["12345678|"], ["12345678", "1"]), ValueError),
        (lambda: task_reward_func(Sort8())("12345678|", "12345678"), TypeError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3)), ValueError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.full((2, 3), 0.5)), ValueError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), beta=0.1), ValueError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), epsilon=0), ValueError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3), loss_agg="x"), ValueError),
        (lambda: trl_grpo_loss(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3)), TypeError),
        (lambda: trl_grpo_loss(torch.full((2, 3), float("nan")), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 3)), ValueError),
    ],
)  # fmt: skip
def test_bad_inputs(call, exc):
    with pytest.raises(exc):
        call()
