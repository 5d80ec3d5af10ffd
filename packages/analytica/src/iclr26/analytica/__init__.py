"""iclr26-analytica: Analytica, "Soft Propositional Reasoning for Robust and Scalable LLM-Driven
Analysis" (ICLR 2026).

A question becomes a tree of soft propositions (truth values in [0, 1]); leaves are grounded by
tool-using agents (bias reduction), parents are synthesised by constrained linear models
(variance reduction: ``Var = Σ β_k² σ_k²``), and what-if analysis edits nodes and recomputes only
their ancestors.
"""

import importlib
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real imports, for type checkers and IDEs
    from iclr26.analytica.baselines import (
        BayesNetAggregator,
        LogisticLeaves,
        SelfConsistency,
        Vanilla,
        aggregate,
        logit_mean,
    )
    from iclr26.analytica.clients import (
        CallableClient,
        CallLedger,
        ChatClient,
        ClientError,
        Completion,
        LedgerEntry,
        OpenAICompatibleClient,
        ParseFailure,
        ScriptedClient,
        complete_json,
        extract_json,
    )
    from iclr26.analytica.data import (
        MacroBenchmark,
        SPRWorld,
        load_macrodata,
        make_macro_benchmark,
        make_spr_world,
        synthesize_batch,
    )
    from iclr26.analytica.decide import (
        accuracy,
        across_run_std,
        brier,
        choose,
        log_loss,
        normalize_weights,
        option_scores,
        score,
    )
    from iclr26.analytica.decompose import LLMDecomposer, TemplateDecomposer, parse_expansions
    from iclr26.analytica.engine import Analytica, IncompleteAnalysis, RunStats
    from iclr26.analytica.ground import (
        DataFrameGrounder,
        GroundingError,
        LLMGrounder,
        LookaheadError,
        NoisyGrounder,
        NotebookGrounder,
        parse_proof,
    )
    from iclr26.analytica.loopback import LoopbackChatServer
    from iclr26.analytica.simulate import SimulatedJudge, SimulatedLLM
    from iclr26.analytica.synth import (
        FittedLinearSynthesizer,
        LinearSynthesizer,
        LLMSynthesizer,
        LogicalSynthesizer,
        MeanSynthesizer,
        SynthesisRejected,
        apply_rule,
        check_linear_answer,
        enumerate_probability,
        evaluate_formula,
        formula_variables,
        parse_formula,
    )
    from iclr26.analytica.tree import Proof, Proposition, PropositionTree, TreeError
    from iclr26.analytica.whatif import (
        Scenario,
        recompute,
        resynthesize,
        scenario,
        sensitivities,
        sensitivity,
    )

__version__ = _version("iclr26-analytica")

# Submodules load on first use, so the command line's --help does not pay for pandas or scipy.
_EXPORTS = {
    "Analytica": "engine",
    "BayesNetAggregator": "baselines",
    "CallLedger": "clients",
    "CallableClient": "clients",
    "ChatClient": "clients",
    "ClientError": "clients",
    "Completion": "clients",
    "DataFrameGrounder": "ground",
    "FittedLinearSynthesizer": "synth",
    "GroundingError": "ground",
    "IncompleteAnalysis": "engine",
    "LLMDecomposer": "decompose",
    "LLMGrounder": "ground",
    "LLMSynthesizer": "synth",
    "LedgerEntry": "clients",
    "LinearSynthesizer": "synth",
    "LogicalSynthesizer": "synth",
    "LogisticLeaves": "baselines",
    "LookaheadError": "ground",
    "LoopbackChatServer": "loopback",
    "MacroBenchmark": "data",
    "MeanSynthesizer": "synth",
    "NoisyGrounder": "ground",
    "NotebookGrounder": "ground",
    "OpenAICompatibleClient": "clients",
    "ParseFailure": "clients",
    "Proof": "tree",
    "Proposition": "tree",
    "PropositionTree": "tree",
    "RunStats": "engine",
    "SPRWorld": "data",
    "Scenario": "whatif",
    "ScriptedClient": "clients",
    "SelfConsistency": "baselines",
    "SimulatedJudge": "simulate",
    "SimulatedLLM": "simulate",
    "SynthesisRejected": "synth",
    "TemplateDecomposer": "decompose",
    "TreeError": "tree",
    "Vanilla": "baselines",
    "accuracy": "decide",
    "across_run_std": "decide",
    "aggregate": "baselines",
    "apply_rule": "synth",
    "brier": "decide",
    "check_linear_answer": "synth",
    "choose": "decide",
    "complete_json": "clients",
    "enumerate_probability": "synth",
    "evaluate_formula": "synth",
    "extract_json": "clients",
    "formula_variables": "synth",
    "load_macrodata": "data",
    "log_loss": "decide",
    "logit_mean": "baselines",
    "make_macro_benchmark": "data",
    "make_spr_world": "data",
    "normalize_weights": "decide",
    "option_scores": "decide",
    "parse_expansions": "decompose",
    "parse_formula": "synth",
    "parse_proof": "ground",
    "recompute": "whatif",
    "resynthesize": "whatif",
    "scenario": "whatif",
    "score": "decide",
    "sensitivities": "whatif",
    "sensitivity": "whatif",
    "synthesize_batch": "data",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'iclr26.analytica' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"iclr26.analytica.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Analytica",
    "BayesNetAggregator",
    "CallLedger",
    "CallableClient",
    "ChatClient",
    "ClientError",
    "Completion",
    "DataFrameGrounder",
    "FittedLinearSynthesizer",
    "GroundingError",
    "IncompleteAnalysis",
    "LLMDecomposer",
    "LLMGrounder",
    "LLMSynthesizer",
    "LedgerEntry",
    "LinearSynthesizer",
    "LogicalSynthesizer",
    "LogisticLeaves",
    "LookaheadError",
    "LoopbackChatServer",
    "MacroBenchmark",
    "MeanSynthesizer",
    "NoisyGrounder",
    "NotebookGrounder",
    "OpenAICompatibleClient",
    "ParseFailure",
    "Proof",
    "Proposition",
    "PropositionTree",
    "RunStats",
    "SPRWorld",
    "Scenario",
    "ScriptedClient",
    "SelfConsistency",
    "SimulatedJudge",
    "SimulatedLLM",
    "SynthesisRejected",
    "TemplateDecomposer",
    "TreeError",
    "Vanilla",
    "__version__",
    "accuracy",
    "across_run_std",
    "aggregate",
    "apply_rule",
    "brier",
    "check_linear_answer",
    "choose",
    "complete_json",
    "enumerate_probability",
    "evaluate_formula",
    "extract_json",
    "formula_variables",
    "load_macrodata",
    "log_loss",
    "logit_mean",
    "make_macro_benchmark",
    "make_spr_world",
    "normalize_weights",
    "option_scores",
    "parse_expansions",
    "parse_formula",
    "parse_proof",
    "recompute",
    "resynthesize",
    "scenario",
    "score",
    "sensitivities",
    "sensitivity",
    "synthesize_batch",
]
