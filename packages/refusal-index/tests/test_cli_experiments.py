import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from iclr26.refusal_index import LatentPropensityModel, refusal_index_paired
from iclr26.refusal_index.cli import main
from iclr26.refusal_index.experiments import THRESHOLD_METRICS, e1_rate_sweep, e2_zoo_ranking


def write_passes(tmp_path, sample):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text(
        "".join(
            json.dumps({"id": i, "correct": bool(not w)}) + "\n"
            for i, w in enumerate(sample.forced_wrong)
        )
    )
    b.write_text(
        "".join(
            json.dumps({"id": i, "refused": bool(r)} | ({} if r else {"correct": bool(not w)}))
            + "\n"
            for i, (r, w) in enumerate(zip(sample.refused, sample.forced_wrong, strict=True))
        )
    )
    return a, b


def test_compute_from_pass_files(tmp_path, capsys):
    s = LatentPropensityModel(500, 0.6, 0.4, seed=0).sample(0.3, np.random.default_rng(0))
    a, b = write_passes(tmp_path, s)
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b), "--n-boot", "200"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = refusal_index_paired(s.refused, ~s.forced_wrong, n_boot=200)
    assert out["ri"] == pytest.approx(expected.ri)
    assert out["ci"] == pytest.approx(list(expected.ci))
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b), "--rates-only"]) == 0
    assert json.loads(capsys.readouterr().out)["ri"] == pytest.approx(expected.ri, abs=1e-12)


def test_compute_reports_bad_files_clearly(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    a.write_text('{"id": 1, "correct": true}\nnot json\n')
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(a)]) == 2
    assert "a.jsonl:2: not valid JSON" in capsys.readouterr().err
    a.write_text('{"id": 1, "correct": "yes"}\n')
    b = tmp_path / "b.jsonl"
    b.write_text('{"id": 1, "refused": true}\n')
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b)]) == 2
    assert "needs a boolean 'correct'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["compute", "--pass-a", str(tmp_path / "missing.jsonl"), "--pass-b", str(b)])
    assert exit_.value.code == 2
    assert "--pass-a" in capsys.readouterr().err


def test_compute_refuses_duplicated_ids_and_counts_them(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"id": i % 3, "correct": True}) + "\n" for i in range(5)))
    b.write_text(
        "".join(json.dumps({"id": i, "refused": False, "correct": True}) + "\n" for i in range(3))
    )
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b)]) == 2
    err = capsys.readouterr().err
    assert "a.jsonl: 2 ids appear more than once (2 extra records)" in err
    assert len(err.strip().splitlines()) == 1


def test_compute_unmatched_ids_warn_with_counts_or_fail_above_the_limit(tmp_path, capsys):
    s = LatentPropensityModel(200, 0.6, 0.4, seed=0).sample(0.3, np.random.default_rng(0))
    a, b = write_passes(tmp_path, s)
    lines = a.read_text().splitlines()
    a.write_text("\n".join(lines[:196]) + "\n")  # 4 of 200 ids only in pass B: 2 %
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b), "--n-boot", "50"]) == 0
    captured = capsys.readouterr()
    assert (
        "4 of 200 ids (2.0%) are in only one pass file (0 only in --pass-a, 4 only in --pass-b)"
        in captured.err
    )
    assert json.loads(captured.out)["only_in_pass_b"] == 4
    a.write_text("\n".join(lines[:100]) + "\n")  # half unmatched
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b)]) == 2
    assert "above --max-unmatched 0.05" in capsys.readouterr().err


def test_compute_prints_null_never_nan(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({"id": i, "correct": i % 2 == 0}) + "\n" for i in range(8)))
    b.write_text(
        "".join(
            json.dumps({"id": i, "refused": False, "correct": i % 2 == 0}) + "\n" for i in range(8)
        )
    )
    assert main(["compute", "--pass-a", str(a), "--pass-b", str(b)]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text
    out = json.loads(text)
    assert out["ri"] is None
    assert "refusal rate is 0" in out["reason"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [(["compute", "--pass-a", "x", "--pass-b", "y", "--seed", "-1"], "argument --seed"),
     (["compute", "--pass-a", "x", "--pass-b", "y", "--n-boot", "abc"], "argument --n-boot"),
     (["compute", "--pass-a", "x", "--pass-b", "y", "--max-unmatched", "1.5"], "argument --max-unmatched"),
     (["eval", "--base-url", "u", "--model", "m", "--log", "l", "--samples", "0"], "argument --samples"),
     (["eval", "--base-url", "u", "--model", "m", "--log", "l", "--strength", "4"], "argument --strength"),
     (["eval", "--base-url", "u", "--model", "m", "--log", "l", "--concurrency", "0"], "argument --concurrency"),
     (["eval", "--base-url", "u", "--model", "m", "--log", "l", "--timeout", "0"], "argument --timeout"),
     (["eval", "--base-url", "u", "--model", "m", "--log", "l", "--items", "nope.jsonl"], "nope.jsonl does not exist")],
)  # fmt: skip
def test_argument_errors_name_the_option(tmp_path, monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text('{"id": 1, "correct": true}\n')
    (tmp_path / "y").write_text('{"id": 1, "refused": true}\n')
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert fragment in capsys.readouterr().err


def test_headline_claim_at_tiny_scale():
    rows = e1_rate_sweep((0.3, 0.7), 10_000, 2, seed=0)
    for rho in (0.3, 0.7):
        sub = [r for r in rows if r["rho"] == rho]
        ri = [r["ri"] for r in sub]
        assert max(abs(x - sub[0]["true_ri"]) for x in ri) < 0.06
        assert max(ri) - min(ri) < 0.08
        assert all(
            max(r[m] for r in sub) - min(r[m] for r in sub) > max(ri) - min(ri)
            for m in ("refusal_recall", "refusal_f1")
        )
    ranking, _ = e2_zoo_ranking(300, seed=0)
    by = {r["metric"]: r for r in ranking}
    assert by["ri"]["kendall_tau_across_strengths"] > max(
        by[m]["kendall_tau_across_strengths"] for m in ("refusal_recall", "refusal_f1")
    )
    assert abs(by["ri"]["spearman_with_accuracy"]) < abs(by["simpleqa_f"]["spearman_with_accuracy"])
    assert set(THRESHOLD_METRICS) <= set(by)


@pytest.mark.slow
def test_reproduce_quick_writes_report(tmp_path):
    assert main(["reproduce", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert len(data["checks"]) == 6
    assert (tmp_path / "e1_rate_sweep.png").exists()


def test_ksample_rows_report_cost_and_shrinking_bias():
    from iclr26.refusal_index.experiments import KS, KSAMPLE_RATES, _ksample_rows

    rng = np.random.default_rng(0)
    model = LatentPropensityModel(400, 0.6, 0.4, noise_refusal=0.5, noise_error=0.5, seed=3)
    e = model.error_probs()
    cases = []
    for q in KSAMPLE_RATES:
        r = model.refusal_probs(q)
        cases.append((r, e, float(spearmanr(r, e).statistic)))

    def draw(k, r, e):
        return rng.random((k, r.size)) < r, rng.random((k, e.size)) < e

    rows = {row["estimator"]: row for row in _ksample_rows("sim", cases, draw, 4, 2, 50, 0)}
    assert rows["two-pass (paired)"]["calls per question"] == 2
    assert [rows[f"K-sample K={k}"]["calls per question"] for k in KS] == [2 * k for k in KS]
    bias = [rows[f"K-sample K={k}"]["bias"] for k in KS]
    assert all(b < 0 for b in bias)  # finite K attenuates towards 0
    assert bias == sorted(bias)  # and less so as K grows
    sd = [rows[f"K-sample K={k}"]["sd"] for k in KS]
    assert sd[-1] < sd[0]
