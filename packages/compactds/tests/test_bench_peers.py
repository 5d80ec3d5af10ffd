"""The LanceDB peer of ``bench``: an embedded table whose refine stage recovers what PQ loses."""

import numpy as np
import pytest

from iclr26.compactds.evaluation import exact_topk, recall_at_k
from iclr26.compactds.experiments import _lancedb_peer


def test_lancedb_ivfpq_with_refine_matches_exact_search(tmp_path, clustered):
    pytest.importorskip("lancedb")
    base, queries = clustered
    search, ram, disk, build_s, info = _lancedb_peer(
        tmp_path,
        base,
        queries,
        nlist=8,
        m=4,
        n_train=3000,
        nprobe=8,
        K=500,
        k=10,
        measure_ram=False,
    )
    truth = exact_topk(base, queries, 10)
    one_by_one = np.concatenate([search(queries[r : r + 1]) for r in range(len(queries))])
    # every partition probed and 500 candidates rescored with the full vectors: exact top 10
    assert recall_at_k(one_by_one, truth) >= 0.98
    np.testing.assert_array_equal(search(queries), one_by_one)  # batch plan = per-query plans
    assert info == {"partitions": 8, "sub_vectors": 4, "bits": 8, "refine_factor": 50}
    assert disk >= base.nbytes  # the table holds the full float32 vectors
    assert ram == 0
    assert build_s > 0
