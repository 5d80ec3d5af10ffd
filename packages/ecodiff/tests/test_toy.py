"""The shipped toy U-Net (E5): weights load, it denoises digits far better than random init,
and the training command writes a loadable file."""

import torch

from iclr26.ecodiff import digits_split, find_prunable_units, toy_scheduler
from iclr26.ecodiff.toy import load_toy_unet, save_toy_unet, train_toy_unet


def _loss(unet, prompts, x, y, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ac = toy_scheduler("ddpm").alphas_cumprod.float()
    t = torch.randint(0, 1000, (len(y),), generator=gen)
    noise = torch.randn(x.shape, generator=gen)
    a = ac[t].view(-1, 1, 1, 1)
    with torch.no_grad():
        out = unet(a.sqrt() * x + (1 - a).sqrt() * noise, t, encoder_hidden_states=prompts[y])
    return float((out.sample - noise).pow(2).mean())


def test_shipped_unet_denoises_digits_and_uses_its_prompts():
    unet, prompts = load_toy_unet()
    assert prompts.shape == (10, 4, 32)
    kinds = {u.kind for u in find_prunable_units(unet)}
    assert kinds == {"heads", "ffn"}
    _, _, x, y = digits_split(0)
    x, y = x[:128], y[:128]
    trained = _loss(unet, prompts, x, y)
    rand_unet, rand_prompts = load_toy_unet(trained=False)
    assert trained < 0.5 * _loss(rand_unet, rand_prompts, x, y)
    # the class prompt matters: the wrong class's prompt denoises worse
    assert trained < _loss(unet, prompts, x, (y + 5) % 10)


def test_train_toy_unet_writes_a_loadable_file(tmp_path):
    unet, prompts = train_toy_unet(steps=2, batch_size=4, seed=1)
    path = save_toy_unet(unet, prompts, tmp_path)
    assert path.stat().st_size < 2 * 2**20
    from safetensors.torch import load_file

    state = load_file(str(path))
    assert state["prompt_embeddings"].shape == (10, 4, 32)
    fresh, _ = load_toy_unet(trained=False)
    state.pop("prompt_embeddings")
    fresh.load_state_dict({k: v.float() for k, v in state.items()})
