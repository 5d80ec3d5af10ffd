import json

import pytest
import torch
from torch import nn

from iclr26.spice import RandomProjector, per_sample_grads, select_params
from iclr26.spice.models import MLP, CharTransformer, CharVocab

torch.set_num_threads(1)


def xent(call, sample):
    x, y = sample
    return nn.functional.cross_entropy(call(x), y)


def loop_reference(model, X, y, names):
    rows = []
    params = dict(model.named_parameters())
    for i in range(len(y)):
        model.zero_grad()
        nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        rows.append(torch.cat([params[n].grad.reshape(-1) for n in names]))
    return torch.stack(rows)


def test_vmap_and_loop_equal_single_example_backward():
    torch.manual_seed(0)
    model = MLP(8, 3, hidden=5).eval()
    X, y = torch.randn(7, 8), torch.randint(0, 3, (7,))
    names = [n for n, _ in model.named_parameters()]
    ref = loop_reference(model, X, y, names)
    for method, chunk in (("vmap", None), ("vmap", 3), ("loop", None)):
        G = per_sample_grads(model, xent, (X, y), method=method, chunk_size=chunk)
        torch.testing.assert_close(G, ref, atol=1e-6, rtol=1e-5)


def test_restricting_to_trainable_parameters():
    model = MLP(8, 3, hidden=5).eval()
    model.net[0].requires_grad_(False)
    X, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    G = per_sample_grads(model, xent, (X, y))
    assert G.shape == (4, 5 * 3 + 3)
    names = ["net.2.weight", "net.2.bias"]
    torch.testing.assert_close(
        G, per_sample_grads(model, xent, (X, y), params=names, method="loop")
    )
    with pytest.raises(ValueError, match="unknown parameter names"):
        select_params(model, ["nope"])


def test_transformer_last_block_gradients_match_loop():
    torch.manual_seed(1)
    vocab = CharVocab(["abc def", "xyz"])
    model = CharTransformer(len(vocab), d_model=16, n_layers=2, n_heads=2, length=12).eval()
    ids = vocab.encode(["abc", "def xyz", "ab"], 12)

    def lm_loss(call, sample):
        logits = call(sample[:, :-1])
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), sample[:, 1:].reshape(-1), ignore_index=0
        )

    names = model.last_block_names()
    a = per_sample_grads(model, lm_loss, ids, params=names, method="vmap")
    b = per_sample_grads(model, lm_loss, ids, params=names, method="loop")
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_projector_is_seeded_blockwise_and_preserves_geometry():
    x = torch.randn(50, 3000, dtype=torch.float64)
    p = RandomProjector(3000, 512, seed=3, block_rows=700)
    y1 = p(x)
    y2 = RandomProjector(3000, 512, seed=3, block_rows=700)(x)
    torch.testing.assert_close(y1, y2)
    assert not torch.allclose(y1, RandomProjector(3000, 512, seed=4)(x))
    ratio = (y1.norm(dim=1) / x.norm(dim=1)).numpy()
    assert abs(ratio.mean() - 1) < 0.03
    assert ratio.std() < 0.08
    r = RandomProjector(3000, 64, kind="rademacher")(x)
    assert r.shape == (50, 64)
    with pytest.raises(ValueError, match=r"expected shape \(n, 3000\)"):
        p(torch.randn(2, 10))


def test_projected_gradients_are_projection_of_gradients():
    model = MLP(8, 3, hidden=5).eval()
    X, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    G = per_sample_grads(model, xent, (X, y))
    proj = RandomProjector(G.shape[1], 16, seed=0)
    torch.testing.assert_close(per_sample_grads(model, xent, (X, y), projector=proj), proj(G))


def test_hugging_face_lora_path_on_a_tiny_random_model(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from tokenizers import Tokenizer, models, pre_tokenizers

    from iclr26.spice import format_example, lm_per_sample_grads, load_causal_lm

    chars = sorted(
        set("".join(format_example("add 1 2", "3") + format_example("reverse ab", "ba")))
    )
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    config = transformers.LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "llama"

    model, tokenizer = load_causal_lm(tmp_path)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable
    assert all("lora" in n for n in trainable)
    examples = [("add 1 2", "3"), ("reverse ab", "ba")]
    G = lm_per_sample_grads(model, tokenizer, examples, max_length=32)
    assert G.shape[0] == 2
    assert torch.isfinite(G).all()
    # the same gradient as one example alone (padding does not leak into the loss)
    alone = lm_per_sample_grads(model, tokenizer, examples[1:], max_length=32)
    torch.testing.assert_close(G[1:], alone, atol=1e-6, rtol=1e-4)
    masked = lm_per_sample_grads(model, tokenizer, examples, max_length=32, mask_prompt=True)
    assert not torch.allclose(masked, G)
