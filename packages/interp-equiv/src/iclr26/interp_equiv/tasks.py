"""Tasks with several known algorithms (high-level causal models) computing the same labels.

An :class:`Algorithm` names its intermediate variables (functions of the input tokens) and the
output computed from them. Two algorithms of a task agree on every real input, so behaviour
cannot tell their implementations apart; they differ in their variables, hence in the outputs of
interchange interventions (:meth:`Algorithm.counterfactual`).

* :class:`PermutationDetection` — is a length-``n`` sequence over ``{0..n-1}`` a permutation?
  (the official toy task) with ``sort_diff``, ``dup_count`` and ``rank_check``.
* :class:`ModSum` — sum of ``L`` digits mod ``p`` with ``pairwise`` and ``total`` (fast MLP tier).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from iclr26.shared import check_int

__all__ = ["Algorithm", "ModSum", "PermutationDetection", "Task", "Variable"]


@dataclass(frozen=True)
class Variable:
    """An intermediate variable: ``fn(tokens) -> (batch,)`` long tensor with values in ``[0, n_values)``."""

    fn: Callable[[torch.Tensor], torch.Tensor]
    n_values: int


@dataclass(frozen=True)
class Algorithm:
    """A high-level causal model: variables computed from the input, output from the variables."""

    name: str
    variables: Mapping[str, Variable]
    output: Callable[[Mapping[str, torch.Tensor]], torch.Tensor]
    description: str = ""

    def values(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every variable on ``tokens``."""
        return {k: v.fn(tokens) for k, v in self.variables.items()}

    def label(self, tokens: torch.Tensor) -> torch.Tensor:
        """The algorithm's output on ``tokens`` (equals the task's label)."""
        return self.output(self.values(tokens))

    def counterfactual(
        self,
        base: torch.Tensor,
        source: torch.Tensor,
        swap: Mapping[str, torch.Tensor],
    ) -> torch.Tensor:
        """Output after an interchange intervention: variables in ``swap`` take their value on
        ``source`` where the boolean ``(batch,)`` mask is true, the others keep their ``base`` value.
        """
        unknown = set(swap) - set(self.variables)
        if unknown:
            raise ValueError(
                f"unknown variables {sorted(unknown)}; {self.name} has {list(self.variables)}"
            )
        vb, vs = self.values(base), self.values(source)
        mixed = {k: torch.where(swap[k].bool(), vs[k], vb[k]) if k in swap else vb[k] for k in vb}
        return self.output(mixed)


@dataclass
class Task:
    """A classification task over integer token sequences with one or more algorithms."""

    name: str
    vocab: int
    seq_len: int
    n_classes: int
    algorithms: dict[str, Algorithm] = field(default_factory=dict)

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` inputs ``(n, seq_len)`` and labels ``(n,)``; each concrete task defines it."""
        raise TypeError(f"{type(self).__name__} defines no input distribution: subclass Task")

    def label(self, tokens: torch.Tensor) -> torch.Tensor:
        """Task labels of ``tokens`` (every algorithm computes the same ones)."""
        return next(iter(self.algorithms.values())).label(tokens)

    def algorithm(self, name: str) -> Algorithm:
        if name not in self.algorithms:
            raise ValueError(
                f"unknown algorithm {name!r}; {self.name} has {sorted(self.algorithms)}"
            )
        return self.algorithms[name]


def _all_positions(n: int, fn: Callable[[torch.Tensor, int], torch.Tensor], values: int):
    return {f"v{i}": Variable(lambda t, i=i: fn(t, i), values) for i in range(n)}


class PermutationDetection(Task):
    """Label 1 iff the first ``n`` tokens are a permutation of ``0..n-1``; token ``n`` is a
    classification token appended at the end (``seq_len = n + 1``, ``vocab = n + 1``).

    Algorithms (one variable per position ``i``, named ``v{i}``):

    * ``sort_diff`` — ``v_i = sorted(x)_i``; output: ``v_i == i`` for all ``i`` (sorted values step
      by one from 0).
    * ``dup_count`` — ``v_i = #{j != i : x_j = x_i}``; output: every count is 0 (no duplicate).
    * ``rank_check`` — ``v_i = #{j : x_j < x_i}`` (count-less-than); output: the ranks are
      ``0..n-1`` in some order.

    The sampler is balanced: half permutations, half non-permutations (only ``n!`` of ``n^n``
    sequences are permutations).
    """

    def __init__(self, n: int = 5) -> None:
        check_int(n, "n", low=2, high=12)
        super().__init__("permutation_detection", vocab=n + 1, seq_len=n + 1, n_classes=2)
        self.n = n
        ar = torch.arange(n)

        def digits(t: torch.Tensor) -> torch.Tensor:
            return t[:, :n]

        def sort_v(t, i):
            return digits(t).sort(1).values[:, i]

        def dup_v(t, i):
            d = digits(t)
            return (d == d[:, i : i + 1]).sum(1) - 1

        def rank_v(t, i):
            d = digits(t)
            return (d < d[:, i : i + 1]).sum(1)

        def stack(v: Mapping[str, torch.Tensor]) -> torch.Tensor:
            return torch.stack([v[f"v{i}"] for i in range(n)], 1)

        self.algorithms = {
            "sort_diff": Algorithm(
                "sort_diff", _all_positions(n, sort_v, n),
                lambda v: (stack(v) == ar).all(1).long(),
                "sort, then check that adjacent differences are 1 starting at 0",
            ),
            "dup_count": Algorithm(
                "dup_count", _all_positions(n, dup_v, n),
                lambda v: (stack(v) == 0).all(1).long(),
                "count duplicates of each element, then check none has one",
            ),
            "rank_check": Algorithm(
                "rank_check", _all_positions(n, rank_v, n),
                lambda v: (stack(v).sort(1).values == ar).all(1).long(),
                "count smaller elements of each position, then check the ranks are 0..n-1",
            ),
        }  # fmt: skip

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        check_int(n, "n", low=1)
        k = self.n
        n_perm = n // 2
        perms = torch.argsort(torch.rand(n_perm, k, generator=generator), 1)
        others = torch.randint(0, k, (2 * (n - n_perm) + 8, k), generator=generator)
        is_perm = (others.sort(1).values == torch.arange(k)).all(1)
        others = others[~is_perm][: n - n_perm]
        while others.shape[0] < n - n_perm:  # astronomically rare for k >= 3
            extra = torch.randint(0, k, (n, k), generator=generator)
            extra = extra[~(extra.sort(1).values == torch.arange(k)).all(1)]
            others = torch.cat([others, extra])[: n - n_perm]
        digits = torch.cat([perms, others])[torch.randperm(n, generator=generator)]
        tokens = torch.cat([digits, torch.full((n, 1), k)], 1)
        return tokens, self.label(tokens)

    def label(self, tokens: torch.Tensor) -> torch.Tensor:
        return (tokens[:, : self.n].sort(1).values == torch.arange(self.n)).all(1).long()


class ModSum(Task):
    """Label = sum of ``L`` digits in ``{0..p-1}`` mod ``p`` (no classification token).

    * ``pairwise`` — ``s_k = (x_{2k} + x_{2k+1}) mod p`` for each pair; output ``Σ s_k mod p``.
    * ``total`` — ``t = Σ x_i`` as an integer in ``[0, L(p-1)]``; output ``t mod p``.
    """

    def __init__(self, p: int = 5, length: int = 6) -> None:
        check_int(p, "p", low=2, high=64)
        check_int(length, "length", low=2, high=64)
        if length % 2:
            raise ValueError(f"length must be even (digits are paired), got {length}")
        super().__init__("modsum", vocab=p, seq_len=length, n_classes=p)
        self.p = p
        pairs = {
            f"pair{k}": Variable(lambda t, k=k: (t[:, 2 * k] + t[:, 2 * k + 1]) % p, p)
            for k in range(length // 2)
        }
        self.algorithms = {
            "pairwise": Algorithm(
                "pairwise", pairs,
                lambda v: torch.stack(list(v.values()), 1).sum(1) % p,
                "sum adjacent pairs mod p, then add the pair sums mod p",
            ),
            "total": Algorithm(
                "total", {"total": Variable(lambda t: t.sum(1), length * (p - 1) + 1)},
                lambda v: v["total"] % p,
                "add all digits as integers, then reduce mod p",
            ),
        }  # fmt: skip

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        check_int(n, "n", low=1)
        tokens = torch.randint(0, self.p, (n, self.seq_len), generator=generator)
        return tokens, tokens.sum(1) % self.p
