"""LoRA through peft: only adapters train, the reference is the adapter-disabled base, and at
init the wrapped policy has the full model's loss and, through the chain rule, its gradient."""

import pytest
import torch

pytest.importorskip("peft")

from iclr26.maskgrpo import (
    MaskGRPOConfig,
    MaskGRPOTrainer,
    Sort8,
    TinyMaskedDenoiser,
    ar_like_remask,
    clipped_surrogate,
    group_advantages,
    masked_token_logps,
)
from iclr26.maskgrpo.lora import is_adapter_policy, lora_policy

TASK = Sort8(n_digits=4)  # prompt 5, completion 4


def _model(seed=0):
    torch.manual_seed(seed)
    return TinyMaskedDenoiser(TASK.mask_id + 1, 9, d_model=16, n_layers=2, n_heads=2)


def _batch():
    g = torch.Generator().manual_seed(3)
    prompts = TASK.sample_prompts(3, 0)
    comp = torch.randint(0, 10, (12, 4), generator=g)
    seqs = torch.cat([prompts.repeat_interleave(4, 0), comp], 1)
    rewards = TASK.score(seqs[:, :5], seqs[:, 5:]).double()
    noised, mask = ar_like_remask(seqs, 5, 0.8, TASK.mask_id, generator=7)
    return seqs, noised, mask, group_advantages(rewards, 4).float()


def _loss(policy, seqs, noised, mask, adv):
    logps = masked_token_logps(policy, noised, seqs, 5)
    old = (logps.detach() - 0.1).clone()  # off-policy so that the surrogate is not flat
    return clipped_surrogate(logps, old, adv, mask, epsilon=0.2)[0]


def test_lora_at_init_matches_the_full_model_loss_and_gradient():
    full, wrapped = _model(), lora_policy(_model(), r=3, lora_alpha=6, lora_dropout=0.0)
    seqs, noised, mask, adv = _batch()
    torch.testing.assert_close(wrapped(noised), full(noised), rtol=0, atol=0)
    l_full, l_lora = _loss(full, seqs, noised, mask, adv), _loss(wrapped, seqs, noised, mask, adv)
    assert l_full.item() == l_lora.item() != 0.0
    l_full.backward()
    l_lora.backward()
    for i in range(2):
        for name in ("linear1", "linear2"):
            w_grad = getattr(full.encoder.layers[i], name).weight.grad
            lora = getattr(wrapped.base_model.model.encoder.layers[i], name)
            a = lora.lora_A["default"].weight
            b_grad = lora.lora_B["default"].weight.grad
            # W' = W + s·B·A  ⇒  ∂L/∂B = s·(∂L/∂W')·Aᵀ, and ∂L/∂A = 0 while B = 0
            torch.testing.assert_close(b_grad, 2.0 * w_grad @ a.T, rtol=1e-4, atol=1e-7)
            assert float(b_grad.abs().max()) > 0
            assert torch.equal(lora.lora_A["default"].weight.grad, torch.zeros_like(a))
            assert lora.base_layer.weight.grad is None  # frozen


def test_only_adapters_train_and_the_reference_is_the_base():
    base = _model()
    policy = lora_policy(_model(), r=4, lora_alpha=8, lora_dropout=0.0)
    assert is_adapter_policy(policy)
    cfg = MaskGRPOConfig(num_generations=4, num_iterations=2, learning_rate=1e-2, seed=0)
    tr = MaskGRPOTrainer(policy, TASK, cfg)
    assert tr.ref_policy is None  # no second copy: the adapter-disabled base
    before = {n: q.detach().clone() for n, q in policy.named_parameters()}
    for _ in range(3):
        tr.step(TASK.sample_prompts(4, tr.step_count))
    changed = {n for n, q in policy.named_parameters() if not torch.equal(before[n], q)}
    assert changed, "no parameter moved"
    assert all("lora_" in n for n in changed)
    assert any("lora_B" in n for n in changed)
    seqs, noised, _, _ = _batch()
    with torch.no_grad():
        ref = tr.reference_logps(noised, seqs)
        torch.testing.assert_close(ref, masked_token_logps(base, noised, seqs, 5))
        # the trained adapters act in inference (fused-kernel) mode as in training mode
        policy.eval()
        moved = masked_token_logps(policy, noised, seqs, 5)
    assert float((moved - ref).abs().max()) > 1e-4
    with torch.enable_grad():
        torch.testing.assert_close(masked_token_logps(policy, noised, seqs, 5).detach(), moved)


def test_lora_checkpoint_resumes(tmp_path):
    cfg = MaskGRPOConfig(num_generations=4, num_iterations=2, seed=0)
    a = MaskGRPOTrainer(lora_policy(_model(), r=2, lora_dropout=0.0), TASK, cfg)
    a.train(2, prompts_per_step=2, checkpoint_path=tmp_path / "run.pt")
    b = MaskGRPOTrainer(lora_policy(_model(), r=2, lora_dropout=0.0), TASK, cfg)
    assert b.load_checkpoint(tmp_path / "run.pt") == 2
    for (n, p), q in zip(a.policy.named_parameters(), b.policy.parameters(), strict=True):
        assert torch.equal(p, q), n


def test_attention_adapters_are_used_and_out_proj_alone_is_refused():
    policy = lora_policy(_model(), r=2, lora_dropout=0.0, target_modules=["self_attn"])
    attn = policy.base_model.model.encoder.layers[0].self_attn
    with torch.no_grad():
        attn.lora_B["default"].weight.fill_(0.5)
    _, noised, _, _ = _batch()
    with torch.no_grad():
        assert float((policy(noised) - _model()(noised)).abs().max()) > 1e-3
    with pytest.raises(ValueError, match="out_proj"):
        lora_policy(_model(), target_modules=["out_proj"])


def test_hf_masked_lm_with_default_targets(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        vocab_size=TASK.mask_id + 1, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "bert")
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "bert")
    policy = lora_policy(model, r=2, lora_dropout=0.0)  # peft's Bert default: query, value
    before = {n: q.detach().clone() for n, q in policy.named_parameters()}
    tr = MaskGRPOTrainer(policy, TASK, MaskGRPOConfig(num_generations=4, num_iterations=2))
    rec = {"zero_std_frac": 1.0}
    for _ in range(3):
        rec = tr.step(TASK.sample_prompts(4, tr.step_count))
        if rec["zero_std_frac"] < 1.0:
            break
    changed = {n for n, q in policy.named_parameters() if not torch.equal(before[n], q)}
    assert changed
    assert all("lora_" in n for n in changed)
    assert any("query" in n for n in changed)
    assert any("value" in n for n in changed)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"r": 0}, ValueError, "r"),
        ({"lora_dropout": 1.0}, ValueError, "lora_dropout"),
        ({"lora_alpha": -1}, ValueError, "lora_alpha"),
        ({"target_modules": []}, ValueError, "target_modules"),
        ({"target_modules": ["nothing_here"]}, ValueError, "target_modules"),
    ],
)
def test_lora_bad_inputs(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        lora_policy(_model(), **kwargs)


def test_lora_needs_targets_for_an_unknown_module_and_refuses_a_second_wrap():
    with pytest.raises(TypeError, match="policy"):
        lora_policy("model")
    with pytest.raises(ValueError, match="target_modules is required"):
        lora_policy(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    with pytest.raises(ValueError, match="already"):
        lora_policy(lora_policy(_model(), r=2))
    with pytest.raises(ValueError, match="ref_sync_steps"):
        MaskGRPOTrainer(lora_policy(_model(), r=2), TASK, MaskGRPOConfig(ref_sync_steps=2))
