"""The two-pass evaluation harness: run any chat client over a question set twice, once forced
to answer and once allowed to refuse, log every raw response, and compute RI and peer metrics.

Every response is appended to a JSONL log as soon as it arrives (one flushed line each); a rerun
with the same log skips what is already there, so an interrupted run resumes without asking any
question twice. Records are keyed by pass, item id, sample index, model name and a hash of the
system prompt, so changing the prompt or the model re-asks. Ctrl-C stops scheduling at once, keeps every answer that arrived,
and re-raises ``KeyboardInterrupt``; a failed request (its client's retries spent) stops the run
the same way and re-raises the client's error.

With ``samples=K > 1`` every question is asked ``K`` times per pass (the client must sample, at a
temperature above 0) and the K-sample estimator
(:func:`~iclr26.refusal_index.estimators.refusal_index_ksample`) is reported next to the
two-pass one, which uses the first sample of each pass.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.refusal_index.clients import ChatClient
from iclr26.refusal_index.detect import AliasGrader, Grader, RefusalDetector
from iclr26.refusal_index.estimators import (
    RIResult,
    refusal_index_from_rates,
    refusal_index_ksample,
    refusal_index_paired,
)
from iclr26.refusal_index.metrics import peer_metrics
from iclr26.shared import (
    JsonlAppender,
    check_choice,
    check_int,
    check_nonempty,
    prepare_output_file,
    progress,
)

__all__ = [
    "FORCED_PROMPT",
    "REFUSAL_PROMPTS",
    "Item",
    "PassRecord",
    "TwoPassEvaluator",
    "TwoPassResult",
]

log = logging.getLogger(__name__)

FORCED_PROMPT = (
    "Answer the question with a short factual answer. Always give your best single answer, even "
    "if you are unsure. Never refuse and never say that you do not know."
)

#: Refusal-permitted system prompts, from weak (0) to strong (3): the refusal-rate knob.
REFUSAL_PROMPTS = (
    "Answer the question with a short factual answer. Only if you have no idea at all, reply "
    "exactly: I don't know.",
    "Answer the question with a short factual answer. If you are not confident that your answer "
    "is correct, reply exactly: I don't know.",
    "Answer the question with a short factual answer only if you are sure it is correct. "
    "Otherwise reply exactly: I don't know.",
    "Wrong answers are heavily penalised and 'I don't know' is not. Answer with a short factual "
    "answer only if you are certain; otherwise reply exactly: I don't know.",
)

PASSES = ("forced", "refusal")


@dataclass(frozen=True)
class Item:
    """One question with its gold answer and aliases."""

    id: str
    question: str
    answers: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.id or not self.question:
            raise ValueError(f"item needs a non-empty id and question, got {self!r}")
        if not self.answers or not all(isinstance(a, str) and a for a in self.answers):
            raise ValueError(f"item {self.id!r} needs at least one non-empty answer")


@dataclass(frozen=True)
class PassRecord:
    """One logged response (one line of the JSONL log)."""

    item_id: str
    pass_name: str
    prompt_hash: str
    response: str
    finish_reason: str | None
    label: str  # "refused" | "answered" | "unscorable"
    reason: str
    correct: bool | None  # None when not answered or not attempted
    sample: int = 0  # which of the K answers to this question in this pass
    model: str | None = None  # the client's model name, when it has one


@dataclass
class TwoPassResult:
    """Everything a two-pass run produced.

    Attributes:
        forced, refusal: records per item id for pass A and pass B.
        item_ids: ids of the items scored in both passes, in input order.
        excluded: item id -> why it was left out (unscorable in a pass).
        ri: paired estimate (bootstrap CI); ri_rates: the aggregate-rates estimate.
        peers: peer metrics on the same questions.
        ri_ksample: the K-sample estimate (bootstrap CI) when each question was asked
            ``samples > 1`` times per pass, else ``None``; ``ksample_excluded`` counts the
            questions it left out (an unscorable answer among their samples).
        samples: answers per question and pass.
    """

    forced: dict[str, PassRecord]
    refusal: dict[str, PassRecord]
    item_ids: list[str]
    excluded: dict[str, str]
    ri: RIResult
    ri_rates: RIResult
    peers: dict[str, float] = field(default_factory=dict)
    ri_ksample: RIResult | None = None
    ksample_excluded: int = 0
    samples: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Summary as plain data (no raw responses); write it with ``iclr26.shared.write_json``
        (NaN becomes ``null``)."""
        out = {
            "n_scored": len(self.item_ids),
            "n_excluded": len(self.excluded),
            "samples": self.samples,
            "calls": 2 * self.samples * (len(self.item_ids) + len(self.excluded)),
            "ri": asdict(self.ri),
            "ri_rates": asdict(self.ri_rates),
            "peers": self.peers,
        }
        if self.ri_ksample is not None:
            out["ri_ksample"] = asdict(self.ri_ksample)
            out["ksample_excluded"] = self.ksample_excluded
        return out


def _hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:12]


class TwoPassEvaluator:
    """Run pass A (forced answer) and pass B (refusal allowed) of a chat client over items.

    Args:
        client: any :class:`~iclr26.refusal_index.clients.ChatClient`.
        grader: grades answered responses (default :class:`AliasGrader`).
        detector: classifies responses (default :class:`RefusalDetector` with all languages).
        refusal_strength: index into :data:`REFUSAL_PROMPTS` (0 weak … 3 strong).
        forced_prompt, refusal_prompt: override the system prompts.
        max_concurrency: requests in flight at once.
        log_path: JSONL log of every response; existing records are reused (resume). Its folder
            is created and the path checked here, before any request.
        samples: answers per question and pass (``K``); ``K > 1`` adds the K-sample estimator
            and needs a client that samples (temperature above 0: a client with a
            ``temperature`` attribute of 0 is refused).
        n_boot, seed: bootstrap of the paired and K-sample RI.
        progress: show a progress bar per pass.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        grader: Grader | None = None,
        detector: RefusalDetector | None = None,
        refusal_strength: int = 1,
        forced_prompt: str | None = None,
        refusal_prompt: str | None = None,
        max_concurrency: int = 4,
        log_path: str | Path | None = None,
        samples: int = 1,
        n_boot: int = 1000,
        seed: int = 0,
        progress: bool = False,
    ) -> None:
        if not hasattr(client, "complete"):
            raise TypeError(
                f"client must have a complete(messages) method, got {type(client).__name__}"
            )
        check_int(refusal_strength, "refusal_strength", low=0, high=len(REFUSAL_PROMPTS) - 1)
        self.samples = check_int(samples, "samples", low=1)
        if self.samples > 1 and getattr(client, "temperature", None) == 0:
            raise ValueError(
                f"samples={samples} needs a client that samples: its temperature is 0, so the "
                "K answers would be identical"
            )
        self.client = client
        model = getattr(client, "model", None)
        self.model = model if isinstance(model, str) else None
        self.grader = grader or AliasGrader()
        self.detector = detector or RefusalDetector()
        self.prompts = {
            "forced": forced_prompt or FORCED_PROMPT,
            "refusal": refusal_prompt or REFUSAL_PROMPTS[refusal_strength],
        }
        self.max_concurrency = check_int(max_concurrency, "max_concurrency", low=1)
        self.log_path = prepare_output_file(log_path, "log_path") if log_path is not None else None
        self.n_boot = check_int(n_boot, "n_boot", low=10)
        self.seed = check_int(seed, "seed", low=0)
        self.progress = progress

    def _load_log(self) -> dict[tuple[str, str, str, int], PassRecord]:
        # Not iclr26.shared.read_jsonl: a line cut by a crash mid-write is expected damage in a
        # log that is appended to while a run is killed; it is skipped (and re-asked), not fatal.
        done: dict[tuple[str, str, str, int], PassRecord] = {}
        if self.log_path is None or not self.log_path.exists():
            return done
        other = bad = good = 0
        with self.log_path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = PassRecord(**json.loads(line))
                    good += 1
                except (json.JSONDecodeError, TypeError) as err:
                    bad += 1
                    if bad > 1 and not good:
                        raise ValueError(
                            f"{self.log_path} exists but does not look like an answer log (lines "
                            f"1-{n} are not records); refusing to append to it — choose another "
                            "log path"
                        ) from None
                    log.warning(
                        "%s:%d is not a complete record (%s); it will be re-asked",
                        self.log_path,
                        n,
                        err,
                    )
                    continue
                if rec.model != self.model:
                    other += 1
                    continue
                done[(rec.pass_name, rec.prompt_hash, rec.item_id, rec.sample)] = rec
        if other:
            log.warning(
                "%s: %d records are for another model than %r and are not reused",
                self.log_path,
                other,
                self.model,
            )
        return done

    def _ask(self, item: Item, pass_name: str, sample: int) -> PassRecord:
        prompt = self.prompts[pass_name]
        messages = [
            {"role": "system", "content": prompt},
            {"role": "user", "content": item.question},
        ]
        reply = self.client.complete(messages)
        det = self.detector.detect(
            reply.text, question=item.question, finish_reason=reply.finish_reason
        )
        correct = None
        if det.label == "answered":
            correct = self.grader.grade(item.question, item.answers, reply.text)
        return PassRecord(
            item.id,
            pass_name,
            _hash(prompt),
            reply.text,
            reply.finish_reason,
            det.label,
            det.reason,
            correct,
            sample,
            self.model,
        )

    def run_pass(self, items: Sequence[Item], pass_name: str) -> dict[str, list[PassRecord]]:
        """Ask every item ``samples`` times in one pass (skipping logged answers).

        Returns the records by item id, one per sample in sample order. Sample 0 of every item
        is asked before sample 1 of any, so an interrupted run has the two-pass data first.
        """
        check_choice(pass_name, "pass_name", PASSES)
        done = self._load_log()
        key = _hash(self.prompts[pass_name])
        found: dict[tuple[str, int], PassRecord] = {}
        todo: list[tuple[Item, int]] = []
        for k in range(self.samples):
            for it in items:
                rec = done.get((pass_name, key, it.id, k))
                if rec is None:
                    todo.append((it, k))
                else:
                    found[(it.id, k)] = rec
        if found:
            log.info(
                "%s pass: %d of %d answers resumed from the log",
                pass_name,
                len(found),
                len(items) * self.samples,
            )
        for rec in self._execute(todo, pass_name):
            found[(rec.item_id, rec.sample)] = rec
        return {it.id: [found[(it.id, k)] for k in range(self.samples)] for it in items}

    def _execute(self, jobs: list[tuple[Item, int]], pass_name: str) -> list[PassRecord]:
        """Ask ``jobs`` with ``max_concurrency`` worker threads; log each answer as it arrives.

        Workers take the next job only while no stop is requested, so after Ctrl-C or a failed
        request at most the requests already in flight are still sent; their answers are not
        waited for. Workers are daemon threads: they never keep the process alive.
        """
        if not jobs:
            return []
        pending: queue.SimpleQueue[tuple[Item, int]] = queue.SimpleQueue()
        for job in jobs:
            pending.put(job)
        arrived: queue.SimpleQueue[tuple[PassRecord | None, BaseException | None]] = (
            queue.SimpleQueue()
        )
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                try:
                    item, k = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    arrived.put((self._ask(item, pass_name, k), None))
                except BaseException as err:  # handed to the main thread, which re-raises it
                    stop.set()
                    arrived.put((None, err))
                    return

        threads = [
            threading.Thread(target=worker, name=f"ri-{pass_name}-{i}", daemon=True)
            for i in range(min(self.max_concurrency, len(jobs)))
        ]
        records: list[PassRecord] = []
        appender = JsonlAppender(self.log_path) if self.log_path is not None else None
        bar = progress(total=len(jobs), enabled=self.progress, desc=f"{pass_name} pass", unit="q")

        bar_open = [True]

        def keep(record: PassRecord) -> None:
            if appender is not None:
                appender.append(asdict(record))
            records.append(record)
            if bar_open[0]:
                bar.update(1)

        failure: BaseException | None = None
        try:
            with bar:
                for t in threads:
                    t.start()
                while len(records) < len(jobs):
                    try:
                        # a timeout keeps the wait interruptible by Ctrl-C on every platform
                        record, error = arrived.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    if error is not None:
                        failure = error
                        stop.set()
                        self._drain(arrived, keep)
                        break
                    assert record is not None
                    keep(record)
            bar_open[0] = False
        except BaseException:
            bar_open[0] = False
            stop.set()
            self._drain(arrived, keep)
            log.warning(
                "%s pass interrupted: %d of %d answers kept in %s",
                pass_name,
                len(records),
                len(jobs),
                self.log_path or "memory (no log_path)",
            )
            raise
        finally:
            if appender is not None:
                appender.close()
        if failure is not None:
            raise failure
        return records

    @staticmethod
    def _drain(arrived: queue.SimpleQueue, keep: Any) -> None:
        """Keep every answer that has already arrived (errors after the first are dropped)."""
        while True:
            try:
                record, _ = arrived.get_nowait()
            except queue.Empty:
                return
            if record is not None:
                keep(record)

    def run(self, items: Iterable[Item]) -> TwoPassResult:
        """Run both passes and score them.

        A forced-pass refusal counts as wrong (the model gave no correct answer when it had to);
        items unscorable in either pass are excluded and listed in ``excluded``.
        """
        items = list(items)
        check_nonempty(items, "items")
        for it in items:
            if not isinstance(it, Item):
                raise TypeError(f"items must be Item objects, got {type(it).__name__}")
        ids = [it.id for it in items]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"item ids must be unique; {len(dup)} repeated, e.g. {dup[:3]}")
        forced = self.run_pass(items, "forced")
        refusal = self.run_pass(items, "refusal")
        return score_passes(items, forced, refusal, n_boot=self.n_boot, seed=self.seed)


def score_passes(
    items: Sequence[Item],
    forced: Mapping[str, PassRecord | Sequence[PassRecord]],
    refusal: Mapping[str, PassRecord | Sequence[PassRecord]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> TwoPassResult:
    """Turn the records of both passes into RI estimates and peer metrics.

    ``forced`` and ``refusal`` map item ids to a record or to a list of ``K`` sampled records.
    The two-pass estimators use the first record of each pass; with ``K >= 2`` in both passes
    the K-sample estimator uses all of them (on the items with no unscorable sample).
    """
    first_a = {k: _as_list(v, k)[0] for k, v in forced.items()}
    first_b = {k: _as_list(v, k)[0] for k, v in refusal.items()}
    missing = [it.id for it in items if it.id not in first_a or it.id not in first_b]
    if missing:
        raise ValueError(f"{len(missing)} items have no record in a pass, e.g. {missing[:3]}")
    excluded: dict[str, str] = {}
    kept: list[str] = []
    for it in items:
        a, b = first_a[it.id], first_b[it.id]
        if a.label == "unscorable":
            excluded[it.id] = f"forced pass: {a.reason}"
        elif b.label == "unscorable":
            excluded[it.id] = f"refusal pass: {b.reason}"
        elif b.label == "answered" and b.correct is None:
            excluded[it.id] = "refusal pass: grader says not attempted"
        else:
            kept.append(it.id)
    if not kept:
        raise ValueError(f"no item was scorable in both passes ({len(excluded)} excluded)")
    refused = np.array([first_b[i].label == "refused" for i in kept])
    forced_correct = np.array([first_a[i].correct is True for i in kept])
    answered_correct = np.array([first_b[i].correct is True for i in kept])
    n = len(kept)
    ri = refusal_index_paired(
        refused, forced_correct, answered_correct=answered_correct, n_boot=n_boot, seed=seed
    )
    ri_rates = refusal_index_from_rates(
        float(refused.mean()),
        float((~forced_correct).mean()),
        float((~refused & ~answered_correct).mean()),
        n,
    )
    peers = peer_metrics(refused, ~forced_correct, answered_correct)
    ksample, k_excluded, samples = _ksample(items, forced, refusal, n_boot, seed)
    return TwoPassResult(
        first_a, first_b, kept, excluded, ri, ri_rates, peers, ksample, k_excluded, samples
    )


def _as_list(value: PassRecord | Sequence[PassRecord], item_id: str) -> list[PassRecord]:
    records = [value] if isinstance(value, PassRecord) else list(value)
    if not records or not all(isinstance(r, PassRecord) for r in records):
        raise TypeError(f"item {item_id!r}: expected a PassRecord or a list of them")
    return records


def _ksample(
    items: Sequence[Item],
    forced: Mapping[str, PassRecord | Sequence[PassRecord]],
    refusal: Mapping[str, PassRecord | Sequence[PassRecord]],
    n_boot: int,
    seed: int,
) -> tuple[RIResult | None, int, int]:
    a = {it.id: _as_list(forced[it.id], it.id) for it in items}
    b = {it.id: _as_list(refusal[it.id], it.id) for it in items}
    k_a = min(len(v) for v in a.values())
    k_b = min(len(v) for v in b.values())
    if k_a < 2 or k_b < 2:
        return None, 0, min(k_a, k_b)

    def scorable(rec: PassRecord) -> bool:
        return rec.label != "unscorable" and not (rec.label == "answered" and rec.correct is None)

    kept = [
        it.id
        for it in items
        if all(scorable(r) for r in a[it.id][:k_a]) and all(scorable(r) for r in b[it.id][:k_b])
    ]
    if len(kept) < 4:
        return None, len(items) - len(kept), min(k_a, k_b)
    refused = np.array([[b[i][k].label == "refused" for i in kept] for k in range(k_b)])
    wrong = np.array([[a[i][k].correct is not True for i in kept] for k in range(k_a)])
    result = refusal_index_ksample(refused, wrong, n_boot=n_boot, seed=seed)
    return result, len(items) - len(kept), min(k_a, k_b)
