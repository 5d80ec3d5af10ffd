import numpy as np
import pytest
import torch

from iclr26.ecodiff.baselines import magnitude_scores, torch_pruning_scores
from iclr26.ecodiff.select import select
from iclr26.ecodiff.toy import tiny_dit
from iclr26.ecodiff.units import find_prunable_units

pytest.importorskip("torch_pruning")


def _spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return np.corrcoef(ra, rb)[0, 1]


def _inputs():
    return torch.randn(2, 1, 8, 8), torch.tensor([10, 20]), torch.tensor([1, 2])


def test_torch_pruning_ranks_each_group_as_our_magnitude_and_leaves_the_model():
    model = tiny_dit(seed=0)
    units = find_prunable_units(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tp = torch_pruning_scores(model, units, _inputs())
    for k, v in model.state_dict().items():
        assert torch.equal(before[k], v)
    mag = magnitude_scores(model, units)
    for u in units:
        a, b = tp.logits[u.key].numpy(), mag.logits[u.key].numpy()
        if u.size > 2:
            assert _spearman(a, b) > 0.999, u.name
    # per-group mean normalisation: every group's scores average 1
    for u in units:
        assert abs(float(tp.logits[u.key].mean()) - 1.0) < 1e-6
    keep = select(tp, 0.2, total_params=sum(p.numel() for p in model.parameters()))
    assert set(keep) == {u.key for u in units}


def test_torch_pruning_scores_bad_input():
    model = tiny_dit(seed=0)
    units = find_prunable_units(model)
    with pytest.raises(ValueError, match="units"):
        torch_pruning_scores(model, [], _inputs())
    with pytest.raises(TypeError, match="example_inputs"):
        torch_pruning_scores(model, units, [])
