"""The command line as a user drives it, and a tiny-scale version of the headline claims."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from iclr26.analytica import (
    LoopbackChatServer,
    Proof,
    PropositionTree,
    SimulatedLLM,
    make_spr_world,
)
from iclr26.analytica.cli import main
from iclr26.analytica.experiments import _e1_depth, _engine_agrees


def test_help_and_version_are_fast_and_light():
    code = (
        "import sys, time; t = time.perf_counter(); from iclr26.analytica.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'jax', 'pandas', 'scipy', 'httpx', 'matplotlib') if m in sys.modules))"
    )
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert "iclr26-analytica" in out.stdout
    assert time.perf_counter() - start < 20  # generous: shared 2-core machine


@pytest.mark.parametrize(
    "argv",
    [
        ["reproduce", "--seed", "-1"],
        ["analyze", "x", "--base-url", "ftp://a", "--model", "m"],
        ["analyze", "x", "--base-url", "http://a", "--model", "m", "--max-leaves", "0"],
        ["analyze", "x", "--base-url", "http://a", "--model", "m", "--concurrency", "1.5"],
        ["render", "no-such-file.json"],
        ["whatif", "no-such-file.json", "--set", "P1=0.5"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("iclr26-analytica")
    assert "error" in err[-1]


def proven_tree_file(tmp_path):
    w = make_spr_world(1, depth=2, branching=2, seed=0)
    t = w.question_tree(0)
    for node in w.tree:
        if node.children:
            t.get(node.pid).synthesis = node.synthesis
    for j, pid in enumerate(t.leaves()):
        t.get(pid).proof = Proof(float(w.leaf_truth[0, j]))
    from iclr26.analytica import recompute

    for pid, v in recompute(t).items():
        t.get(pid).proof = Proof(v)
    path = tmp_path / "tree.json"
    path.write_text(t.to_json())
    return path, t


def test_render_and_whatif_commands(tmp_path, capsys):
    path, _tree = proven_tree_file(tmp_path)
    assert main(["render", str(path), "--png", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert "P1.2" in capsys.readouterr().out
    assert main(["whatif", str(path), "--set", "P1.1=0.9"]) == 0
    out = capsys.readouterr().out
    assert "P0:" in out
    assert "P1:" in out
    assert main(["whatif", str(path), "--set", "P7=0.2"]) == 2
    assert "no proposition 'P7'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["whatif", str(path), "--set", "P1.1=2"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"nodes": [{"pid": "P0", "sentence": "a", "children": ["P1"]}]}')
    assert main(["render", str(bad)]) == 2
    assert "dangling" in capsys.readouterr().err


def test_analyze_against_a_loopback_server(tmp_path, capsys):
    template = {
        "sentence": "r",
        "children": [{"sentence": "Rates fall"}, {"sentence": "Jobs grow"}],
    }
    llm = SimulatedLLM({"Rates fall": 0.8, "Jobs grow": 0.4}, template=template)
    with LoopbackChatServer(llm) as server:
        code = main(
            [
                "analyze",
                "The economy expands",
                "--base-url",
                server.url,
                "--model",
                "sim",
                "--date",
                "2024-01-01",
                "--out",
                str(tmp_path / "run"),
            ]
        )
    assert code == 0
    tree = PropositionTree.from_json((tmp_path / "run" / "tree.json").read_text())
    assert tree.root.p_true == pytest.approx(0.6)
    assert (tmp_path / "run" / "tree.png").exists()
    assert len((tmp_path / "run" / "ledger.jsonl").read_text().splitlines()) >= 4
    assert "P0 [0.600]" in capsys.readouterr().out


def test_analyze_unreachable_server_is_one_line(tmp_path, capsys):
    code = main(
        [
            "analyze",
            "x",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--timeout",
            "1",
            "--max-retries",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    assert "no usable reply" in capsys.readouterr().err


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert (
        main(
            ["analyze", "x", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(f)]
        )
        == 2
    )
    assert "expected a folder" in capsys.readouterr().err


def test_tiny_headline_tree_beats_holistic_in_variance_and_error():
    world = make_spr_world(60, depth=2, branching=3, truth_range=(0.05, 0.95), seed=5)
    res = _e1_depth(world, runs=6, bias_sd=0.1, noise_sd=0.15, seed=5)
    tree, van, sc10 = res["analytica-linear"], res["vanilla"], res["self-consistency K=10"]
    assert tree["std_across_runs"] < 0.6 * van["std_across_runs"]
    assert tree["rmse_to_truth"] < van["rmse_to_truth"]
    assert tree["rmse_to_truth"] < sc10["rmse_to_truth"]  # bias does not average out over repeats
    assert tree["calls"] == 13
    assert van["calls"] == 1
    # with one shared bias the advantage over self-consistency disappears (honest limit)
    shared = _e1_depth(world, runs=6, bias_sd=0.1, noise_sd=0.15, seed=5, correlation=1.0)
    assert shared["analytica-linear"]["rmse_to_truth"] > tree["rmse_to_truth"]


def test_engine_and_batched_paths_agree():
    worst, counts_ok = _engine_agrees(
        make_spr_world(2, depth=2, branching=3, seed=1), noise_sd=0.1, seed=1, questions=2
    )
    assert worst < 1e-12
    assert counts_ok
    assert np.isfinite(worst)


@pytest.mark.slow
def test_reproduce_quick_runs_and_writes_a_report(tmp_path):
    assert main(["reproduce", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["held"] is True
    assert (tmp_path / "variance.png").exists()
    assert (tmp_path / "tree.png").exists()
