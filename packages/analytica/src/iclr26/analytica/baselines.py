"""Baselines a user would run instead of a decomposition tree.

* :class:`Vanilla` — one holistic estimate of the root proposition (official ``Vanilla`` agent).
* :class:`SelfConsistency` — ``K`` holistic samples aggregated by mean, median or logit mean.
* :func:`logit_mean` — BLF-style logit-space aggregation with shrinkage.
* :class:`LogisticLeaves` — logistic regression of the outcome on the leaf values (supervised
  upper reference that needs resolved history).
* :class:`BayesNetAggregator` — BIRD-style Bayesian network with the tree as structure (children
  → parent), CPDs estimated on history (pgmpy), root posterior given the leaves.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from iclr26.analytica.clients import CallLedger, ChatClient
from iclr26.analytica.ground import CALIBRATION_PROMPT, LLMGrounder
from iclr26.analytica.tree import Proof, Proposition, PropositionTree
from iclr26.shared import check_array, check_int, import_optional

__all__ = [
    "BayesNetAggregator",
    "HolisticEstimator",
    "LogisticLeaves",
    "SelfConsistency",
    "Vanilla",
    "aggregate",
    "logit_mean",
]


@runtime_checkable
class HolisticEstimator(Protocol):
    """Estimates a proposition's ``p_true`` in one judgement (no tree)."""

    async def estimate(self, prop: Proposition) -> Proof: ...


class Vanilla:
    """One LLM call on the root proposition with the calibration prompt."""

    def __init__(
        self,
        client: ChatClient,
        *,
        prompt: str = CALIBRATION_PROMPT,
        max_repairs: int = 3,
        ledger: CallLedger | None = None,
    ) -> None:
        self._grounder = LLMGrounder(client, prompt=prompt, max_repairs=max_repairs, ledger=ledger)

    @property
    def calls(self) -> int:
        return self._grounder.calls

    async def estimate(self, prop: Proposition) -> Proof:
        return await self._grounder.ground(prop)


def logit_mean(probs: ArrayLike, *, shrink: float = 1.0, eps: float = 1e-3) -> float:
    """``σ(shrink · mean(logit(p)))`` with ``p`` clipped to ``[eps, 1 − eps]`` (BLF's K-trial
    logit-space aggregation; ``shrink < 1`` pulls toward 0.5)."""
    p = np.clip(
        np.asarray(check_array(probs, "probs", ndim=1, finite=True), dtype=float), eps, 1 - eps
    )
    if (np.asarray(probs, dtype=float) < 0).any() or (np.asarray(probs, dtype=float) > 1).any():
        raise ValueError("probs must lie in [0, 1]")
    z = shrink * np.mean(np.log(p) - np.log1p(-p))
    return float(1.0 / (1.0 + np.exp(-z)))


def aggregate(probs: ArrayLike, method: str = "mean", *, shrink: float = 1.0) -> float:
    """Aggregate K samples: ``"mean"``, ``"median"`` or ``"logit_mean"``."""
    p = np.asarray(check_array(probs, "probs", ndim=1, finite=True), dtype=float)
    if method == "mean":
        return float(p.mean())
    if method == "median":
        return float(np.median(p))
    if method == "logit_mean":
        return logit_mean(p, shrink=shrink)
    raise ValueError(f"method must be 'mean', 'median' or 'logit_mean', got {method!r}")


class SelfConsistency:
    """``k`` independent holistic estimates, aggregated (variance-reduction baseline at ``k``×
    the cost of :class:`Vanilla`)."""

    def __init__(
        self, inner: HolisticEstimator, k: int = 5, agg: str = "mean", *, shrink: float = 1.0
    ) -> None:
        self.inner = inner
        self.k = check_int(k, "k", low=1)
        if agg not in ("mean", "median", "logit_mean"):
            raise ValueError(f"agg must be 'mean', 'median' or 'logit_mean', got {agg!r}")
        self.agg = agg
        self.shrink = shrink

    async def estimate(self, prop: Proposition) -> Proof:
        proofs = await asyncio.gather(*(self.inner.estimate(prop) for _ in range(self.k)))
        samples = [p.p_true for p in proofs]
        value = aggregate(samples, self.agg, shrink=self.shrink)
        return Proof(
            min(1.0, max(0.0, value)), f"{self.agg} of {self.k} samples", meta={"samples": samples}
        )


class LogisticLeaves:
    """Logistic regression of a binary outcome on leaf values (scikit-learn; L2, ``C``)."""

    def __init__(self, *, C: float = 1.0) -> None:
        self.C = C

    def fit(self, x: ArrayLike, y: ArrayLike) -> LogisticLeaves:
        x = np.asarray(check_array(x, "x", ndim=2, finite=True), dtype=float)
        y = np.asarray(y)
        if y.shape != (x.shape[0],):
            raise ValueError(f"y must have shape ({x.shape[0]},), got {y.shape}")
        if len(np.unique(y)) < 2:
            raise ValueError("y needs both classes to fit")
        from sklearn.linear_model import LogisticRegression

        self.model_ = LogisticRegression(C=self.C).fit(x, y.astype(int))
        return self

    def predict_proba(self, x: ArrayLike) -> NDArray[np.float64]:
        x = np.asarray(check_array(x, "x", ndim=2, finite=True), dtype=float)
        return self.model_.predict_proba(x)[:, 1]


class BayesNetAggregator:
    """BIRD-style Bayesian network over the tree's propositions (pgmpy).

    Structure: every child is a parent of its parent proposition in the network; all nodes are
    binary (values thresholded at 0.5). CPDs are fitted with a BDeu prior on resolved history;
    the root posterior given the thresholded leaves is the prediction (cached per evidence
    pattern). Needs the ``[peers]`` extra.
    """

    def __init__(self, tree: PropositionTree, *, equivalent_sample_size: float = 5.0) -> None:
        self.tree = tree
        self.ess = equivalent_sample_size
        self._cache: dict[tuple[int, ...], float] = {}

    def fit(self, samples: Sequence[Mapping[str, float]]) -> BayesNetAggregator:
        import pandas as pd

        with warnings.catch_warnings():  # pgmpy 1.1 warns about its own internal imports
            warnings.simplefilter("ignore", FutureWarning)
            import_optional(
                "pgmpy", dist="iclr26-analytica", extra="peers", purpose="BayesNetAggregator"
            )
            from pgmpy.inference import VariableElimination
            from pgmpy.models import DiscreteBayesianNetwork
            from pgmpy.parameter_estimator import DiscreteBayesianEstimator

        if not samples:
            raise ValueError("samples must not be empty")
        nodes = [n.pid for n in self.tree]
        edges = [(c, n.pid) for n in self.tree for c in n.children]
        data = pd.DataFrame({pid: [int(float(s[pid]) > 0.5) for s in samples] for pid in nodes})
        model = DiscreteBayesianNetwork(edges)
        state_names = {pid: [0, 1] for pid in nodes}
        model.fit(
            data,
            estimator=DiscreteBayesianEstimator(
                state_names=state_names, prior_type="BDeu", equivalent_sample_size=self.ess
            ),
        )
        self.model_ = model
        self._infer = VariableElimination(model)
        self._cache = {}
        return self

    def predict(self, leaf_values: Mapping[str, float]) -> float:
        leaves = self.tree.leaves()
        key = tuple(int(float(leaf_values[pid]) > 0.5) for pid in leaves)
        if key not in self._cache:
            q: Any = self._infer.query(
                [self.tree.root_id],
                evidence=dict(zip(leaves, key, strict=True)),
                show_progress=False,
            )
            self._cache[key] = float(q.values[1])
        return self._cache[key]
