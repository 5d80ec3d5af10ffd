import json

import numpy as np
import pytest

from iclr26.spice import greedy_logdet, spice
from iclr26.spice.cli import main
from iclr26.spice.data import TASK_FAMILIES, load_digits_split, make_instruction_suite
from iclr26.spice.experiments import e1_static_pool


def test_select_command(tmp_path, capsys):
    G = np.random.default_rng(0).normal(size=(30, 5))
    path = tmp_path / "g.npy"
    np.save(path, G)
    assert main(["select", str(path), "--k", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["indices"] == spice(G, 4).indices.tolist()
    assert (
        main(
            [
                "select",
                str(path),
                "--budget",
                "0.2",
                "--selector",
                "greedy",
                "--out",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    assert (
        json.loads((tmp_path / "s.json").read_text())["indices"]
        == greedy_logdet(G, 6).indices.tolist()
    )
    assert main(["select", str(path), "--k", "40"]) == 2
    assert "larger than the pool" in capsys.readouterr().err
    assert main(["select", str(path)]) == 2


def test_data_generators():
    d = load_digits_split(label_noise=0.2, seed=0)
    assert d.X_train.shape[1] == 64
    assert 0.15 < d.noisy.mean() < 0.25
    clean = load_digits_split(seed=0)
    assert (clean.y_train[d.noisy] != d.y_train[d.noisy]).all()
    suite = make_instruction_suite(400, corruption=0.25, seed=1)
    assert set(np.unique(suite.families)) == set(range(len(TASK_FAMILIES)))
    ok = ~suite.corrupted
    i = int(np.flatnonzero(ok & (suite.families == list(TASK_FAMILIES).index("add")))[0])
    a, b = (int(v) for v in suite.instructions[i].split()[1:])
    assert suite.responses[i] == str(a + b)


def test_information_claim_at_tiny_scale():
    rows, sels = e1_static_pool(0)
    by = {r["selector"]: r["F(S) exact"] for r in rows}
    assert (
        by["greedy exact (FisherSFT-style)"]
        >= max(v for k, v in by.items() if "exact" not in k) - 1e-9
    )
    assert by["SPICE exact, raw λ=0.1"] > by["top-k (official default)"]
    assert by["SPICE exact, raw λ=0.1"] > by["random"]
    assert (sels["greedy exact (FisherSFT-style)"].eps <= 1e-9).all()


@pytest.mark.slow
def test_reproduce_quick_writes_report(tmp_path):
    assert main(["reproduce", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["checks"]
    assert (tmp_path / "e1_gain_trajectories.png").exists()
