"""Every function of the README API table refuses bad input with a ValueError/TypeError naming
the argument — wrong shape, wrong dtype (integers converted or refused, never truncated),
NaN/inf, empty, out of range — and never a torch RuntimeError or an all-NaN result."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import iclr26.elvis as E

torch.manual_seed(0)
SIM = torch.rand(2, 5, 6) * 2 - 1
ZQ, ZD = torch.rand(2, 5) * 0.5, torch.rand(2, 6) * 0.5


def _nan(t, value=float("nan")):
    t = t.clone()
    t.view(-1)[0] = value
    return t


DUSTBIN_CASES = {
    "NaN score": ({"sim": _nan(SIM)}, ValueError, "sim contains NaN"),
    "inf score": ({"sim": _nan(SIM, float("inf"))}, ValueError, "sim contains NaN"),
    "NaN row gain": ({"row_gain": _nan(ZQ)}, ValueError, "row_gain contains NaN"),
    "NaN col gain": ({"col_gain": _nan(ZD)}, ValueError, "col_gain contains NaN"),
    "row gain shape": ({"row_gain": ZQ[:, :4]}, ValueError, r"row_gain must have shape \(2, 5\)"),
    "col gain shape": ({"col_gain": ZD[:1]}, ValueError, r"col_gain must have shape \(2, 6\)"),
    "sim 2-D": ({"sim": SIM[0]}, ValueError, "sim must have 3 dimensions"),
    "sim integer": ({"sim": (SIM * 10).long()}, TypeError, "sim must be a floating"),
    "sim numpy": ({"sim": SIM.numpy()}, TypeError, "sim must be a torch.Tensor"),
    "empty": ({"sim": SIM[:, :0], "row_gain": ZQ[:, :0]}, ValueError, "empty"),
    "row mask shape": ({"row_mask": torch.zeros(2, 4, dtype=torch.bool)}, ValueError, r"row_mask must have shape \(2, 5\)"),
    "col mask shape": ({"col_mask": torch.zeros(3, 6, dtype=torch.bool)}, ValueError, r"col_mask must have shape \(2, 6\)"),
    "float mask": ({"row_mask": torch.full((2, 5), 0.5)}, TypeError, "row_mask must be a bool"),
    "mask of 2s": ({"col_mask": torch.full((2, 6), 2)}, ValueError, "col_mask must hold only 0/1"),
    "mask hides all": ({"row_mask": torch.ones(2, 5, dtype=torch.bool)}, ValueError, "row_mask masks every"),
    "temperature 0": ({"temperature": 0.0}, ValueError, "temperature"),
    "temperature NaN": ({"temperature": float("nan")}, ValueError, "temperature"),
    "corner NaN": ({"corner": float("nan")}, ValueError, "corner"),
    "n_iters -1": ({"n_iters": -1}, ValueError, "n_iters"),
    "n_iters 2.5": ({"n_iters": 2.5}, TypeError, "n_iters"),
    "domain": ({"domain": "fast"}, ValueError, "domain"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DUSTBIN_CASES))
def test_dustbin_transport_bad_input(case):
    change, error, match = DUSTBIN_CASES[case]
    args = {"sim": SIM, "row_gain": ZQ, "col_gain": ZD, **change}
    sim, zq, zd = args.pop("sim"), args.pop("row_gain"), args.pop("col_gain")
    with pytest.raises(error, match=match):
        E.dustbin_transport(sim, zq, zd, **args)


def test_dustbin_transport_integer_mask_is_converted():
    mask = torch.zeros(2, 6, dtype=torch.long)
    mask[:, -1] = 1
    torch.testing.assert_close(
        E.dustbin_transport(SIM, ZQ, ZD, col_mask=mask),
        E.dustbin_transport(SIM, ZQ, ZD, col_mask=mask.bool()),
    )


@pytest.mark.parametrize(("fn", "marg"), [(E.log_sinkhorn, "log_a"), (E.exp_sinkhorn, "a")])
def test_sinkhorn_bad_input(fn, marg):
    a = torch.full((2, 5), 0.2)
    b = torch.full((2, 6), 1 / 6)
    if fn is E.log_sinkhorn:
        a, b = a.log(), b.log()
    with pytest.raises(ValueError, match=rf"{marg} must have shape \(2, 5\)"):
        fn(SIM, a[:, :3], b)
    with pytest.raises(ValueError, match="scores contains NaN"):
        fn(_nan(SIM), a, b)
    with pytest.raises(TypeError, match="scores must be a floating"):
        fn(SIM.long(), a, b)
    with pytest.raises(ValueError, match="n_iters"):
        fn(SIM, a, b, n_iters=-2)
    if fn is E.exp_sinkhorn:
        with pytest.raises(ValueError, match="non-negative"):
            fn(SIM, -a, b)


def _feats(n=4, d=8, seed=0):
    return E.LocalFeatures(np.random.default_rng(seed).random((n, d)).astype(np.float32))


def test_model_and_features_bad_input():
    m = E.ELViS(8).init_untrained_()
    q, d = torch.randn(2, 5, 8), torch.randn(2, 6, 8)
    with pytest.raises(TypeError, match="q must be a floating"):
        m(q.long(), d)
    with pytest.raises(ValueError, match="d contains NaN"):
        m(q, _nan(d))
    with pytest.raises(ValueError, match="D=8"):
        m(torch.randn(2, 5, 7), torch.randn(2, 6, 7))
    for kwargs, match in (({"in_dim": 0}, "in_dim"), ({"temperature": -1}, "temperature"),
                          ({"n_iters": -1}, "n_iters"), ({"domain": "x"}, "domain")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            E.ELViS(**{"in_dim": 8, **kwargs})
    with pytest.raises(ValueError, match="gain"):
        E.ELViS(8).init_untrained_(gain=2)
    with pytest.raises(TypeError, match="desc must hold real numbers"):
        E.LocalFeatures(np.full((3, 4), "a"))
    with pytest.raises(ValueError, match="desc contains NaN"):
        E.LocalFeatures(np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match=r"xy must have shape \(3, 2\)"):
        E.LocalFeatures(np.ones((3, 4)), xy=np.ones((2, 2)))
    np.testing.assert_array_equal(E.LocalFeatures(np.ones((3, 4), dtype=int)).desc, np.ones((3, 4)))
    img = np.zeros((64, 64), np.uint8)
    for fn in (E.extract_sift, E.extract_orb):
        with pytest.raises(ValueError, match="n_features"):
            fn(img, 0)
        with pytest.raises(TypeError, match="n_features"):
            fn(img, 2.5)
    for bad, error, match in ((np.full((8, 8), np.nan), ValueError, "NaN"), (np.zeros((0, 0)), ValueError, "empty"),
                              (np.zeros((2, 2, 2, 2)), ValueError, "shape"), (np.full((8, 8), "a"), TypeError, "dtype")):  # fmt: skip
        with pytest.raises(error, match=match):
            E.extract_sift(bad, 10)
    with pytest.raises(ValueError, match="too small"):
        E.extract_daisy(np.zeros((5, 5), np.uint8))
    with pytest.raises(ValueError, match="feats"):
        E.pad_batch([])
    with pytest.raises(TypeError, match="max_len"):
        E.pad_batch([_feats()], 2.5)


def test_rerank_fuse_global_metrics_bad_input():
    qf, df = [_feats(seed=1)] * 2, [_feats(seed=2)] * 3
    sims = np.random.default_rng(0).random((2, 3))
    scorer = E.sum_max_similarity
    for kwargs, error, match in (({"top_k": 0}, ValueError, "top_k"), ({"top_k": 2.5}, TypeError, "top_k"),
                                 ({"top_k": 4}, ValueError, "top_k"), ({"lam": 2}, ValueError, "lam"),
                                 ({"t": "fast"}, ValueError, "t must be")):  # fmt: skip
        with pytest.raises(error, match=match):
            E.rerank(sims, scorer, qf, df, **{"top_k": 2, **kwargs})
    with pytest.raises(ValueError, match="global_sims"):
        E.rerank(np.full((2, 3), np.nan), scorer, qf, df, top_k=2)
    with pytest.raises(ValueError, match="global_sims"):
        E.rerank(sims[:, :2], scorer, qf, df, top_k=2)
    with pytest.raises(ValueError, match="scorer must return 4 finite"):
        E.rerank(sims, lambda a, b: np.full(len(a), np.nan), qf, df, top_k=2)
    with pytest.raises(ValueError, match="one shape"):
        E.fuse(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="global_score"):
        E.fuse(np.full(3, np.nan), np.ones(3))
    with pytest.raises(ValueError, match="lam"):
        E.fuse(np.ones(3), np.ones(3), lam=float("nan"))
    for kwargs, error, match in (({"k": 0}, ValueError, "k"), ({"k": 2.5}, TypeError, "k"),
                                 ({"power": -1}, ValueError, "power"), ({"seed": -1}, ValueError, "seed")):  # fmt: skip
        with pytest.raises(error, match=match):
            E.VLAD(**kwargs)
    with pytest.raises(ValueError, match="desc must be finite"):
        E.gem(np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match="p must be"):
        E.gem(np.ones((3, 4)), p=0)
    with pytest.raises(TypeError, match="relevant must be bool"):
        E.average_precision([0.5, 1.0])
    with pytest.raises(ValueError, match="at least one relevant"):
        E.average_precision([])
    order, labels = np.array([[2, 0, 1]]), np.array([[True, False, False]])
    with pytest.raises(TypeError, match="order must hold integer"):
        E.mean_average_precision(order.astype(float), labels)
    with pytest.raises(ValueError, match="permutation"):
        E.mean_average_precision(np.array([[0, 0, 1]]), labels)
    with pytest.raises(ValueError, match=r"\(Q, N\)"):
        E.mean_average_precision(order, labels[:, :2])
    with pytest.raises(TypeError, match="labels must be bool"):
        E.map_at_k(order, labels.astype(float), 2)
    with pytest.raises(ValueError, match="k must be"):
        E.map_at_k(order, labels, 0)
    assert E.mean_average_precision(order, labels.astype(int)) == E.mean_average_precision(
        order, labels
    )
    with pytest.raises(TypeError, match="order must hold integer"):
        E.revisited_map(order.astype(float), labels)
    with pytest.raises(ValueError, match="protocol"):
        E.revisited_ground_truth(labels, ~labels, "x")


def test_peers_training_data_and_checkpoint_bad_input(tmp_path):
    q, d = [_feats(seed=1)], [_feats(seed=2)]
    for fn in (E.mnn_count, E.sum_max_similarity):
        with pytest.raises(ValueError, match="threshold"):
            fn(q, d, threshold=float("nan"))
        with pytest.raises(ValueError, match="queries"):
            fn(q, d * 2)
    with pytest.raises(ValueError, match="xy"):
        E.ratio_magsac_inliers(q, d)
    with pytest.raises(ValueError, match="px"):
        E.ratio_magsac_inliers(q, d, px=0)
    with pytest.raises(ValueError, match="in_dim"):
        E.AMESLite(0)
    m = E.ELViS(8).init_untrained_()
    pair = [(_feats(seed=1), _feats(seed=2), 1)]
    for kwargs, error, match in (({"epochs": 0}, ValueError, "epochs"), ({"lr": -1.0}, ValueError, "lr"),
                                 ({"lr": float("inf")}, ValueError, "lr"), ({"warmup": 2.0}, ValueError, "warmup"),
                                 ({"batch_size": 1.5}, TypeError, "batch_size")):  # fmt: skip
        with pytest.raises(error, match=match):
            E.fit(m, pair, **kwargs)
    with pytest.raises(ValueError, match="labels"):
        E.fit(m, [(_feats(), _feats(), 2)])
    with pytest.raises(ValueError, match="positive_pairs"):
        E.calibrate_temperature(m, [])
    with pytest.raises(ValueError, match="global_sims"):
        E.TripletSampler(np.array([0, 0, 1, 1]), np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match="unknown bundled image"):
        E.load_image("nope")
    with pytest.raises(ValueError, match="max_side"):
        E.load_image("camera", 0)
    with pytest.raises(ValueError, match="relevant"):
        E.make_training_pairs([_feats()], [_feats()], np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="names"):
        E.make_retrieval_set([])
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=f"checkpoint {junk} is not a readable") as info:
        E.load_official_checkpoint(junk)
    assert "weights_only" not in str(info.value)  # never suggests unpickling an untrusted file
    with pytest.raises(FileNotFoundError, match="does not exist"):
        E.load_official_checkpoint(tmp_path / "missing.pt")
    torch.save({"remap_local.0.weight": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="lacks official ELViS keys"):
        E.load_official_checkpoint(tmp_path / "other.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match="expected a state dict"):
        E.load_official_checkpoint(tmp_path / "list.pt")


def test_import_does_not_load_torch():
    code = "import sys, iclr26.elvis as e; e.REVISITED_PROTOCOLS; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().lower()) is False
