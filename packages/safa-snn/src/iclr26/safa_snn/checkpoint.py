"""Per-session checkpoints of an FSCIL run: tensors as safetensors, metadata as JSON.

A run folder holds ``session_XX.safetensors`` (the method's state after session XX) and
``session_XX.json`` (the run's configuration fingerprint, the metrics so far and the SHA-256 of
the tensor file). The JSON is written last, atomically, so a session counts as finished only when
both files are complete; a restarted run resumes after the last finished session and refuses a
folder written by another configuration.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "config_mismatch",
    "fingerprint_tensors",
    "latest_session",
    "load_session",
    "load_state",
    "save_session",
    "save_state",
]

FORMAT = "iclr26-safa-snn/fscil-checkpoint/1"
_NAME = re.compile(r"^session_(\d+)\.json$")


def fingerprint_tensors(tensors: dict[str, Tensor] | list[Tensor]) -> str:
    """SHA-256 over the dtype, shape and bytes of tensors (names included for a dict)."""
    h = hashlib.sha256()
    items = sorted(tensors.items()) if isinstance(tensors, dict) else enumerate(tensors)
    for k, t in items:
        t = t.detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_state(
    folder: str | os.PathLike[str], stem: str, tensors: dict[str, Tensor], meta: dict
) -> Path:
    """Write ``stem.safetensors`` then ``stem.json`` (metadata + the tensors' SHA-256)."""
    from safetensors.torch import save

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    st = folder / f"{stem}.safetensors"
    blob = save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})
    _atomic_write(st, blob)
    payload = {"format": FORMAT, "tensors": st.name, "sha256": hashlib.sha256(blob).hexdigest()}
    js = folder / f"{stem}.json"
    text = json.dumps(_clean({**payload, **meta}), indent=2, allow_nan=False) + "\n"
    _atomic_write(js, text.encode())
    return js


def load_state(folder: str | os.PathLike[str], stem: str) -> tuple[dict[str, Tensor], dict]:
    """Read ``stem.json`` and its tensors; raises ValueError when either is corrupt."""
    from safetensors.torch import load_file

    folder = Path(folder)
    js = folder / f"{stem}.json"
    try:
        meta = json.loads(js.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"checkpoint {js} is unreadable ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"checkpoint {js} is not an {FORMAT} file")
    st = folder / str(meta.get("tensors"))
    if not st.is_file() or _file_sha(st) != meta.get("sha256"):
        raise ValueError(f"checkpoint tensors {st} are missing or do not match their SHA-256")
    return load_file(st), meta


def save_session(
    folder: str | os.PathLike[str], session: int, tensors: dict[str, Tensor], meta: dict
) -> Path:
    """Write the checkpoint of finished ``session``; returns the JSON path."""
    return save_state(folder, f"session_{session:02d}", tensors, {"session": session, **meta})


def latest_session(folder: str | os.PathLike[str]) -> int | None:
    """Index of the last finished session in ``folder`` (None when it holds none)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    found = [int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return max(found) if found else None


def load_session(folder: str | os.PathLike[str], session: int) -> tuple[dict[str, Tensor], dict]:
    """Read the checkpoint of ``session``; raises ValueError when it is corrupt."""
    return load_state(folder, f"session_{session:02d}")


def config_mismatch(saved: dict, current: dict) -> list[str]:
    """Keys of ``current`` whose value differs from ``saved`` (JSON-normalised)."""
    cur = json.loads(json.dumps(_clean(current)))
    return sorted(k for k in set(cur) | set(saved) if saved.get(k) != cur.get(k))
