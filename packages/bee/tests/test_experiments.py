"""The geometric part of reproduce on a tiny grid (the MiniLM part runs in `reproduce`)."""

import torch

from iclr26.bee.experiments import _geometric_study

torch.set_num_threads(1)


def test_geometric_study_table_and_rows():
    table, per = _geometric_study([(0.5, 1.5), (0.95, 1.5), (1.0, 0.5)], [0], 6, False)
    rows = {r["rho"] if r["sigma"] == 1.5 else "sep": r for r in table}
    assert rows[0.95]["drift rank"] <= 3
    assert rows[0.95]["official rank"] > rows[0.95]["drift rank"]
    assert rows[0.95]["z planted"] > 3
    assert rows[0.5]["z planted"] < 2
    assert rows["sep"]["B2T val errors"] == 0
    assert per[(1.0, 0.5)][0]["null"] == "permutation"
