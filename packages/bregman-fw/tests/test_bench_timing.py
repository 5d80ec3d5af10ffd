"""The bench's time to a target gap is the wall time of a run stopped there, not an estimate."""

import time

import numpy as np

from iclr26.bregman_fw.peers import Trace, time_to_rows, time_to_target


def _trace(name, f, cost_per_iter, calls):
    """A fake solver whose k-iteration run sleeps ``cost_per_iter[:k].sum()`` seconds."""

    def run_to(k):
        calls.append((name, k))
        return lambda: time.sleep(float(np.sum(cost_per_iter[:k])))

    tr = Trace(name, "bregman-fw (JAX)" if name == "ours" else "peer 1.0", np.asarray(f), None)
    tr.run_to = run_to
    tr.seconds = [float(np.sum(cost_per_iter))] * 2  # the full runs, as _time_rounds records
    return tr


def test_time_to_target_times_the_run_stopped_at_the_first_hit():
    calls = []
    # "peer": cheap iterations after it converged (like copt's pairwise FW), expensive before
    f_peer = [1.0, 1e-3, 1e-5, 5e-7, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9]
    peer = _trace("peer", f_peer, np.r_[np.full(3, 0.02), np.zeros(6)], calls)
    f_ours = [1.0, 1e-3, 1e-5, 2e-6, 9e-7, 1e-9]
    ours = _trace("ours", f_ours, np.full(5, 0.01), calls)
    never = _trace("never", [1.0, 0.5, 0.2], np.full(2, 0.01), calls)
    time_to_target([peer, ours, never], 0.0, rounds=2, best_of=1)
    # stopped where each first reaches 1e-6 (index = iterations run); "never" is not timed
    assert calls == [("peer", 3), ("ours", 4)]
    assert len(peer.seconds_to) == 2
    assert not never.seconds_to
    rows = {r["method"]: r for r in time_to_rows("B", "p", [peer, ours, never], 0.0)}
    assert set(rows) == {"peer", "ours"}
    assert rows["peer"]["timed"] == "run stopped at 1e-6"
    measured = float(rows["peer"]["seconds to 1e-6 median [min, max]"].split()[0])
    estimate = float(rows["peer"]["iters x full-run ms/iter"].split()[0])
    # the old estimate (3 of 9 iterations x the mean cost) is a third of what the run takes
    assert measured >= 0.06
    assert abs(estimate - 0.02) < 1e-9
    assert float(rows["ours"]["seconds to 1e-6 median [min, max]"].split()[0]) >= 0.04
