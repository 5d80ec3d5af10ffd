"""One bad input per entry of the README API table: a clear error naming the argument."""

import pytest
import torch

import iclr26.maskgrpo as mg

S = torch.randint(0, 10, (4, 8))
LP = torch.zeros(4, 3, dtype=torch.double)
MASK = torch.ones(4, 3, dtype=torch.bool)
ADV = torch.zeros(4, dtype=torch.double)
TINY = mg.TinyMaskedDenoiser(13, 17, d_model=8, n_layers=1, n_heads=2)
TASK = mg.Sort8()

CASES = {
    "mask_ratio_schedule iteration": (
        lambda: mg.mask_ratio_schedule(4, 4),
        ValueError,
        "iteration",
    ),
    "mask_ratio_schedule min_mask_rate": (
        lambda: mg.mask_ratio_schedule(0, 4, 1.2),
        ValueError,
        "min_mask_rate",
    ),
    "kappa schedule": (lambda: mg.kappa(1, 4, "sqrt"), ValueError, "schedule"),
    "ar_like_remask float seqs": (
        lambda: mg.ar_like_remask(S.float(), 5, 0.7, 12),
        TypeError,
        "seqs",
    ),
    "ar_like_remask ratio": (lambda: mg.ar_like_remask(S, 5, 1.5, 12), ValueError, "ratio"),
    "ar_like_remask prompt_len": (
        lambda: mg.ar_like_remask(S, 8, 0.7, 12),
        ValueError,
        "prompt_len",
    ),
    "random_remask ratio NaN": (
        lambda: mg.random_remask(S, 5, float("nan"), 12),
        ValueError,
        "ratio",
    ),
    "d1_perturb p_mask_prompt": (
        lambda: mg.d1_perturb(S, 5, -0.1, 12),
        ValueError,
        "p_mask_prompt",
    ),
    "iteration_seed step": (lambda: mg.iteration_seed(0, -1, 0), ValueError, "step"),
    "policy_logits input": (lambda: mg.policy_logits(TINY, S.float()), TypeError, "input_ids"),
    "policy_logits bad output": (
        lambda: mg.policy_logits(torch.nn.Identity(), S),
        ValueError,
        "policy must return",
    ),
    "TinyMaskedDenoiser heads": (
        lambda: mg.TinyMaskedDenoiser(13, 8, d_model=10, n_heads=4),
        ValueError,
        "divisible",
    ),
    "TinyMaskedDenoiser context": (
        lambda: TINY(torch.zeros(1, 30, dtype=torch.long)),
        ValueError,
        "context",
    ),
    "TinyMaskedDenoiser pos_std": (
        lambda: mg.TinyMaskedDenoiser(13, 8, d_model=8, n_heads=2, pos_std=0.0),
        ValueError,
        "pos_std",
    ),
    "TinyMaskedDenoiser ids": (lambda: TINY(torch.full((1, 3), 13)), ValueError, "input_ids"),
    "save_denoiser model": (
        lambda: mg.save_denoiser(torch.nn.Linear(1, 1), "x.safetensors"),
        TypeError,
        "model",
    ),
    "load_denoiser path": (lambda: mg.load_denoiser("/nonexistent/m.safetensors"), OSError, "path"),
    "masked_token_logps shape": (
        lambda: mg.masked_token_logps(TINY, S[:, :5], S, 5),
        ValueError,
        "noised",
    ),
    "group_advantages NaN": (
        lambda: mg.group_advantages(torch.tensor([1.0, float("nan")]), 2),
        ValueError,
        "finite",
    ),
    "group_advantages group_size": (
        lambda: mg.group_advantages(torch.ones(4), 1),
        ValueError,
        "group_size",
    ),
    "group_advantages length": (
        lambda: mg.group_advantages(torch.ones(5), 2),
        ValueError,
        "multiple",
    ),
    "group_advantages scale": (
        lambda: mg.group_advantages(torch.ones(4), 2, "z"),
        ValueError,
        "scale",
    ),
    "rank_rewards type": (lambda: mg.rank_rewards([1.0, 2.0], 2), TypeError, "rewards"),
    "clipped_surrogate advantages": (
        lambda: mg.clipped_surrogate(LP, LP, ADV[:3], MASK),
        ValueError,
        "advantages",
    ),
    "clipped_surrogate mask": (
        lambda: mg.clipped_surrogate(LP, LP, ADV, MASK[:, :2]),
        ValueError,
        "mask",
    ),
    "clipped_surrogate epsilon": (
        lambda: mg.clipped_surrogate(LP, LP, ADV, MASK, epsilon=0.0),
        ValueError,
        "epsilon",
    ),
    "clipped_surrogate ref": (
        lambda: mg.clipped_surrogate(LP, LP, ADV, MASK, beta=0.1),
        ValueError,
        "ref_logps",
    ),
    "clipped_surrogate loss_agg": (
        lambda: mg.clipped_surrogate(LP, LP, ADV, MASK, loss_agg="sum"),
        ValueError,
        "loss_agg",
    ),
    "check_loss_inputs binary mask": (
        lambda: mg.check_loss_inputs(LP, LP, ADV, MASK.double() * 0.5, binary_mask=True),
        ValueError,
        "mask must be 0/1",
    ),
    "check_loss_inputs NaN old_logps": (
        lambda: mg.check_loss_inputs(LP, LP * float("nan"), ADV, MASK),
        ValueError,
        "old_logps must be finite",
    ),
    "gmpo_surrogate old": (
        lambda: mg.gmpo_surrogate(LP, LP[:2], ADV, MASK),
        ValueError,
        "old_logps",
    ),
    "k3_kl ints": (
        lambda: mg.k3_kl(torch.ones(2, dtype=torch.long), torch.ones(2)),
        TypeError,
        "logps",
    ),
    "low_confidence block_length": (
        lambda: mg.low_confidence_block_sample(TINY, S[:, :9], 8, 12, block_length=3),
        ValueError,
        "block_length",
    ),
    "low_confidence steps": (
        lambda: mg.low_confidence_block_sample(TINY, S[:, :9], 8, 12, steps=9),
        ValueError,
        "steps",
    ),
    "emerge masked prompt": (
        lambda: mg.emerge_sample(TINY, torch.full((2, 3), 12), 4, 12),
        ValueError,
        "mask token",
    ),
    "emerge cfg": (
        lambda: mg.emerge_sample(TINY, S[:, :3], 4, 12, cfg_scale=1.0),
        ValueError,
        "uncond_ids",
    ),
    "maskgit temperature": (
        lambda: mg.maskgit_sample(TINY, S[:, :3], 4, 12, temperature=0.0),
        ValueError,
        "temperature",
    ),
    "Sudoku4 n_blanks": (lambda: mg.Sudoku4(n_blanks=0), ValueError, "n_blanks"),
    "Task reward shape": (
        lambda: TASK.reward(TASK.sample_prompts(2, 0), torch.zeros(2, 3, dtype=torch.long)),
        ValueError,
        "completions",
    ),
    "Task sample_prompts n": (lambda: TASK.sample_prompts(0, 0), ValueError, "n must"),
    "get_task name": (lambda: mg.get_task("chess"), ValueError, "task"),
    "mdlm_loss seqs": (
        lambda: mg.mdlm_loss(TINY, S.float(), 5, 12, torch.Generator()),
        TypeError,
        "seqs",
    ),
    "pretrain_denoiser task": (lambda: mg.pretrain_denoiser(TINY, "sort8"), TypeError, "task"),
    "pretrain_denoiser steps": (
        lambda: mg.pretrain_denoiser(TINY, TASK, steps=0),
        ValueError,
        "steps",
    ),
    "MaskGRPOConfig estimator": (
        lambda: mg.MaskGRPOConfig(estimator="gdpo"),
        ValueError,
        "estimator",
    ),
    "MaskGRPOConfig num_generations": (
        lambda: mg.MaskGRPOConfig(num_generations=1),
        ValueError,
        "num_generations",
    ),
    "MaskGRPOConfig num_iterations float": (
        lambda: mg.MaskGRPOConfig(num_iterations=2.0),
        TypeError,
        "num_iterations",
    ),
    "MaskGRPOConfig min_mask_rate": (
        lambda: mg.MaskGRPOConfig(min_mask_rate=0.0),
        ValueError,
        "min_mask_rate",
    ),
    "MaskGRPOTrainer policy": (lambda: mg.MaskGRPOTrainer("model", TASK), TypeError, "policy"),
    "MaskGRPOTrainer task": (lambda: mg.MaskGRPOTrainer(TINY, "sort8"), TypeError, "task"),
    "MaskGRPOTrainer.step prompts": (
        lambda: mg.MaskGRPOTrainer(TINY, TASK).step(torch.zeros(2, 9)),
        TypeError,
        "prompts",
    ),
    "MaskGRPOTrainer.train steps": (
        lambda: mg.MaskGRPOTrainer(TINY, TASK).train(-1),
        ValueError,
        "num_steps",
    ),
    "MaskGRPOTrainer.load_checkpoint": (
        lambda: mg.MaskGRPOTrainer(TINY, TASK).load_checkpoint("/nonexistent.pt"),
        OSError,
        "checkpoint",
    ),
    "build_estimator_inputs step": (
        lambda: mg.build_estimator_inputs(S, 5, 12, mg.MaskGRPOConfig(), -1, 0),
        ValueError,
        "step",
    ),
    "load_pretrained task": (lambda: mg.load_pretrained("chess"), ValueError, "task"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_api_rejects_bad_input(name):
    fn, exc, match = CASES[name]
    with pytest.raises(exc, match=match):
        fn()
