"""Decomposers (the official analyzer): grow a proposition tree from a root proposition.

:class:`LLMDecomposer` runs the official dialog: the LLM emits expansions
``{"parent": id, "children": {id: sentence}, "causality": text}`` that must attach to a node
already in the tree with fresh ``<parent>.<j>`` ids; a rejected expansion is sent back with the
error; the loop ends at ``<END_OF_ANALYSIS>`` or when the tree has ``max_leaves`` leaves.
:class:`TemplateDecomposer` builds the same tree from a fixed nested template (offline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from iclr26.analytica.clients import (
    CallLedger,
    ChatClient,
    ParseFailure,
    complete_json,
    extract_json,
)
from iclr26.analytica.tree import Proposition, PropositionTree, TreeError

__all__ = [
    "ANALYZER_PROMPT",
    "END_OF_ANALYSIS",
    "Decomposer",
    "LLMDecomposer",
    "TemplateDecomposer",
    "parse_expansions",
]

END_OF_ANALYSIS = "<END_OF_ANALYSIS>"


@runtime_checkable
class Decomposer(Protocol):
    """Turns a root proposition into a decomposition tree."""

    async def decompose(self, root: Proposition, *, max_leaves: int = 10) -> PropositionTree: ...


ANALYZER_PROMPT = """You decompose a proposition into sub-propositions whose truth values decide it.
Write self-contained children (each readable on its own, with its date and subject), make the
decomposition mutually exclusive and collectively exhaustive, include explicit counter-evidence
(risks), and choose between a factor paradigm (drivers of the outcome) and a constituent paradigm
(parts of the outcome). Ids: the root is P0; children of P0 are P1, P2, ...; children of Pk are
Pk.1, Pk.2, .... Each reply is a JSON list of expansions
[{"parent": "<id already in the tree, not yet expanded>", "children": {"<new id>": "<sentence>"},
"causality": "<how the children determine the parent>"}]
or the token <END_OF_ANALYSIS> when the tree is complete."""


def parse_expansions(text: str, tree: PropositionTree) -> tuple[PropositionTree, bool]:
    """Apply a reply's expansions to a copy of ``tree``; returns ``(new tree, finished)``.

    Raises ``ValueError``/``TreeError`` (sent back to the model) for malformed JSON, a missing
    field, a parent outside the tree, reused ids, or ids outside the scheme.
    """
    if END_OF_ANALYSIS in text and "{" not in text:
        return tree, True
    data = extract_json(text)
    items = [data] if isinstance(data, Mapping) else data
    if not isinstance(items, list) or not items:
        raise ValueError("expected a JSON list of expansions")
    new = tree.copy()
    for item in items:
        if not isinstance(item, Mapping) or "parent" not in item or "children" not in item:
            raise ValueError("each expansion needs 'parent' and 'children'")
        if not isinstance(item["children"], Mapping):
            raise ValueError("'children' must be an object {id: sentence}")
        new.expand(str(item["parent"]), item["children"], str(item.get("causality", "")))
    return new, END_OF_ANALYSIS in text


class LLMDecomposer:
    """The official analyzer dialog (``max_leaves`` default 10, as in ``default.yaml``).

    Args:
        client: the LLM.
        prompt: system prompt (:data:`ANALYZER_PROMPT`).
        max_rounds: expansion rounds before stopping.
        max_repairs: rejected replies re-asked per round.
        ledger: records parse attempts (kind ``"decompose-parse"``).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        prompt: str = ANALYZER_PROMPT,
        max_rounds: int = 8,
        max_repairs: int = 3,
        ledger: CallLedger | None = None,
    ) -> None:
        self.client = client
        self.prompt = prompt
        self.max_rounds = max_rounds
        self.max_repairs = max_repairs
        self.ledger = ledger
        self.calls = 0

    async def decompose(self, root: Proposition, *, max_leaves: int = 10) -> PropositionTree:
        if not isinstance(max_leaves, int) or max_leaves < 1:
            raise ValueError(f"max_leaves must be an integer ≥ 1, got {max_leaves!r}")
        self.calls += 1
        tree = PropositionTree([Proposition(root.pid, root.sentence, root.context, root.date)])
        dialog: list[dict[str, str]] = [
            {"role": "system", "content": self.prompt},
            {
                "role": "user",
                "content": f"Root {root.pid}: {root.sentence}\nDate: {root.date}\nContext: "
                f"{root.context}\nMaximum leaves: {max_leaves}.",
            },
        ]
        for _ in range(self.max_rounds):
            current = tree
            try:
                tree, finished = await complete_json(
                    self.client,
                    dialog,
                    lambda text, current=current: parse_expansions(text, current),
                    max_repairs=self.max_repairs,
                    tag=root.pid,
                    ledger=self.ledger,
                    kind="decompose-parse",
                )
            except ParseFailure:
                if len(tree) > 1:
                    break  # keep the tree grown so far, as the official loop does
                raise
            if finished or len(tree.leaves()) >= max_leaves:
                break
            dialog += [
                {"role": "assistant", "content": tree.to_json()},
                {
                    "role": "user",
                    "content": f"Current tree:\n{tree.render(show_rule=False)}\nContinue expanding "
                    f"leaves or reply {END_OF_ANALYSIS}.",
                },
            ]
        return tree


class TemplateDecomposer:
    """Builds the tree from a nested template (offline, deterministic).

    ``template`` is ``{"sentence": s, "children": [template, ...], "causality": c, "meta": {...}}``;
    ``{sentence}``, ``{date}`` and ``{context}`` in child sentences are filled from the root. The
    root proposition's own sentence, context and date are kept. ``max_leaves`` is checked, not
    used to prune: a template with more leaves is an error.
    """

    def __init__(self, template: Mapping[str, Any]) -> None:
        if not isinstance(template, Mapping) or "children" not in template:
            raise ValueError("template must be a mapping with 'children'")
        self.template = template
        self.calls = 0

    async def decompose(self, root: Proposition, *, max_leaves: int = 10) -> PropositionTree:
        self.calls += 1
        fields = {"sentence": root.sentence, "date": root.date, "context": root.context}

        def fill(node: Mapping[str, Any]) -> dict[str, Any]:
            kids: Sequence[Mapping[str, Any]] = node.get("children", [])
            return {
                "sentence": str(node["sentence"]).format(**fields),
                "causality": node.get("causality", ""),
                "meta": dict(node.get("meta", {})),
                "children": [fill(k) for k in kids],
            }

        spec = fill(self.template)
        spec["sentence"] = root.sentence
        spec["meta"] = {**spec["meta"], **root.meta}
        tree = PropositionTree.from_spec(spec, context=root.context, date=root.date, pid="P0")
        if len(tree.leaves()) > max_leaves:
            raise TreeError(f"template has {len(tree.leaves())} leaves > max_leaves={max_leaves}")
        return tree
