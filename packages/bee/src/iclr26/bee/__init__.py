"""iclr26-bee: BEE (ICLR 2026), spurious correlations read from a linear probe's weights.

Train a linear probe initialised at the class-name text embeddings (the zero-shot classifier),
then rank vocabulary concepts by how each class weight aligns with their text embeddings
(the official score), or how the weight's *change* from the zero-shot anchor aligns with them
(the drift score), with the official knee threshold and null-calibrated z-scores.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-bee")

# Lazy: `iclr26-bee --help` imports neither NumPy nor torch.
__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "baselines": [
            "B2TScores",
            "b2t_scores",
            "cooccurrence_scores",
            "domino_like",
            "splice_scores",
        ],
        "calibration": ["NullCalibration", "null_calibrate"],
        "data": [
            "GeometricTask",
            "Split",
            "TextTask",
            "load_civilcomments",
            "load_metadata_csv",
            "make_bird_sentences",
            "make_geometric",
            "make_review_sentences",
        ],
        "encoders": [
            "LSAEncoder",
            "MiniLMEncoder",
            "PrecomputedEncoder",
            "SentenceTransformerEncoder",
            "TextEncoder",
            "load_embeddings",
            "minilm_words",
        ],
        "finetune": ["FineTunedEncoder", "finetune_minilm", "finetune_top_layers"],
        "mitigate": ["concept_variance_penalty", "group_dro_probe"],
        "probe": ["ProbeResult", "fit_probe", "fit_probes", "normalize_anchors"],
        "scoring": [
            "ConceptScore",
            "alignment",
            "class_scores",
            "concept_class_scores",
            "discover",
            "drift_scores",
            "knee_threshold",
            "max_gap",
        ],
        "validate": [
            "InsertionResult",
            "bias_enhanced_zero_shot",
            "insertion_attack",
            "worst_group_accuracy",
        ],
        "vocab": [
            "BIRD_CLASS_TERMS",
            "extract_keywords",
            "filter_class_terms",
            "sample_control_words",
        ],
    },
)
__all__ += ["__version__"]
