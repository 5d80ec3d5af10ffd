"""Test 8 (class-term filter), keyword extraction, encoders and embedding files."""

import numpy as np
import pytest

from iclr26.bee import (
    BIRD_CLASS_TERMS,
    LSAEncoder,
    PrecomputedEncoder,
    extract_keywords,
    filter_class_terms,
    load_embeddings,
    make_bird_sentences,
    minilm_words,
    sample_control_words,
)
from iclr26.bee.vocab import lemmatize


def test_class_term_filter_removes_class_words_and_keeps_the_rest():
    kws = ["waterbird", "a duck in the lake", "water", "ducks", "sandy desert", "the bird",
           "geese on the shore", "landbird"]  # fmt: skip
    out = filter_class_terms(kws, ["landbird", "waterbird"], BIRD_CLASS_TERMS)
    assert "waterbird" not in out
    assert "landbird" not in out
    assert "lake" in out  # compound phrase loses only the class words
    assert "water" in out  # "waterbird" is one word: "water" survives (official tokenisation)
    assert "ducks" not in out
    assert "the bird" not in out
    assert "sandy desert" in out
    assert "shore" in out


def test_compound_mode_keeps_phrases_whole():
    out = filter_class_terms(["a duck in the lake", "duck"], ["waterbird"], ["duck"],
                             keep="compound")  # fmt: skip
    assert out == ["duck in the lake"]


def test_llm_hook_output_must_come_from_the_input():
    out = filter_class_terms(["duck on the lake", "red car"], ["waterbird"],
                             llm=lambda p: "lake" if "duck" in p else "blue car")  # fmt: skip
    assert out == ["lake"]


def test_lemmatize():
    assert [lemmatize(w) for w in ("geese", "berries", "boxes", "birds", "grass")] == [
        "goose", "berry", "box", "bird", "grass"]  # fmt: skip


@pytest.mark.parametrize("backend", ["tfidf", "yake"])
def test_extract_keywords_finds_backgrounds(backend):
    if backend == "yake":
        pytest.importorskip("yake")
    t = make_bird_sentences(1.0, n_train=200, n_val=8, n_test=8, seed=0)
    by_class = {c: [x for x, y in zip(t.train.texts, t.train.y, strict=True) if y == c]
                for c in (0, 1)}  # fmt: skip
    kws = extract_keywords(by_class, backend=backend, top=40)
    text = " ".join(kws)
    assert "snow" in text
    assert "desert" in text
    kept = filter_class_terms(kws, t.class_names, t.class_terms)
    assert not any(w in k.split() for k in kept for w in ("duck", "sparrow", "bird"))
    assert kept


def test_lsa_encoder_unit_rows_and_similarity():
    corpus = ["a duck on the lake", "a swan on the lake", "a crow in the snow", "snow and ice",
              "desert sand dunes", "the desert is dry"]  # fmt: skip
    enc = LSAEncoder(4).fit(corpus)
    E = enc.encode(["lake duck", "desert dunes", "unknownword"])
    np.testing.assert_allclose(np.linalg.norm(E[:2], axis=1), 1, atol=1e-5)
    assert np.linalg.norm(E[2]) == 0
    q = enc.encode(["swan lake"])[0]
    assert q @ E[0] > q @ E[1]
    with pytest.raises(RuntimeError, match="fit"):
        LSAEncoder().encode(["x"])


def test_precomputed_encoder_and_files(tmp_path):
    rng = np.random.default_rng(0)
    M = rng.standard_normal((3, 5))
    np.save(tmp_path / "e.npy", M)
    (tmp_path / "t.txt").write_text("a\nb\nc\n")
    enc = PrecomputedEncoder.from_files(tmp_path / "t.txt", tmp_path / "e.npy")
    out = enc.encode(["c", "a"])
    np.testing.assert_allclose(out, M[[2, 0]] / np.linalg.norm(M[[2, 0]], axis=1, keepdims=True),
                               atol=1e-6)  # fmt: skip
    with pytest.raises(KeyError):
        enc.encode(["zzz"])
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"emb": [list(r) for r in M]}), tmp_path / "e.parquet")
    np.testing.assert_allclose(load_embeddings(tmp_path / "e.parquet"),
                               load_embeddings(tmp_path / "e.npy"), atol=1e-6)  # fmt: skip
    pq.write_table(pa.table({f"d{i}": M[:, i] for i in range(5)}), tmp_path / "w.parquet")
    np.testing.assert_allclose(load_embeddings(tmp_path / "w.parquet"),
                               load_embeddings(tmp_path / "e.npy"), atol=1e-6)  # fmt: skip


def test_load_embeddings_refuses_nan_zero_and_unknown(tmp_path):
    bad = np.ones((3, 4))
    bad[1, 2] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    with pytest.raises(ValueError, match="NaN"):
        load_embeddings(tmp_path / "nan.npy")
    np.save(tmp_path / "zero.npy", np.zeros((2, 3)))
    with pytest.raises(ValueError, match="zero"):
        load_embeddings(tmp_path / "zero.npy")
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(ValueError, match="npy"):
        load_embeddings(tmp_path / "x.csv")
    with pytest.raises(OSError, match="not found"):
        load_embeddings(tmp_path / "missing.npy")


def test_control_words_are_seeded_distinct_and_exclude_by_lemma():
    words = ["apple", "apples", "chair", "the", "Snow", "snow", "snows", "xy", "garden", "rivers",
             "music", "bread", "caf\u00e9", "phone2"]  # fmt: skip
    a = sample_control_words(words, 4, exclude=["snow", "river"], seed=3)
    assert a == sample_control_words(words, 4, exclude=["snow", "river"], seed=3)
    # eligible: apple (apples is the same lemma), chair, garden, music, bread
    assert set(a) <= {"apple", "chair", "garden", "music", "bread"}
    assert len(set(a)) == 4
    draws = {tuple(sample_control_words(words, 4, exclude=["snow", "river"], seed=s))
             for s in range(20)}  # fmt: skip
    assert len(draws) > 1
    with pytest.raises(ValueError, match="eligible"):
        sample_control_words(words, 6, exclude=["snow", "river"])


def test_minilm_words_is_a_large_lowercase_word_list():
    words = minilm_words()
    assert len(words) > 15_000
    assert all(w.isalpha() and w.islower() for w in words)
    assert {"forest", "chair", "music"} <= set(words)
    assert not any(w.startswith("#") for w in words)
