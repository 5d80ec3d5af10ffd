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


Z, ONE, A2 = torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: decode_ids([12]), ValueError, "not a digit"),
        (lambda: decode_ids(torch.tensor([1.0])), TypeError, "ids"),
        (lambda: encode_text("12a"), ValueError, "characters"),
        (lambda: encode_text(12), TypeError, "text"),
        (lambda: task_reward_func("sort8"), TypeError, "task"),
        (lambda: task_reward_func(Sort8())(["1|"], ["1"]), ValueError, "prompt"),
        (lambda: task_reward_func(Sort8())(["12345678|"], ["12345678", "1"]), ValueError, "differ in length"),
        (lambda: task_reward_func(Sort8())("12345678|", "12345678"), TypeError, "lists of strings"),
        # the loss checks are clipped_surrogate's (one validation, the same messages)
        (lambda: trl_grpo_loss(Z, Z, torch.zeros(3), ONE), ValueError, r"advantages must be a tensor of shape \(2,\)"),
        (lambda: trl_grpo_loss(Z, Z, A2, torch.full((2, 3), 0.5)), ValueError, "mask must be 0/1"),
        (lambda: trl_grpo_loss(Z, Z, A2, ONE, beta=0.1), ValueError, "ref_logps is required when beta > 0"),
        (lambda: trl_grpo_loss(Z, Z, A2, ONE, beta=0.1, ref_logps=Z[:1]), ValueError, "ref_logps must be a tensor shaped like logps"),
        (lambda: trl_grpo_loss(Z, Z, A2, ONE, epsilon=0), ValueError, "epsilon"),
        (lambda: trl_grpo_loss(Z, Z, A2, ONE, loss_agg="x"), ValueError, "loss_agg"),
        (lambda: trl_grpo_loss(Z.long(), Z, A2, ONE), TypeError, "logps must be a floating-point"),
        (lambda: trl_grpo_loss(Z, Z[:, :2], A2, ONE), ValueError, "old_logps must be a tensor shaped like logps"),
        (lambda: trl_grpo_loss(torch.full((2, 3), float("nan")), Z, A2, ONE), ValueError, "logps must be finite"),
    ],
)  # fmt: skip
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"advantages": torch.zeros(3)},
        {"mask": torch.ones(2, 2)},
        {"beta": 0.1},
        {"beta": 0.1, "ref_logps": torch.zeros(1, 3)},
        {"epsilon": -1.0},
        {"loss_agg": "sum"},
        {"logps": torch.zeros(2, 3, dtype=torch.long)},
        {"old_logps": torch.zeros(2, 2)},
        {"logps": torch.tensor([[0.0, float("inf"), 0.0]] * 2)},
        {"advantages": torch.tensor([0.0, float("nan")])},
    ],
)
def test_trl_loss_and_clipped_surrogate_reject_alike(kwargs):
    """One validation: the same bad input gets the same error and message from both losses."""
    args = {"logps": Z, "old_logps": Z, "advantages": A2, "mask": ONE, **kwargs}
    errors = []
    for fn in (clipped_surrogate, trl_grpo_loss):
        a = dict(args)
        with pytest.raises((TypeError, ValueError)) as info:
            fn(a.pop("logps"), a.pop("old_logps"), a.pop("advantages"), a.pop("mask"), **a)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]
