import json

import numpy as np
import pytest

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
    assert main(["compute", "--pass-a", str(tmp_path / "missing.jsonl"), "--pass-b", str(b)]) == 2


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
