"""Progress bars that library code switches on with ``progress=True`` (off means silent)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["progress"]

T = TypeVar("T")


class _Silent(Generic[T]):
    """The disabled bar: same surface as the tqdm calls library code uses, doing nothing."""

    def __init__(self, iterable: Iterable[T] | None) -> None:
        self._iterable = iterable

    def __iter__(self) -> Iterator[T]:
        if self._iterable is None:
            raise TypeError("this progress bar was created without an iterable; call update()")
        return iter(self._iterable)

    def __enter__(self) -> _Silent[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        """Advance the bar (no-op)."""

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Show extra values next to the bar (no-op)."""

    def set_description(self, desc: str | None = None) -> None:
        """Change the label (no-op)."""

    def close(self) -> None:
        """Close the bar (no-op)."""


def progress(
    iterable: Iterable[T] | None = None,
    *,
    enabled: bool,
    total: int | None = None,
    desc: str | None = None,
    leave: bool = False,
    unit: str = "it",
) -> Any:
    """Wrap ``iterable`` in a tqdm bar on stderr when ``enabled``; otherwise return a silent stand-in.

    Both forms support iteration, ``with``, ``update(n)``, ``set_postfix(...)`` and ``close()``,
    so library code is written once::

        for batch in progress(loader, enabled=progress, desc="epoch 1"):
            ...

    Args:
        iterable: what to iterate; ``None`` for a manually updated bar (give ``total``).
        enabled: show the bar. Library functions expose this as their ``progress=`` argument.
        total: number of steps when ``iterable`` has no ``len``.
        desc: label shown before the bar.
        leave: keep the finished bar on screen.
        unit: unit name shown in the rate.

    Raises:
        ImportError: if ``enabled`` and tqdm is missing (install ``iclr26-shared[progress]``).
    """
    if not enabled:
        return _Silent(iterable)
    try:
        from tqdm.auto import tqdm
    except ImportError as err:
        raise ImportError(
            "progress bars need tqdm: pip install 'iclr26-shared[progress]' (or pass progress=False)"
        ) from err
    return tqdm(iterable, total=total, desc=desc, leave=leave, unit=unit, dynamic_ncols=True)
