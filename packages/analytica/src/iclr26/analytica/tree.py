"""Soft propositions and the decomposition tree (paper §2: Soft Propositional Reasoning).

A proposition carries a sentence, its context and query date, and a soft truth value
``p_true ∈ [0, 1]`` (the probability that it is true) once it has a :class:`Proof`. A question is a
tree of propositions rooted at ``P0``; children follow the official id scheme ``P0 → P1, P2, …`` and
``Pk → Pk.1, Pk.2, …``. :class:`PropositionTree` validates what the official parser validates (unique
ids, exactly one root, expansions attached to a node already in the tree) and, in addition, cycles,
nodes with two parents, dangling child ids and ids that break the scheme.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Proof", "Proposition", "PropositionTree", "TreeError", "check_probability"]

_ID_PART = re.compile(r"^P(0|[1-9]\d*)((\.[1-9]\d*)*)$")


class TreeError(ValueError):
    """A proposition tree (or an expansion of it) breaks a structural rule."""


def check_probability(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1]; bools are accepted, NaN/inf/out of range/non-numbers raise."""
    if isinstance(value, np.generic) and value.shape == ():
        value = value.item()
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a soft truth value in [0, 1], got {value!r}")
    return v


@dataclass
class Proof:
    """A soft truth value with its justification (the official ``{p_true, key_factor}`` + proof).

    Attributes:
        p_true: probability that the proposition is true, in [0, 1].
        text: the proof (grounder transcript, synthesis rationale).
        key_factor: the one factor the prover named as decisive.
        meta: anything else (synthesis coefficients, call counts, grounder name).
    """

    p_true: float
    text: str = ""
    key_factor: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.p_true = check_probability(self.p_true, "p_true")
        if not isinstance(self.text, str) or not isinstance(self.key_factor, str):
            raise TypeError("Proof.text and Proof.key_factor must be strings")

    def to_dict(self) -> dict[str, Any]:
        return {
            "p_true": self.p_true,
            "text": self.text,
            "key_factor": self.key_factor,
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proof:
        if "p_true" not in data:
            raise ValueError("a proof needs a 'p_true'")
        return cls(
            data["p_true"],
            str(data.get("text", "")),
            str(data.get("key_factor", "")),
            dict(data.get("meta", {})),
        )


@dataclass
class Proposition:
    """One soft proposition: ``pid``, ``sentence``, context, query ``date`` and child ids.

    ``proof`` is set when the node is grounded (leaf) or synthesised (internal node);
    ``synthesis`` holds the rule a synthesiser chose (e.g. ``{"kind": "linear", "intercept": β₀,
    "weights": {child: β_k}}``) so what-if analysis can re-evaluate it without calling an LLM.
    """

    pid: str
    sentence: str
    context: str = ""
    date: str | None = None
    children: list[str] = field(default_factory=list)
    causality: str = ""
    proof: Proof | None = None
    synthesis: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.pid, str) or not self.pid.strip():
            raise ValueError(f"pid must be a non-empty string, got {self.pid!r}")
        if not isinstance(self.sentence, str) or not self.sentence.strip():
            raise ValueError(f"proposition {self.pid}: sentence must be a non-empty string")
        if self.date is not None and not isinstance(self.date, str):
            self.date = str(self.date)
        self.children = [str(c) for c in self.children]

    @property
    def p_true(self) -> float | None:
        return None if self.proof is None else self.proof.p_true

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "sentence": self.sentence,
            "context": self.context,
            "date": self.date,
            "children": list(self.children),
            "causality": self.causality,
            "proof": None if self.proof is None else self.proof.to_dict(),
            "synthesis": self.synthesis,
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposition:
        for key in ("pid", "sentence"):
            if key not in data:
                raise ValueError(f"a proposition needs {key!r}, got keys {sorted(data)}")
        proof = data.get("proof")
        return cls(
            pid=data["pid"],
            sentence=data["sentence"],
            context=data.get("context", "") or "",
            date=data.get("date"),
            children=list(data.get("children", [])),
            causality=data.get("causality", "") or "",
            proof=None if proof is None else Proof.from_dict(proof),
            synthesis=data.get("synthesis"),
            meta=dict(data.get("meta", {}) or {}),
        )


def _expected_child_prefix(parent: str) -> str:
    return "P" if parent == "P0" else parent + "."


class PropositionTree:
    """A validated tree of :class:`Proposition` objects, addressed by id.

    Args:
        nodes: the propositions (any order).
        strict_ids: enforce the official id scheme (``P0`` root; children of ``P0`` are ``P1,
            P2, …``, children of ``Pk`` are ``Pk.1, Pk.2, …``). Set ``False`` for free ids.

    Raises:
        TreeError: duplicate ids, dangling child ids, a node with two parents, zero or several
            roots, a cycle or unreachable nodes, or (strict) ids breaking the scheme.
    """

    def __init__(self, nodes: Iterable[Proposition], *, strict_ids: bool = True) -> None:
        self.strict_ids = bool(strict_ids)
        self._nodes: dict[str, Proposition] = {}
        for node in nodes:
            if not isinstance(node, Proposition):
                raise TypeError(f"nodes must be Proposition objects, got {type(node).__name__}")
            if node.pid in self._nodes:
                raise TreeError(f"id {node.pid!r} is used twice")
            self._nodes[node.pid] = node
        if not self._nodes:
            raise TreeError("a tree needs at least one proposition")
        self._reindex()

    # -- structure ------------------------------------------------------------------------
    def _reindex(self) -> None:
        parent: dict[str, str] = {}
        for node in self._nodes.values():
            if len(set(node.children)) != len(node.children):
                raise TreeError(f"{node.pid} lists a child twice: {node.children}")
            for child in node.children:
                if child not in self._nodes:
                    raise TreeError(f"{node.pid} has a dangling child id {child!r}")
                if child in parent:
                    raise TreeError(f"{child} has two parents: {parent[child]} and {node.pid}")
                parent[child] = node.pid
        roots = [pid for pid in self._nodes if pid not in parent]
        if len(roots) != 1:
            if not roots:
                raise TreeError("the tree has no root (every node has a parent: a cycle)")
            raise TreeError(f"the tree has {len(roots)} roots: {roots}; exactly one is allowed")
        self.root_id = roots[0]
        # Iterative DFS from the root: anything unreached sits on a cycle.
        order: list[str] = []
        depth = {self.root_id: 0}
        stack = [self.root_id]
        while stack:
            pid = stack.pop()
            order.append(pid)
            for child in reversed(self._nodes[pid].children):
                depth[child] = depth[pid] + 1
                stack.append(child)
        if len(order) != len(self._nodes):
            lost = sorted(set(self._nodes) - set(order))
            raise TreeError(f"nodes {lost} are not reachable from the root {self.root_id}: a cycle")
        if self.strict_ids:
            if self.root_id != "P0":
                raise TreeError(f"the root id must be 'P0', got {self.root_id!r}")
            for pid, node in self._nodes.items():
                if not _ID_PART.match(pid):
                    raise TreeError(f"id {pid!r} does not follow the P0 / P1 / P1.2 scheme")
                prefix = _expected_child_prefix(pid)
                for child in node.children:
                    rest = child[len(prefix) :] if child.startswith(prefix) else ""
                    if not rest.isdigit() or rest.startswith("0"):
                        raise TreeError(
                            f"child id {child!r} of {pid} must look like {prefix}<j> (j ≥ 1)"
                        )
        self._parent = parent
        self._preorder = order
        self._depth = depth

    @property
    def root(self) -> Proposition:
        return self._nodes[self.root_id]

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, pid: object) -> bool:
        return pid in self._nodes

    def __iter__(self) -> Iterator[Proposition]:
        return (self._nodes[p] for p in self._preorder)

    def get(self, pid: str) -> Proposition:
        """The proposition with id ``pid`` (``KeyError`` naming it if absent)."""
        try:
            return self._nodes[pid]
        except KeyError:
            raise KeyError(f"no proposition {pid!r} in the tree") from None

    def parent(self, pid: str) -> str | None:
        self.get(pid)
        return self._parent.get(pid)

    def depth_of(self, pid: str) -> int:
        self.get(pid)
        return self._depth[pid]

    @property
    def depth(self) -> int:
        return max(self._depth.values())

    def is_leaf(self, pid: str) -> bool:
        return not self.get(pid).children

    def leaves(self) -> list[str]:
        """Leaf ids in pre-order."""
        return [p for p in self._preorder if not self._nodes[p].children]

    def internal(self) -> list[str]:
        """Internal-node ids, deepest first (a valid bottom-up synthesis order)."""
        inner = [p for p in self._preorder if self._nodes[p].children]
        return sorted(inner, key=lambda p: -self._depth[p])

    def levels(self) -> list[list[str]]:
        """Internal nodes grouped by depth, deepest level first (each level can run in parallel)."""
        by_depth: dict[int, list[str]] = {}
        for pid in self.internal():
            by_depth.setdefault(self._depth[pid], []).append(pid)
        return [by_depth[d] for d in sorted(by_depth, reverse=True)]

    def ancestors(self, pid: str) -> list[str]:
        """Ids from ``pid``'s parent up to the root."""
        self.get(pid)
        out = []
        while pid in self._parent:
            pid = self._parent[pid]
            out.append(pid)
        return out

    def path_to_root(self, pid: str) -> list[str]:
        return [pid, *self.ancestors(pid)]

    def values(self) -> dict[str, float | None]:
        """``pid -> p_true`` (``None`` where no proof yet)."""
        return {p: self._nodes[p].p_true for p in self._preorder}

    # -- growth (the official analyzer's expansion rules) -----------------------------------
    def expand(self, parent: str, children: Mapping[str, str], causality: str = "") -> list[str]:
        """Attach new children to ``parent`` (one analyzer JSON object ``{parent, children, causality}``).

        Rejects (``TreeError``) a parent not already in the tree, a parent that already has
        children, an empty expansion, reused ids and (strict) ids outside ``<parent>.<j>``.
        The tree is unchanged when an expansion is rejected. Returns the new ids.
        """
        if parent not in self._nodes:
            raise TreeError(f"expansion root {parent!r} is not in the tree")
        if self._nodes[parent].children:
            raise TreeError(f"{parent} is already expanded")
        if not isinstance(children, Mapping) or not children:
            raise TreeError(f"expansion of {parent} has no children")
        base = self._nodes[parent]
        new = []
        for cid, sentence in children.items():
            cid = str(cid)
            if cid in self._nodes:
                raise TreeError(f"id {cid!r} is already used")
            if not isinstance(sentence, str) or not sentence.strip():
                raise TreeError(f"child {cid} of {parent} needs a sentence")
            new.append(Proposition(cid, sentence.strip(), base.context, base.date))
        saved = (dict(self._nodes), list(base.children), base.causality)
        for node in new:
            self._nodes[node.pid] = node
        base.children = [n.pid for n in new]
        base.causality = causality
        try:
            self._reindex()
        except TreeError:
            self._nodes, base.children, base.causality = saved[0], saved[1], saved[2]
            self._reindex()
            raise
        return base.children

    # -- serialisation --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root_id,
            "strict_ids": self.strict_ids,
            "nodes": [self._nodes[p].to_dict() for p in self._preorder],
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PropositionTree:
        if "nodes" not in data:
            raise ValueError("a tree dict needs 'nodes'")
        return cls(
            [Proposition.from_dict(n) for n in data["nodes"]],
            strict_ids=bool(data.get("strict_ids", True)),
        )

    @classmethod
    def from_json(cls, text: str) -> PropositionTree:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"tree JSON does not parse: {err.msg} at char {err.pos}") from err
        if not isinstance(data, Mapping):
            raise ValueError("tree JSON must be an object")
        return cls.from_dict(data)

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Any],
        *,
        context: str = "",
        date: str | None = None,
        pid: str = "P0",
    ) -> PropositionTree:
        """Build from a nested spec ``{"sentence": s, "children": [spec, ...], "causality": c}``,
        numbering ids with the official scheme."""
        nodes: list[Proposition] = []

        def walk(node: Mapping[str, Any], node_id: str) -> None:
            if not isinstance(node, Mapping) or "sentence" not in node:
                raise ValueError(f"spec node {node_id} needs a 'sentence'")
            kids = list(node.get("children", []))
            prefix = _expected_child_prefix(node_id)
            ids = [f"{prefix}{j}" for j in range(1, len(kids) + 1)]
            nodes.append(
                Proposition(
                    node_id,
                    str(node["sentence"]),
                    context=str(node.get("context", context)),
                    date=node.get("date", date),
                    children=ids,
                    causality=str(node.get("causality", "")),
                    meta=dict(node.get("meta", {})),
                )
            )
            for kid, kid_id in zip(kids, ids, strict=True):
                walk(kid, kid_id)

        walk(spec, pid)
        return cls(nodes)

    def copy(self) -> PropositionTree:
        return copy.deepcopy(self)

    # -- display --------------------------------------------------------------------------
    def render(self, *, width: int = 72, show_rule: bool = True) -> str:
        """A terminal rendering: one line per node with id, p_true and (linear) weight."""
        lines = []
        for pid in self._preorder:
            node = self._nodes[pid]
            d = self._depth[pid]
            p = "  —  " if node.p_true is None else f"{node.p_true:.3f}"
            weight = ""
            parent = self._parent.get(pid)
            if show_rule and parent is not None:
                rule = self._nodes[parent].synthesis or {}
                w = (rule.get("weights") or {}).get(pid)
                if w is not None:
                    weight = f" β={w:+.2f}"
            head = f"{'  ' * d}{'└ ' if d else ''}{pid} [{p}]{weight} "
            room = max(10, width - len(head))
            sentence = (
                node.sentence if len(node.sentence) <= room else node.sentence[: room - 1] + "…"
            )
            lines.append(head + sentence)
            if show_rule and node.synthesis and node.synthesis.get("kind") == "linear":
                lines.append(f"{'  ' * (d + 1)}  intercept β₀={node.synthesis['intercept']:+.3f}")
            elif show_rule and node.synthesis and node.synthesis.get("kind") == "logical":
                lines.append(f"{'  ' * (d + 1)}  formula {node.synthesis['formula']}")
        return "\n".join(lines)
