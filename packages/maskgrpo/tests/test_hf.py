"""A Hugging Face masked LM, saved and re-loaded through its own loader, trains as a policy."""

import pytest
import torch

transformers = pytest.importorskip("transformers")


@pytest.mark.slow
def test_bert_for_masked_lm_policy(tmp_path):
    from iclr26.maskgrpo import MaskGRPOConfig, MaskGRPOTrainer, Sort8

    task = Sort8(n_digits=4)
    cfg = transformers.BertConfig(
        vocab_size=13, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.BertForMaskedLM(cfg).save_pretrained(tmp_path / "bert")
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "bert")
    before = [p.detach().clone() for p in model.parameters()]
    tr = MaskGRPOTrainer(model, task, MaskGRPOConfig(num_generations=4, num_iterations=2, seed=0))
    rec = tr.step(task.sample_prompts(3, 0))
    assert 0.0 <= rec["reward"] <= 1.0
    if rec["zero_std_frac"] < 1.0:
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
