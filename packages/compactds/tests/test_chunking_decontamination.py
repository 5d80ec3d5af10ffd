import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclr26.compactds import Chunker, Decontaminator


@given(st.lists(st.sampled_from(["a", "bb", "c.", "d-e"]), max_size=60), st.integers(1, 9))
def test_keep_last_preserves_every_word(words, size):
    text = " ".join(words)
    chunks = Chunker(size).chunk(text)
    assert " ".join(chunks).split() == words
    assert all(len(c.split()) == size for c in chunks[:-1])


def test_keep_last_false_drops_the_short_tail_and_min_words_filters():
    text = " ".join(str(i) for i in range(10))
    assert Chunker(4).chunk(text) == ["0 1 2 3", "4 5 6 7", "8 9"]
    assert Chunker(4, keep_last=False).chunk(text) == ["0 1 2 3", "4 5 6 7"]
    assert Chunker(4, min_words=3).chunk(text) == ["0 1 2 3", "4 5 6 7"]
    assert Chunker(4).chunk("   ") == []


def test_chunker_rejects_bad_arguments():
    with pytest.raises(ValueError, match="words"):
        Chunker(0)
    with pytest.raises(TypeError, match="text"):
        Chunker(3).chunk(None)


WORDS = [f"word{i}" for i in range(200)]


def _text(ids):
    return " ".join(WORDS[i] for i in ids)


def test_verbatim_question_inside_a_long_passage_is_removed():
    question = "What is the boiling point of water at sea level in degrees"
    d = Decontaminator([question])
    passage = _text(range(100)) + " " + question + " " + _text(range(100, 150))
    assert not d.keep(passage)
    assert d.keep(_text(range(150)))
    assert d.removed == 1


def test_jaccard_threshold_on_13_grams():
    # both texts have 40 words, i.e. 28 13-grams; sharing a prefix of s words shares s - 12 grams
    query = _text(range(40))

    def with_shared_prefix(s):
        return _text(list(range(s)) + list(range(100, 140 - s)))

    d = Decontaminator([query], containment=None)
    # 38 shared words -> 26 shared grams -> J = 26 / 30 = 0.87 > 0.7: removed
    j, _ = d.max_overlap(with_shared_prefix(38))
    assert j == pytest.approx(26 / 30)
    assert not d.keep(with_shared_prefix(38))
    # 34 shared words -> 22 grams -> J = 22 / 34 = 0.65: kept
    assert d.max_overlap(with_shared_prefix(34))[0] == pytest.approx(22 / 34)
    assert d.keep(with_shared_prefix(34))
    assert d.keep(_text(range(100, 140)))  # unrelated


def test_jaccard_half_is_kept_and_short_queries_match_as_phrases():
    query = _text(range(40))
    d = Decontaminator([query])
    # 31 shared words -> 19 of 28 grams; J = 19/37 = 0.51, containment 0.68 < 1: kept
    text = _text(list(range(31)) + list(range(100, 109)))
    assert d.max_overlap(text)[0] == pytest.approx(19 / 37)
    assert d.keep(text)
    short = Decontaminator(["Who wrote Hamlet?"])
    assert not short.keep("Many ask who wrote hamlet and why.")
    assert short.keep("Hamlet was written long ago.")
