"""Concept vocabulary: keyword extraction and the class-term filter (``step_2a_filter.py``).

The official pipeline runs YAKE per class over that class's captions (n-gram limits 3 and 5, top
256 each, dedup 0.9), drops NLTK stopwords, merges the sets, asks Llama-3.1-8B to delete mentions
of the class from each phrase, then applies a lexical/WordNet filter. Here:

* :func:`extract_keywords` uses YAKE when the ``yake`` package is installed (``[yake]`` extra) and
  otherwise a documented TF-IDF fallback (``backend="tfidf"``): the top-scoring 1-3-word n-grams
  of each class's texts against the other classes' texts.
* :func:`filter_class_terms` is the lexical part of ``utils.remove_class_instances``: lemmatise
  (a small rule-based lemmatiser), drop stopwords (scikit-learn's English list), drop every word
  that is a class name or a class term (WordNet hyponyms/hypernyms in the official code; NLTK's
  WordNet data is a download, so you pass the terms, e.g. :data:`BIRD_CLASS_TERMS`), keep the rest
  as an "attribute" concept. ``llm=`` takes any callable that plays the Llama filter's role.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from iclr26.bee.encoders import check_texts
from iclr26.shared import check_choice, check_int

__all__ = [
    "BIRD_CLASS_TERMS",
    "extract_keywords",
    "filter_class_terms",
    "lemmatize",
    "sample_control_words",
    "stopwords",
]

log = logging.getLogger(__name__)
_WORD = re.compile(r"[a-z0-9][a-z0-9_'\-]*")

#: Class terms for the bird task (the role WordNet's bird synset plays in the official filter):
#: hypernyms and the species used by :func:`iclr26.bee.make_bird_sentences`.
BIRD_CLASS_TERMS: tuple[str, ...] = (
    "bird", "landbird", "waterbird", "animal", "fowl", "waterfowl", "seabird", "songbird",
    "sparrow", "robin", "crow", "finch", "cardinal", "jay", "wren", "warbler", "woodpecker",
    "thrush", "duck", "swan", "pelican", "gull", "heron", "goose", "cormorant", "albatross",
    "puffin", "loon",
)  # fmt: skip

_IRREGULAR = {"geese": "goose", "mice": "mouse", "children": "child", "men": "man",
              "women": "woman", "feet": "foot", "teeth": "tooth", "leaves": "leaf",
              "wolves": "wolf", "knives": "knife", "lives": "life"}  # fmt: skip


def stopwords() -> frozenset[str]:
    """English stopwords (scikit-learn's list; the official code uses NLTK's, a download)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | {"photo", "image", "picture"}


def lemmatize(word: str) -> str:
    """Rule-based noun lemma (plural -> singular); WordNet's lemmatiser needs a data download."""
    w = word.lower()
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def extract_keywords(
    texts_by_class: Mapping[Any, Sequence[str]],
    *,
    ngram_sizes: Sequence[int] = (3, 5),
    top: int = 256,
    backend: Literal["auto", "yake", "tfidf"] = "auto",
    dedup: float = 0.9,
) -> list[str]:
    """Keywords of each class's texts, merged (official: YAKE, n = 3 and 5, top 256, dedup 0.9).

    Args:
        texts_by_class: ``{class: [text, ...]}`` (captions for images, the texts for text data).
        ngram_sizes: YAKE's maximum n-gram sizes, one extraction per size (official ``(3, 5)``).
        top: keywords per class and size.
        backend: ``"yake"``, ``"tfidf"`` (fallback: per-class TF-IDF of 1-3-grams, ranked by the
            class's mean TF-IDF minus the other classes'), or ``"auto"`` (YAKE if installed).
        dedup: YAKE's deduplication threshold.

    Returns:
        Unique lower-cased keywords, stopwords removed, in first-seen order.
    """
    check_choice(backend, "backend", ("auto", "yake", "tfidf"))
    top = check_int(top, "top", low=1)
    if not isinstance(texts_by_class, Mapping) or not texts_by_class:
        raise ValueError("texts_by_class must be a non-empty {class: [texts]} mapping")
    groups = {c: check_texts(t, f"texts_by_class[{c!r}]") for c, t in texts_by_class.items()}
    sizes = [check_int(n, "ngram_sizes", low=1, high=8) for n in ngram_sizes]
    if not sizes:
        raise ValueError("ngram_sizes must not be empty")
    if backend == "auto":
        try:
            import yake

            backend = "yake"
        except ImportError:
            backend = "tfidf"
            log.info("yake is not installed; using the TF-IDF keyword fallback")
    stop = stopwords()
    found: list[str] = []
    if backend == "yake":
        try:
            import yake
        except ImportError as err:
            raise ImportError("backend='yake' needs: pip install 'iclr26-bee[yake]'") from err
        for texts in groups.values():
            doc = ". ".join(t.strip().rstrip(".") for t in texts)
            for n in sizes:
                kw = yake.KeywordExtractor(lan="en", n=n, dedupLim=dedup, top=top)
                found += [k for k, _ in kw.extract_keywords(doc)]
    else:
        import numpy as np
        from sklearn.feature_extraction.text import TfidfVectorizer

        docs = [" ".join(t) for t in groups.values()]
        vec = TfidfVectorizer(ngram_range=(1, min(3, max(sizes))), stop_words=sorted(stop))
        M = vec.fit_transform(docs).toarray()
        terms = vec.get_feature_names_out()
        for i in range(len(docs)):
            others = np.delete(M, i, axis=0)
            rel = M[i] - (others.mean(axis=0) if len(others) else 0.0)
            order = np.argsort(-rel, kind="stable")
            found += [str(terms[j]) for j in order[:top] if M[i, j] > 0]
    out: list[str] = []
    seen: set[str] = set()
    for k in found:
        words = list(_words(k))
        while words and words[0] in stop:
            words.pop(0)
        while words and words[-1] in stop:
            words.pop()
        phrase = " ".join(words)
        if phrase and phrase not in seen:
            seen.add(phrase)
            out.append(phrase)
    return out


def filter_class_terms(
    keywords: Iterable[str],
    class_names: Sequence[str],
    class_terms: Iterable[str] | None = None,
    *,
    llm: Callable[[str], str] | None = None,
    keep: Literal["attribute", "compound"] = "attribute",
) -> list[str]:
    """Remove mentions of the classes from candidate concepts (``utils.remove_class_instances``).

    Args:
        keywords: candidate phrases.
        class_names: the dataset's class names; each of their words is a class word
            (``"waterbird"`` is one word, so ``"water"`` survives, as in the official tokenisation).
        class_terms: further class words (the WordNet hyponyms/hypernyms of the official filter),
            e.g. :data:`BIRD_CLASS_TERMS`; compared after lemmatisation.
        llm: optional ``phrase -> phrase`` callable applied first (the official Llama filter:
            "delete mentions of the class concept"); outputs with words not in the input are dropped.
        keep: ``"attribute"`` (default: strip class words and stopwords from a phrase,
            "a duck in the lake" -> "lake") or ``"compound"`` (drop a phrase only if nothing but
            class words and stopwords is left, otherwise keep it whole).

    Returns:
        Unique surviving concepts in first-seen order. May be empty; :func:`iclr26.bee.discover`
        refuses an empty vocabulary.
    """
    check_choice(keep, "keep", ("attribute", "compound"))
    keywords = check_texts(keywords, "keywords", nonempty=False)
    class_names = check_texts(class_names, "class_names")
    extra = check_texts([] if class_terms is None else class_terms, "class_terms", nonempty=False)
    cls_words = {lemmatize(w) for name in class_names for w in _words(name)}
    cls_words |= {lemmatize(w) for t in extra for w in _words(t)}
    stop = stopwords()
    out: list[str] = []
    seen: set[str] = set()
    for phrase in keywords:
        if llm is not None:
            edited = llm(phrase)
            if not isinstance(edited, str):
                raise TypeError(f"llm must return a string, got {type(edited).__name__}")
            if not set(_words(edited)) <= set(_words(phrase)):
                continue  # the official filter drops outputs not made of input words
            phrase = edited
        words = _words(phrase)
        content = [w for w in words if w not in stop and lemmatize(w) not in cls_words]
        if not content:
            continue
        if keep == "attribute":
            kept = " ".join(content)
        else:
            while words and words[0] in stop:
                words.pop(0)
            while words and words[-1] in stop:
                words.pop()
            kept = " ".join(words)
        if kept not in seen:
            seen.add(kept)
            out.append(kept)
    return out


def sample_control_words(
    words: Iterable[str],
    n: int,
    *,
    exclude: Iterable[str] = (),
    min_len: int = 4,
    seed: int = 0,
) -> list[str]:
    """Draw ``n`` random control concepts from a large word list (the ``--random_biases`` role).

    The official control regularises / inserts random concepts from a vocabulary of thousands of
    caption phrases, so a random draw is almost never related to the classes. A small curated
    vocabulary cannot play that role (its scenery words are the classes' zero-shot prior), so the
    controls are drawn from a general word list instead, e.g. an encoder's word-piece vocabulary
    (:func:`iclr26.bee.minilm_words`). Candidates are lower-case alphabetic words of at least
    ``min_len`` letters that are not stopwords and whose lemma is not excluded (pass the planted
    concepts, class terms and any known attribute words); duplicates by lemma are dropped.

    Args:
        words: the word list to draw from.
        n: number of controls.
        exclude: words whose lemmas are never drawn.
        min_len: minimum word length.
        seed: sampling seed.

    Returns:
        ``n`` distinct words, in draw order.
    """
    import numpy as np

    words = check_texts(words, "words")
    n = check_int(n, "n", low=1)
    min_len = check_int(min_len, "min_len", low=1)
    seed = check_int(seed, "seed", low=0)
    excluded = {lemmatize(w) for w in check_texts(exclude, "exclude", nonempty=False)}
    stop = stopwords()
    seen: set[str] = set()
    pool = []
    for w in words:
        lem = lemmatize(w)
        if (
            len(w) >= min_len
            and w.isascii()
            and w.isalpha()
            and w.islower()
            and w not in stop
            and lem not in excluded
            and lem not in seen
        ):
            seen.add(lem)
            pool.append(w)
    if len(pool) < n:
        raise ValueError(f"words holds only {len(pool)} eligible control words, n = {n} asked")
    idx = np.random.default_rng(seed).choice(len(pool), size=n, replace=False)
    return [pool[i] for i in idx]
