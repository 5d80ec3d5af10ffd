"""Data the experiments run on, all offline: scikit-learn's bundled digits and a synthetic
instruction-tuning suite of eight task families (generated in-process)."""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from iclr26.shared import check_int, check_range

__all__ = [
    "TASK_FAMILIES",
    "Digits",
    "InstructionSuite",
    "load_digits_split",
    "make_instruction_suite",
]


@dataclass(frozen=True)
class Digits:
    """Digits split into train / validation / test; ``noisy`` marks flipped training labels."""

    X_train: NDArray[np.float32]
    y_train: NDArray[np.int64]
    X_val: NDArray[np.float32]
    y_val: NDArray[np.int64]
    X_test: NDArray[np.float32]
    y_test: NDArray[np.int64]
    noisy: NDArray[np.bool_]


def load_digits_split(*, label_noise: float = 0.0, n_val: int = 100, seed: int = 0) -> Digits:
    """scikit-learn's 1,797 8×8 digits, scaled to [0, 1], split 60/…/rest with a validation set.

    Args:
        label_noise: share of training labels replaced by a different random class.
        n_val: validation examples (the target set of LESS-style selection).
        seed: split and noise seed.
    """
    from sklearn.datasets import load_digits

    check_range(label_noise, "label_noise", low=0.0, high=1.0, high_inclusive=False)
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_train = int(0.6 * len(y))
    tr, va, te = order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
    y_train = y[tr].copy()
    noisy = rng.random(n_train) < label_noise
    y_train[noisy] = (y_train[noisy] + rng.integers(1, 10, noisy.sum())) % 10
    return Digits(X[tr], y_train, X[va], y[va], X[te], y[te], noisy)


# ---------------------------------------------------------------- synthetic instruction suite

_WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "tiger",
    "lemon",
    "piano",
    "rocket",
    "garden",
    "silver",
    "forest",
    "candle",
    "orange",
    "window",
    "planet",
    "bridge",
    "castle",
    "dragon",
    "marble",
    "pepper",
    "summer",
    "winter",
    "yellow",
    "purple",
]


def _reverse(rng: np.random.Generator) -> tuple[str, str]:
    w = "".join(rng.choice(list(string.ascii_lowercase), rng.integers(3, 7)))
    return f"reverse {w}", w[::-1]


def _sort_digits(rng: np.random.Generator) -> tuple[str, str]:
    d = "".join(rng.choice(list("0123456789"), rng.integers(3, 7)))
    return f"sort {d}", "".join(sorted(d))


def _add(rng: np.random.Generator) -> tuple[str, str]:
    a, b = (int(v) for v in rng.integers(0, 50, 2))
    return f"add {a} {b}", str(a + b)


def _upper(rng: np.random.Generator) -> tuple[str, str]:
    w = str(rng.choice(_WORDS))
    return f"upper {w}", w.upper()


def _count(rng: np.random.Generator) -> tuple[str, str]:
    w = str(rng.choice(_WORDS))
    c = str(rng.choice(sorted(set(w))))
    return f"count {c} in {w}", str(w.count(c))


def _length(rng: np.random.Generator) -> tuple[str, str]:
    w = str(rng.choice(_WORDS))
    return f"length {w}", str(len(w))


def _brackets(rng: np.random.Generator) -> tuple[str, str]:
    s = "".join(rng.choice(list("()"), rng.integers(2, 7)))
    depth, ok = 0, True
    for ch in s:
        depth += 1 if ch == "(" else -1
        ok &= depth >= 0
    return f"balanced {s}", "yes" if ok and depth == 0 else "no"


def _capital(rng: np.random.Generator) -> tuple[str, str]:
    country, capital = _CAPITALS[int(rng.integers(len(_CAPITALS)))]
    return f"capital {country}", capital


_CAPITALS = [
    ("france", "paris"), ("japan", "tokyo"), ("peru", "lima"), ("kenya", "nairobi"),
    ("italy", "rome"), ("egypt", "cairo"), ("chile", "santiago"), ("spain", "madrid"),
    ("cuba", "havana"), ("iran", "tehran"), ("mali", "bamako"), ("nepal", "kathmandu"),
]  # fmt: skip

#: The eight task families of the suite (a stand-in for the paper's eight benchmarks).
TASK_FAMILIES = {
    "reverse": _reverse, "sort": _sort_digits, "add": _add, "upper": _upper,
    "count": _count, "length": _length, "brackets": _brackets, "capital": _capital,
}  # fmt: skip


@dataclass(frozen=True)
class InstructionSuite:
    """Instruction/response pairs with their task family and a flag for corrupted responses."""

    instructions: list[str]
    responses: list[str]
    families: NDArray[np.int64]
    corrupted: NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.instructions)


def make_instruction_suite(n: int, *, corruption: float = 0.0, seed: int = 0) -> InstructionSuite:
    """``n`` examples drawn evenly from :data:`TASK_FAMILIES`; a share ``corruption`` of them get
    a wrong response (another example's), the low-quality data a selector should avoid."""
    check_int(n, "n", low=1)
    check_range(corruption, "corruption", low=0.0, high=1.0)
    rng = np.random.default_rng(seed)
    names = list(TASK_FAMILIES)
    families = rng.integers(len(names), size=n)
    pairs = [TASK_FAMILIES[names[f]](rng) for f in families]
    instructions = [p[0] for p in pairs]
    responses = [p[1] for p in pairs]
    corrupted = rng.random(n) < corruption
    shuffled = rng.permutation(n)
    for i in np.flatnonzero(corrupted):
        responses[i] = (
            responses[shuffled[i]]
            if responses[shuffled[i]] != responses[i]
            else responses[i][::-1] + "x"
        )
    return InstructionSuite(instructions, responses, families.astype(np.int64), corrupted)
