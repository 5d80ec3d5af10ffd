"""The FLOP count behind bench's sampler limit."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from iclr26.maskgrpo import TinyMaskedDenoiser, load_pretrained
from iclr26.maskgrpo.experiments import denoiser_matmuls


@pytest.mark.parametrize(
    "model",
    [load_pretrained("sort8"), TinyMaskedDenoiser(11, 9, d_model=32, n_layers=3, n_heads=8)],
    ids=["shipped sort8", "d32 3 layers 8 heads"],
)
def test_denoiser_matmuls_counts_the_flops_torch_counts(model):
    """The products listed by denoiser_matmuls add up to the FLOPs torch's own counter sees in a
    (module-path) forward, and their shapes are those the forward multiplies."""
    batch, length = 3, model.config["max_len"]
    x = torch.randint(0, model.config["vocab_size"], (batch, length))
    with FlopCounterMode(display=False) as counter:
        model(x)
    mms = denoiser_matmuls(model.config, batch, length)
    assert sum(m[3] for m in mms) == counter.get_total_flops()
    for _name, a, b, flops in mms:
        assert a[-1] == b[-2]
        assert flops == 2 * torch.Size(a).numel() * b[-1]
    assert len(mms) == 6 * model.config["n_layers"] + 1
