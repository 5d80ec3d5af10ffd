"""iclr26-ecodiff: EcoDiff — learnable structured sparsity for vision generative models
(ICLR 2026).

Hard-concrete gates over attention heads and FFN neurons of diffusers models, learned end to end
through the sampler with time-step gradient checkpointing, then selected at any sparsity and
physically removed, without retraining.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-ecodiff")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "gates": ["deterministic_gate", "hard_concrete", "regularizer"],
        "units": ["PrunableUnit", "find_prunable_units", "linear_pair_unit"],
        "masking": ["MaskedModel"],
        "sampler": ["MarkovSampler", "diffusers_model_fn", "from_scheduler"],
        "adjoint": ["SavedTensorMeter", "trajectory_grad"],
        "learn": ["EcoDiffConfig", "NonFiniteLossError", "learn_masks"],
        "select": ["MaskScores", "count_macs", "count_params", "select", "threshold"],
        "materialize": ["ZeroHeadsProcessor", "load_pruned", "materialize", "save_pruned"],
        "baselines": ["magnitude_scores", "random_scores", "taylor_scores"],
        "recover": ["denoising_loss", "lora_recover"],
        "metrics": ["DigitsJudge", "frechet_distance", "mse", "psnr"],
        "toy": ["load_toy", "load_toy_unet", "tiny_dit", "tiny_flux", "tiny_unet", "toy_scheduler",
                "train_toy", "train_toy_unet"],
        "data": ["digits", "digits_split"],
    },
)  # fmt: skip
__all__ += ["__version__"]
