"""placeholder"""

from iclr26.shared import Report


def reproduce(*, quick: bool, seed: int, progress: bool) -> Report:
    raise NotImplementedError


def bench(*, quick: bool, seed: int, progress: bool) -> Report:
    raise NotImplementedError
