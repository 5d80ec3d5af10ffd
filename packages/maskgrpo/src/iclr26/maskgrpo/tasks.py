"""Verifiable generated tasks (spec §5.3) and the :class:`Task` protocol for your own verifier.

Shared vocabulary: digits 0–9 are ids 0–9, ``|`` (SEP) is 10, ``+`` is 11 and the mask token is
12 (``VOCAB_SIZE = 13``). A prompt ends with SEP; the completion has a fixed length.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from iclr26.shared import check_int

__all__ = [
    "MASK_ID",
    "PLUS",
    "SEP",
    "VOCAB_SIZE",
    "Add3",
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
    ``score`` a partial-credit version logged beside it.
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

TASKS = {"sort8": Sort8, "add3": Add3, "sudoku4": Sudoku4}


def get_task(name: str) -> Task:
    """The built-in task called ``name`` (``"sort8"``, ``"add3"``, ``"sudoku4"``)."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {', '.join(map(repr, TASKS))}; got {name!r}")
    return TASKS[name]()
