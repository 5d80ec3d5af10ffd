import json
import shutil

import pytest
import torch
from torch import nn

from iclr26.spice import (
    KroneckerProjector,
    RandomProjector,
    clear_compiled,
    per_sample_grads,
    select_params,
)
from iclr26.spice.models import MLP, CharTransformer, CharVocab

torch.set_num_threads(1)


def xent(call, sample):
    x, y = sample
    return nn.functional.cross_entropy(call(x), y)


def xent_per_example(call, sample):
    x, y = sample
    return nn.functional.cross_entropy(call(x), y, reduction="none")


def lm_losses(call, ids):
    logits = call(ids[:, :-1])
    targets = ids[:, 1:]
    token = nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=0, reduction="none"
    )
    return token.sum(1) / (targets != 0).sum(1)


def loop_reference(model, X, y, names):
    rows = []
    params = dict(model.named_parameters())
    for i in range(len(y)):
        model.zero_grad()
        nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        rows.append(
            torch.cat(
                [
                    torch.zeros(params[n].numel())
                    if params[n].grad is None
                    else params[n].grad.reshape(-1)
                    for n in names
                ]
            ).to(params[names[0]].dtype)
        )
    return torch.stack(rows)


def small_mlp_case():
    """A seeded 8-5-3 MLP, 7 examples, all parameter names and the per-example reference."""
    torch.manual_seed(0)
    model = MLP(8, 3, hidden=5).eval()
    X, y = torch.randn(7, 8), torch.randint(0, 3, (7,))
    names = [n for n, _ in model.named_parameters()]
    return model, X, y, names, loop_reference(model, X, y, names)


def test_vmap_and_loop_equal_single_example_backward():
    model, X, y, _, ref = small_mlp_case()
    for method, chunk in (("vmap", None), ("vmap", 3), ("loop", None)):
        G = per_sample_grads(model, xent, (X, y), method=method, chunk_size=chunk)
        torch.testing.assert_close(G, ref, atol=1e-6, rtol=1e-5)
    for method in ("hooks", "auto", "vmap", "loop"):  # one per-example loss serves every method
        G = per_sample_grads(model, xent_per_example, (X, y), method=method)
        torch.testing.assert_close(G, ref, atol=1e-6, rtol=1e-5)


@pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
    reason="torch.compile's CPU backend needs a C++ compiler",
)
def test_compiled_equals_single_example_backward_and_reuses_its_code():
    from iclr26.spice.grads import _COMPILED

    model, X, y, names, ref = small_mlp_case()
    clear_compiled(model)
    G = per_sample_grads(model, xent, (X, y), method="compiled")
    torch.testing.assert_close(G, ref, atol=1e-6, rtol=1e-5)
    program = next(iter(_COMPILED[model].values()))
    # new data of the same shape runs the same program, not a new compile
    X2, y2 = torch.randn(7, 8), torch.randint(0, 3, (7,))
    torch.testing.assert_close(
        per_sample_grads(model, xent, (X2, y2), method="compiled"),
        loop_reference(model, X2, y2, names),
        atol=1e-6,
        rtol=1e-5,
    )
    assert list(_COMPILED[model].values()) == [program]
    # the weights are inputs of the program: an in-place update is seen without recompiling
    with torch.no_grad():
        model.net[0].weight.mul_(0.5)
    torch.testing.assert_close(
        per_sample_grads(model, xent, (X, y), method="compiled"),
        loop_reference(model, X, y, names),
        atol=1e-6,
        rtol=1e-5,
    )
    assert len(_COMPILED[model]) == 1
    # a non-contiguous batch of the same shape is accepted (made dense for the compiled code)
    Xt = torch.randn(8, 7).T
    torch.testing.assert_close(
        per_sample_grads(model, xent, (Xt, y), method="compiled"),
        loop_reference(model, Xt, y, names),
        atol=1e-6,
        rtol=1e-5,
    )
    # a Kronecker projector on the compiled matrix equals the projector on the reference
    kp = KroneckerProjector(2, 2, seed=0)
    torch.testing.assert_close(
        per_sample_grads(model, xent, (X, y), method="compiled", projector=kp),
        per_sample_grads(model, xent, (X, y), method="loop", projector=kp),
        atol=1e-6,
        rtol=1e-5,
    )
    assert len(_COMPILED[model]) == 1
    clear_compiled(model)
    assert model not in _COMPILED


@pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
    reason="torch.compile's CPU backend needs a C++ compiler",
)
def test_compiled_refuses_data_dependent_control_flow():
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x):
            return self.lin(x) if x.sum() > 0 else -self.lin(x)

    model = Branchy()
    with pytest.raises(RuntimeError, match="could not trace"):
        per_sample_grads(
            model, xent, (torch.randn(3, 4), torch.tensor([0, 1, 0])), method="compiled"
        )


class TwoUses(nn.Module):
    """One linear layer applied twice (weight sharing), an in-place ReLU after a linear layer,
    a LayerNorm, and a linear layer that never reaches the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.norm = nn.LayerNorm(6)
        self.b = nn.Linear(6, 2)
        self.unused = nn.Linear(6, 3)

    def forward(self, x):
        h = nn.functional.relu(self.a(x), inplace=True)
        h = self.a(self.norm(h))
        self.unused(x)
        return self.b(h)


def test_hooks_match_loop_with_shared_weights_inplace_ops_and_unused_layers():
    torch.manual_seed(3)
    model = TwoUses().eval()
    X, y = torch.randn(9, 6), torch.randint(0, 2, (9,))
    names = [n for n, _ in model.named_parameters()]
    ref = loop_reference(model, X, y, names)
    G = per_sample_grads(model, xent_per_example, (X, y), method="hooks")
    torch.testing.assert_close(G, ref, atol=1e-6, rtol=1e-5)
    assert G[:, -(3 * 6 + 3) :].abs().max() == 0  # the unused layer


def test_hooks_refuse_what_they_cannot_separate():
    model = MLP(8, 3, hidden=5).eval()
    X, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match=r"one loss per example, shape \(4,\)"):
        per_sample_grads(model, xent, (X, y), method="hooks")  # a batch-mean loss
    # auto falls back to vmap for a batch-mean loss and still gives per-sample gradients
    torch.testing.assert_close(
        per_sample_grads(model, xent, (X, y), method="auto"),
        per_sample_grads(model, xent, (X, y), method="loop"),
    )
    vocab = CharVocab(["abc"])
    tr = CharTransformer(len(vocab), d_model=8, n_layers=1, n_heads=2, length=6).eval()
    with pytest.raises(ValueError, match=r"nn.Linear and nn.LayerNorm only.*'pos'"):
        per_sample_grads(tr, lm_losses, vocab.encode(["ab"], 6), params="all", method="hooks")


def test_hooks_with_weights_only_frozen_biases_and_bias_free_layers():
    """Hooks, vmap and the loop agree when a layer's bias is frozen (its weight is the one
    gradient the backward is asked for), a layer has no bias, and the batch size makes the
    rows of the result a view of a 64-byte-aligned buffer (12 columns)."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 3, bias=False)).eval()
    model[0].bias.requires_grad_(False)
    X, y = torch.randn(5, 3), torch.randint(0, 3, (5,))
    got = {
        m: per_sample_grads(model, xent_per_example, (X, y), method=m)
        for m in ("hooks", "vmap", "loop")
    }
    assert got["hooks"].shape == (5, 2 * 3 + 3 * 2)
    torch.testing.assert_close(got["hooks"], got["loop"], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got["vmap"], got["loop"], atol=1e-6, rtol=1e-5)
    assert not model[0].bias.requires_grad  # the frozen parameter stays frozen


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
    # the last block is linear layers and LayerNorms: one batched backward with hooks, where
    # each linear layer's per-sample gradient is Σ_t δ_t x_tᵀ over the sequence
    c = per_sample_grads(model, lm_losses, ids, params=names, method="hooks")
    torch.testing.assert_close(c, b, atol=1e-5, rtol=1e-4)
    # every parameter (embeddings, positions): auto falls back to vmap
    full = per_sample_grads(model, lm_losses, ids, params="all", method="auto")
    torch.testing.assert_close(
        full,
        per_sample_grads(model, lm_loss, ids, params="all", method="loop"),
        atol=1e-5,
        rtol=1e-4,
    )


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


def kron_reference(G_blocks, proj):
    """Project materialised per-parameter gradients by explicit Kronecker products."""
    cols = []
    for j, g in enumerate(G_blocks):
        n = g.shape[0]
        if g.ndim == 2:
            p = proj.factor(j, 0, g.shape[1], g.dtype, g.device)
            cols.append(g if p is None else g @ p.T)
            continue
        p_out = proj.factor(j, 0, g.shape[1], g.dtype, g.device)
        p_in = proj.factor(j, 1, g.shape[2], g.dtype, g.device)
        p_out = torch.eye(g.shape[1], dtype=g.dtype) if p_out is None else p_out
        p_in = torch.eye(g.shape[2], dtype=g.dtype) if p_in is None else p_in
        cols.append(g.reshape(n, -1) @ torch.kron(p_out, p_in).T)  # vec(P_out G P_inᵀ)
    return torch.cat(cols, dim=1)


def test_kronecker_projection_of_factors_equals_projection_of_loop_gradients():
    torch.manual_seed(4)
    model = MLP(20, 7, hidden=12).eval().double()
    X, y = torch.randn(6, 20, dtype=torch.float64), torch.randint(0, 7, (6,))
    names = [n for n, _ in model.named_parameters()]
    ref = loop_reference(model, X, y, names)
    shapes = [p.shape for p in model.parameters()]
    blocks, start = [], 0
    for shape in shapes:
        width = shape.numel()
        blocks.append(ref[:, start : start + width].reshape(6, *shape))
        start += width
    proj = KroneckerProjector(k_in=5, k_out=4, seed=2)
    want = kron_reference(blocks, proj)
    assert want.shape[1] == proj.dim(shapes) == 4 * 5 + 4 + 4 * 5 + 4
    for method in ("hooks", "vmap", "loop"):
        got = per_sample_grads(model, xent_per_example, (X, y), method=method, projector=proj)
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-9)
    # a side no larger than its k is kept exactly; same seed, same projection
    wide = KroneckerProjector(k_in=64, k_out=64, seed=2)
    torch.testing.assert_close(
        per_sample_grads(model, xent_per_example, (X, y), projector=wide), ref
    )
    again = per_sample_grads(
        model, xent_per_example, (X, y), projector=KroneckerProjector(5, 4, seed=2)
    )
    torch.testing.assert_close(again, want, atol=1e-10, rtol=1e-9)


def test_kronecker_projector_preserves_norms_in_expectation():
    g = torch.randn(200, 60, 50, dtype=torch.float64)
    proj = KroneckerProjector(k_in=40, k_out=40, seed=0)
    ratio = (proj.project_block(0, g).norm(dim=1) / g.reshape(200, -1).norm(dim=1)).numpy()
    assert abs(ratio.mean() - 1) < 0.05
    assert ratio.std() < 0.1


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
    # LoRA A/B are nn.Linear: auto takes one batched backward with hooks; same as the loop
    loop = lm_per_sample_grads(model, tokenizer, examples, max_length=32, method="loop")
    torch.testing.assert_close(G, loop, atol=1e-6, rtol=1e-4)
    kp = KroneckerProjector(4, 4, seed=0)
    torch.testing.assert_close(
        lm_per_sample_grads(model, tokenizer, examples, max_length=32, projector=kp),
        lm_per_sample_grads(model, tokenizer, examples, max_length=32, projector=kp, method="loop"),
        atol=1e-6, rtol=1e-4,
    )  # fmt: skip
    assert torch.isfinite(G).all()
    # the same gradient as one example alone (padding does not leak into the loss)
    alone = lm_per_sample_grads(model, tokenizer, examples[1:], max_length=32)
    torch.testing.assert_close(G[1:], alone, atol=1e-6, rtol=1e-4)
    masked = lm_per_sample_grads(model, tokenizer, examples, max_length=32, mask_prompt=True)
    assert not torch.allclose(masked, G)
