"""Client partitions and the offline datasets used by the experiments and tests.

``load_digits`` (1797 × 64, 10 classes) ships inside the scikit-learn wheel: nothing downloads.
It stands in for the paper's FashionMNIST / CIFAR-10 on a 2-core CPU.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from iclr26.shared import check_array, check_int, check_range

__all__ = [
    "FederatedData",
    "dirichlet_partition",
    "iid_partition",
    "load_digits_split",
    "stack_clients",
]


class FederatedData(NamedTuple):
    """Client datasets stacked for ``vmap``: ``data`` leaves have shape ``(n, m_max, ...)``, rows
    ``>= counts[i]`` of client ``i`` are padding; ``counts`` is an int ``(n,)`` NumPy array."""

    data: Any
    counts: np.ndarray

    @property
    def n_clients(self) -> int:
        return int(self.counts.shape[0])


def dirichlet_partition(
    labels: np.ndarray, n_clients: int, beta: float, *, seed: int, min_size: int = 2
) -> list[np.ndarray]:
    """Label-skewed split: for each class, client shares ~ Dirichlet(β·1) (Hsu et al. 2019).

    Small ``β`` (0.1) gives each client few classes; large ``β`` (10) is close to IID. Redraws
    until every client holds at least ``min_size`` examples.

    Args:
        labels: int array ``(N,)``.
        n_clients: number of clients.
        beta: concentration, > 0.
        seed: random seed.
        min_size: minimum examples per client.

    Returns:
        ``n_clients`` sorted index arrays that partition ``range(N)``.
    """
    labels = np.asarray(check_array(labels, "labels", ndim=1))
    if labels.dtype.kind == "f" and not np.array_equal(labels, np.round(labels)):
        raise ValueError("labels must be integer class ids, got non-integral floats")
    if labels.dtype.kind not in "biuf":
        raise TypeError(f"labels must be integer class ids, got dtype {labels.dtype}")
    check_int(n_clients, "n_clients", low=1, high=labels.size)
    check_range(beta, "beta", low=0.0, low_inclusive=False)
    if not np.isfinite(beta):
        raise ValueError(f"beta must be finite, got {beta!r}")
    check_int(min_size, "min_size", low=0, high=labels.size // n_clients)
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    for _ in range(1000):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            share = rng.dirichlet(np.full(n_clients, beta))
            cuts = (np.cumsum(share)[:-1] * idx.size).astype(int)
            for i, chunk in enumerate(np.split(idx, cuts)):
                parts[i].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(f"could not give every client {min_size} examples with beta={beta}")


def iid_partition(n_examples: int, n_clients: int, *, seed: int) -> list[np.ndarray]:
    """Uniformly random split of ``range(n_examples)`` into ``n_clients`` near-equal parts."""
    check_int(n_clients, "n_clients", low=1)
    check_int(n_examples, "n_examples", low=n_clients)
    perm = np.random.default_rng(seed).permutation(n_examples)
    return [np.sort(p) for p in np.array_split(perm, n_clients)]


def stack_clients(datasets: list[Any], *, pad_to_power_of_two: bool = True) -> FederatedData:
    """Stack per-client pytrees of arrays (leading axis = examples) into :class:`FederatedData`.

    Padding repeats each client's first row (never read by minibatch sampling, masked in full
    evaluations). Rounding ``m_max`` up to a power of two lets runs with different partitions
    share one compiled round.
    """
    if not isinstance(datasets, list | tuple):
        raise TypeError(f"datasets must be a list of client pytrees, got {type(datasets).__name__}")
    if not datasets:
        raise ValueError("datasets must hold at least one client")
    counts = []
    for i, d in enumerate(datasets):
        sizes = {int(np.shape(leaf)[0]) for leaf in jax.tree.leaves(d)}
        if len(sizes) != 1:
            raise ValueError(f"client {i}: leaves disagree on the number of examples {sizes}")
        (m,) = sizes
        if m == 0:
            raise ValueError(f"client {i} holds no examples")
        for leaf in jax.tree.leaves(d):
            arr = np.asarray(leaf)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"client {i}: data must be numeric arrays, got dtype {arr.dtype}")
            if arr.dtype.kind == "f" and not np.isfinite(arr).all():
                raise ValueError(f"client {i}: data contains NaN or inf")
        counts.append(m)
    m_max = max(counts)
    if pad_to_power_of_two:
        m_max = 1 << (m_max - 1).bit_length()

    def pad(leaf: Any) -> np.ndarray:
        leaf = np.asarray(leaf)
        extra = np.repeat(leaf[:1], m_max - leaf.shape[0], axis=0)
        return np.concatenate([leaf, extra], axis=0)

    stacked = jax.tree.map(lambda *leaves: np.stack([pad(x) for x in leaves]), *datasets)
    return FederatedData(stacked, np.asarray(counts, dtype=np.int32))


def load_digits_split(*, seed: int, test_fraction: float = 0.2) -> tuple[np.ndarray, ...]:
    """sklearn digits, scaled to [0, 1], split into ``(x_train, y_train, x_test, y_test)``.

    ``x`` is float32 ``(N, 64)``, ``y`` int32 ``(N,)``; the split is stratified by class.
    """
    check_range(
        test_fraction, "test_fraction", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    from sklearn.datasets import load_digits  # after the checks: sklearn takes a while to load

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    y = y.astype(np.int32)
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        test[idx[: round(test_fraction * idx.size)]] = True
    return x[~test], y[~test], x[test], y[test]
