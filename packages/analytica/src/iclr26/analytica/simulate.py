"""Deterministic simulated agents: the offline stand-ins for the LLM roles.

* :class:`SimulatedJudge` — a grounder (leaves) and holistic estimator (root) whose judgement of
  a proposition with soft truth ``v`` is ``clip(v + b + ε)``: ``b ~ N(0, bias_sd)`` is fixed per
  (question, proposition) across runs (a systematic error), ``ε ~ N(0, noise_sd)`` is drawn per
  call (run-to-run noise). Every judgement — leaf or holistic — gets the same error model, so a
  comparison between the tree and a holistic estimate isolates the aggregation.
* :class:`SimulatedLLM` — a chat responder that plays all three roles through the real prompts
  and parsers (analyzer expansions from a template, calibrated prover answers from a truth table,
  linear/logical/free-form synthesis answers), optionally returning unparseable answers at a
  seeded rate. Serve it with :class:`~iclr26.analytica.loopback.LoopbackChatServer` to exercise
  the HTTP client, or wrap it in :class:`~iclr26.analytica.clients.CallableClient`.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from iclr26.analytica.decompose import ANALYZER_PROMPT, END_OF_ANALYSIS
from iclr26.analytica.ground import CALIBRATION_PROMPT, NOTEBOOK_PROMPT
from iclr26.analytica.synth import FREEFORM_PROMPT, LINEAR_PROMPT, LOGICAL_PROMPT
from iclr26.analytica.tree import Proof, Proposition

__all__ = ["SimulatedJudge", "SimulatedLLM"]


def _h(*parts: Any) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


class SimulatedJudge:
    """Simulated grounder / holistic estimator with a known truth.

    Args:
        truth: ``prop -> soft truth`` (e.g. a lookup by ``(prop.date, prop.pid)``).
        bias_sd: sd of the per-(question, proposition) systematic error (fixed by ``world_seed``).
        noise_sd: sd of the per-call error (drawn from ``seed`` and a per-proposition counter).
        seed: run seed; ``world_seed``: seed of the systematic errors.
        correlation: correlation of the systematic errors across the propositions of one question
            (0 = independent, the variance law's assumption; 1 = one shared error).
    """

    def __init__(
        self,
        truth: Callable[[Proposition], float],
        *,
        bias_sd: float = 0.0,
        noise_sd: float = 0.1,
        seed: int = 0,
        world_seed: int = 0,
        correlation: float = 0.0,
    ) -> None:
        for name, v in (("bias_sd", bias_sd), ("noise_sd", noise_sd)):
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be ≥ 0, got {v}")
        if not 0 <= correlation <= 1:
            raise ValueError(f"correlation must be in [0, 1], got {correlation}")
        self.truth = truth
        self.bias_sd = bias_sd
        self.noise_sd = noise_sd
        self.seed = seed
        self.world_seed = world_seed
        self.correlation = correlation
        self._count: dict[int, int] = {}
        self.calls = 0

    def bias(self, prop: Proposition) -> float:
        if self.bias_sd == 0:
            return 0.0
        own = np.random.default_rng([self.world_seed, _h("bias", prop.date, prop.pid)]).normal()
        shared = np.random.default_rng([self.world_seed, _h("bias", prop.date)]).normal()
        r = self.correlation
        return self.bias_sd * (math.sqrt(r) * shared + math.sqrt(1 - r) * own)

    def judge(self, prop: Proposition) -> float:
        self.calls += 1
        key = _h(prop.date, prop.pid, prop.sentence)
        k = self._count.get(key, 0)
        self._count[key] = k + 1
        noise = (
            np.random.default_rng([self.seed, key, k]).normal(0.0, self.noise_sd)
            if self.noise_sd
            else 0.0
        )
        return float(np.clip(self.truth(prop) + self.bias(prop) + noise, 0.0, 1.0))

    async def ground(self, prop: Proposition) -> Proof:
        return Proof(self.judge(prop), "simulated judgement")

    async def estimate(self, prop: Proposition) -> Proof:
        return Proof(self.judge(prop), "simulated holistic judgement")


_CHILD = re.compile(r"^- (\S+): .*?\| p_true=([0-9.eE+-]+|None) \|", re.M)
_PROP = re.compile(r"^Proposition (\S+): (.*)$", re.M)
_ROOT = re.compile(r"^Root (\S+): (.*)$", re.M)


class SimulatedLLM:
    """A deterministic chat model for the package's own prompts (see module docstring).

    Args:
        truths: ``sentence -> p_true`` answered by the prover role (unknown sentences: 0.5).
        template: nested ``{"sentence", "children": [...]}`` the analyzer role expands, one level
            per round.
        linear_weights: ``"equal"`` (``β = 1/K``) or a callable ``(child ids) -> {id: β}``.
        unparseable_rate: share of answers replaced by prose that no parser accepts (seeded by
            the request content, so the same dialog gets the same answer).
        notebook_cells: code cells the notebook-prover role writes before answering.
    """

    def __init__(
        self,
        truths: Mapping[str, float] | None = None,
        *,
        template: Mapping[str, Any] | None = None,
        linear_weights: str | Callable[[Sequence[str]], Mapping[str, float]] = "equal",
        unparseable_rate: float = 0.0,
        notebook_cells: Sequence[str] = (),
        seed: int = 0,
    ) -> None:
        if not 0 <= unparseable_rate <= 1:
            raise ValueError(f"unparseable_rate must be in [0, 1], got {unparseable_rate}")
        self.truths = dict(truths or {})
        self.template = template
        self.linear_weights = linear_weights
        self.unparseable_rate = unparseable_rate
        self.notebook_cells = list(notebook_cells)
        self.seed = seed
        self.calls = 0

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> str:
        self.calls += 1
        system = messages[0]["content"] if messages else ""
        # The task is in the first user message; later ones are repair requests.
        last = messages[1]["content"] if len(messages) > 1 else ""
        if self.unparseable_rate:
            u = np.random.default_rng([self.seed, _h(*(m["content"] for m in messages))]).random()
            if u < self.unparseable_rate:
                return "I believe this is fairly likely, on balance."
        if system == CALIBRATION_PROMPT:
            return self._prove(messages[1]["content"])
        if system == NOTEBOOK_PROMPT:
            step = sum(1 for m in messages if m["role"] == "assistant")
            if step < len(self.notebook_cells):
                return f"```python\n{self.notebook_cells[step]}\n```"
            return self._prove(messages[1]["content"])
        if system.startswith(LINEAR_PROMPT.split("\n")[0]):
            return self._linear(last)
        if system == LOGICAL_PROMPT:
            kids = [m.group(1) for m in _CHILD.finditer(last)]
            return json.dumps({"formula": " AND ".join(kids), "PA": 1.0, "rationale": "all needed"})
        if system == FREEFORM_PROMPT:
            vals = [float(m.group(2)) for m in _CHILD.finditer(last)]
            return json.dumps(
                {"p_true": float(np.mean(vals)), "key_factor": "", "proof": "average"}
            )
        if system == ANALYZER_PROMPT:
            return self._analyze(messages)
        return "I cannot help with that request."

    def _prove(self, user: str) -> str:
        m = _PROP.search(user)
        sentence = m.group(2).strip() if m else ""
        p = self.truths.get(sentence, 0.5)
        return (
            "Here is my proof.\n```json\n"
            + json.dumps(
                {"p_true": p, "key_factor": "lookup", "proof": f"table value for {sentence!r}"}
            )
            + "\n```"
        )

    def _linear(self, user: str) -> str:
        kids = [(m.group(1), float(m.group(2))) for m in _CHILD.finditer(user)]
        ids = [k for k, _ in kids]
        if self.linear_weights == "equal":
            weights = {k: 1.0 / len(ids) for k in ids}
        else:
            weights = dict(self.linear_weights(ids))  # type: ignore[operator]
        p = sum(weights[k] * v for k, v in kids)
        p = min(1.0, max(0.0, p))
        return json.dumps(
            {
                "intercept": 0.0,
                "coefficients": weights,
                "p_true": round(p, 6),
                "rationale": "weighted",
            }
        )

    def _analyze(self, messages: Sequence[Mapping[str, str]]) -> str:
        if self.template is None:
            return END_OF_ANALYSIS
        rounds = sum(
            1 for m in messages if m["role"] == "assistant" and m["content"].startswith("{")
        )
        root = _ROOT.search(messages[1]["content"])
        root_id = root.group(1) if root else "P0"
        # Expansions of depth `rounds`: walk the template and emit every node at that depth.
        level: list[tuple[str, Mapping[str, Any]]] = [(root_id, self.template)]
        for _ in range(rounds):
            level = [
                (f"{'P' if pid == 'P0' else pid + '.'}{j}", kid)
                for pid, node in level
                for j, kid in enumerate(node.get("children", []), 1)
            ]
        items = []
        for pid, node in level:
            kids = node.get("children", [])
            if kids:
                prefix = "P" if pid == "P0" else pid + "."
                items.append(
                    {
                        "parent": pid,
                        "children": {f"{prefix}{j}": k["sentence"] for j, k in enumerate(kids, 1)},
                        "causality": node.get("causality", ""),
                    }
                )
        if not items:
            return END_OF_ANALYSIS
        return json.dumps(items)
