"""The official on-disk descriptor format (HDF5, optional ``h5py``; design notes §1.3).

One dataset ``features`` per file, one row per image, shape (k, 5 + D): five metadata columns,
then the descriptor. Column 3 of the metadata is the padding mask. A structured-dtype variant has
``metadata`` and ``descriptor`` fields. The meaning of the other metadata columns is not
documented upstream; we read columns 0–1 as keypoint x, y [verify] and column 4 as the detector
weight [verify], all configurable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from iclr26.elvis.features import LocalFeatures

__all__ = ["read_official_h5", "write_official_h5"]

N_META = 5


def _h5py():
    from iclr26.shared import import_optional

    return import_optional("h5py", dist="iclr26-elvis", extra="hdf5", purpose="HDF5 descriptors")


def read_official_h5(
    path: str | os.PathLike[str],
    *,
    dataset: str = "features",
    rows: Sequence[int] | None = None,
    mask_col: int = 3,
    mask_is_padding: bool = True,
    xy_cols: tuple[int, int] | None = (0, 1),
    weight_col: int | None = 4,
) -> list[LocalFeatures]:
    """Read images' descriptors from an official-layout HDF5 file into :class:`LocalFeatures`.

    Args:
        path: the ``.h5``/``.hdf5`` file.
        dataset: dataset name (official: ``"features"``).
        rows: which images to read (default all).
        mask_col: metadata column holding the padding flag (official: 3).
        mask_is_padding: nonzero flag means padding (True) or a valid token (False) [verify].
        xy_cols, weight_col: metadata columns for positions and detector weight, or None.
    """
    h5py = _h5py()
    out = []
    with h5py.File(os.fspath(path), "r") as f:
        if dataset not in f:
            raise ValueError(f"{path} has no dataset {dataset!r} (has {list(f.keys())})")
        data = f[dataset]
        idx = range(data.shape[0]) if rows is None else rows
        for i in idx:
            row = data[int(i)]
            if row.dtype.names:
                meta = np.asarray(row["metadata"], dtype=np.float32)
                desc = np.asarray(row["descriptor"], dtype=np.float32)
            else:
                row = np.asarray(row, dtype=np.float32)
                if row.ndim != 2 or row.shape[1] <= N_META:
                    raise ValueError(f"rows must be (k, {N_META} + D), got {row.shape}")
                meta, desc = row[:, :N_META], row[:, N_META:]
            flag = meta[:, mask_col] != 0
            keep = ~flag if mask_is_padding else flag
            if not keep.any():
                raise ValueError(f"image {i} of {path} has no valid descriptor")
            xy = meta[keep][:, list(xy_cols)] if xy_cols is not None else None
            weight = meta[keep, weight_col] if weight_col is not None else None
            out.append(LocalFeatures(desc[keep], xy, weight))
    return out


def write_official_h5(
    path: str | os.PathLike[str], feats: Sequence[LocalFeatures], *, k: int | None = None
) -> None:
    """Write :class:`LocalFeatures` in the plain (k, 5 + D) official layout, padding to ``k``.

    Metadata columns: x, y, 0, padding flag (1 = padding), weight.
    """
    h5py = _h5py()
    if not len(feats):
        raise ValueError("feats must not be empty")
    dims = {f.dim for f in feats}
    if len(dims) != 1:
        raise ValueError(f"all descriptor sets must share one dimension, got {sorted(dims)}")
    k = k or max(len(f) for f in feats)
    arr = np.zeros((len(feats), k, N_META + dims.pop()), np.float32)
    arr[:, :, 3] = 1.0
    for i, f in enumerate(feats):
        n = min(len(f), k)
        arr[i, :n, N_META:] = f.desc[:n]
        arr[i, :n, 3] = 0.0
        if f.xy is not None:
            arr[i, :n, :2] = f.xy[:n]
        if f.weight is not None:
            arr[i, :n, 4] = f.weight[:n]
    with h5py.File(os.fspath(path), "w") as h:
        h.create_dataset("features", data=arr)
