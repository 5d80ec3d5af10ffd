"""The on-disk datastore format: layout, metadata, checksums and atomic writes.

::

    store/
      meta.json          schema version, encoder (name, fingerprint, dim), metric, vector dtype,
                         chunking, index parameters, library versions, per-source counts,
                         size + sha256 of every other file (written last: its presence marks a
                         complete store)
      encoder.json       how to rebuild the encoder (+ encoder.npz for LSA)
      passages/<source>-<shard>.jsonl   {"id", "source", "doc_id", "text"} per line
      offsets.npy        uint64 byte offset of each passage in its shard file
      file_ids.npy       uint32 index into meta["passage_files"]
      vectors.f16|.f32   N x dim raw rows (row = global id), read through np.memmap
      ann/index.faiss    the IVFPQ index over the same ids
      sources.json       {"source": [first_id, end_id)} contiguous id ranges

Every file is written to a temporary name and renamed into place (``os.replace`` is atomic on
POSIX), so a crash never leaves a half-written file under its final name.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "StoreError",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_record",
    "verify_files",
]

SCHEMA_VERSION = 1
META = "meta.json"
VECTOR_DTYPES = {"float16": "vectors.f16", "float32": "vectors.f32"}


class StoreError(ValueError):
    """A store on disk is incomplete, corrupted, or incompatible with what was asked."""


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file, fsync and rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """UTF-8 :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_replace(tmp: Path, path: Path) -> None:
    """fsync a finished temporary file and rename it to ``path``."""
    with tmp.open("rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def file_record(root: Path, rel: str) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of ``root/rel`` for the metadata's file table."""
    p = root / rel
    return {"bytes": p.stat().st_size, "sha256": sha256_file(p)}


# Files hashed on every open ("fast") while they are small; the rest (and any file over
# FAST_HASH_LIMIT, e.g. a production-size index) get a size check unless verify="full".
_ALWAYS_HASHED = ("offsets.npy", "file_ids.npy", "sources.json", "encoder.json", "encoder.npz",
                  "ann/index.faiss")  # fmt: skip
FAST_HASH_LIMIT = 256 * 2**20
#: Entries of meta.json that opening a store reads.
_META_KEYS = ("n", "encoder", "vector_dtype", "vector_file", "passage_files", "files")


def verify_files(root: Path, files: dict[str, dict[str, Any]], verify: str) -> None:
    """Check each recorded file exists with its size; hash the small metadata files and the index
    (up to 256 MiB) in ``"fast"`` mode, every file in ``"full"`` mode.

    Raises:
        StoreError: naming the first missing, truncated or corrupted file.
    """
    if verify == "none":
        return
    for rel, rec in files.items():
        p = root / rel
        if not p.is_file():
            raise StoreError(f"store {root}: file {rel} is missing")
        size = p.stat().st_size
        if size != rec["bytes"]:
            raise StoreError(
                f"store {root}: file {rel} has {size} bytes, the metadata records "
                f"{rec['bytes']} (truncated or overwritten)"
            )
        hashed = verify == "full" or (rel in _ALWAYS_HASHED and size <= FAST_HASH_LIMIT)
        if hashed and sha256_file(p) != rec["sha256"]:
            raise StoreError(f"store {root}: file {rel} is corrupted (sha256 mismatch)")


def read_meta(root: Path) -> dict[str, Any]:
    """Parse ``meta.json``; a missing one means the build never finished."""
    path = root / META
    if not root.exists():
        raise StoreError(f"{root} does not exist")
    if not root.is_dir():
        raise StoreError(f"{root} is a file, not a datastore directory")
    if not path.is_file():
        hint = (
            " (an interrupted build: run the build again to resume)"
            if (root / "build").is_dir()
            else ""
        )
        raise StoreError(f"{root} has no {META}: not a complete datastore{hint}")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise StoreError(f"{path} is corrupted: {err}") from err
    if not isinstance(meta, dict):
        raise StoreError(f"{path} is corrupted: expected a JSON object")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"{root} uses store schema {version!r}; this version of iclr26-compactds reads "
            f"schema {SCHEMA_VERSION}. Rebuild the store."
        )
    missing = [k for k in _META_KEYS if k not in meta]
    if missing or not isinstance(meta.get("encoder"), dict) or "dim" not in meta["encoder"]:
        raise StoreError(f"{path} is corrupted: missing {', '.join(missing) or 'encoder.dim'}")
    return meta
