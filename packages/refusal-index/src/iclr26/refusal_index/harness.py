"""The two-pass evaluation harness: run any chat client over a question set twice, once forced
to answer and once allowed to refuse, log every raw response, and compute RI and peer metrics.

Every response is appended to a JSONL log as soon as it arrives; a rerun with the same log skips
what is already there, so an interrupted run resumes without asking any question twice. Records
are keyed by pass, item id and a hash of the system prompt, so changing a prompt re-asks.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.refusal_index.clients import ChatClient
from iclr26.refusal_index.detect import AliasGrader, Grader, RefusalDetector
from iclr26.refusal_index.estimators import RIResult, refusal_index_from_rates, refusal_index_paired
from iclr26.refusal_index.metrics import peer_metrics
from iclr26.shared import check_choice, check_int, check_nonempty, progress

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


@dataclass
class TwoPassResult:
    """Everything a two-pass run produced.

    Attributes:
        forced, refusal: records per item id for pass A and pass B.
        item_ids: ids of the items scored in both passes, in input order.
        excluded: item id -> why it was left out (unscorable in a pass).
        ri: paired estimate (bootstrap CI); ri_rates: the aggregate-rates estimate.
        peers: peer metrics on the same questions.
    """

    forced: dict[str, PassRecord]
    refusal: dict[str, PassRecord]
    item_ids: list[str]
    excluded: dict[str, str]
    ri: RIResult
    ri_rates: RIResult
    peers: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Summary as plain data (no raw responses)."""
        return {
            "n_scored": len(self.item_ids),
            "n_excluded": len(self.excluded),
            "ri": asdict(self.ri),
            "ri_rates": asdict(self.ri_rates),
            "peers": self.peers,
        }


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
        log_path: JSONL log of every response; existing records are reused (resume).
        n_boot, seed: bootstrap of the paired RI.
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
        n_boot: int = 1000,
        seed: int = 0,
        progress: bool = False,
    ) -> None:
        if not hasattr(client, "complete"):
            raise TypeError(
                f"client must have a complete(messages) method, got {type(client).__name__}"
            )
        check_int(refusal_strength, "refusal_strength", low=0, high=len(REFUSAL_PROMPTS) - 1)
        self.client = client
        self.grader = grader or AliasGrader()
        self.detector = detector or RefusalDetector()
        self.prompts = {
            "forced": forced_prompt or FORCED_PROMPT,
            "refusal": refusal_prompt or REFUSAL_PROMPTS[refusal_strength],
        }
        self.max_concurrency = check_int(max_concurrency, "max_concurrency", low=1)
        self.log_path = Path(log_path) if log_path is not None else None
        self.n_boot = n_boot
        self.seed = seed
        self.progress = progress
        self._lock = threading.Lock()

    def _load_log(self) -> dict[tuple[str, str, str], PassRecord]:
        done: dict[tuple[str, str, str], PassRecord] = {}
        if self.log_path is None or not self.log_path.exists():
            return done
        with self.log_path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = PassRecord(**json.loads(line))
                except (json.JSONDecodeError, TypeError) as err:
                    # A line cut by a crash mid-write is the only expected damage: skip it, re-ask.
                    log.warning(
                        "%s:%d is not a complete record (%s); it will be re-asked",
                        self.log_path,
                        n,
                        err,
                    )
                    continue
                done[(rec.pass_name, rec.prompt_hash, rec.item_id)] = rec
        with self.log_path.open("rb+") as f:
            if f.seek(0, 2) and (f.seek(-1, 2), f.read(1))[1] != b"\n":
                f.write(b"\n")  # close a line cut by a crash so the next record starts clean
        return done

    def _ask(self, item: Item, pass_name: str) -> PassRecord:
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
        )

    def _write(self, record: PassRecord) -> None:
        if self.log_path is None:
            return
        with self._lock, self.log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")

    def run_pass(self, items: Sequence[Item], pass_name: str) -> dict[str, PassRecord]:
        """Ask every item in one pass (skipping logged ones); returns records by item id."""
        check_choice(pass_name, "pass_name", PASSES)
        done = self._load_log()
        key = _hash(self.prompts[pass_name])
        records = {
            it.id: done[(pass_name, key, it.id)] for it in items if (pass_name, key, it.id) in done
        }
        todo = [it for it in items if it.id not in records]
        if records:
            log.info(
                "%s pass: %d of %d items resumed from the log", pass_name, len(records), len(items)
            )
        bar = progress(total=len(todo), enabled=self.progress, desc=f"{pass_name} pass", unit="q")
        with bar, ThreadPoolExecutor(self.max_concurrency) as pool:
            futures = {pool.submit(self._ask, it, pass_name): it for it in todo}
            for future in as_completed(futures):
                record = future.result()  # a failure propagates; what finished is already logged
                self._write(record)
                records[record.item_id] = record
                bar.update(1)
        return records

    def run(self, items: Iterable[Item]) -> TwoPassResult:
        """Run both passes and score them.

        A forced-pass refusal counts as wrong (the model gave no correct answer when it had to);
        items unscorable in either pass are excluded and listed in ``excluded``.
        """
        items = list(items)
        check_nonempty(items, "items")
        ids = [it.id for it in items]
        if len(set(ids)) != len(ids):
            raise ValueError("item ids must be unique")
        forced = self.run_pass(items, "forced")
        refusal = self.run_pass(items, "refusal")
        return score_passes(items, forced, refusal, n_boot=self.n_boot, seed=self.seed)


def score_passes(
    items: Sequence[Item],
    forced: dict[str, PassRecord],
    refusal: dict[str, PassRecord],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> TwoPassResult:
    """Turn the records of both passes into RI estimates and peer metrics."""
    excluded: dict[str, str] = {}
    kept: list[str] = []
    for it in items:
        a, b = forced[it.id], refusal[it.id]
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
    refused = np.array([refusal[i].label == "refused" for i in kept])
    forced_correct = np.array([forced[i].correct is True for i in kept])
    answered_correct = np.array([refusal[i].correct is True for i in kept])
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
    return TwoPassResult(forced, refusal, kept, excluded, ri, ri_rates, peers)
