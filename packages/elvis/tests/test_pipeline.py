import json
import math

import numpy as np
import pytest
import torch

from iclr26.elvis import (
    DOCS,
    SCIENCE,
    VLAD,
    ELViS,
    LocalFeatures,
    TripletSampler,
    average_precision,
    extract_daisy,
    extract_orb,
    extract_sift,
    fit,
    make_retrieval_set,
    map_at_k,
    mean_average_precision,
    mnn_count,
    rerank,
)
from iclr26.elvis.cli import main


def test_average_precision_closed_forms():
    assert average_precision([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([0, 1], n_relevant=2) == pytest.approx(0.25)
    order = np.array([[2, 0, 1]])
    labels = np.array([[True, False, True]])
    assert mean_average_precision(order, labels) == pytest.approx(1.0)
    assert map_at_k(np.array([[1, 0, 2]]), labels, 1) == pytest.approx(0.0)


def test_rerank_keeps_the_tail_and_an_oracle_helps():
    rng = np.random.default_rng(0)
    n = 12
    sims = rng.normal(size=(2, n))
    labels = np.zeros((2, n), bool)
    labels[0, [3, 7]] = labels[1, [1, 9]] = True
    feats = [LocalFeatures(np.full((1, 2), i + 1.0)) for i in range(n)]
    queries = [LocalFeatures(np.zeros((1, 2))), LocalFeatures(np.ones((1, 2)))]
    lookup = {id(f): i for i, f in enumerate(feats)}
    qid = {id(q): i for i, q in enumerate(queries)}

    def oracle(qs, ds):
        return np.array(
            [10.0 * labels[qid[id(q)], lookup[id(d)]] for q, d in zip(qs, ds, strict=True)]
        )

    _, order = rerank(sims, oracle, queries, feats, top_k=n, lam=0.0, t=1.0)
    assert mean_average_precision(order, labels) == pytest.approx(1.0)
    _, order5 = rerank(sims, oracle, queries, feats, top_k=5, lam=0.5)
    glob = np.argsort(-sims, 1, kind="stable")
    np.testing.assert_array_equal(order5[:, 5:], glob[:, 5:])
    assert {tuple(sorted(r)) for r in order5[:, :5]} == {tuple(sorted(r)) for r in glob[:, :5]}
    with pytest.raises(ValueError, match="larger than the database"):
        rerank(sims, oracle, queries, feats, top_k=n + 1)


def test_extractors():
    img = np.zeros((160, 160), np.float32)
    img[40:120, 40:120] = 1.0
    img[60:100, 60:100] = 0.3
    sift = extract_sift(img, 50)
    assert sift.dim == 128
    assert np.allclose(np.linalg.norm(sift.desc, axis=1), 1.0, atol=1e-3)
    orb = extract_orb(img, 50)
    assert orb.dim == 256
    assert set(np.unique(orb.desc)) <= {-1.0, 1.0}
    daisy = extract_daisy(img, n_keep=20)
    assert len(daisy) == 20
    assert daisy.xy.shape == (20, 2)
    blank = extract_sift(np.zeros((64, 64)), 10)
    assert len(blank) == 1


def test_vlad_and_triplet_sampler():
    rng = np.random.default_rng(1)
    feats = [LocalFeatures(rng.normal(size=(20, 8))) for _ in range(4)]
    enc = VLAD(4, seed=0).fit(feats).encode(feats)
    np.testing.assert_allclose(np.linalg.norm(enc, axis=1), 1.0, atol=1e-5)
    labels = np.repeat(np.arange(3), 6)
    sims = np.where(labels[:, None] == labels[None], 0.9, 0.5) + rng.uniform(0, 0.05, (18, 18))
    sampler = TripletSampler(labels, sims, num_candidates=17, min_pos=5, min_neg=5)
    assert len(sampler.anchors) == 18
    for a, p, n in sampler.sample(seed=0):
        assert labels[a] == labels[p] != labels[n]
        assert a != p


def _synthetic_pairs(n_pairs, seed):
    rng = np.random.default_rng(seed)
    pairs = []
    for k in range(n_pairs):
        x = rng.normal(size=(24, 16)).astype(np.float32)
        if k % 2:
            y = rng.normal(size=(24, 16)).astype(np.float32)
            y[:8] = x[:8] + 0.2 * rng.normal(size=(8, 16))
        else:
            y = rng.normal(size=(24, 16)).astype(np.float32)
        pairs.append((LocalFeatures(x), LocalFeatures(y), k % 2))
    return pairs


def test_training_sanity_loss_leaves_ln2():
    pairs = _synthetic_pairs(400, 0)
    model = (
        ELViS(16, model_dim=16, gain_hidden=16).init_untrained_(gain=0.7).warm_start_head_(pairs)
    )
    hist = fit(model, pairs, epochs=2, batch_size=50, lr=2e-3, desc_variable_min=16, seed=0)
    assert hist.accuracy[-1] > 0.9
    assert np.mean(hist.loss[-4:]) < math.log(2) - 0.2


def test_benchmark_regression_ot_vote_beats_mnn_and_global():
    torch.manual_seed(0)
    data = make_retrieval_set(SCIENCE + DOCS, n_pos=2, n_distractors=4, seed=7)
    q = [extract_sift(im, 200) for im in data.queries]
    db = [extract_sift(im, 200) for im in data.database]
    vlad = VLAD(16, seed=0).fit(q + db)
    sims = vlad.encode(q) @ vlad.encode(db).T
    glob = mean_average_precision(np.argsort(-sims, 1), data.relevant)
    k = len(db)
    _, o_mnn = rerank(
        sims, lambda a, b: mnn_count(a, b, threshold=0.8), q, db, top_k=k, lam=0.0, t="auto"
    )
    model = ELViS(128).init_untrained_(gain=0.7)
    _, o_ot = rerank(sims, model.score, q, db, top_k=k, lam=0.0, t="auto")
    mnn = mean_average_precision(o_mnn, data.relevant)
    otv = mean_average_precision(o_ot, data.relevant)
    assert otv >= mnn + 0.10, (otv, mnn)
    assert otv >= glob + 0.05, (otv, glob)


def test_cli_rerank_on_image_folders(tmp_path, capsys):
    import cv2

    from iclr26.elvis import load_image

    qdir, ddir = tmp_path / "q", tmp_path / "d"
    qdir.mkdir()
    ddir.mkdir()
    cam, coins = load_image("camera", 256), load_image("coins", 256)
    cv2.imwrite(str(qdir / "camera.png"), (cam * 255).astype(np.uint8))
    cv2.imwrite(str(ddir / "a_coins.png"), (coins * 255).astype(np.uint8))
    cv2.imwrite(str(ddir / "b_camera.png"), (cam[8:, 8:] * 255).astype(np.uint8))
    assert main(["rerank", str(qdir), str(ddir), "--n-features", "150"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["camera.png"][0]["image"] == "b_camera.png"


def _one_line_error(capsys, argv, *needles):
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse: exit 2 with a usage line
        code = stop.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    for needle in needles:
        assert needle in last, last
    return err


def test_cli_rerank_fails_early_in_one_line_naming_the_file(tmp_path, capsys):
    import cv2

    from iclr26.elvis import load_image

    qdir, ddir = tmp_path / "q", tmp_path / "d"
    qdir.mkdir()
    ddir.mkdir()
    cam = (load_image("camera", 96) * 255).astype(np.uint8)
    cv2.imwrite(str(qdir / "camera.png"), cam)
    cv2.imwrite(str(ddir / "a.png"), cam)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"\x00\x01 definitely not a checkpoint")
    err = _one_line_error(
        capsys, ["rerank", str(qdir), str(ddir), "--checkpoint", str(junk)], str(junk), "checkpoint"
    )
    assert len(err.splitlines()) == 1
    assert "weights_only" not in err
    bad = ddir / "b_corrupt.jpg"
    bad.write_bytes(b"\xff\xd8\xff garbage that is not a jpeg")
    err = _one_line_error(
        capsys, ["rerank", str(qdir), str(ddir)], str(bad), "not a readable image"
    )
    assert len(err.splitlines()) == 1
    _one_line_error(capsys, ["rerank", str(qdir), str(tmp_path / "nope")], "does not exist")
    _one_line_error(capsys, ["rerank", str(qdir), str(junk)], "expected a folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(capsys, ["rerank", str(qdir), str(empty)], "holds no images")
    _one_line_error(
        capsys,
        ["rerank", str(qdir), str(ddir), "--checkpoint", str(tmp_path / "x.pt")],
        "does not exist",
    )
    _one_line_error(capsys, ["rerank", str(qdir), str(ddir), "--out", str(tmp_path)], "--out")
    for option, value in (("--top-k", "0"), ("--n-features", "abc"), ("--temperature", "-1"),
                          ("--lam", "1.5"), ("--show", "0")):  # fmt: skip
        _one_line_error(capsys, ["rerank", str(qdir), str(ddir), option, value], option)


def test_help_and_argument_errors_do_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from iclr26.elvis.cli import main\n"
        "for argv in (['--help'], ['rerank', '--help'], ['rerank', 'nope', 'nope']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules, 'cv2' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False False"


@pytest.mark.slow
def test_reproduce_quick_runs_and_reports(tmp_path):
    from iclr26.elvis.experiments import reproduce

    report = reproduce(quick=True, seed=0, progress=False)
    assert report.tables
    assert report.figures
    assert report.checks


def test_official_hdf5_round_trip(tmp_path):
    from iclr26.elvis import read_official_h5, write_official_h5

    rng = np.random.default_rng(3)
    feats = [
        LocalFeatures(rng.normal(size=(n, 8)), rng.uniform(0, 50, (n, 2)), rng.uniform(size=n))
        for n in (5, 9)
    ]
    path = tmp_path / "desc.h5"
    write_official_h5(path, feats, k=12)
    back = read_official_h5(path)
    assert [len(f) for f in back] == [5, 9]
    for a, b in zip(feats, back, strict=True):
        np.testing.assert_allclose(a.desc, b.desc, atol=1e-6)
        np.testing.assert_allclose(a.xy, b.xy, atol=1e-5)
    with pytest.raises(ValueError, match="no dataset"):
        read_official_h5(path, dataset="nope")


def test_gem_warmup_cosine_and_temperature_calibration():
    from iclr26.elvis import calibrate_temperature, gem, warmup_cosine

    x = np.abs(np.random.default_rng(0).normal(size=(10, 4)))
    mean = x.mean(0)
    np.testing.assert_allclose(gem(x, p=1.0), mean / np.linalg.norm(mean), atol=1e-6)
    assert warmup_cosine(0, 100, 0.1) == pytest.approx(0.1)
    assert warmup_cosine(10, 100, 0.1) == pytest.approx(1.0)
    assert warmup_cosine(55, 100, 0.1) == pytest.approx(0.5)
    pairs = [(p[0], p[1]) for p in _synthetic_pairs(6, 1) if p[2] == 1]
    model = ELViS(16, model_dim=16).init_untrained_()
    taus = [calibrate_temperature(model, pairs, target=t) for t in (0.2, 0.5, 0.8)]
    assert taus == sorted(taus)
    assert float(model.temperature) == pytest.approx(10.0)  # restored


def test_ames_check_uses_kept_gain_and_flags_a_peer_that_did_not_learn():
    from iclr26.elvis.experiments import _main_checks
    from iclr26.shared import Report

    def rows(ames_in, ames_ood):
        base = {"gap (in − out)": 0.0, "ms/pair": 1.0, "params": 10}
        table = {
            "global VLAD": (60.0, 50.0),
            "MNN count": (55.0, 45.0),
            "untrained OT + vote": (70.0, 55.0),
            "ELViS": (80.0, 60.0),  # gains 20 in domain, keeps 10 of it: fraction 0.5
            "AMES-lite": (ames_in, ames_ood),
        }
        out = []
        for name, (i, o) in table.items():
            r = {"method": name, "in-domain mAP": i, "out-of-domain mAP": o, **base}
            if name == "AMES-lite":
                r["params"], r["ms/pair"] = 100, 5.0
            out.append(r)
        return out

    def ames_check(ames_in, ames_ood, loss_a):
        report = Report("p", "reproduce", "claim", seed=0)
        _main_checks(report, rows(ames_in, ames_ood), 0.3, loss_a)
        (check,) = [c for c in report.checks if "AMES-lite (higher" in c.name]
        return check

    # AMES-lite learned (+10 in domain) but kept only 0.2 of it out of domain: ELViS holds up,
    # although its raw in − out gap (20) is larger than AMES-lite's (18)
    c = ames_check(70.0, 52.0, 0.4)
    assert c.held
    assert "fraction kept 0.50 vs 0.20" in c.detail
    # AMES-lite keeps more of its gain: does not hold
    assert not ames_check(70.0, 59.5, 0.4).held
    # AMES-lite at ln 2 or no better than global in domain: reported as not meaningful
    for ames_in, loss_a in ((70.0, 0.69), (60.5, 0.4)):
        c = ames_check(ames_in, 40.0, loss_a)
        assert not c.held
        assert c.detail.startswith("NOT MEANINGFUL")
