"""iclr26-refusal-index: the Refusal Index (RI) of "Can LLMs Refuse Questions They Do Not Know?
Measuring Knowledge-Aware Refusal in Factual Tasks" (ICLR 2026).

RI is the Spearman correlation between a model's per-question refusal probability and its error
probability. The two-pass estimator (one forced-answer run, one refusal-allowed run, Gaussian
copula) is our reconstruction of the paper's Section 3 and sits behind an ``estimator=`` switch.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-refusal-index")

# Submodules load on first use of a name: ``import iclr26.refusal_index`` costs nothing.
__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "clients": [
            "CallableClient",
            "ChatClient",
            "ClientError",
            "Completion",
            "OpenAICompatibleClient",
            "ScriptedClient",
        ],
        "detect": [
            "DEFAULT_PHRASES",
            "AliasGrader",
            "Detection",
            "ExactMatchGrader",
            "JudgeGrader",
            "RefusalDetector",
            "normalize_answer",
        ],
        "estimators": [
            "ESTIMATORS",
            "RefusalIndexWarning",
            "RIResult",
            "disattenuate",
            "refusal_index_direct",
            "refusal_index_from_rates",
            "refusal_index_ksample",
            "refusal_index_paired",
            "retest_reliability",
        ],
        "facts": [
            "RELATIONS",
            "FactMemorizer",
            "FactTable",
            "load_fact_table",
        ],
        "harness": [
            "FORCED_PROMPT",
            "REFUSAL_PROMPTS",
            "Item",
            "PassRecord",
            "TwoPassEvaluator",
            "TwoPassResult",
            "score_passes",
        ],
        "metrics": [
            "accuracy_given_attempted",
            "aurc",
            "auroc",
            "brier",
            "ece",
            "peer_metrics",
            "phi_coefficient",
            "refusal_auroc_binary",
            "refusal_f1",
            "refusal_precision",
            "refusal_recall",
            "reliability",
            "simpleqa_f_score",
        ],
        "simulate": [
            "LatentPropensityModel",
            "TwoPassSample",
            "make_model_zoo",
        ],
        "tetrachoric": [
            "bvn_density",
            "bvn_upper",
            "pearson_to_spearman",
            "spearman_to_pearson",
            "tetrachoric",
        ],
    },
)
__all__ += ["__version__"]
