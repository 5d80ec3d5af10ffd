"""One JSON writer and one JSONL reader/appender for every package's files.

JSON written here is RFC 8259 JSON: NaN and ±inf become ``null`` (never a bare ``NaN``), NumPy
scalars and arrays become builtins, and a file is replaced atomically so an interrupted write
never leaves half a report. JSONL is read with errors that name the file and the line, and
appended one flushed record at a time so a crash or Ctrl-C loses nothing already written.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = ["JsonlAppender", "dumps_json", "read_jsonl", "to_jsonable", "write_json"]


def to_jsonable(value: Any) -> Any:
    """Convert to JSON-safe Python: NumPy scalars/arrays to builtins, NaN/±inf to ``None``.

    Mappings become dicts with string keys, tuples and arrays become lists, paths become strings;
    anything else unknown is written as its ``str``.
    """
    import numpy as np  # here, not at import: the CLI helpers that read JSONL stay NumPy-free

    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def dumps_json(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as RFC 8259 JSON text (see :func:`to_jsonable`); never contains ``NaN``."""
    return json.dumps(to_jsonable(data), indent=indent, allow_nan=False)


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file, then a rename).

    The parent folder is created. Returns the path. Raises ``IsADirectoryError`` when ``path``
    is a folder.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, expected a file path")
    text = dumps_json(data, indent=indent) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_jsonl(
    path: str | os.PathLike[str],
    *,
    required: Sequence[str] = (),
    allow_empty: bool = False,
) -> list[dict[str, Any]]:
    """Read a JSON Lines file: one JSON object per line, blank lines skipped.

    Args:
        path: the file.
        required: keys every record must have.
        allow_empty: return ``[]`` for a file with no records instead of raising.

    Raises:
        FileNotFoundError: ``path`` does not exist (the message says so and names it).
        ValueError: a line is not a JSON object or lacks a required key (``file:line`` named),
            or the file holds no records.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder, expected a JSONL file")
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not valid JSON ({err.msg})") from err
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            missing = [k for k in required if k not in row]
            if missing:
                raise ValueError(f"{path}:{n}: missing key(s) {', '.join(map(repr, missing))}")
            rows.append(row)
    if not rows and not allow_empty:
        raise ValueError(f"{path} holds no records")
    return rows


class JsonlAppender:
    """Append records to a JSONL file, each written and flushed as it arrives.

    Use as a context manager. The parent folder is created when the appender opens, so a bad
    path fails before any work. A last line left incomplete by a crash is terminated first, so
    the next record starts on its own line.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise IsADirectoryError(f"{self.path} is a folder, expected a file path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = None
        self.written = 0

    def __enter__(self) -> JsonlAppender:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Open the file for appending (idempotent)."""
        if self._file is not None:
            return
        needs_newline = False
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                needs_newline = f.read(1) != b"\n"
        self._file = self.path.open("a", encoding="utf-8")
        if needs_newline:
            self._file.write("\n")
            self._file.flush()

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as a line and flush it to the operating system."""
        if self._file is None:
            self.open()
        assert self._file is not None
        self._file.write(dumps_json(record, indent=None) + "\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None
