"""Synthesizers: how a parent's soft truth is computed from its children (paper §2.2 step 5).

* :class:`LinearSynthesizer` — ``p = β₀ + Σ_k β_k p_k`` with the official parser's rules
  (:func:`check_linear_answer`): every child has a coefficient, ``|β₀| ≤ abs_intercept_max``
  (0.1), ``p ∈ [0, 1]``, and the model's stated ``p_true`` within 0.02 of the recomputed value.
  Coefficients come from an LLM (faithful path), from fixed rules, or equal weights.
* :class:`FittedLinearSynthesizer` — the same linear form with coefficients fitted by bounded least
  squares (or a bounded Huber fit) on resolved history, the offline stand-in for LLM-chosen βs.
* :class:`LogicalSynthesizer` — a formula over the child ids and an assumption ``PA`` evaluated
  with probabilistic logic (``AND = ab``, ``OR = a + b − ab``, ``NOT = 1 − a``), see
  :func:`evaluate_formula`.
* :class:`MeanSynthesizer` and :class:`LLMSynthesizer` (free-form ``p_true``).

Every synthesizer returns a :class:`~iclr26.analytica.tree.Proof` whose ``meta["rule"]`` is the
rule it used; :func:`apply_rule` re-evaluates a stored rule (what-if analysis, no LLM call).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from scipy.optimize import least_squares, lsq_linear

from iclr26.analytica.clients import CallLedger, ChatClient, complete_json, extract_json
from iclr26.analytica.tree import Proof, PropositionTree, check_probability

__all__ = [
    "FittedLinearSynthesizer",
    "LLMSynthesizer",
    "LinearSynthesizer",
    "LogicalSynthesizer",
    "MeanSynthesizer",
    "SynthesisRejected",
    "Synthesizer",
    "apply_rule",
    "check_linear_answer",
    "enumerate_probability",
    "evaluate_formula",
    "formula_variables",
    "parse_formula",
]


class SynthesisRejected(ValueError):
    """A synthesis answer broke one of the parser's rules (the dialog is retried)."""


@runtime_checkable
class Synthesizer(Protocol):
    """Computes an internal node's proof from its children's proofs."""

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof: ...


def _child_values(tree: PropositionTree, pid: str) -> dict[str, float]:
    node = tree.get(pid)
    if not node.children:
        raise ValueError(f"{pid} is a leaf: nothing to synthesise")
    values = {}
    for c in node.children:
        p = tree.get(c).p_true
        if p is None:
            raise ValueError(f"child {c} of {pid} has no proof yet")
        values[c] = p
    return values


# ----------------------------------------------------------------------------- linear
@dataclass(frozen=True)
class _LinearRules:
    abs_intercept_max: float | None
    coef_bounds: tuple[float, float] | None
    tol: float
    mode: str


def check_linear_answer(
    answer: Mapping[str, Any],
    child_values: Mapping[str, float],
    *,
    abs_intercept_max: float | None = 0.1,
    coef_bounds: tuple[float, float] | None = (-1.0, 1.0),
    tol: float | None = 0.02,
    mode: str = "reject",
) -> dict[str, Any]:
    """Validate a linear-synthesis answer and recompute ``p = β₀ + Σ β_k p_k`` (official parser).

    Args:
        answer: ``{"intercept": β₀, "coefficients": {child_id: β_k}, "p_true": stated p}``.
        child_values: the children's ``p_true``.
        abs_intercept_max: bound on ``|β₀|`` (official ``abs_intercept_max`` = 0.1; ``None`` off).
        coef_bounds: bounds on each ``β_k``; the official prompt asks for [−1, 1] but its parser
            does not enforce it — we enforce it by default, ``None`` reproduces the parser.
        tol: maximal gap between stated and recomputed ``p`` (official 0.02; ``None`` skips the
            check and does not require a stated value).
        mode: ``"reject"`` raises on ``p ∉ [0, 1]``; ``"project"`` clips ``p`` to [0, 1]
            (the errata's reading of the spec's undefined "project" mode).

    Returns:
        The rule ``{"kind": "linear", "intercept", "weights", "p_true"}``.

    Raises:
        SynthesisRejected: missing/extra child, bad numbers, intercept or coefficient out of
            bounds, ``p ∉ [0, 1]`` (reject mode), stated vs recomputed gap > ``tol``.
    """
    if mode not in ("reject", "project"):
        raise ValueError(f"mode must be 'reject' or 'project', got {mode!r}")
    if not isinstance(answer, Mapping):
        raise SynthesisRejected(f"the answer must be a JSON object, got {type(answer).__name__}")
    coefs = answer.get("coefficients")
    if not isinstance(coefs, Mapping):
        raise SynthesisRejected("the answer needs 'coefficients': {child_id: beta}")
    missing = [c for c in child_values if c not in coefs]
    extra = [c for c in coefs if c not in child_values]
    if missing:
        raise SynthesisRejected(f"no coefficient for children {missing}")
    if extra:
        raise SynthesisRejected(f"coefficients for unknown ids {extra}")
    try:
        b0 = float(answer.get("intercept", 0.0))
        weights = {c: float(coefs[c]) for c in child_values}
    except (TypeError, ValueError):
        raise SynthesisRejected("intercept and coefficients must be numbers") from None
    if not all(math.isfinite(v) for v in [b0, *weights.values()]):
        raise SynthesisRejected("intercept and coefficients must be finite")
    if abs_intercept_max is not None and abs(b0) > abs_intercept_max + 1e-12:
        raise SynthesisRejected(f"|intercept| = {abs(b0):.3f} exceeds {abs_intercept_max}")
    if coef_bounds is not None:
        lo, hi = coef_bounds
        bad = {c: w for c, w in weights.items() if not lo - 1e-12 <= w <= hi + 1e-12}
        if bad:
            raise SynthesisRejected(f"coefficients outside [{lo}, {hi}]: {bad}")
    p = b0 + sum(weights[c] * child_values[c] for c in child_values)
    if not 0.0 <= p <= 1.0:
        if mode == "reject":
            raise SynthesisRejected(f"recomputed p = {p:.4f} is outside [0, 1]")
        p = min(1.0, max(0.0, p))
    if tol is not None:
        if "p_true" not in answer:
            raise SynthesisRejected("the answer needs the stated 'p_true'")
        try:
            stated = float(answer["p_true"])
        except (TypeError, ValueError):
            raise SynthesisRejected("p_true must be a number") from None
        if not abs(stated - p) <= tol:
            raise SynthesisRejected(
                f"stated p_true {stated:.4f} differs from β₀ + Σβp = {p:.4f} by more than {tol}"
            )
    return {"kind": "linear", "intercept": b0, "weights": weights, "p_true": p}


LINEAR_PROMPT = """You synthesise the probability that a proposition is true from the proofs of its
sub-propositions with a linear model p = intercept + sum_k beta_k * p_k.
Rules: give every child a coefficient beta_k in [-1, 1] (positive for supporting factors, negative
for risks; dominant driver +-0.40-0.60, significant +-0.20-0.39, minor +-0.05-0.19); |intercept|
<= {abs_intercept_max}; the result must lie in [0, 1]; state p_true equal to the recomputed value.
Reply with one JSON object: {{"intercept": float, "coefficients": {{"<child id>": float, ...}},
"p_true": float, "rationale": "..."}}"""


def _children_block(tree: PropositionTree, pid: str, max_chars: int = 1500) -> str:
    node = tree.get(pid)
    lines = [
        f"Proposition {pid}: {node.sentence}",
        f"Date: {node.date}",
        f"Context: {node.context}",
    ]
    if node.causality:
        lines.append(f"Causality: {node.causality}")
    lines.append("Children:")
    for c in node.children:
        child = tree.get(c)
        proof = child.proof
        text = "" if proof is None else proof.text[:max_chars]
        kf = "" if proof is None else proof.key_factor
        lines.append(
            f"- {c}: {child.sentence} | p_true={child.p_true} | key factor: {kf}\n  {text}"
        )
    return "\n".join(lines)


class LinearSynthesizer:
    """Constrained linear synthesis ``p = β₀ + Σ_k β_k p_k`` (official ``analytica_linear``).

    With ``client`` the coefficients are chosen by the LLM and checked by
    :func:`check_linear_answer` (a rejected answer is sent back, up to ``max_repairs`` times).
    Without a client the coefficients come from ``rules`` (``{pid: {"intercept", "weights"}}``
    or a callable ``(tree, pid) -> rule``), else equal weights ``1/K`` with ``β₀ = 0``.

    Args:
        client: an LLM :class:`~iclr26.analytica.clients.ChatClient` or ``None``.
        rules: fixed rules used when there is no client.
        abs_intercept_max, coef_bounds, tol, mode: see :func:`check_linear_answer`
            (defaults: official 0.1 and 0.02; coefficients in [−1, 1]; reject).
        max_repairs: bound on the repair dialog.
        ledger: records parse attempts (kind ``"synthesize-parse"``).
    """

    def __init__(
        self,
        client: ChatClient | None = None,
        *,
        rules: Mapping[str, Mapping[str, Any]]
        | Callable[[PropositionTree, str], Mapping[str, Any]]
        | None = None,
        abs_intercept_max: float | None = 0.1,
        coef_bounds: tuple[float, float] | None = (-1.0, 1.0),
        tol: float | None = 0.02,
        mode: str = "reject",
        max_repairs: int = 3,
        ledger: CallLedger | None = None,
    ) -> None:
        if mode not in ("reject", "project"):
            raise ValueError(f"mode must be 'reject' or 'project', got {mode!r}")
        if abs_intercept_max is not None and not abs_intercept_max >= 0:
            raise ValueError(f"abs_intercept_max must be ≥ 0, got {abs_intercept_max}")
        if coef_bounds is not None and not coef_bounds[0] <= coef_bounds[1]:
            raise ValueError(f"coef_bounds must be (low, high) with low ≤ high, got {coef_bounds}")
        self.client = client
        self.rules = rules
        self.limits = {
            "abs_intercept_max": abs_intercept_max,
            "coef_bounds": coef_bounds,
            "tol": tol,
            "mode": mode,
        }
        self.max_repairs = max_repairs
        self.ledger = ledger
        self.calls = 0

    @property
    def local(self) -> bool:
        """No I/O: the engine may run it without tasks."""
        return self.client is None

    def _fixed_rule(self, tree: PropositionTree, pid: str) -> Mapping[str, Any]:
        kids = tree.get(pid).children
        if self.rules is None:
            return {"intercept": 0.0, "weights": {c: 1.0 / len(kids) for c in kids}}
        rule = self.rules(tree, pid) if callable(self.rules) else self.rules.get(pid)
        if rule is None:
            raise ValueError(f"no linear rule for {pid}")
        return rule

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof:
        self.calls += 1
        values = _child_values(tree, pid)
        if self.client is None:
            rule = self._fixed_rule(tree, pid)
            answer = {
                "intercept": rule.get("intercept", 0.0),
                "coefficients": rule["weights"],
            }
            limits = {**self.limits, "tol": None}
            checked = check_linear_answer(answer, values, **limits)
            return Proof(checked["p_true"], "fixed linear rule", meta={"rule": checked})
        limits = self.limits
        prompt = LINEAR_PROMPT.format(abs_intercept_max=limits["abs_intercept_max"])

        def parse(text: str) -> dict[str, Any]:
            return {
                **check_linear_answer(extract_json(text), values, **limits),
                "rationale": str(extract_json(text).get("rationale", "")),
            }

        rule = await complete_json(
            self.client,
            [
                {"role": "system", "content": prompt},
                {"role": "user", "content": _children_block(tree, pid)},
            ],
            parse,
            max_repairs=self.max_repairs,
            tag=pid,
            ledger=self.ledger,
            kind="synthesize-parse",
        )
        rationale = rule.pop("rationale")
        return Proof(rule["p_true"], rationale, meta={"rule": rule})


class FittedLinearSynthesizer:
    """Linear synthesis with coefficients fitted on resolved history (offline stand-in for LLM βs).

    Bounded least squares (``method="bls"``, :func:`scipy.optimize.lsq_linear`) or a bounded Huber
    fit (``"huber"``, :func:`scipy.optimize.least_squares` with ``loss="huber"``) keeps the
    official constraints ``|β₀| ≤ abs_intercept_max`` and ``β_k ∈ coef_bounds``; ``"ols"`` is the
    unconstrained reference. Internal nodes are fitted bottom-up: a parent is regressed on its
    children's *fitted* values, so upper levels see the scale they will see at prediction time.

    Fitted attribute: ``rules_`` (``{pid: rule}``).
    """

    def __init__(
        self,
        method: str = "bls",
        *,
        abs_intercept_max: float = 0.1,
        coef_bounds: tuple[float, float] = (-1.0, 1.0),
        huber_delta: float = 0.25,
    ) -> None:
        if method not in ("bls", "huber", "ols"):
            raise ValueError(f"method must be 'bls', 'huber' or 'ols', got {method!r}")
        if not abs_intercept_max >= 0:
            raise ValueError(f"abs_intercept_max must be ≥ 0, got {abs_intercept_max}")
        self.method = method
        self.abs_intercept_max = float(abs_intercept_max)
        self.coef_bounds = (float(coef_bounds[0]), float(coef_bounds[1]))
        self.huber_delta = float(huber_delta)
        self.rules_: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.local = True

    def fit_xy(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Fit ``y ≈ β₀ + x β`` under the bounds; ``x`` (n, K) and ``y`` (n,) finite floats."""
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
            raise ValueError(f"x must be (n, K) and y (n,), got {x.shape} and {y.shape}")
        if x.shape[0] < 2:
            raise ValueError(f"need at least 2 samples to fit, got {x.shape[0]}")
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise ValueError("x and y must be finite")
        a = np.hstack([np.ones((x.shape[0], 1)), x])
        k = x.shape[1]
        lo = np.r_[-self.abs_intercept_max, np.full(k, self.coef_bounds[0])]
        hi = np.r_[self.abs_intercept_max, np.full(k, self.coef_bounds[1])]
        if self.method == "ols":
            beta = np.linalg.lstsq(a, y, rcond=None)[0]
        elif self.method == "bls":
            beta = lsq_linear(a, y, bounds=(lo, hi)).x
        else:
            start = np.clip(lsq_linear(a, y, bounds=(lo, hi)).x, lo + 1e-9, hi - 1e-9)
            beta = least_squares(
                lambda b: a @ b - y,
                start,
                loss="huber",
                f_scale=self.huber_delta,
                bounds=(lo, hi),
            ).x
        return float(beta[0]), beta[1:]

    def fit(
        self, tree: PropositionTree, samples: Sequence[Mapping[str, float]]
    ) -> FittedLinearSynthesizer:
        """Fit every internal node of ``tree`` on ``samples``.

        Args:
            tree: the decomposition whose structure is shared by all samples.
            samples: one dict per resolved question holding every leaf's grounded value and
                every internal node's resolved outcome (0/1 or a soft value).
        """
        if not samples:
            raise ValueError("samples must not be empty")
        fitted: dict[str, np.ndarray] = {}

        def column(pid: str) -> np.ndarray:
            if pid in fitted:
                return fitted[pid]
            try:
                return np.array([float(s[pid]) for s in samples])
            except KeyError:
                raise ValueError(f"samples lack a value for {pid}") from None

        self.rules_ = {}
        for pid in tree.internal():
            kids = tree.get(pid).children
            x = np.column_stack([column(c) for c in kids])
            y = np.array([float(s[pid]) for s in samples])
            b0, beta = self.fit_xy(x, y)
            self.rules_[pid] = {
                "kind": "linear",
                "intercept": b0,
                "weights": {c: float(b) for c, b in zip(kids, beta, strict=True)},
            }
            fitted[pid] = np.clip(b0 + x @ beta, 0.0, 1.0)
        return self

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof:
        if pid not in self.rules_:
            raise ValueError(f"no fitted rule for {pid}; call fit() first")
        self.calls += 1
        rule = apply_rule(self.rules_[pid], _child_values(tree, pid))
        return Proof(rule["p_true"], f"fitted {self.method} linear rule", meta={"rule": rule})


# ---------------------------------------------------------------------------- logical
_TOKEN = re.compile(r"\s*(?:(\()|(\))|([A-Za-z_][A-Za-z0-9_]*(?:\.[0-9]+)*)|(\S))")
_OPS = {"AND", "OR", "NOT", "IMPLIES"}


def _tokens(formula: str) -> list[str]:
    if not isinstance(formula, str) or not formula.strip():
        raise ValueError("formula must be a non-empty string")
    out = []
    pos = 0
    formula = formula.rstrip()
    while pos < len(formula):
        m = _TOKEN.match(formula, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-space
            break
        if m.group(4) is not None:
            raise ValueError(
                f"unknown token {m.group(4)!r} at position {m.start(4)} in {formula!r}"
            )
        tok = m.group(1) or m.group(2) or m.group(3)
        out.append(tok.upper() if tok.upper() in _OPS else tok)
        pos = m.end()
    return out


@functools.lru_cache(maxsize=4096)
def parse_formula(formula: str) -> Any:
    """Parse AND/OR/NOT/IMPLIES formulas over variable names into a nested-tuple AST.

    Precedence NOT > AND > OR > IMPLIES (the official order for the first three; IMPLIES,
    absent from the official grammar, binds loosest and is right-associative, ``a IMPLIES b`` =
    ``NOT a OR b``). Maximal munch: ``P10`` is one variable (the official tokenizer reads it as
    ``P1`` then ``0`` when ``P1`` is also a child); ``NOT NOT a`` is allowed.
    """
    toks = _tokens(formula)
    pos = 0

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> str:
        nonlocal pos
        tok = toks[pos]
        pos += 1
        return tok

    def implies() -> Any:
        left = disj()
        if peek() == "IMPLIES":
            take()
            return ("IMPLIES", left, implies())
        return left

    def disj() -> Any:
        node = conj()
        while peek() == "OR":
            take()
            node = ("OR", node, conj())
        return node

    def conj() -> Any:
        node = neg()
        while peek() == "AND":
            take()
            node = ("AND", node, neg())
        return node

    def neg() -> Any:
        if peek() == "NOT":
            take()
            return ("NOT", neg())
        return atom()

    def atom() -> Any:
        tok = peek()
        if tok is None:
            raise ValueError(f"formula {formula!r} ends early")
        if tok == "(":
            take()
            node = implies()
            if peek() != ")":
                raise ValueError(f"missing ')' in {formula!r}")
            take()
            return node
        if tok in _OPS or tok == ")":
            raise ValueError(f"unexpected {tok!r} in {formula!r}")
        take()
        return ("VAR", tok)

    tree = implies()
    if pos != len(toks):
        raise ValueError(f"unexpected {toks[pos]!r} after a complete formula in {formula!r}")
    return tree


def formula_variables(formula: str | Any) -> list[str]:
    """Variables of a formula (or AST), in order of first appearance, with repeats removed."""
    ast = parse_formula(formula) if isinstance(formula, str) else formula
    out: list[str] = []

    def walk(node: Any) -> None:
        if node[0] == "VAR":
            out.append(node[1])
        else:
            for child in node[1:]:
                walk(child)

    walk(ast)
    return list(dict.fromkeys(out))


def _eval(node: Any, probs: Mapping[str, float]) -> float:
    op = node[0]
    if op == "VAR":
        if node[1] not in probs:
            raise ValueError(f"unknown variable {node[1]!r} (known: {sorted(probs)})")
        return probs[node[1]]
    if op == "NOT":
        return 1.0 - _eval(node[1], probs)
    a, b = _eval(node[1], probs), _eval(node[2], probs)
    if op == "AND":
        return a * b
    if op == "OR":
        return a + b - a * b
    return 1.0 - a + a * b  # IMPLIES = NOT a OR b


def evaluate_formula(formula: str, probs: Mapping[str, float]) -> float:
    """Probabilistic-logic value of ``formula`` (official rule, independence assumed).

    ``AND = a·b``, ``OR = a + b − a·b``, ``NOT = 1 − a``. Exact for read-once formulas over
    independent variables; a variable used twice is treated as two independent copies (so
    ``P1 AND P1`` gives ``p²``, not ``p``) — compare :func:`enumerate_probability`.
    """
    for k, v in probs.items():
        check_probability(v, f"probs[{k!r}]")
    return _eval(parse_formula(formula), probs)


def enumerate_probability(formula: str, probs: Mapping[str, float]) -> float:
    """Exact probability that ``formula`` is true for independent Bernoulli variables, by
    enumerating all ``2^n`` assignments (n ≤ 20)."""
    ast = parse_formula(formula)
    names = formula_variables(ast)
    if len(names) > 20:
        raise ValueError(f"too many variables to enumerate ({len(names)} > 20)")
    total = 0.0
    for bits in itertools.product((0.0, 1.0), repeat=len(names)):
        world = dict(zip(names, bits, strict=True))
        weight = math.prod(probs[n] if b else 1.0 - probs[n] for n, b in world.items())
        if weight and _eval(ast, world) > 0.5:
            total += weight
    return total


LOGICAL_PROMPT = """You synthesise the probability that a proposition is true from its
sub-propositions by writing a logical formula over ALL child ids and an assumption variable PA
(the probability that everything not covered by the children holds), using AND, OR, NOT and
parentheses. Reply with one JSON object: {"formula": "...", "PA": float in [0, 1], "rationale": "..."}"""


class LogicalSynthesizer:
    """Probabilistic-logic synthesis (official ``analytica_logical``).

    With ``client`` the LLM writes the formula; offline, ``formulas`` gives one per parent
    (``{pid: formula}`` or a callable ``(tree, pid) -> formula``), else the conjunction of the
    children. Every child must appear; ``PA`` is the assumption variable (``assumption``
    default 1.0 when no LLM states it).
    """

    def __init__(
        self,
        client: ChatClient | None = None,
        *,
        formulas: Mapping[str, str] | Callable[[PropositionTree, str], str] | None = None,
        assumption: float = 1.0,
        max_repairs: int = 3,
        ledger: CallLedger | None = None,
    ) -> None:
        self.client = client
        self.formulas = formulas
        self.assumption = check_probability(assumption, "assumption")
        self.max_repairs = max_repairs
        self.ledger = ledger
        self.calls = 0

    @property
    def local(self) -> bool:
        return self.client is None

    @staticmethod
    def check(formula: str, values: Mapping[str, float], pa: float) -> dict[str, Any]:
        """Parse, require every child, evaluate; returns the rule (raises ``SynthesisRejected``)."""
        try:
            ast = parse_formula(formula)
        except ValueError as err:
            raise SynthesisRejected(str(err)) from None
        names = formula_variables(ast)
        missing = [c for c in values if c not in names]
        unknown = [n for n in names if n not in values and n != "PA"]
        if missing:
            raise SynthesisRejected(f"the formula must use every child; missing {missing}")
        if unknown:
            raise SynthesisRejected(f"unknown ids in the formula: {unknown}")
        p = _eval(ast, {**values, "PA": pa})
        return {"kind": "logical", "formula": formula, "PA": pa, "p_true": p}

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof:
        self.calls += 1
        values = _child_values(tree, pid)
        if self.client is None:
            if self.formulas is None:
                formula = " AND ".join(values)
            elif callable(self.formulas):
                formula = self.formulas(tree, pid)
            else:
                formula = self.formulas[pid]
            rule = self.check(formula, values, self.assumption)
            return Proof(rule["p_true"], "fixed formula", meta={"rule": rule})

        def parse(text: str) -> dict[str, Any]:
            data = extract_json(text)
            if not isinstance(data, Mapping) or "formula" not in data:
                raise SynthesisRejected("the answer needs a 'formula'")
            pa = check_probability(data.get("PA", self.assumption), "PA")
            return {
                **self.check(str(data["formula"]), values, pa),
                "rationale": str(data.get("rationale", "")),
            }

        rule = await complete_json(
            self.client,
            [
                {"role": "system", "content": LOGICAL_PROMPT},
                {"role": "user", "content": _children_block(tree, pid)},
            ],
            parse,
            max_repairs=self.max_repairs,
            tag=pid,
            ledger=self.ledger,
            kind="synthesize-parse",
        )
        rationale = rule.pop("rationale")
        return Proof(rule["p_true"], rationale, meta={"rule": rule})


class MeanSynthesizer:
    """The children's mean (a linear rule with ``β_k = 1/K``, ``β₀ = 0``)."""

    local = True

    def __init__(self) -> None:
        self.calls = 0

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof:
        self.calls += 1
        values = _child_values(tree, pid)
        rule = apply_rule(
            {"kind": "linear", "intercept": 0.0, "weights": {c: 1 / len(values) for c in values}},
            values,
        )
        return Proof(rule["p_true"], "mean of children", meta={"rule": rule})


FREEFORM_PROMPT = """You judge the probability that a proposition is true from the proofs of its
sub-propositions. Reply with one JSON object: {"p_true": float in [0, 1], "key_factor": "...",
"proof": "..."}"""


class LLMSynthesizer:
    """Free-form synthesis (official ``analytica``): the LLM writes a proof and a ``p_true``.
    Not a linear model, so what-if analysis must call it again for every ancestor."""

    def __init__(
        self, client: ChatClient, *, max_repairs: int = 3, ledger: CallLedger | None = None
    ) -> None:
        self.client = client
        self.max_repairs = max_repairs
        self.ledger = ledger
        self.calls = 0

    async def synthesize(self, tree: PropositionTree, pid: str) -> Proof:
        self.calls += 1
        _child_values(tree, pid)

        def parse(text: str) -> Proof:
            data = extract_json(text)
            if not isinstance(data, Mapping) or "p_true" not in data:
                raise ValueError("the answer needs 'p_true'")
            return Proof(
                check_probability(data["p_true"], "p_true"),
                str(data.get("proof", "")),
                str(data.get("key_factor", "")),
                {"rule": {"kind": "freeform"}},
            )

        return await complete_json(
            self.client,
            [
                {"role": "system", "content": FREEFORM_PROMPT},
                {"role": "user", "content": _children_block(tree, pid)},
            ],
            parse,
            max_repairs=self.max_repairs,
            tag=pid,
            ledger=self.ledger,
            kind="synthesize-parse",
        )


def apply_rule(rule: Mapping[str, Any], child_values: Mapping[str, float]) -> dict[str, Any]:
    """Re-evaluate a stored synthesis rule on (possibly edited) child values; linear results are
    clipped to [0, 1]. Returns the rule with the new ``p_true``."""
    kind = rule.get("kind", "linear")
    if kind == "linear":
        w = rule["weights"]
        p = float(rule.get("intercept", 0.0)) + sum(w[c] * child_values[c] for c in w)
        return {**rule, "kind": "linear", "p_true": min(1.0, max(0.0, p))}
    if kind == "logical":
        return {
            **rule,
            "p_true": _eval(
                parse_formula(rule["formula"]), {**child_values, "PA": rule.get("PA", 1.0)}
            ),
        }
    raise ValueError(f"a {kind!r} rule cannot be re-evaluated without its synthesizer")
