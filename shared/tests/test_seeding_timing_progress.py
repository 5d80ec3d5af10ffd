import random
import sys

import numpy as np
import pytest

import iclr26.shared.timing as timing_module
from iclr26.shared import progress, seed_everything, timeit


def test_seed_everything_makes_all_global_generators_repeatable():
    rng = seed_everything(123)
    first = (random.random(), np.random.rand(), rng.random())  # noqa: NPY002
    rng = seed_everything(123)
    second = (random.random(), np.random.rand(), rng.random())  # noqa: NPY002
    assert first == second
    seed_everything(124)
    assert random.random() != first[0]


def test_seed_everything_returns_generator_equal_to_default_rng():
    assert seed_everything(7).random() == np.random.default_rng(7).random()


def test_seed_everything_does_not_import_absent_backends():
    seed_everything(0)
    assert ("torch" in sys.modules) == (_has("torch"))
    assert "jax" not in sys.modules


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize(
    ("seed", "error"), [(-1, ValueError), (2**32, ValueError), (1.5, TypeError)]
)
def test_seed_everything_rejects_bad_seeds(seed, error):
    with pytest.raises(error, match="seed"):
        seed_everything(seed)


class FakeClock:
    def __init__(self, durations):
        self.t = 0.0
        self.durations = iter(durations)
        self.calls = 0

    def perf_counter(self):
        return self.t

    def work(self):
        self.calls += 1
        self.t += next(self.durations)


def test_timeit_median_spread_and_warmup(monkeypatch):
    clock = FakeClock([100.0, 1.0, 5.0, 2.0, 4.0, 3.0])  # first is warm-up (compilation)
    monkeypatch.setattr(timing_module.time, "perf_counter", clock.perf_counter)
    t = timeit(clock.work, repeats=5, warmup=1)
    assert clock.calls == 6
    assert t.median == 3.0
    assert t.min == 1.0
    assert t.max == 5.0
    assert t.iqr == pytest.approx(2.0)
    assert t.ratio_to(timing_module.Timing(6.0, 0, 6, 6, 1, 1)) == 2.0


def test_timeit_divides_by_number(monkeypatch):
    clock = FakeClock([1.0] * 8)
    monkeypatch.setattr(timing_module.time, "perf_counter", clock.perf_counter)
    t = timeit(clock.work, repeats=2, warmup=0, number=4)
    assert t.median == pytest.approx(1.0)
    assert t.as_dict()["number"] == 4


def test_timeit_blocks_on_async_results_and_syncs():
    events = []

    class Async:
        def block_until_ready(self):
            events.append("block")

    timeit(lambda: (Async(), [Async()]), repeats=1, warmup=0, sync=lambda: events.append("sync"))
    assert events == ["block", "block", "sync"]


def test_timeit_validates_arguments():
    with pytest.raises(ValueError, match="repeats"):
        timeit(lambda: None, repeats=0)


def test_progress_disabled_is_transparent_and_silent(capsys):
    bar = progress(range(3), enabled=False, desc="x")
    assert list(bar) == [0, 1, 2]
    with progress(total=3, enabled=False) as manual:
        manual.update(2)
        manual.set_postfix(loss=1.0)
    with pytest.raises(TypeError, match="without an iterable"):
        iter(progress(enabled=False))
    assert capsys.readouterr() == ("", "")


def test_progress_enabled_draws_on_stderr(capsys):
    pytest.importorskip("tqdm")
    assert list(progress(range(4), enabled=True, desc="steps", leave=True)) == [0, 1, 2, 3]
    err = capsys.readouterr().err
    assert "steps" in err
    assert "4/4" in err


def test_progress_enabled_without_tqdm_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ImportError, match=r"iclr26-shared\[progress\]"):
        progress(range(2), enabled=True)
