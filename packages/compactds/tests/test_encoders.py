import numpy as np
import pytest

from iclr26.compactds import HashingEncoder, LSAEncoder, SentenceTransformerEncoder, load_encoder
from iclr26.compactds.encoders import save_encoder

TEXTS = ["the cat sat on the mat", "a dog barked at the cat", "numpy arrays hold numbers",
         "arrays of floating point numbers", "the mat was red"]  # fmt: skip


def test_hashing_is_deterministic_unit_norm_and_lexical():
    enc = HashingEncoder(256)
    a = enc.encode_passages(TEXTS)
    assert a.dtype == np.float32
    assert a.shape == (5, 256)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-6)
    np.testing.assert_array_equal(a, HashingEncoder(256).encode_passages(TEXTS))
    q = enc.encode_queries(["cat on a mat"])[0]
    assert int(np.argmax(a @ q)) == 0
    assert HashingEncoder(256, seed=1).fingerprint != enc.fingerprint
    with pytest.raises(TypeError, match="list of strings"):
        enc.encode_passages("just one string")


def test_lsa_fit_is_seeded_and_groups_related_texts(text_corpus):
    texts = [t for docs in text_corpus.sources.values() for _, t in docs][:300]
    a = LSAEncoder(32, seed=0).fit(texts)
    b = LSAEncoder(32, seed=0).fit(texts)
    assert a.fingerprint == b.fingerprint
    np.testing.assert_allclose(
        a.encode_passages(texts[:5]), b.encode_passages(texts[:5]), atol=1e-5
    )
    v = a.encode_passages(texts)
    # a passage is closer to itself re-encoded than to the average other passage
    assert float(np.mean(np.sum(v * a.encode_queries(texts), axis=1))) > 0.99
    with pytest.raises(ValueError, match="not fitted"):
        LSAEncoder(8).encode_queries(["x"])
    with pytest.raises(ValueError, match="terms"):
        LSAEncoder(64).fit(TEXTS)


def test_save_and_load_round_trip(tmp_path, lsa, hashing):
    for enc in (lsa, hashing):
        save_encoder(enc, tmp_path / enc.name)
        back = load_encoder(tmp_path / enc.name)
        assert back.fingerprint == enc.fingerprint
        np.testing.assert_allclose(back.encode_queries(TEXTS), enc.encode_queries(TEXTS), atol=1e-6)


def test_hub_ids_are_refused_without_opt_in():
    with pytest.raises(ValueError, match="allow_download"):
        SentenceTransformerEncoder("sentence-transformers/all-MiniLM-L6-v2")


def _tiny_model(path):
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6 moved the modules
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:
        from sentence_transformers.models import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in TEXTS for w in t.split()})
    vocab = path / "vocab.txt"
    path.mkdir()
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(vocab))
    cfg = BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)  # fmt: skip
    import torch

    torch.manual_seed(0)
    raw = path / "raw"
    BertModel(cfg).save_pretrained(raw)
    tok.save_pretrained(raw)
    st = SentenceTransformer(modules=[Transformer(str(raw)), Pooling(16, "mean")])
    st.save(str(path / "st"))
    return path / "st"


def test_local_sentence_transformer_folder_loads_offline_and_restores_order(tmp_path):
    folder = _tiny_model(tmp_path / "tiny")
    enc = SentenceTransformerEncoder(folder, batch_size=2, num_threads=1, sort_by_length=True)
    assert enc.dim == 16
    sorted_out = enc.encode_passages(TEXTS)
    enc.sort_by_length = False
    np.testing.assert_allclose(sorted_out, enc.encode_passages(TEXTS), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(sorted_out, axis=1), 1, atol=1e-5)
    assert enc.fingerprint == SentenceTransformerEncoder(folder).fingerprint


@pytest.mark.slow
def test_minilm_from_the_installed_package_ranks_a_paraphrase_first():
    from iclr26.compactds import MiniLMEncoder

    enc = MiniLMEncoder(num_threads=1)
    assert enc.dim == 384
    docs = [
        "A cat is sleeping on the rug.",
        "Stock markets fell sharply today.",
        "Python lists are mutable.",
    ]
    q = enc.encode_queries(["kitten napping on a carpet"])[0]
    assert int(np.argmax(enc.encode_passages(docs) @ q)) == 0
