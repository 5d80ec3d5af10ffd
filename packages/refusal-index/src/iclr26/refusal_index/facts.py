"""A small model with a genuine knowledge boundary, trained from scratch on real country facts.

The facts come from the ``countryinfo`` package (its bundled JSON, no download): for each of
~250 countries its capital, region, subregion, demonym and currency. Each relation is one
"dataset". :class:`FactMemorizer` is a tiny network (subject embedding + relation embedding →
tanh layer → one softmax head per relation) trained on a subset of the facts where each fact is
shown a number of times drawn from a Zipf law: some facts are seen often, some rarely, many
never. Facts never seen can still be inferred through other relations of the same country
(a subregion fixes the region), so the boundary between known and unknown is learned, not
scripted.

The forced answer is sampled from the model's softmax (error probability ``1 − p_correct``);
the refusal decision thresholds the model's confidence (its top probability), blurred by a fixed
per-question distortion of strength ``miscalibration`` and by logistic noise of scale
``refusal_noise`` per run. The threshold is the "prompt strength" knob.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, logit

from iclr26.refusal_index.harness import Item
from iclr26.shared import check_int, check_range

__all__ = ["RELATIONS", "FactMemorizer", "FactTable", "load_fact_table"]

RELATIONS = ("capital", "region", "subregion", "demonym", "currency")

_QUESTIONS = {
    "capital": "What is the capital of {}?",
    "region": "In which world region is {}?",
    "subregion": "In which subregion is {}?",
    "demonym": "What is the demonym of people from {}?",
    "currency": "What is the ISO currency code used in {}?",
}


@dataclass(frozen=True)
class FactTable:
    """Facts as integer triples ``(subject, relation, answer)`` with their vocabularies.

    Attributes:
        subjects: country names.
        relations: relation names (the datasets).
        answers: per relation, the answer vocabulary.
        subject_ids, relation_ids, answer_ids: ``(n_facts,)`` integer arrays.
    """

    subjects: tuple[str, ...]
    relations: tuple[str, ...]
    answers: tuple[tuple[str, ...], ...]
    subject_ids: NDArray[np.int64]
    relation_ids: NDArray[np.int64]
    answer_ids: NDArray[np.int64]

    @property
    def n_facts(self) -> int:
        return int(self.subject_ids.size)

    def items(self, relation: str | None = None) -> list[Item]:
        """The facts as question/answer :class:`Item` s (for the evaluation harness)."""
        out = []
        for i in range(self.n_facts):
            rel = self.relations[self.relation_ids[i]]
            if relation is not None and rel != relation:
                continue
            subject = self.subjects[self.subject_ids[i]]
            answer = self.answers[self.relation_ids[i]][self.answer_ids[i]]
            out.append(Item(f"{rel}:{subject}", _QUESTIONS[rel].format(subject), (answer,)))
        return out


def load_fact_table(relations: Sequence[str] = RELATIONS) -> FactTable:
    """Read the country facts bundled in ``countryinfo`` into a :class:`FactTable`.

    Countries lacking a value for a relation contribute no fact for it.
    """
    if isinstance(relations, str) or not isinstance(relations, Sequence):
        raise TypeError(f"relations must be a sequence of names, got {relations!r}")
    if not relations:
        raise ValueError(f"relations must name at least one of {RELATIONS}")
    for rel in relations:
        if rel not in _QUESTIONS:
            raise ValueError(f"unknown relation {rel!r}; choose from {RELATIONS}")
    from countryinfo import all_countries

    records = []
    for country in all_countries():
        info = country.info()
        name = info.get("name")
        if not name:
            continue
        values = {rel: info.get(rel) for rel in ("capital", "region", "subregion", "demonym")}
        currencies = info.get("currencies") or []
        values["currency"] = currencies[0] if currencies else None
        records.append((name, values))
    records.sort()
    subjects = tuple(name for name, _ in records)
    vocab = {
        rel: sorted({v[rel] for _, v in records if isinstance(v[rel], str) and v[rel]})
        for rel in relations
    }
    index = {rel: {a: i for i, a in enumerate(vocab[rel])} for rel in relations}
    s_ids, r_ids, a_ids = [], [], []
    for s, (_, values) in enumerate(records):
        for r, rel in enumerate(relations):
            value = values[rel]
            if isinstance(value, str) and value:
                s_ids.append(s)
                r_ids.append(r)
                a_ids.append(index[rel][value])
    return FactTable(
        subjects=subjects,
        relations=tuple(relations),
        answers=tuple(tuple(vocab[rel]) for rel in relations),
        subject_ids=np.asarray(s_ids, dtype=np.int64),
        relation_ids=np.asarray(r_ids, dtype=np.int64),
        answer_ids=np.asarray(a_ids, dtype=np.int64),
    )


def zipf_exposure(
    n: int, *, total: int, alpha: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """How often each of ``n`` facts is shown: Zipf-distributed counts over a random order."""
    ranks = rng.permutation(n) + 1
    weights = ranks.astype(float) ** -alpha
    return rng.multinomial(total, weights / weights.sum())


@dataclass
class FactMemorizer:
    """Tiny fact-recall network trained from scratch with Adam on Zipf-exposed facts (spec §4.4).

    Args:
        width: hidden size ``d``.
        steps: full-batch Adam steps.
        lr: Adam learning rate.
        exposure: total number of fact presentations (Zipf-distributed over facts).
        zipf_alpha: Zipf exponent of the exposure.
        miscalibration: strength of the fixed per-question distortion of the confidence used for
            refusals (0 = refusals follow the model's own confidence exactly).
        refusal_noise: scale of per-run logistic noise on the refusal decision (logit units).
        seed: seed of initialisation, exposure and distortion.
    """

    width: int = 32
    steps: int = 300
    lr: float = 0.05
    exposure: int = 3000
    zipf_alpha: float = 1.0
    miscalibration: float = 0.5
    refusal_noise: float = 0.5
    seed: int = 0
    params_: dict[str, NDArray] = field(default_factory=dict, repr=False)
    exposure_: NDArray | None = field(default=None, repr=False)

    def fit(self, table: FactTable) -> FactMemorizer:
        """Train on ``table`` with Zipf exposure; sets ``params_`` and ``exposure_``."""
        check_int(self.width, "width", low=1)
        check_int(self.steps, "steps", low=1)
        check_range(self.lr, "lr", low=0.0, low_inclusive=False)
        rng = np.random.default_rng(self.seed)
        counts = zipf_exposure(table.n_facts, total=self.exposure, alpha=self.zipf_alpha, rng=rng)
        self.exposure_ = counts
        d = self.width
        p = {
            "E": rng.normal(0, 0.5, (len(table.subjects), d)),
            "R": rng.normal(0, 0.5, (len(table.relations), d)),
        }
        for r, vocab in enumerate(table.answers):
            p[f"W{r}"] = rng.normal(0, 1 / math.sqrt(d), (d, len(vocab)))
            p[f"b{r}"] = np.zeros(len(vocab))
        m = {k: np.zeros_like(v) for k, v in p.items()}
        v = {k: np.zeros_like(v) for k, v in p.items()}
        weights = counts / max(counts.sum(), 1)
        beta1, beta2 = 0.9, 0.999
        for t in range(1, self.steps + 1):
            grads = self._grads(p, table, weights)
            for k in p:
                m[k] = beta1 * m[k] + (1 - beta1) * grads[k]
                v[k] = beta2 * v[k] + (1 - beta2) * grads[k] ** 2
                p[k] -= self.lr * (m[k] / (1 - beta1**t)) / (np.sqrt(v[k] / (1 - beta2**t)) + 1e-8)
        self.params_ = p
        return self

    @staticmethod
    def _grads(p: dict[str, NDArray], table: FactTable, weights: NDArray) -> dict[str, NDArray]:
        grads = {k: np.zeros_like(val) for k, val in p.items()}
        for r in range(len(table.relations)):
            sel = table.relation_ids == r
            s, y, w = table.subject_ids[sel], table.answer_ids[sel], weights[sel]
            h = np.tanh(p["E"][s] + p["R"][r])
            logits = h @ p[f"W{r}"] + p[f"b{r}"]
            probs = _softmax(logits)
            dlogits = probs
            dlogits[np.arange(y.size), y] -= 1.0
            dlogits *= w[:, None]
            grads[f"W{r}"] += h.T @ dlogits
            grads[f"b{r}"] += dlogits.sum(axis=0)
            dpre = (dlogits @ p[f"W{r}"].T) * (1.0 - h * h)
            if np.unique(s).size == s.size:  # one fact per subject and relation (countryinfo)
                grads["E"][s] += dpre
            else:
                np.add.at(grads["E"], s, dpre)
            grads["R"][r] += dpre.sum(axis=0)
        return grads

    def relation_proba(
        self, table: FactTable, relation: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """``(fact_indices, probs)``: the softmax over the answers of one relation for its facts."""
        if not self.params_:
            raise ValueError("FactMemorizer is not fitted; call fit(table) first")
        p = self.params_
        idx = np.flatnonzero(table.relation_ids == relation)
        h = np.tanh(p["E"][table.subject_ids[idx]] + p["R"][relation])
        return idx, _softmax(h @ p[f"W{relation}"] + p[f"b{relation}"])

    def behaviour(self, table: FactTable) -> tuple[NDArray, NDArray, NDArray]:
        """``(p_correct, confidence, refusal_score)`` per fact.

        ``confidence`` is the top softmax probability; ``refusal_score`` is the logit of the
        confidence plus the fixed per-question distortion (lower = more likely to refuse).
        """
        p_correct = np.empty(table.n_facts)
        confidence = np.empty(table.n_facts)
        for r in range(len(table.relations)):
            idx, probs = self.relation_proba(table, r)
            p_correct[idx] = probs[np.arange(idx.size), table.answer_ids[idx]]
            confidence[idx] = probs.max(axis=1)
        rng = np.random.default_rng([self.seed, 1])
        distortion = self.miscalibration * rng.standard_normal(table.n_facts)
        score = logit(np.clip(confidence, 1e-9, 1 - 1e-9)) + distortion
        return p_correct, confidence, score

    def refusal_probs(self, score: NDArray, threshold: float) -> NDArray[np.float64]:
        """``P(refuse)`` per question at a threshold on the refusal score (logistic noise)."""
        if self.refusal_noise == 0:
            return (score < threshold).astype(float)
        return expit((threshold - score) / self.refusal_noise)

    def threshold_for_rate(self, score: NDArray, refusal_rate: float) -> float:
        """The threshold whose expected refusal rate is ``refusal_rate`` (bisection)."""
        check_range(
            refusal_rate,
            "refusal_rate",
            low=0.0,
            high=1.0,
            low_inclusive=False,
            high_inclusive=False,
        )
        lo, hi = float(score.min()) - 50.0, float(score.max()) + 50.0
        for _ in range(100):
            mid = (lo + hi) / 2.0
            if self.refusal_probs(score, mid).mean() < refusal_rate:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2.0


def _softmax(logits: NDArray) -> NDArray:
    z = logits - logits.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z
