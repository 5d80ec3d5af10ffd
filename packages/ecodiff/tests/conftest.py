import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny ops: one thread is faster than two on a shared 2-core machine
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def small_dit(seed: int = 0, layers: int = 2, dtype=torch.float64):
    from diffusers import DiTTransformer2DModel

    torch.manual_seed(seed)
    m = DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=1, num_layers=layers,
        sample_size=8, patch_size=2, num_embeds_ada_norm=10, norm_num_groups=1,
    )  # fmt: skip
    # ada_norm_zero initialises the block gates to zero-ish only in training; perturb all
    # weights so every unit matters
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m.to(dtype).eval()


@pytest.fixture
def dit():
    return small_dit()


@pytest.fixture
def make_dit():
    return small_dit
