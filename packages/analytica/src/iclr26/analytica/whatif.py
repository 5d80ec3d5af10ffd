"""What-if analysis (paper §2.2 step 6): edit nodes, recompute only their ancestors.

The official ``Proposition.edit(key, p_true)`` stores an override under a scenario key and
``resynthesize_key`` re-runs synthesis for the ancestors only, reusing every other proof.
:func:`scenario` does the same with the rules the synthesizers stored on each node (linear or
logical: no LLM call); :func:`resynthesize` calls a synthesizer again for the ancestors (needed
for free-form synthesis). :func:`sensitivities` gives ``∂ v(root) / ∂ v(node)`` for every node
in one top-down pass (for linear trees: the product of the βs along the path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from iclr26.analytica.synth import Synthesizer, apply_rule
from iclr26.analytica.tree import Proof, PropositionTree, check_probability

__all__ = ["Scenario", "recompute", "resynthesize", "scenario", "sensitivities", "sensitivity"]


def _check_overrides(tree: PropositionTree, overrides: Mapping[str, float]) -> dict[str, float]:
    if not isinstance(overrides, Mapping) or not overrides:
        raise ValueError("overrides must be a non-empty mapping {pid: p_true}")
    out = {}
    for pid, value in overrides.items():
        if pid not in tree:
            raise KeyError(f"no proposition {pid!r} in the tree")
        out[pid] = check_probability(value, f"overrides[{pid!r}]")
    return out


def _proven(tree: PropositionTree, pid: str) -> float:
    p = tree.get(pid).p_true
    if p is None:
        raise ValueError(f"{pid} has no proof: analyse the tree first")
    return p


@dataclass
class Scenario:
    """An overlay on a proven tree: the edited and recomputed values; the rest is the base tree.

    Attributes:
        key: the scenario's name.
        overrides: the edits.
        values: new values of every edited or recomputed node.
        recomputed: ancestors re-evaluated, deepest first (nothing else was touched).
    """

    tree: PropositionTree
    key: str
    overrides: dict[str, float]
    values: dict[str, float] = field(default_factory=dict)
    recomputed: list[str] = field(default_factory=list)

    def value(self, pid: str) -> float:
        return self.values[pid] if pid in self.values else _proven(self.tree, pid)

    @property
    def root(self) -> float:
        return self.value(self.tree.root_id)

    @property
    def root_change(self) -> float:
        return self.root - _proven(self.tree, self.tree.root_id)


def scenario(
    tree: PropositionTree, overrides: Mapping[str, float], *, key: str = "whatif"
) -> Scenario:
    """Set ``overrides`` (``{pid: p_true}``) and re-evaluate only their ancestors with the stored
    synthesis rules. The base tree is not modified. Overriding an internal node fixes its value
    (its children are ignored), as the official ``edit`` does."""
    edits = _check_overrides(tree, overrides)
    result = Scenario(tree, key, edits, dict(edits))
    todo: set[str] = set()
    for pid in edits:
        todo.update(tree.ancestors(pid))
    todo -= set(edits)
    for pid in sorted(todo, key=lambda p: -tree.depth_of(p)):
        node = tree.get(pid)
        if node.synthesis is None:
            raise ValueError(f"{pid} has no stored synthesis rule; use resynthesize()")
        values = {c: result.value(c) for c in node.children}
        result.values[pid] = apply_rule(node.synthesis, values)["p_true"]
        result.recomputed.append(pid)
    return result


async def resynthesize(
    tree: PropositionTree, overrides: Mapping[str, float], synthesizer: Synthesizer
) -> tuple[PropositionTree, list[str]]:
    """Like :func:`scenario` but calls ``synthesizer`` for each ancestor (official
    ``resynthesize_key``); returns a new proven tree and the ids that were re-synthesised."""
    edits = _check_overrides(tree, overrides)
    new = tree.copy()
    for pid, value in edits.items():
        new.get(pid).proof = Proof(value, "what-if override")
    todo: set[str] = set()
    for pid in edits:
        todo.update(new.ancestors(pid))
    todo -= set(edits)
    order = sorted(todo, key=lambda p: -new.depth_of(p))
    for pid in order:
        proof = await synthesizer.synthesize(new, pid)
        node = new.get(pid)
        node.synthesis = proof.meta.pop("rule", None)
        node.proof = proof
    return new, order


def recompute(
    tree: PropositionTree, leaf_values: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Full bottom-up re-evaluation of every internal node with the stored rules (the baseline a
    what-if is compared with). ``leaf_values`` replaces the leaves' proven values."""
    values: dict[str, float] = {}
    for pid in tree.leaves():
        values[pid] = (
            leaf_values[pid]
            if leaf_values is not None and pid in leaf_values
            else _proven(tree, pid)
        )
    for pid in tree.internal():
        node = tree.get(pid)
        if node.synthesis is None:
            raise ValueError(f"{pid} has no stored synthesis rule")
        values[pid] = apply_rule(node.synthesis, {c: values[c] for c in node.children})["p_true"]
    return values


def _local_derivative(
    tree: PropositionTree, parent: str, child: str, values: Mapping[str, float], h: float
) -> float:
    rule = tree.get(parent).synthesis
    if rule is None:
        raise ValueError(f"{parent} has no stored synthesis rule")
    kids = {c: values[c] for c in tree.get(parent).children}
    if rule.get("kind", "linear") == "linear":
        raw = float(rule.get("intercept", 0.0)) + sum(rule["weights"][c] * kids[c] for c in kids)
        return 0.0 if not 0.0 <= raw <= 1.0 else float(rule["weights"][child])
    # Probabilistic logic is multilinear in each (read-once) variable: a central difference is
    # exact; evaluated off the [0, 1] box is fine for the polynomial.
    hi = apply_rule(rule, {**kids, child: kids[child] + h})["p_true"]
    lo = apply_rule(rule, {**kids, child: kids[child] - h})["p_true"]
    return (hi - lo) / (2 * h)


def sensitivities(tree: PropositionTree, *, h: float = 1e-4) -> dict[str, float]:
    """``∂ v(root) / ∂ v(node)`` for every node (chain rule along the unique path; 0 where a linear
    node is clipped to [0, 1])."""
    values = {pid: _proven(tree, pid) for pid in (n.pid for n in tree)}
    out = {tree.root_id: 1.0}
    for node in tree:  # pre-order: a parent before its children
        for child in node.children:
            out[child] = out[node.pid] * _local_derivative(tree, node.pid, child, values, h)
    return out


def sensitivity(
    tree: PropositionTree, pid: str, *, method: str = "analytic", eps: float = 0.01
) -> float:
    """``∂ v(root) / ∂ v(pid)``: ``"analytic"`` (chain rule) or ``"finite"`` (a central difference
    of two :func:`scenario` calls, ``±eps`` clipped to [0, 1])."""
    tree.get(pid)
    if method == "analytic":
        return sensitivities(tree)[pid]
    if method != "finite":
        raise ValueError(f"method must be 'analytic' or 'finite', got {method!r}")
    v = _proven(tree, pid)
    lo, hi = max(0.0, v - eps), min(1.0, v + eps)
    if hi == lo:
        raise ValueError("eps must be > 0")
    return (scenario(tree, {pid: hi}).root - scenario(tree, {pid: lo}).root) / (hi - lo)
