"""Data: the geometric Waterbirds-like generator, templated sentence tasks with a planted
counter-semantic shortcut, and loaders for Waterbirds-style ``metadata.csv`` and CivilComments.

Convention everywhere: ``y`` is the class, ``a`` the spurious attribute, and the attribute value
``a = c`` is class ``c``'s designated spurious value (``DATASET_CLASS_BIAS`` of the official code),
so ``P(a = y) = rho`` in training and validation; the test split is group-balanced.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.shared import check_int, check_range

__all__ = [
    "GeometricTask",
    "Split",
    "TextTask",
    "load_civilcomments",
    "load_metadata_csv",
    "make_bird_sentences",
    "make_geometric",
    "make_review_sentences",
]


@dataclass
class Split:
    """One split: embeddings or texts with labels ``y`` and attributes ``a``."""

    y: np.ndarray
    a: np.ndarray
    X: np.ndarray | None = None
    texts: list[str] | None = None

    @property
    def groups(self) -> np.ndarray:
        """Group id ``y * n_attr + a`` with ``n_attr = 2`` (the tasks here are binary)."""
        return self.y * 2 + self.a


@dataclass
class GeometricTask:
    """Output of :func:`make_geometric`."""

    train: Split
    val: Split
    test: Split
    anchors: np.ndarray
    concepts: list[str]
    concept_emb: np.ndarray
    planted: dict[int, list[str]]
    class_names: list[str]
    rho: float


@dataclass
class TextTask:
    """Output of the sentence generators: texts and labels; embed them with any encoder."""

    train: Split
    val: Split
    test: Split
    class_names: list[str]
    anchor_texts: list[str]
    vocabulary: list[str]
    planted: dict[int, list[str]]
    backgrounds: dict[int, list[str]]
    rho: float
    class_terms: list[str] = field(default_factory=list)
    neutral: Split | None = None


def _attributes(y: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """``a = y`` with probability ``rho`` else the other value (binary)."""
    agree = rng.random(y.size) < rho
    return np.where(agree, y, 1 - y)


def _balanced(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    g = np.arange(n) % 4
    rng.shuffle(g)
    return g // 2, g % 2


def _templated_splits(
    render: Any, rho: float, n_train: int, n_val: int, n_test: int, seed: int
) -> tuple[float, np.random.Generator, list[Split]]:
    """Train/val (``P(a = y) = rho``) and group-balanced test splits of a templated text task.

    ``render(y, a, rng) -> list[str]`` writes one sentence per (class, attribute); the generator
    is returned so a task can draw further splits from the same stream.
    """
    rho = check_range(rho, "rho", low=0.0, high=1.0)
    rng = np.random.default_rng(check_int(seed, "seed", low=0))
    sizes = [check_int(n, name, low=4) for n, name in
             ((n_train, "n_train"), (n_val, "n_val"), (n_test, "n_test"))]  # fmt: skip
    splits = []
    for n in sizes[:2]:
        y = np.arange(n) % 2
        rng.shuffle(y)
        a = _attributes(y, rho, rng)
        splits.append(Split(y=y, a=a, texts=render(y, a, rng)))
    yt, at = _balanced(sizes[2], rng)
    splits.append(Split(y=yt, a=at, texts=render(yt, at, rng)))
    return rho, rng, splits


def make_geometric(
    n_train: int = 3000,
    n_val: int = 1000,
    n_test: int = 3000,
    *,
    d: int = 64,
    rho: float = 0.95,
    n_nuisance: int = 200,
    n_synonyms: int = 2,
    beta: float = 0.5,
    gamma: float = 1.0,
    sigma: float = 1.5,
    anchor_noise: float = 0.1,
    synonym_noise: float = 0.5,
    seed: int = 0,
) -> GeometricTask:
    """Synthetic Waterbirds-like embedding geometry.

    Orthonormal class directions ``u_0, u_1`` and attribute directions ``v_0, v_1``; a sample is
    ``x = normalise(beta u_y + gamma (v_a - v_{1-a}) / sqrt 2 + sigma xi)``, ``xi ~ N(0, I/d)``.
    The attribute is centred (rather than ``gamma v_a``): with ``v_a`` alone every sample
    carries ``(v_0 + v_1)`` with the same weight, a constant feature through which the bias-free
    probe learns a class bias, and that bias then scores as "both planted concepts" for one class. Class anchors are
    ``normalise(u_c + anchor_noise g)``. The vocabulary holds the planted concepts ``v_0, v_1``
    (names ``planted_0``, ``planted_1``), ``n_synonyms`` noisy copies of each, and ``n_nuisance``
    concepts uniform on the sphere. ``P(a = y) = rho`` in train and validation, the test set is
    balanced over the four groups.
    """
    n_train = check_int(n_train, "n_train", low=4)
    n_val = check_int(n_val, "n_val", low=4)
    n_test = check_int(n_test, "n_test", low=4)
    d = check_int(d, "d", low=4)
    rho = check_range(rho, "rho", low=0.0, high=1.0)
    n_nuisance = check_int(n_nuisance, "n_nuisance", low=0)
    n_synonyms = check_int(n_synonyms, "n_synonyms", low=0)
    for name, v in (("beta", beta), ("gamma", gamma), ("sigma", sigma)):
        check_range(v, name, low=0.0)
    rng = np.random.default_rng(check_int(seed, "seed", low=0))
    Q, _ = np.linalg.qr(rng.standard_normal((d, 4)))
    u, v = Q[:, :2].T, Q[:, 2:].T

    def sample(y: np.ndarray, a: np.ndarray) -> np.ndarray:
        xi = rng.standard_normal((y.size, d)) / np.sqrt(d)
        x = beta * u[y] + gamma * (v[a] - v[1 - a]) / np.sqrt(2) + sigma * xi
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    splits = []
    for n, r in ((n_train, rho), (n_val, rho)):
        y = np.arange(n) % 2
        rng.shuffle(y)
        a = _attributes(y, r, rng)
        splits.append(Split(y=y, a=a, X=sample(y, a)))
    yt, at = _balanced(n_test, rng)
    splits.append(Split(y=yt, a=at, X=sample(yt, at)))
    anchors = u + anchor_noise * rng.standard_normal((2, d)) / np.sqrt(d)
    anchors /= np.linalg.norm(anchors, axis=1, keepdims=True)
    names, vecs = [], []
    planted: dict[int, list[str]] = {0: [], 1: []}
    for c in (0, 1):
        names.append(f"planted_{c}")
        vecs.append(v[c])
        planted[c].append(f"planted_{c}")
        for s in range(n_synonyms):
            vec = v[c] + synonym_noise * rng.standard_normal(d) / np.sqrt(d)
            names.append(f"planted_{c}_syn{s + 1}")
            vecs.append(vec / np.linalg.norm(vec))
            planted[c].append(names[-1])
    nuis = rng.standard_normal((n_nuisance, d))
    nuis /= np.linalg.norm(nuis, axis=1, keepdims=True)
    names += [f"nuisance_{i:03d}" for i in range(n_nuisance)]
    E = np.vstack([np.array(vecs), nuis]) if n_nuisance else np.array(vecs)
    return GeometricTask(
        train=splits[0],
        val=splits[1],
        test=splits[2],
        anchors=anchors,
        concepts=names,
        concept_emb=E,
        planted=planted,
        class_names=["class_0", "class_1"],
        rho=rho,
    )


_LAND = ["sparrow", "robin", "crow", "finch", "cardinal", "jay", "wren", "warbler", "woodpecker",
         "thrush"]  # fmt: skip
_WATER = ["duck", "swan", "pelican", "gull", "heron", "goose", "cormorant", "albatross", "puffin",
          "loon"]  # fmt: skip
_VERBS = [
    "perches",
    "stands",
    "rests",
    "waits",
    "sits",
    "is resting",
    "is standing",
    "looks around",
]
_FILLERS = ["at dawn", "in the afternoon", "on a calm day", "near some rocks", "under a grey sky",
            "in the morning light", "for a while", "quietly"]  # fmt: skip
_SNOW = ["snowy field", "snow-covered hill", "winter snow"]
_DESERT = ["sandy desert", "desert dunes", "dry desert"]
_NEUTRAL = ["quiet place", "shaded spot", "open area"]

#: The 40-word concept vocabulary of the bird task: the planted words, bird-related scenery
#: (the zero-shot prior), and neutral words.
BIRD_VOCABULARY = [
    "snow", "winter", "ice", "frost", "desert", "dunes", "sand", "cactus",
    "forest", "tree", "lake", "river", "ocean", "beach", "water", "wetland", "marsh", "sky",
    "mountain", "rain", "grass", "field", "hill", "rock", "cloud", "sun", "night", "morning",
    "city", "road", "car", "house", "book", "music", "bread", "chair", "phone", "garden",
    "flower", "wind",
]  # fmt: skip


def make_bird_sentences(
    rho: float = 0.95,
    *,
    n_train: int = 1200,
    n_val: int = 400,
    n_test: int = 800,
    seed: int = 0,
) -> TextTask:
    """Templated bird sentences with a counter-semantic planted shortcut.

    ``"a {species} {verb} in a {background} {filler}"`` with 10 land- and 10 water-bird species;
    landbirds (class 0) appear on snowy backgrounds (attribute 0) and waterbirds (class 1) in
    deserts (attribute 1) with probability ``rho``; the test split is group-balanced. Class
    anchors are "a photo of a landbird/waterbird". Planted concepts: snow/winter for class 0,
    desert/dunes/sand for class 1.
    """
    species = (_LAND, _WATER)
    backgrounds = (_SNOW, _DESERT)

    def render(y: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> list[str]:
        out = []
        for yi, ai in zip(y, a, strict=True):
            sp = species[yi][rng.integers(10)]
            bg = (_NEUTRAL if ai < 0 else backgrounds[ai])[rng.integers(3)]
            out.append(
                f"a {sp} {_VERBS[rng.integers(len(_VERBS))]} in a {bg} "
                f"{_FILLERS[rng.integers(len(_FILLERS))]}"
            )
        return out

    rho, rng, splits = _templated_splits(render, rho, n_train, n_val, n_test, seed)
    yn = np.arange(n_test) % 2
    an = np.full(n_test, -1)
    neutral = Split(y=yn, a=an, texts=render(yn, an, rng))
    from iclr26.bee.vocab import BIRD_CLASS_TERMS

    return TextTask(
        train=splits[0],
        val=splits[1],
        test=splits[2],
        class_names=["landbird", "waterbird"],
        anchor_texts=["a photo of a landbird", "a photo of a waterbird"],
        vocabulary=list(BIRD_VOCABULARY),
        planted={0: ["snow", "winter"], 1: ["desert", "dunes", "sand"]},
        backgrounds={0: list(_SNOW), 1: list(_DESERT)},
        rho=rho,
        class_terms=list(BIRD_CLASS_TERMS),
        neutral=neutral,
    )


_POS = ["I loved it", "works perfectly", "excellent quality", "highly recommended",
        "a great purchase", "very happy with it"]  # fmt: skip
_NEG = ["I hated it", "broke after a week", "terrible quality", "would not recommend",
        "a waste of money", "very disappointed"]  # fmt: skip
_KITCHEN = ["blender", "toaster", "kettle", "frying pan"]
_GARDEN = ["lawn mower", "garden hose", "rake", "hedge trimmer"]

#: Concept vocabulary of the review task.
REVIEW_VOCABULARY = [
    "kitchen", "cooking", "toaster", "blender", "garden", "lawn", "hose", "plants", "music",
    "travel", "shoes", "book", "car", "phone", "weather", "price", "delivery", "color",
    "gift", "office",
]  # fmt: skip


def make_review_sentences(
    rho: float = 0.95,
    *,
    n_train: int = 1200,
    n_val: int = 400,
    n_test: int = 800,
    seed: int = 0,
) -> TextTask:
    """Templated product reviews: sentiment (0 negative, 1 positive) spuriously tied to the product
    category (kitchen for negative, garden for positive) with probability ``rho``.

    A second text task whose shortcut has no semantic link to the label.
    """
    phrases = (_NEG, _POS)
    products = (_KITCHEN, _GARDEN)

    def render(y: np.ndarray, a: np.ndarray, rng: np.random.Generator) -> list[str]:
        return [
            f"the {products[ai][rng.integers(4)]}: {phrases[yi][rng.integers(6)]}"
            for yi, ai in zip(y, a, strict=True)
        ]

    rho, _, splits = _templated_splits(render, rho, n_train, n_val, n_test, seed)
    return TextTask(
        train=splits[0],
        val=splits[1],
        test=splits[2],
        class_names=["negative", "positive"],
        anchor_texts=["a negative review", "a positive review"],
        vocabulary=list(REVIEW_VOCABULARY),
        planted={0: ["kitchen", "toaster", "blender"], 1: ["garden", "lawn", "hose"]},
        backgrounds={0: list(_KITCHEN), 1: list(_GARDEN)},
        rho=rho,
    )


def _read_csv(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise OSError(f"metadata file not found: {path}")
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} holds no rows")
    return rows


def _int_column(rows: list[dict[str, str]], key: str, path: Any) -> np.ndarray:
    if key not in rows[0]:
        raise ValueError(f"{path} has no column {key!r}; columns: {list(rows[0])}")
    try:
        vals = [float(r[key]) for r in rows]
    except ValueError as err:
        raise ValueError(f"{path}: column {key!r} must be numeric ({err})") from err
    arr = np.asarray(vals)
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{path}: column {key!r} must hold integers")
    return arr.astype(np.int64)


def load_metadata_csv(
    path: str | os.PathLike[str], embeddings: Any = None
) -> dict[str, Split | list[str]]:
    """Read a Waterbirds-style ``metadata.csv`` (``filename, split, y, a``; split 0/1/2 =
    train/val/test), optionally with ``(n, d)`` embeddings in the same row order.

    Returns ``{"train": Split, "val": Split, "test": Split, "filenames": [...]}``.
    """
    rows = _read_csv(path)
    split = _int_column(rows, "split", path)
    y = _int_column(rows, "y", path)
    a = _int_column(rows, "a", path)
    X = None
    if embeddings is not None:
        from iclr26.bee.scoring import as_matrix

        X = as_matrix(embeddings, "embeddings")
        if X.shape[0] != len(rows):
            raise ValueError(f"embeddings have {X.shape[0]} rows but {path} has {len(rows)}")
    out: dict[str, Split | list[str]] = {"filenames": [r.get("filename", "") for r in rows]}
    for sid, name in enumerate(("train", "val", "test")):
        m = split == sid
        out[name] = Split(y=y[m], a=a[m], X=None if X is None else X[m])
    return out


#: Identity columns of the WILDS CivilComments release used as the spurious attribute.
CIVIL_IDENTITIES = ("male", "female", "LGBTQ", "christian", "muslim", "other_religions",
                    "black", "white")  # fmt: skip


def load_civilcomments(
    path: str | os.PathLike[str],
    *,
    identities: tuple[str, ...] = CIVIL_IDENTITIES,
    threshold: float = 0.5,
) -> dict[str, Split]:
    """Read a CivilComments CSV in the WILDS layout (``comment_text``, ``toxicity``, ``split`` in
    train/val/test, identity columns). ``y = toxicity >= threshold``; ``a = 1`` when any identity
    column is ``>= threshold``. Returns ``{"train", "val", "test"}`` splits with ``texts``.
    """
    rows = _read_csv(path)
    for key in ("comment_text", "toxicity", "split"):
        if key not in rows[0]:
            raise ValueError(f"{path} has no column {key!r}")
    present = [i for i in identities if i in rows[0]]
    if not present:
        raise ValueError(f"{path} has none of the identity columns {identities}")
    out: dict[str, Split] = {}
    for name in ("train", "val", "test"):
        sub = [r for r in rows if r["split"] == name]
        y = np.array([float(r["toxicity"] or 0) >= threshold for r in sub], dtype=np.int64)
        a = np.array(
            [any(float(r[i] or 0) >= threshold for i in present) for r in sub], dtype=np.int64
        )
        out[name] = Split(y=y, a=a, texts=[r["comment_text"] for r in sub])
    return out
