"""bench's FSCIL section: every method's accuracy and energy rows, the ANN twin included, with a
stand-in for E1 whose results are known (the LIF timing part runs for real, at its quick size,
so the test is slow)."""

import pytest


@pytest.mark.slow
def test_bench_prints_fscil_accuracy_and_energy_tables_for_every_method(monkeypatch, tmp_path):
    from iclr26.safa_snn import experiments
    from iclr26.safa_snn.fscil import FSCILResult

    seen = []

    def fake_e1(seed, *, epochs, progress=False):
        seen.append((seed, epochs))
        results = [
            FSCILResult(
                method=name,
                acc=[0.9, 0.5 + 0.1 * k],
                base_acc=[0.9, 0.6],
                novel_acc=[0.0, 0.4],
                hmean=[0.0, 0.48],
                inference_energy=[1e-9 * (k + 1)] * 2,
                sops=[100.0 * k] * 2,
                session_energy=[0.0, 1e-6 * (k + 1)],
                thresholds=[1.0, 1.0],
            )
            for k, name in enumerate(["SAFA (α=0.1)", "prototype", experiments.ANN_TWIN])
        ]
        return results, {"ann_twin_J": 2e-9, "snn_J": 3e-9}

    monkeypatch.setattr(experiments, "e1_digits", fake_e1)
    report = experiments.bench(quick=True, seed=3, progress=False)
    assert seen == [(3, 15), (4, 15)]
    tables = {t.title: t for t in report.tables}
    acc = next(t for n, t in tables.items() if n.startswith("E1 digits FSCIL accuracy"))
    assert [r["method"] for r in acc.rows] == ["SAFA (α=0.1)", "prototype", experiments.ANN_TWIN]
    assert acc.rows[2]["last session"].startswith("0.700")
    energy = next(t for n, t in tables.items() if n.startswith("E1 energy"))
    assert energy.rows[0]["inference nJ/sample (last)"] == "1.00"
    assert energy.rows[-1]["inference nJ/sample (s0)"] == "2.00"  # the analytic twin row
    assert report.config["fscil"] == {"experiment": "E1", "seeds": 2, "base_epochs": 15}
    report.write(tmp_path)
    assert (tmp_path / "report.md").read_text().count("ANN twin") >= 2
