"""Samplers: emerge statistics, uniformity, low-confidence order, prompt never touched."""

import math

import pytest
import torch

from iclr26.maskgrpo import (
    emerge_sample,
    kappa,
    low_confidence_block_sample,
    maskgit_sample,
)

MASK, V = 12, 13


class Recorder(torch.nn.Module):
    """Uniform logits over the vocabulary; records the masked count of every call's input."""

    def __init__(self):
        super().__init__()
        self.counts = []

    def forward(self, ids):
        self.counts.append((ids == MASK).double().mean().item())
        return torch.zeros(*ids.shape, V)


class Oracle(torch.nn.Module):
    """Knows the answer; its confidence rises with position (so high positions go first)."""

    def __init__(self, answer):
        super().__init__()
        self.answer = answer

    def forward(self, ids):
        b, t = ids.shape
        logits = torch.zeros(b, t, V)
        pos = torch.arange(t, dtype=torch.float32)
        logits.scatter_(
            2, self.answer[:, :, None].expand(b, t, 1), (1.0 + pos)[None, :, None].expand(b, t, 1)
        )
        return logits


def test_emerge_reveals_tokens_at_the_kappa_rate():
    pol = Recorder()
    prompts = torch.full((4000, 3), 5)
    out = emerge_sample(pol, prompts, 16, MASK, steps=8, generator=0)
    assert not (out == MASK).any()
    assert torch.equal(out[:, :3], prompts)
    # masked fraction (over the generated part) before step s is κ_s
    frac = [c * 19 / 16 for c in pol.counts]
    for s, f in enumerate(frac):
        k = kappa(s, 8)
        sd = math.sqrt(max(k * (1 - k), 1e-12) / (4000 * 16))
        assert abs(f - k) < 5 * sd + 1e-12, (s, f, k)


def test_emerge_uniform_policy_gives_uniform_tokens():
    out = emerge_sample(Recorder(), torch.zeros(3000, 2, dtype=torch.long), 8, MASK, generator=1)[
        :, 2:
    ]
    counts = torch.bincount(out.reshape(-1), minlength=V).double()
    assert counts[MASK] == 0
    expected = out.numel() / (V - 1)
    chi2 = (((counts[:MASK] - expected) ** 2) / expected).sum().item()
    assert chi2 < 40  # 11 degrees of freedom: p ≈ 3e-5 at 40


def test_emerge_is_seeded():
    p = torch.zeros(5, 2, dtype=torch.long)
    a = emerge_sample(Recorder(), p, 6, MASK, generator=3)
    b = emerge_sample(Recorder(), p, 6, MASK, generator=3)
    c = emerge_sample(Recorder(), p, 6, MASK, generator=4)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_low_confidence_unmasks_most_confident_first_and_finds_the_answer():
    answer = torch.randint(0, 10, (3, 10), generator=torch.Generator().manual_seed(0))
    answer[:, :4] = torch.tensor([1, 2, 3, 10])
    seen = []

    class Spy(Oracle):
        def forward(self, ids):
            seen.append(ids.clone())
            return super().forward(ids)

    out = low_confidence_block_sample(Spy(answer), answer[:, :4], 6, MASK, steps=3, temperature=0.0)
    assert torch.equal(out, answer)
    # 2 tokens per step, from the highest position (most confident) down
    assert ((seen[1][:, 4:] == MASK).sum(1) == 4).all()
    assert (seen[1][:, 8:] != MASK).all()
    assert (seen[1][:, 4:8] == MASK).all()


def test_low_confidence_blocks_go_left_to_right():
    answer = torch.randint(0, 10, (2, 12), generator=torch.Generator().manual_seed(1))
    answer[:, :4] = 3
    seen = []

    class Spy(Oracle):
        def forward(self, ids):
            seen.append(ids.clone())
            return super().forward(ids)

    out = low_confidence_block_sample(
        Spy(answer), answer[:, :4], 8, MASK, block_length=4, steps=4, temperature=0.0
    )
    assert torch.equal(out, answer)
    # after the first block's two steps, the second block is still fully masked
    assert (seen[2][:, 4:8] != MASK).all()
    assert (seen[2][:, 8:] == MASK).all()


@pytest.mark.parametrize("sampler", [emerge_sample, maskgit_sample])
def test_samplers_fill_everything_and_keep_prompt(sampler):
    prompts = torch.randint(0, 10, (7, 4), generator=torch.Generator().manual_seed(2))
    out = sampler(Recorder(), prompts, 9, MASK, steps=5, generator=5)
    assert out.shape == (7, 13)
    assert torch.equal(out[:, :4], prompts)
    assert not (out == MASK).any()


def test_maskgit_count_schedule():
    pol = Recorder()
    maskgit_sample(pol, torch.zeros(50, 2, dtype=torch.long), 16, MASK, steps=4, generator=0)
    masked = [round(c * 18 * 1) for c in pol.counts]  # masked tokens per row before each step
    want = [16] + [math.floor(16 * math.cos(math.pi / 2 * s / 4)) for s in (1, 2, 3)]
    assert masked == want


def test_classifier_free_guidance_combines_logits():
    class Cond(torch.nn.Module):
        def forward(self, ids):
            logits = torch.zeros(*ids.shape, V)
            cond = (ids[:, :1] == 1).float()  # conditional prompt favours token 4, uncond token 7
            logits[..., 4] += 2 * cond
            logits[..., 7] += 2 * (1 - cond) + 1.0 * cond
            return logits

    p = torch.ones(2000, 1, dtype=torch.long)
    unc = torch.zeros(1, dtype=torch.long)
    plain = emerge_sample(Cond(), p, 4, MASK, generator=0)[:, 1:]
    guided = emerge_sample(Cond(), p, 4, MASK, cfg_scale=3.0, uncond_ids=unc, generator=0)[:, 1:]
    assert (guided == 4).double().mean() > (plain == 4).double().mean() + 0.2
    assert (guided == 7).double().mean() < 0.01


def _reference_low_confidence(
    policy, prompt_ids, gen_length, mask_id, block_length, steps, tau, seed
):
    """The 0.3.0 sampler, float64 work on every position (kept to pin the faster one to it)."""
    g = torch.Generator().manual_seed(seed)
    p = prompt_ids.shape[1]
    x = torch.cat([prompt_ids, torch.full((len(prompt_ids), gen_length), mask_id)], 1)
    blocks = gen_length // block_length
    per_block = steps // blocks
    base, rem = divmod(block_length, per_block)
    counts = [base + (1 if i < rem else 0) for i in range(per_block)]
    with torch.no_grad():
        for b in range(blocks):
            lo, hi = p + b * block_length, p + (b + 1) * block_length
            for n_s in counts:
                if n_s == 0:
                    continue
                logits = policy(x).double()
                logits[..., mask_id] = -math.inf
                if tau > 0:
                    u = torch.rand(logits.shape, generator=g, dtype=torch.float64)
                    u = u.clamp_(1e-20, 1.0 - 1e-16)
                    logits_n = logits + tau * (-torch.log(-torch.log(u)))
                else:
                    logits_n = logits
                x0 = logits_n.argmax(-1)
                conf = torch.softmax(logits, -1).gather(-1, x0[..., None]).squeeze(-1)
                masked = x == mask_id
                conf = torch.where(masked, conf, -math.inf)
                conf[:, :lo] = -math.inf
                conf[:, hi:] = -math.inf
                top = conf.topk(n_s, dim=1).indices
                sel = torch.zeros_like(masked).scatter_(1, top, True) & masked
                x = torch.where(sel, x0, x)
    return x


@pytest.mark.parametrize(
    ("block", "steps", "tau"), [(8, 8, 0.9), (4, 4, 0.9), (8, 4, 0.0), (2, 8, 1.3)]
)
def test_low_confidence_sampler_equals_the_full_width_reference(block, steps, tau):
    """Restricting the float64 work to the current block changes no sample (same stream)."""
    from iclr26.maskgrpo import TinyMaskedDenoiser

    torch.manual_seed(0)
    pol = TinyMaskedDenoiser(V, 17, d_model=16, n_layers=1, n_heads=2).eval()
    prompts = torch.randint(0, 10, (16, 9), generator=torch.Generator().manual_seed(1))
    ref = _reference_low_confidence(pol, prompts, 8, MASK, block, steps, tau, seed=7)
    out = low_confidence_block_sample(
        pol, prompts, 8, MASK, block_length=block, steps=steps, temperature=tau, generator=7
    )
    assert torch.equal(out, ref)
