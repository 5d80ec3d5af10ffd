"""iclr26-maskgrpo: MaskGRPO — GRPO for masked discrete diffusion models (ICLR 2026).

The masking-aware importance estimator (truncated mask-ratio schedule, AR-like or random
re-masking with seeds shared by the old, reference and current passes), the clipped GRPO loss on
masked tokens, the diffu-GRPO / uniform-remask / M = 1 baselines, the emerge, MaskGIT and LLaDA
low-confidence samplers, a pure-torch trainer and verifiable toy tasks, in PyTorch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-maskgrpo")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "schedules": ["kappa", "mask_ratio_schedule"],
        "remask": [
            "ar_like_keep_probs", "ar_like_remask", "d1_perturb", "iteration_seed", "random_remask",
        ],
        "policy": [
            "MaskedDiffusionPolicy", "TinyMaskedDenoiser", "load_denoiser", "policy_logits",
            "save_denoiser",
        ],
        "logprob": ["masked_token_logps"],
        "advantages": ["group_advantages", "rank_rewards"],
        "loss": ["LossInputs", "check_loss_inputs", "clipped_surrogate", "gmpo_surrogate", "k3_kl"],
        "sampling": ["emerge_sample", "low_confidence_block_sample", "maskgit_sample"],
        "tasks": ["Add3", "DigitsT2I", "Sort8", "Sudoku4", "Task", "get_task"],
        "pretrain": ["mdlm_loss", "pretrain_denoiser"],
        "trainer": ["ESTIMATORS", "MaskGRPOConfig", "MaskGRPOTrainer", "build_estimator_inputs"],
        "data": ["load_pretrained", "pretrained_path"],
        "lora": ["TINY_LORA_TARGETS", "is_adapter_policy", "lora_policy"],
    },
)  # fmt: skip
__all__ += ["__version__"]
