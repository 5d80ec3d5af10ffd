"""The simulator and the trained fact model: the ground truths the experiments rely on."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from iclr26.refusal_index import (
    FactMemorizer,
    LatentPropensityModel,
    load_fact_table,
    make_model_zoo,
    pearson_to_spearman,
    refusal_index_direct,
)


def test_latent_model_truth_and_rates():
    m = LatentPropensityModel(50_000, 0.5, 0.3, noise_refusal=0.5, noise_error=0.5, seed=0)
    assert m.true_ri() == pytest.approx(pearson_to_spearman(0.5))
    assert spearmanr(m.refusal_probs(0.2), m.error_probs()).statistic == pytest.approx(
        m.true_ri(), abs=0.01
    )
    s = m.sample(0.2, np.random.default_rng(1))
    q, pe, w = s.rates
    assert q == pytest.approx(0.2, abs=0.01)
    assert pe == pytest.approx(0.3, abs=0.01)
    assert w == pytest.approx(float((~s.refused & s.forced_wrong).mean()))
    assert m.refusal_probs(0.2).mean() == pytest.approx(0.2, abs=0.01)
    with pytest.raises(ValueError, match="rho"):
        LatentPropensityModel(10, 1.0, 0.3)


def test_zoo_shape_and_independent_accuracy():
    zoo = make_model_zoo(16, 5, n_items=100, seed=0)
    assert len(zoo) == 16
    assert all(len(row) == 5 for row in zoo)
    rho = [row[0].rho for row in zoo]
    acc = [1 - row[0].error_rate for row in zoo]
    assert abs(spearmanr(rho, acc).statistic) < 0.6
    assert (
        make_model_zoo(2, 1, n_items=10, seed=3)[1][0].rho
        == make_model_zoo(2, 1, n_items=10, seed=3)[1][0].rho
    )


@pytest.fixture(scope="module")
def table():
    return load_fact_table()


def test_fact_table_holds_real_facts(table):
    assert table.n_facts > 1000
    assert table.relations == ("capital", "region", "subregion", "demonym", "currency")
    items = {it.id: it for it in table.items()}
    assert items["capital:France"].answers == ("Paris",)
    assert items["currency:Japan"].answers == ("JPY",)
    assert items["region:Peru"].question == "In which world region is Peru?"
    with pytest.raises(ValueError, match="unknown relation"):
        load_fact_table(["capital", "flag"])


def test_fact_memorizer_has_a_knowledge_boundary(table):
    model = FactMemorizer(width=32, steps=200, seed=0).fit(table)
    p_correct, confidence, score = model.behaviour(table)
    seen = model.exposure_ > 0
    assert p_correct[seen].mean() > 0.9
    assert p_correct[~seen].mean() < 0.5
    # the model knows what it knows: confidence ranks its own correctness
    assert spearmanr(confidence, p_correct).statistic > 0.5
    threshold = model.threshold_for_rate(score, 0.3)
    assert model.refusal_probs(score, threshold).mean() == pytest.approx(0.3, abs=1e-6)
    # RI by definition does not depend on the refusal threshold
    ri = [refusal_index_direct(model.refusal_probs(score, model.threshold_for_rate(score, q)), 1 - p_correct).ri
          for q in (0.1, 0.3, 0.5)]  # fmt: skip
    assert max(ri) - min(ri) < 1e-9
    again = FactMemorizer(width=32, steps=200, seed=0).fit(table).behaviour(table)[0]
    np.testing.assert_array_equal(again, p_correct)
    with pytest.raises(ValueError, match="not fitted"):
        FactMemorizer().behaviour(table)
