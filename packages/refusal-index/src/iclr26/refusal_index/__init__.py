"""iclr26-refusal-index: the Refusal Index (RI) of "Can LLMs Refuse Questions They Do Not Know?
Measuring Knowledge-Aware Refusal in Factual Tasks" (ICLR 2026).

RI is the Spearman correlation between a model's per-question refusal probability and its error
probability. The two-pass estimator (one forced-answer run, one refusal-allowed run, Gaussian
copula) is our reconstruction of the paper's Section 3 and sits behind an ``estimator=`` switch.
"""

from importlib.metadata import version as _version

from iclr26.refusal_index.clients import (
    CallableClient,
    ChatClient,
    ClientError,
    Completion,
    OpenAICompatibleClient,
    ScriptedClient,
)
from iclr26.refusal_index.detect import (
    DEFAULT_PHRASES,
    AliasGrader,
    Detection,
    ExactMatchGrader,
    JudgeGrader,
    RefusalDetector,
    normalize_answer,
)
from iclr26.refusal_index.estimators import (
    ESTIMATORS,
    RefusalIndexWarning,
    RIResult,
    disattenuate,
    refusal_index_direct,
    refusal_index_from_rates,
    refusal_index_paired,
    retest_reliability,
)
from iclr26.refusal_index.facts import RELATIONS, FactMemorizer, FactTable, load_fact_table
from iclr26.refusal_index.harness import (
    FORCED_PROMPT,
    REFUSAL_PROMPTS,
    Item,
    PassRecord,
    TwoPassEvaluator,
    TwoPassResult,
    score_passes,
)
from iclr26.refusal_index.metrics import (
    accuracy_given_attempted,
    aurc,
    auroc,
    brier,
    ece,
    peer_metrics,
    phi_coefficient,
    refusal_auroc_binary,
    refusal_f1,
    refusal_precision,
    refusal_recall,
    reliability,
    simpleqa_f_score,
)
from iclr26.refusal_index.simulate import LatentPropensityModel, TwoPassSample, make_model_zoo
from iclr26.refusal_index.tetrachoric import (
    bvn_density,
    bvn_upper,
    pearson_to_spearman,
    spearman_to_pearson,
    tetrachoric,
)

__version__ = _version("iclr26-refusal-index")

__all__ = [
    "DEFAULT_PHRASES",
    "ESTIMATORS",
    "FORCED_PROMPT",
    "REFUSAL_PROMPTS",
    "RELATIONS",
    "AliasGrader",
    "CallableClient",
    "ChatClient",
    "ClientError",
    "Completion",
    "Detection",
    "ExactMatchGrader",
    "FactMemorizer",
    "FactTable",
    "Item",
    "JudgeGrader",
    "LatentPropensityModel",
    "OpenAICompatibleClient",
    "PassRecord",
    "RIResult",
    "RefusalDetector",
    "RefusalIndexWarning",
    "ScriptedClient",
    "TwoPassEvaluator",
    "TwoPassResult",
    "TwoPassSample",
    "__version__",
    "accuracy_given_attempted",
    "aurc",
    "auroc",
    "brier",
    "bvn_density",
    "bvn_upper",
    "disattenuate",
    "ece",
    "load_fact_table",
    "make_model_zoo",
    "normalize_answer",
    "pearson_to_spearman",
    "peer_metrics",
    "phi_coefficient",
    "refusal_auroc_binary",
    "refusal_f1",
    "refusal_index_direct",
    "refusal_index_from_rates",
    "refusal_index_paired",
    "refusal_precision",
    "refusal_recall",
    "reliability",
    "retest_reliability",
    "score_passes",
    "simpleqa_f_score",
    "spearman_to_pearson",
    "tetrachoric",
]
