"""Verifiable generated tasks (spec §5.3) and the :class:`Task` protocol for your own verifier.

Text tasks share one vocabulary: digits 0–9 are ids 0–9, ``|`` (SEP) is 10, ``+`` is 11 and the
mask token is 12 (``VOCAB_SIZE = 13``). A prompt ends with SEP; the completion has a fixed length.
The visual task :class:`DigitsT2I` has its own vocabulary (grey levels, class tokens, a null
prompt, the mask); every task carries its ``vocab_size`` and ``mask_id``.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from iclr26.shared import check_int

__all__ = [
    "MASK_ID",
    "PLUS",
    "SEP",
    "VOCAB_SIZE",
    "Add3",
    "DigitsT2I",
    "Sort8",
    "Sudoku4",
    "Task",
    "get_task",
]

SEP, PLUS, MASK_ID, VOCAB_SIZE = 10, 11, 12, 13


@runtime_checkable
class Task(Protocol):
    """A verifiable generation task: prompts, reference solutions and a reward.

    ``reward(prompts, completions)`` returns a float tensor (N,) in [0, 1] (1 = solved);
    ``score`` a partial-credit version logged beside it. A task whose prompts have many
    solutions (an image per class) may also define ``sample_pairs(n, seed) -> (prompts,
    completions)``, the training pairs :func:`~iclr26.maskgrpo.pretrain_denoiser` draws instead
    of ``(prompts, solutions(prompts))``.
    """

    name: str
    prompt_len: int
    completion_len: int
    vocab_size: int
    mask_id: int

    def sample_prompts(self, n: int, seed: int) -> torch.Tensor: ...
    def solutions(self, prompts: torch.Tensor) -> torch.Tensor: ...
    def reward(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor: ...
    def score(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor: ...


class _Base:
    name = ""
    prompt_len = 0
    completion_len = 0
    vocab_size = VOCAB_SIZE
    mask_id = MASK_ID

    def _check(self, prompts: torch.Tensor, completions: torch.Tensor | None = None) -> None:
        if not isinstance(prompts, torch.Tensor) or prompts.dtype != torch.long:
            raise TypeError("prompts must be a torch.LongTensor")
        if prompts.ndim != 2 or prompts.shape[1] != self.prompt_len:
            raise ValueError(f"prompts must be (N, {self.prompt_len}), got {tuple(prompts.shape)}")
        if completions is not None:
            if not isinstance(completions, torch.Tensor) or completions.dtype != torch.long:
                raise TypeError("completions must be a torch.LongTensor")
            if completions.shape != (prompts.shape[0], self.completion_len):
                raise ValueError(
                    f"completions must be ({prompts.shape[0]}, {self.completion_len}), got "
                    f"{tuple(completions.shape)}"
                )

    def _rng(self, n: int, seed: int) -> np.random.Generator:
        check_int(n, "n", low=1)
        check_int(seed, "seed", low=0)
        return np.random.default_rng([seed, sum(map(ord, self.name))])

    def reward(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """1.0 where the completion is exactly the solution, else 0.0."""
        self._check(prompts, completions)
        return (completions == self.solutions(prompts)).all(1).float()

    def score(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """Fraction of completion positions equal to the solution."""
        self._check(prompts, completions)
        return (completions == self.solutions(prompts)).float().mean(1)


@dataclass(frozen=True)
class Sort8(_Base):
    """Sort-8: prompt 8 random digits + SEP, completion the digits in ascending order.

    Left-to-right structure that suits AR-like remasking.
    """

    n_digits: int = 8
    name = "sort8"

    @property
    def prompt_len(self) -> int:  # type: ignore[override]
        return self.n_digits + 1

    @property
    def completion_len(self) -> int:  # type: ignore[override]
        return self.n_digits

    def sample_prompts(self, n: int, seed: int) -> torch.Tensor:
        """(n, 9) prompts drawn with ``seed``."""
        d = self._rng(n, seed).integers(0, 10, size=(n, self.n_digits))
        return torch.as_tensor(np.concatenate([d, np.full((n, 1), SEP)], 1), dtype=torch.long)

    def solutions(self, prompts: torch.Tensor) -> torch.Tensor:
        """(n, 8) sorted digits."""
        self._check(prompts)
        return prompts[:, : self.n_digits].sort(1).values


@dataclass(frozen=True)
class Add3(_Base):
    """Add-3: ``abc+def|`` → the 4-digit zero-padded sum. Carries flow right to left: a stress
    test for the left-to-right prior of AR-like remasking."""

    name = "add3"
    prompt_len = 8
    completion_len = 4

    def sample_prompts(self, n: int, seed: int) -> torch.Tensor:
        """(n, 8) prompts drawn with ``seed``."""
        d = self._rng(n, seed).integers(0, 10, size=(n, 6))
        out = np.concatenate([d[:, :3], np.full((n, 1), PLUS), d[:, 3:], np.full((n, 1), SEP)], 1)
        return torch.as_tensor(out, dtype=torch.long)

    def solutions(self, prompts: torch.Tensor) -> torch.Tensor:
        """(n, 4) digits of the sum."""
        self._check(prompts)
        place = torch.tensor([100, 10, 1])
        s = (prompts[:, :3] * place).sum(1) + (prompts[:, 4:7] * place).sum(1)
        return torch.stack([(s // 10**k) % 10 for k in (3, 2, 1, 0)], 1)


def _all_grids() -> np.ndarray:
    """Every valid 4×4 sudoku grid (288), by backtracking over rows of permutations."""
    rows = [np.array(p) for p in itertools.permutations(range(1, 5))]
    out: list[np.ndarray] = []

    def fill(grid: list[np.ndarray]) -> None:
        if len(grid) == 4:
            out.append(np.concatenate(grid))
            return
        for r in rows:
            if any((r == prev).any() for prev in grid):  # column clash
                continue
            if len(grid) % 2 == 1:  # second row of a band: the two 2x2 boxes
                top = grid[-1]
                if len({*top[:2], *r[:2]}) < 4 or len({*top[2:], *r[2:]}) < 4:
                    continue
            fill([*grid, r])

    fill([])
    return np.array(out)


_GROUPS = np.array(
    [[4 * r + c for c in range(4)] for r in range(4)]
    + [[4 * r + c for r in range(4)] for c in range(4)]
    + [[4 * (bi + i) + bj + j for i in (0, 1) for j in (0, 1)] for bi in (0, 2) for bj in (0, 2)]
)


@dataclass(frozen=True)
class Sudoku4(_Base):
    """Sudoku-4×4: prompt the 16 cells row-major (0 = blank, 1–4 given) + SEP, completion the
    full grid. Reward 1 iff every row, column and 2×2 box holds 1–4 and the givens are kept
    (any valid completion counts, unique or not); ``score`` = fraction of the 12 groups valid
    and givens kept."""

    n_blanks: int = 4
    name = "sudoku4"
    prompt_len = 17
    completion_len = 16

    def __post_init__(self) -> None:
        check_int(self.n_blanks, "n_blanks", low=1, high=16)

    def sample_prompts(self, n: int, seed: int) -> torch.Tensor:
        """(n, 17) puzzles with ``n_blanks`` blanks each, drawn with ``seed``."""
        rng = self._rng(n, seed)
        grids = _GRIDS[rng.integers(0, len(_GRIDS), size=n)].copy()
        for row in grids:
            row[rng.choice(16, size=self.n_blanks, replace=False)] = 0
        return torch.as_tensor(np.concatenate([grids, np.full((n, 1), SEP)], 1), dtype=torch.long)

    def solutions(self, prompts: torch.Tensor) -> torch.Tensor:
        """(n, 16) one valid solution per puzzle (the first in a fixed enumeration)."""
        self._check(prompts)
        givens = prompts[:, :16].numpy()
        grids = _GRIDS
        ok = ((grids[None] == givens[:, None]) | (givens[:, None] == 0)).all(-1)
        if not ok.any(1).all():
            raise ValueError("a puzzle in prompts has no valid solution")
        return torch.as_tensor(grids[ok.argmax(1)], dtype=torch.long)

    def _parts(self, prompts, completions):
        self._check(prompts, completions)
        c = completions.numpy()
        g = prompts[:, :16].numpy()
        keeps = ((c == g) | (g == 0)).all(1)
        vals = c[:, _GROUPS]  # (n, 12, 4)
        group_ok = (np.sort(vals, -1) == np.arange(1, 5)).all(-1)
        return keeps, group_ok

    def reward(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """1.0 for a valid grid that keeps the givens, else 0.0."""
        keeps, group_ok = self._parts(prompts, completions)
        return torch.as_tensor(keeps & group_ok.all(1), dtype=torch.float32)

    def score(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """Fraction of valid groups, 0 when a given was changed."""
        keeps, group_ok = self._parts(prompts, completions)
        return torch.as_tensor(keeps * group_ok.mean(1), dtype=torch.float32)


_GRIDS = _all_grids()  # the 288 valid 4×4 sudoku grids

_DIGITS_CACHE: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, Any]] = {}


def _digits_data(size: int, levels: int) -> tuple[np.ndarray, np.ndarray, Any]:
    """scikit-learn's 8×8 digits as tokens (N, size²) and labels (N,), and the reward classifier
    (logistic regression on the grey values of the same tokens scaled to [0, 1]), cached per
    preset."""
    key = (size, levels)
    if key not in _DIGITS_CACHE:
        from sklearn.datasets import load_digits
        from sklearn.linear_model import LogisticRegression

        data = load_digits()
        images = data.images.astype(np.float64)  # (1797, 8, 8), values 0..16
        if size == 4:  # 2×2 average pooling
            images = images.reshape(-1, 4, 2, 4, 2).mean((2, 4))
        tokens = np.rint(images.reshape(len(images), -1) * (levels - 1) / 16.0).astype(np.int64)
        labels = data.target.astype(np.int64)
        clf = LogisticRegression(max_iter=1000, C=1.0)  # lbfgs: deterministic
        clf.fit(tokens / (levels - 1.0), labels)  # features: grey values scaled to [0, 1]
        _DIGITS_CACHE[key] = (tokens, labels, clf)
    return _DIGITS_CACHE[key]


@dataclass(frozen=True)
class DigitsT2I:
    """Digits-T2I (spec §5.3): class-conditional image generation on scikit-learn's 8×8 digits.

    Prompt: one class token; completion: the image row-major as ``size²`` grey-level tokens
    (``levels`` levels of the 0–16 pixel scale; 8×8 = 64 tokens, or 4×4 2×2-average-pooled =
    16 tokens, the spec's CI preset). Vocabulary: grey levels ``0..levels−1``, class ``c`` is
    ``levels + c``, the null (unconditional) prompt ``levels + 10`` and the mask ``levels + 11``.
    Reward: the probability of the prompted class under a scikit-learn logistic regression
    trained on every ``load_digits()`` image at this tokenisation (the verifiable reward of the
    spec, in [0, 1]); ``score``: 1 where the classifier's top class is the prompted one.
    Training pairs (:meth:`sample_pairs`) are dataset images with their class, the prompt
    replaced by the null prompt with probability ``p_uncond`` (classifier-free guidance).

    Args:
        size: 8 (64 tokens) or 4 (16 tokens).
        levels: grey levels, 2–17 (17 keeps the dataset's 0–16 values exactly).
        p_uncond: class-dropout probability of :meth:`sample_pairs`.
    """

    size: int = 8
    levels: int = 5
    p_uncond: float = 0.1

    def __post_init__(self) -> None:
        if self.size not in (4, 8) or isinstance(self.size, bool):
            raise ValueError(f"size must be 8 or 4, got {self.size!r}")
        check_int(self.levels, "levels", low=2, high=17)
        if not isinstance(self.p_uncond, (int, float)) or not 0.0 <= self.p_uncond < 1.0:
            raise ValueError(f"p_uncond must lie in [0, 1), got {self.p_uncond!r}")

    @property
    def name(self) -> str:  # type: ignore[override]
        """``"digits"`` (8×8) or ``"digits4"`` (4×4)."""
        return "digits" if self.size == 8 else "digits4"

    @property
    def prompt_len(self) -> int:
        return 1

    @property
    def completion_len(self) -> int:
        return self.size * self.size

    @property
    def vocab_size(self) -> int:
        return self.levels + 12

    @property
    def mask_id(self) -> int:
        return self.levels + 11

    @property
    def null_id(self) -> int:
        """The unconditional prompt token (classifier-free guidance)."""
        return self.levels + 10

    @property
    def uncond_ids(self) -> torch.Tensor:
        """(1,) the unconditional prompt, the ``uncond_ids`` of the emerge / MaskGIT samplers."""
        return torch.tensor([self.null_id], dtype=torch.long)

    def class_token(self, label: int) -> int:
        """Token id of digit class ``label`` (0–9)."""
        check_int(label, "label", low=0, high=9)
        return self.levels + label

    def encode_images(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Grey images (N, size, size) on the dataset's 0–16 scale → tokens (N, size²) long
        (each pixel rounded to the nearest of the ``levels`` levels)."""
        x = torch.as_tensor(np.asarray(images), dtype=torch.float64)
        if x.ndim != 3 or x.shape[1:] != (self.size, self.size):
            raise ValueError(f"images must be (N, {self.size}, {self.size}), got {tuple(x.shape)}")
        if not torch.isfinite(x).all() or x.min() < 0 or x.max() > 16:
            raise ValueError("images must be finite grey values in [0, 16]")
        return torch.round(x.reshape(len(x), -1) * (self.levels - 1) / 16.0).long()

    def decode_tokens(self, completions: torch.Tensor) -> torch.Tensor:
        """Completion tokens (N, size²) → grey images (N, size, size) float64 on 0–16."""
        self._check_completions(completions)
        return (completions.double() * (16.0 / (self.levels - 1))).view(-1, self.size, self.size)

    def _check_completions(self, completions: torch.Tensor) -> None:
        if not isinstance(completions, torch.Tensor) or completions.dtype != torch.long:
            raise TypeError("completions must be a torch.LongTensor")
        if completions.ndim != 2 or completions.shape[1] != self.completion_len:
            raise ValueError(
                f"completions must be (N, {self.completion_len}), got {tuple(completions.shape)}"
            )
        if completions.numel() and (completions.min() < 0 or completions.max() >= self.levels):
            raise ValueError(f"completions must hold grey-level tokens in [0, {self.levels})")

    def _check(self, prompts: torch.Tensor, completions: torch.Tensor | None = None) -> None:
        """Prompts: class tokens; completions: any non-mask tokens of the vocabulary (a sampler
        may emit class or null tokens in image positions: such an image is invalid)."""
        if not isinstance(prompts, torch.Tensor) or prompts.dtype != torch.long:
            raise TypeError("prompts must be a torch.LongTensor")
        if prompts.ndim != 2 or prompts.shape[1] != 1:
            raise ValueError(f"prompts must be (N, 1) class tokens, got {tuple(prompts.shape)}")
        if prompts.numel() and (prompts.min() < self.levels or prompts.max() > self.levels + 9):
            raise ValueError(f"prompts must be class tokens in [{self.levels}, {self.levels + 9}]")
        if completions is not None:
            if not isinstance(completions, torch.Tensor) or completions.dtype != torch.long:
                raise TypeError("completions must be a torch.LongTensor")
            if completions.ndim != 2 or completions.shape[1] != self.completion_len:
                raise ValueError(
                    f"completions must be (N, {self.completion_len}), got "
                    f"{tuple(completions.shape)}"
                )
            if completions.numel() and (completions.min() < 0 or completions.max() >= self.mask_id):
                raise ValueError(f"completions must hold non-mask tokens in [0, {self.mask_id})")
            if completions.shape[0] != prompts.shape[0]:
                raise ValueError(
                    f"completions has {completions.shape[0]} rows for {prompts.shape[0]} prompts"
                )

    def labels(self, prompts: torch.Tensor) -> torch.Tensor:
        """Digit class (N,) of each prompt."""
        self._check(prompts)
        return prompts[:, 0] - self.levels

    def sample_prompts(self, n: int, seed: int) -> torch.Tensor:
        """(n, 1) class tokens, uniform over the ten digits, drawn with ``seed``."""
        check_int(n, "n", low=1)
        check_int(seed, "seed", low=0)
        rng = np.random.default_rng([seed, sum(map(ord, self.name))])
        return torch.as_tensor(self.levels + rng.integers(0, 10, size=(n, 1)), dtype=torch.long)

    def sample_pairs(self, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, 1) prompts and (n, size²) completions: dataset images with their class token
        (the null prompt with probability ``p_uncond``), drawn with ``seed``."""
        check_int(n, "n", low=1)
        check_int(seed, "seed", low=0)
        tokens, labels, _ = _digits_data(self.size, self.levels)
        rng = np.random.default_rng([seed, sum(map(ord, self.name)), 1])
        idx = rng.integers(0, len(tokens), size=n)
        prompts = self.levels + labels[idx]
        prompts = np.where(rng.random(n) < self.p_uncond, self.null_id, prompts)
        return (
            torch.as_tensor(prompts[:, None], dtype=torch.long),
            torch.as_tensor(tokens[idx], dtype=torch.long),
        )

    def solutions(self, prompts: torch.Tensor) -> torch.Tensor:
        """One reference image per prompt: the first dataset image of its class (any image the
        classifier assigns to the class is a solution; the reward does not use this)."""
        tokens, labels, _ = _digits_data(self.size, self.levels)
        first = np.array([np.flatnonzero(labels == c)[0] for c in range(10)])
        return torch.as_tensor(tokens[first[self.labels(prompts).numpy()]], dtype=torch.long)

    def class_probs(self, completions: torch.Tensor) -> torch.Tensor:
        """(N, 10) float64 class probabilities of the reward classifier for each image."""
        self._check_completions(completions)
        _, _, clf = _digits_data(self.size, self.levels)
        if completions.shape[0] == 0:
            return torch.zeros(0, 10, dtype=torch.float64)
        feats = completions.cpu().numpy().astype(np.float64) / (self.levels - 1.0)
        return torch.as_tensor(clf.predict_proba(feats), dtype=torch.float64)

    def _valid_probs(self, prompts, completions) -> tuple[torch.Tensor, torch.Tensor]:
        self._check(prompts, completions)
        comps = completions.cpu()
        valid = (comps < self.levels).all(1)
        probs = torch.zeros(len(comps), 10, dtype=torch.float64)
        if valid.any():
            probs[valid] = self.class_probs(comps[valid])
        return probs, valid

    def reward(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """Probability of the prompted class under the classifier, float32 (N,) in [0, 1]; 0
        for an image holding a token that is not a grey level (a class or the null token)."""
        probs, _ = self._valid_probs(prompts, completions)
        return probs.gather(1, self.labels(prompts)[:, None].cpu()).squeeze(1).float()

    def score(self, prompts: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        """1.0 where the image is valid and the classifier's most probable class is the
        prompted one, else 0.0."""
        probs, valid = self._valid_probs(prompts, completions)
        return ((probs.argmax(1) == self.labels(prompts).cpu()) & valid).float()


TASKS = {
    "sort8": Sort8,
    "add3": Add3,
    "sudoku4": Sudoku4,
    "digits": DigitsT2I,
    "digits4": functools.partial(DigitsT2I, size=4),
}


def get_task(name: str) -> Task:
    """The built-in task called ``name``: ``"sort8"``, ``"add3"``, ``"sudoku4"``, ``"digits"``
    (Digits-T2I 8×8) or ``"digits4"`` (Digits-T2I 4×4, the shipped image denoiser's)."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASKS))}; got {name!r}")
    return TASKS[name]()
