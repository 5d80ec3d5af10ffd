"""The Analytica engine: decompose → ground leaves in parallel → synthesise bottom-up.

Faithful to the official ``analytica/agent/ae.py`` loop (concurrent provers under a semaphore,
``max_concurrent_prove`` = 20, ``max_proof_retries`` = 3, per-node JSON checkpoints so runs
resume), plus per-node timeouts, exponential backoff between retries, a call ledger and an
optional on-disk cache of leaf proofs shared across runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iclr26.analytica.clients import CallLedger, LedgerEntry
from iclr26.analytica.decompose import Decomposer
from iclr26.analytica.ground import Grounder
from iclr26.analytica.synth import Synthesizer
from iclr26.analytica.tree import Proof, Proposition, PropositionTree

__all__ = ["Analytica", "IncompleteAnalysis", "RunStats"]

log = logging.getLogger(__name__)


class IncompleteAnalysis(RuntimeError):
    """Some nodes could not be proven after all retries. ``tree`` holds what was proven (and
    is checkpointed when a checkpoint folder is set, so a later call resumes); ``failed`` maps
    node ids to their last error."""

    def __init__(self, tree: PropositionTree, failed: dict[str, str]) -> None:
        self.tree = tree
        self.failed = failed
        first = next(iter(failed.items()))
        super().__init__(f"{len(failed)} node(s) failed, e.g. {first[0]}: {first[1]}")


@dataclass
class RunStats:
    """Counters of one :meth:`Analytica.analyze` call."""

    decompose_calls: int = 0
    ground_calls: int = 0
    synth_calls: int = 0
    cache_hits: int = 0
    resumed: int = 0
    retries: int = 0
    max_in_flight: int = 0
    wall_s: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)


def _safe(pid: str) -> str:
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in pid)


class Analytica:
    """Soft propositional reasoning engine.

    Args:
        decomposer: grows the tree (skipped when :meth:`analyze` gets a tree).
        grounder: proves leaves.
        synthesizer: proves internal nodes from their children.
        max_concurrency: nodes proven at once (official ``max_concurrent_prove`` = 20).
        max_retries: retries per node after the first attempt (official ``max_proof_retries``
            = 3).
        retry_backoff: first delay between attempts (doubled each retry), seconds.
        timeout_s: per attempt; ``None`` = no limit.
        max_leaves: passed to the decomposer (official 10).
        ledger: node-level attempts are recorded here (kinds ``"ground"``, ``"synthesize"``).
        cache_dir: on-disk cache of leaf proofs keyed by the grounder's name and the leaf's
            sentence, context and date (off by default: a stochastic grounder must not be cached
            when run-to-run variance is measured).
        checkpoint_dir: the tree and every proof are written here as JSON as soon as they
            exist; calling :meth:`analyze` again with the same folder resumes.
    """

    def __init__(
        self,
        decomposer: Decomposer | None,
        grounder: Grounder,
        synthesizer: Synthesizer,
        *,
        max_concurrency: int = 20,
        max_retries: int = 3,
        retry_backoff: float = 0.05,
        timeout_s: float | None = None,
        max_leaves: int = 10,
        ledger: CallLedger | None = None,
        cache_dir: str | Path | None = None,
        checkpoint_dir: str | Path | None = None,
    ) -> None:
        for name, value, low in (
            ("max_concurrency", max_concurrency, 1),
            ("max_retries", max_retries, 0),
            ("max_leaves", max_leaves, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}")
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s!r}")
        if not retry_backoff >= 0:
            raise ValueError(f"retry_backoff must be ≥ 0, got {retry_backoff!r}")
        self.decomposer = decomposer
        self.grounder = grounder
        self.synthesizer = synthesizer
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.retry_backoff = float(retry_backoff)
        self.timeout_s = timeout_s
        self.max_leaves = max_leaves
        self.ledger = ledger if ledger is not None else CallLedger()
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.stats = RunStats()

    # -- checkpoint / cache --------------------------------------------------------------
    def _ckpt_tree(self) -> Path | None:
        return None if self.checkpoint_dir is None else self.checkpoint_dir / "tree.json"

    def _save_tree(self, tree: PropositionTree) -> None:
        path = self._ckpt_tree()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(tree.to_json(indent=1))
            tmp.replace(path)

    def _save_proof(self, pid: str, proof: Proof, rule: dict[str, Any] | None) -> None:
        if self.checkpoint_dir is None:
            return
        folder = self.checkpoint_dir / "proofs"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{_safe(pid)}.tmp"
        tmp.write_text(json.dumps({"pid": pid, "proof": proof.to_dict(), "rule": rule}))
        tmp.replace(folder / f"{_safe(pid)}.json")

    def _load_checkpoint(self, tree: PropositionTree) -> None:
        if self.checkpoint_dir is None or not (self.checkpoint_dir / "proofs").is_dir():
            return
        for path in sorted((self.checkpoint_dir / "proofs").glob("*.json")):
            data = json.loads(path.read_text())
            if data["pid"] in tree and tree.get(data["pid"]).proof is None:
                node = tree.get(data["pid"])
                node.proof = Proof.from_dict(data["proof"])
                node.synthesis = data.get("rule")
                self.stats.resumed += 1

    def _cache_path(self, prop: Proposition) -> Path | None:
        if self.cache_dir is None:
            return None
        name = getattr(self.grounder, "cache_key", type(self.grounder).__name__)
        key = json.dumps([str(name), prop.sentence, prop.context, prop.date])
        return self.cache_dir / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")

    # -- one node with retries ------------------------------------------------------------
    async def _attempts(
        self, kind: str, pid: str, make: Any, sem: asyncio.Semaphore, in_flight: list[int]
    ) -> Proof | None:
        delay = self.retry_backoff
        for attempt in range(self.max_retries + 1):
            async with sem:
                in_flight[0] += 1
                self.stats.max_in_flight = max(self.stats.max_in_flight, in_flight[0])
                start = time.perf_counter()
                try:
                    coro = make()
                    proof = await (
                        coro if self.timeout_s is None else asyncio.wait_for(coro, self.timeout_s)
                    )
                    if not isinstance(proof, Proof):
                        raise TypeError(f"{kind} returned {type(proof).__name__}, not a Proof")
                    self.ledger.record(
                        LedgerEntry(kind, pid, attempt, True, time.perf_counter() - start)
                    )
                    return proof
                except (asyncio.CancelledError, KeyboardInterrupt):
                    raise
                except Exception as err:
                    msg = (
                        "timed out"
                        if isinstance(err, TimeoutError)
                        else f"{type(err).__name__}: {err}"
                    )
                    self.ledger.record(
                        LedgerEntry(
                            kind, pid, attempt, False, time.perf_counter() - start, msg[:500]
                        )
                    )
                    self.stats.failed[pid] = msg[:500]
                    log.info("%s %s attempt %d failed: %s", kind, pid, attempt, msg)
                finally:
                    in_flight[0] -= 1
            if attempt < self.max_retries:
                self.stats.retries += 1
                await asyncio.sleep(delay)
                delay *= 2
        return None

    # -- phases ---------------------------------------------------------------------------
    async def ground_leaves(
        self, tree: PropositionTree, pids: Iterable[str] | None = None
    ) -> dict[str, str]:
        """Prove the given (default: all unproven) leaves concurrently; returns failures."""
        todo = [p for p in (tree.leaves() if pids is None else pids) if tree.get(p).proof is None]
        sem = asyncio.Semaphore(self.max_concurrency)
        in_flight = [0]
        failed: dict[str, str] = {}

        async def one(pid: str) -> None:
            prop = tree.get(pid)
            cache = self._cache_path(prop)
            if cache is not None and cache.exists():
                prop.proof = Proof.from_dict(json.loads(cache.read_text()))
                self.stats.cache_hits += 1
                self._save_proof(pid, prop.proof, None)
                return
            self.stats.ground_calls += 1
            proof = await self._attempts(
                "ground", pid, lambda: self.grounder.ground(prop), sem, in_flight
            )
            if proof is None:
                failed[pid] = self.stats.failed[pid]
                return
            self.stats.failed.pop(pid, None)
            prop.proof = proof
            self._save_proof(pid, proof, None)
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(proof.to_dict()))

        await asyncio.gather(*(one(p) for p in todo))
        return failed

    async def synthesize(self, tree: PropositionTree) -> dict[str, str]:
        """Prove internal nodes bottom-up, each level concurrently; returns failures."""
        sem = asyncio.Semaphore(self.max_concurrency)
        in_flight = [0]
        failed: dict[str, str] = {}
        for level in tree.levels():

            async def one(pid: str) -> None:
                node = tree.get(pid)
                if node.proof is not None:
                    return
                if any(tree.get(c).proof is None for c in node.children):
                    failed[pid] = "a child has no proof"
                    return
                self.stats.synth_calls += 1
                proof = await self._attempts(
                    "synthesize",
                    pid,
                    lambda: self.synthesizer.synthesize(tree, pid),
                    sem,
                    in_flight,
                )
                if proof is None:
                    failed[pid] = self.stats.failed[pid]
                    return
                self.stats.failed.pop(pid, None)
                rule = proof.meta.pop("rule", None)
                node.proof, node.synthesis = proof, rule
                self._save_proof(pid, proof, rule)

            if getattr(self.synthesizer, "local", False):
                # A synthesizer without I/O (fixed or fitted rules) gains nothing from tasks;
                # awaiting in turn keeps a 1,000-node synthesis in the millisecond range.
                for pid in level:
                    await one(pid)
            else:
                await asyncio.gather(*(one(p) for p in level))
        return failed

    async def analyze(self, question: Proposition | PropositionTree) -> PropositionTree:
        """Run the pipeline on a root proposition (decomposed first) or on a given tree.

        Returns the tree with a proof on every node (the root's ``p_true`` is the answer).
        Raises :class:`IncompleteAnalysis` if some node still fails after its retries.
        """
        start = time.perf_counter()
        self.stats = RunStats()
        saved = self._ckpt_tree()
        if saved is not None and saved.exists():
            tree = PropositionTree.from_json(saved.read_text())
            asked = question.root if isinstance(question, PropositionTree) else question
            if not isinstance(asked, Proposition) or asked.sentence != tree.root.sentence:
                raise ValueError(
                    f"checkpoint folder {self.checkpoint_dir} holds another question "
                    f"({tree.root.sentence!r}); use a new folder"
                )
        elif isinstance(question, PropositionTree):
            tree = question.copy()
        elif isinstance(question, Proposition):
            if self.decomposer is None:
                raise ValueError("a decomposer is needed to analyse a single proposition")
            self.stats.decompose_calls += 1
            tree = await self.decomposer.decompose(question, max_leaves=self.max_leaves)
            self.ledger.record(
                LedgerEntry("decompose", question.pid, 0, True, time.perf_counter() - start)
            )
        else:
            raise TypeError(
                f"question must be a Proposition or PropositionTree, got {type(question).__name__}"
            )
        self._save_tree(tree)
        self._load_checkpoint(tree)
        failed = await self.ground_leaves(tree)
        failed.update(await self.synthesize(tree))
        self.stats.wall_s = time.perf_counter() - start
        if failed:
            raise IncompleteAnalysis(tree, failed)
        return tree

    def analyze_sync(self, question: Proposition | PropositionTree) -> PropositionTree:
        """:meth:`analyze` from synchronous code (starts its own event loop)."""
        return asyncio.run(self.analyze(question))
