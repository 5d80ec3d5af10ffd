"""The in-RAM ANN index: faiss IVFPQ with inner product, and parameters that stay valid on small
stores.

CompactDS (``src/indicies/ivf_pq.py``): ``IndexIVFPQ(IndexFlatIP(d), d, nlist, M, nbits,
METRIC_INNER_PRODUCT)``, nlist 65,536, M 64, 8 bits, nprobe 256, trained on ~5 % of the vectors;
README guidance nlist = 4·sqrt(N)..8·sqrt(N).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import faiss
import numpy as np

from iclr26.shared import check_int

__all__ = ["IVFPQParams", "auto_params", "new_ivfpq", "set_threads"]

#: faiss warns below this many training points per centroid / per PQ code.
MIN_POINTS_PER_CENTROID = 39


def set_threads(n: int | None) -> None:
    """Set faiss's OpenMP threads (``None``: leave as is)."""
    if n is not None:
        faiss.omp_set_num_threads(check_int(n, "threads", low=1))


@dataclass(frozen=True)
class IVFPQParams:
    """IVFPQ shape: ``nlist`` inverted lists, ``m`` sub-quantizers of ``nbits`` bits each."""

    nlist: int
    m: int
    nbits: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def code_bytes(self) -> int:
        """Bytes of PQ code per vector."""
        return math.ceil(self.m * self.nbits / 8)


def _largest_divisor_at_most(d: int, target: int) -> int:
    return max(m for m in range(1, min(d, target) + 1) if d % m == 0)


def auto_params(
    n: int,
    dim: int,
    *,
    n_train: int | None = None,
    nlist: int | str = "auto",
    m: int | str = "auto",
    nbits: int | str = "auto",
) -> IVFPQParams:
    """Choose IVFPQ parameters that faiss can train on ``n_train`` points.

    * ``nlist="auto"``: ``4·sqrt(n)`` (the CompactDS README's lower guidance), at most
      ``n_train / 39`` so every centroid gets the 39 points faiss asks for, at least 1.
    * ``m="auto"``: the largest divisor of ``dim`` that is <= ``dim / 8`` (8 dims per
      sub-quantizer; 48 for 384-d, CompactDS uses 64 for 768-d = 12 dims each).
    * ``nbits="auto"``: 8 when there are >= 39·256 training points, else the largest value with
      39·2^nbits <= n_train (at least 1). Small stores would otherwise fail or warn in training.

    Raises:
        ValueError: if explicit values cannot work (``dim % m != 0``, ``nlist > n_train``,
        ``2**nbits > n_train``).
    """
    n = check_int(n, "n", low=1)
    dim = check_int(dim, "dim", low=1)
    n_train = n if n_train is None else check_int(n_train, "n_train", low=1)
    if nlist == "auto":
        nlist_v = max(1, min(round(4 * math.sqrt(n)), n_train // MIN_POINTS_PER_CENTROID))
    else:
        nlist_v = check_int(nlist, "nlist", low=1)
        if nlist_v > n_train:
            raise ValueError(f"nlist={nlist_v} is larger than the {n_train} training vectors")
    if m == "auto":
        m_v = _largest_divisor_at_most(dim, max(1, dim // 8))
    else:
        m_v = check_int(m, "m", low=1)
        if dim % m_v:
            raise ValueError(f"m={m_v} must divide the vector dimension {dim}")
    if nbits == "auto":
        nbits_v = max(1, min(8, int(math.log2(max(2, n_train / MIN_POINTS_PER_CENTROID)))))
    else:
        nbits_v = check_int(nbits, "nbits", low=1, high=16)
        if 2**nbits_v > n_train:
            raise ValueError(
                f"nbits={nbits_v} needs at least {2**nbits_v} training vectors, got {n_train}"
            )
    return IVFPQParams(nlist_v, m_v, nbits_v)


def new_ivfpq(dim: int, params: IVFPQParams) -> Any:
    """An untrained ``faiss.IndexIVFPQ`` (inner product, flat IP coarse quantizer)."""
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(
        quantizer, dim, params.nlist, params.m, params.nbits, faiss.METRIC_INNER_PRODUCT
    )
    index.own_fields = True
    quantizer.this.disown()
    return index


def train_ivfpq(vectors: np.ndarray, params: IVFPQParams, *, seed: int = 0) -> Any:
    """Train an IVFPQ on ``vectors`` (float32 ``(n_train, dim)``), seeded k-means."""
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    index = new_ivfpq(x.shape[1], params)
    index.cp.seed = seed
    index.pq.cp.seed = seed
    index.train(x)
    return index
