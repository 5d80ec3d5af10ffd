"""The official online pool protocol (spec §2.7): walk the data in pools, select a budget share
of each pool with the proxy's current gradients, let the caller update the proxy on the picks,
and log every pick to JSONL, resumable.

The log uses the official ``selected_data.jsonl`` fields (``step``, ``epoch``, ``pool_index``,
``global_index``, ``data``) plus ``gain``. A rerun with the same log replays the finished pools
(their logged picks are handed to ``on_selected`` again, so the proxy is brought to the same state)
and selects only the rest; a pool cut by a crash is dropped and redone.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from iclr26.shared import (
    check_int,
    check_nonempty,
    check_range,
    dumps_json,
    prepare_output_file,
    progress,
)
from iclr26.spice.conflict import conflict_stats
from iclr26.spice.objectives import as_matrix
from iclr26.spice.select import Selection, greedy_logdet, spice, topk

__all__ = ["PoolRecord", "StreamResult", "stream_select"]

log = logging.getLogger(__name__)

SELECTORS: dict[str, Callable[..., Selection]] = {
    "spice": spice,
    "greedy": greedy_logdet,
    "topk": topk,
}


@dataclass(frozen=True)
class PoolRecord:
    """What happened in one pool: its step, the global indices picked and the diagnostics."""

    step: int
    epoch: int
    selected: list[int]
    logdet: float | None
    conflict_ratio: float | None
    eps_mean: float | None
    resumed: bool = False


@dataclass
class StreamResult:
    """All pools of a :func:`stream_select` run."""

    pools: list[PoolRecord] = field(default_factory=list)

    @property
    def selected(self) -> list[int]:
        """Every picked global index, in selection order."""
        return [i for p in self.pools for i in p.selected]

    @property
    def cumulative_information(self) -> float:
        """Sum over pools of the exact ``F(S_t)`` at selection time (resumed pools excluded)."""
        return float(sum(p.logdet for p in self.pools if p.logdet is not None))


def _read_log(path: Path) -> dict[int, list[dict]]:
    """Finished steps of a log; a step whose lines are damaged is dropped and the file rewritten."""
    if not path.exists():
        return {}
    steps: dict[int, list[dict]] = {}
    damaged: set[int] = set()
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        try:
            rec = json.loads(line)
            steps.setdefault(int(rec["step"]), []).append(rec)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            # a line cut by a crash: drop its step (or, if unreadable, the last step written)
            match = re.search(r'"step":\s*(\d+)', line)
            if match:
                damaged.add(int(match.group(1)))
            elif steps:
                damaged.add(max(steps))
    if damaged:
        log.warning(
            "%s: dropping the damaged step(s) %s; they will be selected again",
            path,
            sorted(damaged),
        )
        for step in damaged:
            steps.pop(step, None)
        kept = [dumps_json(r, indent=None) for s in sorted(steps) for r in steps[s]]
        path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return steps


def stream_select(
    data: Sequence[Any],
    grad_fn: Callable[[list[Any]], ArrayLike],
    *,
    pool_size: int = 128,
    budget: float = 0.10,
    selector: str | Callable[..., Selection] = "spice",
    selector_kwargs: dict[str, Any] | None = None,
    on_selected: Callable[[list[Any], Selection | None], None] | None = None,
    epochs: int = 1,
    seed: int = 0,
    log_path: str | Path | None = None,
    progress_bar: bool = False,
) -> StreamResult:
    """Select ``budget`` of every pool with the current proxy, as the official training loop does.

    Args:
        data: the candidate examples (any objects; dicts are logged verbatim under ``"data"``).
        grad_fn: ``grad_fn(examples) -> (len(examples), d)`` gradients under the current proxy.
        pool_size: examples per pool (the last pool of an epoch may be smaller).
        budget: share of each pool to keep, ``k = max(1, round(budget · pool))``.
        selector: ``"spice"``, ``"greedy"``, ``"topk"`` or ``f(G, k, **kwargs) -> Selection``.
        selector_kwargs: passed to the selector (``alpha``, ``conflict_penalty``, ``mode``...).
        on_selected: called after each pool with the picked examples (and the
            :class:`Selection`, ``None`` when replayed from the log): update the proxy here.
        epochs: passes over the data; each epoch is shuffled with ``seed + epoch``.
        seed: shuffling seed.
        log_path: JSONL log of the picks; an existing log is resumed.
        progress_bar: show a progress bar over pools.
    """
    check_nonempty(data, "data")
    check_int(pool_size, "pool_size", low=1)
    check_range(budget, "budget", low=0.0, high=1.0, low_inclusive=False)
    check_int(epochs, "epochs", low=1)
    select = (
        SELECTORS[selector] if isinstance(selector, str) and selector in SELECTORS else selector
    )
    if not callable(select):
        raise ValueError(
            f"selector must be one of {sorted(SELECTORS)} or a callable, got {selector!r}"
        )
    kwargs = dict(selector_kwargs or {})
    path = Path(log_path) if log_path is not None else None
    if path is not None:  # a bad log path fails now, not after the first pool's gradients
        prepare_output_file(path, "log_path")
    done = _read_log(path) if path is not None else {}
    n = len(data)
    n_pools = -(-n // pool_size)
    result = StreamResult()
    bar = progress(total=epochs * n_pools, enabled=progress_bar, desc="pools", unit="pool")
    with bar:
        for epoch in range(epochs):
            order = np.random.default_rng(seed + epoch).permutation(n)
            for p in range(n_pools):
                step = epoch * n_pools + p
                pool = order[p * pool_size : (p + 1) * pool_size]
                if step in done:
                    picked = [int(r["global_index"]) for r in done[step]]
                    if on_selected is not None:
                        on_selected([data[i] for i in picked], None)
                    result.pools.append(
                        PoolRecord(step, epoch, picked, None, None, None, resumed=True)
                    )
                    bar.update(1)
                    continue
                examples = [data[i] for i in pool]
                G = as_matrix(grad_fn(examples), "gradients")
                if G.shape[0] != len(examples):
                    raise ValueError(
                        f"grad_fn returned {G.shape[0]} rows for a pool of {len(examples)}"
                    )
                k = max(1, round(budget * len(examples)))
                sel = select(G, k, **kwargs)
                picked = [int(pool[j]) for j in sel.indices]
                stats = conflict_stats(G, sel.indices)
                if path is not None:
                    records = [
                        {"step": step, "epoch": epoch, "pool_index": int(j), "global_index": int(pool[j]),
                         "data": _jsonable(data[int(pool[j])]), "gain": float(g)}
                        for j, g in zip(sel.indices, sel.gains, strict=True)
                    ]  # fmt: skip
                    # one write per pool, so a crash tears at most the pool's last line, which
                    # _read_log detects (per-record appends could leave a short pool that
                    # reads as complete)
                    lines = [dumps_json(r, indent=None) for r in records]
                    with path.open("a", encoding="utf-8") as f:
                        f.write("".join(line + "\n" for line in lines))
                        f.flush()
                if on_selected is not None:
                    on_selected([data[i] for i in picked], sel)
                result.pools.append(
                    PoolRecord(
                        step,
                        epoch,
                        picked,
                        sel.logdet,
                        stats["conflict_ratio"],
                        float(np.mean(sel.eps)),
                    )
                )
                bar.update(1)
    return result


def _jsonable(example: Any) -> Any:
    if isinstance(example, dict | list | str | int | float | bool) or example is None:
        return example
    if isinstance(example, tuple):
        return list(example)
    return repr(example)
