"""Every function of the README API table refuses bad input with a clear error naming the
argument, before any training."""

import numpy as np
import pytest

import iclr26.bee as bee

rng = np.random.default_rng(0)
X = rng.standard_normal((20, 4))
X /= np.linalg.norm(X, axis=1, keepdims=True)
y = np.arange(20) % 2
A0 = rng.standard_normal((2, 4))
E = rng.standard_normal((5, 4))
W = rng.standard_normal((2, 4))
NAN = X.copy()
NAN[3, 1] = np.nan
CONCEPTS = list("abcde")

CASES = [
    ("fit_probe rows", lambda: bee.fit_probe(X, y[:-1], X, y, A0), ValueError, "y_train"),
    ("fit_probe single class", lambda: bee.fit_probe(X, np.zeros(20, int), X, y, A0),
     ValueError, "2 classes"),
    ("fit_probe NaN", lambda: bee.fit_probe(NAN, y, X, y, A0), ValueError, "X_train"),
    ("fit_probe dim", lambda: bee.fit_probe(X, y, X, y, A0[:, :3]), ValueError, "X_train"),
    ("fit_probe float labels", lambda: bee.fit_probe(X, y + 0.5, X, y, A0), ValueError,
     "y_train"),
    ("fit_probe str labels", lambda: bee.fit_probe(X, np.array(list("ab" * 10)), X, y, A0),
     TypeError, "y_train"),
    ("fit_probe label out of range", lambda: bee.fit_probe(X, y * 2, X, y, A0), ValueError,
     "y_train"),
    ("fit_probe one anchor", lambda: bee.fit_probe(X, y, X, y, A0[:1]), ValueError, "2 classes"),
    ("fit_probe lr", lambda: bee.fit_probe(X, y, X, y, A0, lr=-1.0), ValueError, "lr"),
    ("fit_probe batch", lambda: bee.fit_probe(X, y, X, y, A0, batch_size=2.5), TypeError,
     "batch_size"),
    ("fit_probe empty", lambda: bee.fit_probe(X[:0], y[:0], X, y, A0), ValueError, "X_train"),
    ("fit_probe unknown keyword", lambda: bee.fit_probe(X, y, X, y, A0, learning_rate=0.1),
     TypeError, "learning_rate"),
    ("normalize_anchors zero row", lambda: bee.normalize_anchors(np.zeros((2, 4))), ValueError,
     "class_anchors"),
    ("normalize_anchors NaN", lambda: bee.normalize_anchors(NAN[2:4]), ValueError,
     "class_anchors"),
    ("fit_probes label shape", lambda: bee.fit_probes(X, y, X, y[None], A0), ValueError,
     "labels"),
    ("alignment dim", lambda: bee.alignment(W, E[:, :3]), ValueError, "concept_emb"),
    ("alignment 1d", lambda: bee.alignment(W[0], E), ValueError, "W"),
    ("class_scores one class", lambda: bee.class_scores(W[:1] @ E.T), ValueError, "2 classes"),
    ("concept_class_scores dim", lambda: bee.concept_class_scores(W, E[:, :3]), ValueError,
     "concept_emb"),
    ("concept_class_scores one class", lambda: bee.concept_class_scores(W[:1], E), ValueError,
     "2 classes"),
    ("concept_class_scores chunk", lambda: bee.concept_class_scores(W, E, chunk=0), ValueError,
     "chunk"),
    ("max_gap NaN", lambda: bee.max_gap(np.full((2, 3), np.nan)), ValueError, "A"),
    ("drift_scores W0 shape", lambda: bee.drift_scores(W, W[:1], E), ValueError, "W0"),
    ("knee 2d", lambda: bee.knee_threshold(np.ones((2, 2))), ValueError, "sorted_scores"),
    ("knee NaN", lambda: bee.knee_threshold([np.nan]), ValueError, "sorted_scores"),
    ("knee window", lambda: bee.knee_threshold([1.0], window=0), ValueError, "window"),
    ("discover empty vocab", lambda: bee.discover(W, [], E[:0]), ValueError, "concepts"),
    ("discover length", lambda: bee.discover(W, CONCEPTS[:4], E), ValueError, "concept_emb"),
    ("discover dim", lambda: bee.discover(W, CONCEPTS, E[:, :3]), ValueError, "concept_emb"),
    ("discover mode", lambda: bee.discover(W, CONCEPTS, E, mode="x"), ValueError, "mode"),
    ("discover drift W0", lambda: bee.discover(W, CONCEPTS, E, mode="drift"), ValueError, "W0"),
    ("discover str", lambda: bee.discover(W, "abcde", E), TypeError, "concepts"),
    ("discover threshold", lambda: bee.discover(W, CONCEPTS, E, threshold="best"), ValueError,
     "threshold"),
    ("null null", lambda: bee.null_calibrate(X, y, X, y, A0, E, null="x"), ValueError, "null"),
    ("null groups missing", lambda: bee.null_calibrate(X, y, X, y, A0, E, null="groups"),
     ValueError, "groups"),
    ("null n_null", lambda: bee.null_calibrate(X, y, X, y, A0, E, n_null=1), ValueError,
     "n_null"),
    ("null dim", lambda: bee.null_calibrate(X, y, X, y, A0, E[:, :3]), ValueError,
     "concept_emb"),
    ("null NaN", lambda: bee.null_calibrate(NAN, y, X, y, A0, E), ValueError, "X_train"),
    ("null single class", lambda: bee.null_calibrate(X, 0 * y, X, y, A0, E), ValueError,
     "2 classes"),
    ("b2t rows", lambda: bee.b2t_scores(X, y[:3], y, E), ValueError, "y_val"),
    ("cooc both", lambda: bee.cooccurrence_scores(y), ValueError, "exactly one"),
    ("splice l1", lambda: bee.splice_scores(X, y, E, l1=0.0), ValueError, "l1"),
    ("domino probs", lambda: bee.domino_like(X, y, np.ones((3, 2)), E), ValueError, "probs"),
    ("wga length", lambda: bee.worst_group_accuracy(y, y[:3], y), ValueError, "y_pred"),
    ("insertion concept", lambda: bee.insertion_attack(["a"], [0], "", lambda t: [0]),
     ValueError, "concept"),
    ("insertion texts str", lambda: bee.insertion_attack("abc", [0], "x", lambda t: [0]),
     TypeError, "texts"),
    ("insertion template", lambda: bee.insertion_attack(["a"], [0], "x", lambda t: [0],
                                                        template="{text}"), ValueError, "template"),
    ("zero-shot template", lambda: bee.bias_enhanced_zero_shot(X, y, y, ["a", "b"], ["x"],
                                                               "{cls}", None), ValueError, "template"),
    ("penalty NaN", lambda: bee.concept_variance_penalty(NAN), ValueError, "concept_emb"),
    ("penalty strength", lambda: bee.concept_variance_penalty(E, strength=-1.0), ValueError,
     "strength"),
    ("dro groups", lambda: bee.group_dro_probe(X, y, y[:3], X, y, y, A0), ValueError,
     "groups_train"),
    ("filter names", lambda: bee.filter_class_terms(["x"], []), ValueError, "class_names"),
    ("filter str", lambda: bee.filter_class_terms("lake", ["bird"]), TypeError, "keywords"),
    ("keywords empty", lambda: bee.extract_keywords({}), ValueError, "texts_by_class"),
    ("keywords backend", lambda: bee.extract_keywords({0: ["a"]}, backend="x"), ValueError,
     "backend"),
    ("geometric rho", lambda: bee.make_geometric(rho=1.5), ValueError, "rho"),
    ("geometric n", lambda: bee.make_geometric(n_train=10.0), TypeError, "n_train"),
    ("sentences rho", lambda: bee.make_bird_sentences(rho=-0.1), ValueError, "rho"),
    ("precomputed empty", lambda: bee.PrecomputedEncoder({}), ValueError, "mapping"),
    ("lsa corpus", lambda: bee.LSAEncoder().fit("one string"), TypeError, "corpus"),
    ("lsa n", lambda: bee.LSAEncoder(n_components=1), ValueError, "n_components"),
    ("finetune model", lambda: bee.finetune_top_layers(object(), None, ["a"], [0], A0),
     TypeError, "model"),
    ("finetune_minilm texts", lambda: bee.finetune_minilm("a text", [0], ["x", "y"]), TypeError,
     "texts"),
    ("finetune_minilm anchors", lambda: bee.finetune_minilm(["a"], [0], ["x"]), ValueError,
     "anchor_texts"),
    ("sample_control_words n", lambda: bee.sample_control_words(["apple", "chair"], 2.0),
     TypeError, "n"),
    ("sample_control_words too few", lambda: bee.sample_control_words(["apple", "the"], 2),
     ValueError, "eligible"),
    ("sample_control_words string", lambda: bee.sample_control_words("apple", 1), TypeError,
     "words"),
    ("sample_control_words seed", lambda: bee.sample_control_words(["apple"], 1, seed=-1),
     ValueError, "seed"),
    ("metadata missing", lambda: bee.load_metadata_csv("/nonexistent/metadata.csv"), OSError,
     "not found"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call", "error", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_every_public_callable_is_covered():
    covered = {c[0].split()[0] for c in CASES}
    aliases = {"fit_probes": "fit_probes", "null": "null_calibrate", "b2t": "b2t_scores",
               "cooc": "cooccurrence_scores", "splice": "splice_scores", "domino": "domino_like",
               "wga": "worst_group_accuracy", "insertion": "insertion_attack",
               "zero-shot": "bias_enhanced_zero_shot", "penalty": "concept_variance_penalty",
               "dro": "group_dro_probe", "filter": "filter_class_terms",
               "keywords": "extract_keywords", "geometric": "make_geometric",
               "sentences": "make_bird_sentences", "precomputed": "PrecomputedEncoder",
               "lsa": "LSAEncoder", "metadata": "load_metadata_csv", "knee": "knee_threshold",
               "finetune": "finetune_top_layers"}  # fmt: skip
    names = {aliases.get(c, c) for c in covered}
    api = {"concept_class_scores", "fit_probe", "fit_probes", "normalize_anchors", "finetune_top_layers", "finetune_minilm", "alignment", "class_scores", "max_gap", "drift_scores",
           "knee_threshold", "discover", "null_calibrate", "b2t_scores", "cooccurrence_scores",
           "splice_scores", "domino_like", "worst_group_accuracy", "insertion_attack",
           "bias_enhanced_zero_shot", "concept_variance_penalty", "group_dro_probe",
           "filter_class_terms", "extract_keywords", "make_geometric", "make_bird_sentences",
           "PrecomputedEncoder", "LSAEncoder", "load_metadata_csv",
           "sample_control_words"}  # fmt: skip
    assert api <= names, api - names
