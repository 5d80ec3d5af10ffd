"""iclr26-bee: BEE (ICLR 2026), spurious correlations read from a linear probe's weights.

Train a linear probe initialised at the class-name text embeddings (the zero-shot classifier),
then rank vocabulary concepts by how each class weight aligns with their text embeddings
(the official score), or how the weight's *change* from the zero-shot anchor aligns with them
(the drift score), with the official knee threshold and null-calibrated z-scores.
"""

from importlib.metadata import version as _version

from iclr26.bee.baselines import (
    B2TScores,
    b2t_scores,
    cooccurrence_scores,
    domino_like,
    splice_scores,
)
from iclr26.bee.calibration import NullCalibration, null_calibrate
from iclr26.bee.data import (
    GeometricTask,
    Split,
    TextTask,
    load_civilcomments,
    load_metadata_csv,
    make_bird_sentences,
    make_geometric,
    make_review_sentences,
)
from iclr26.bee.encoders import (
    LSAEncoder,
    MiniLMEncoder,
    PrecomputedEncoder,
    SentenceTransformerEncoder,
    TextEncoder,
    load_embeddings,
)
from iclr26.bee.mitigate import concept_variance_penalty, group_dro_probe
from iclr26.bee.probe import ProbeResult, fit_probe, fit_probes
from iclr26.bee.scoring import (
    ConceptScore,
    alignment,
    class_scores,
    discover,
    drift_scores,
    knee_threshold,
    max_gap,
)
from iclr26.bee.validate import (
    InsertionResult,
    bias_enhanced_zero_shot,
    insertion_attack,
    worst_group_accuracy,
)
from iclr26.bee.vocab import BIRD_CLASS_TERMS, extract_keywords, filter_class_terms

__version__ = _version("iclr26-bee")

__all__ = [
    "BIRD_CLASS_TERMS",
    "B2TScores",
    "ConceptScore",
    "GeometricTask",
    "InsertionResult",
    "LSAEncoder",
    "MiniLMEncoder",
    "NullCalibration",
    "PrecomputedEncoder",
    "ProbeResult",
    "SentenceTransformerEncoder",
    "Split",
    "TextEncoder",
    "TextTask",
    "__version__",
    "alignment",
    "b2t_scores",
    "bias_enhanced_zero_shot",
    "class_scores",
    "concept_variance_penalty",
    "cooccurrence_scores",
    "discover",
    "domino_like",
    "drift_scores",
    "extract_keywords",
    "filter_class_terms",
    "fit_probe",
    "fit_probes",
    "group_dro_probe",
    "insertion_attack",
    "knee_threshold",
    "load_civilcomments",
    "load_embeddings",
    "load_metadata_csv",
    "make_bird_sentences",
    "make_geometric",
    "make_review_sentences",
    "max_gap",
    "null_calibrate",
    "splice_scores",
    "worst_group_accuracy",
]
