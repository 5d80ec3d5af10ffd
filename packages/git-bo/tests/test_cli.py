"""The command line: fast torch-free help, parse-time errors, optimize with a resumable
history, a user objective by import path, train-pfn."""

import json
import subprocess
import sys

import pytest

from iclr26.git_bo.cli import main


def test_help_and_version_do_not_import_torch():
    code = (
        "import sys\n"
        "from iclr26.git_bo.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in ('torch', 'botorch', 'numpy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "optimize" in out.stdout
    assert "train-pfn" in out.stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["optimize", "--problem", "ackley", "--dim", "0", "--budget", "5"], "--dim"),
        (["optimize", "--problem", "ackley", "--dim", "5", "--budget", "x"], "--budget"),
        (["optimize", "--problem", "sphere", "--dim", "5", "--budget", "5"], "--problem"),
        (
            ["optimize", "--problem", "ackley", "--dim", "5", "--budget", "5", "--scale", "0"],
            "--scale",
        ),
        (
            ["optimize", "--objective", "m:f", "--bounds", "missing.json", "--budget", "5"],
            "--bounds",
        ),
        (["optimize", "--dim", "5", "--budget", "5"], "--objective"),
        (["train-pfn", "--out", "x.safetensors", "--steps", "-1"], "--steps"),
        (["reproduce", "--seed", "-3"], "--seed"),
    ],
)
def test_parse_errors_name_the_option(argv, needle, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


def test_user_errors_are_one_line(tmp_path, capsys):
    assert (
        main(["optimize", "--problem", "ackley", "--dim", "3", "--d-eff", "5", "--budget", "5"])
        == 2
    )
    assert main(["optimize", "--objective", "nomodule", "--dim", "3", "--budget", "5"]) == 2
    assert main(["optimize", "--objective", "math:fsum", "--dim", "3", "--lower", "1",
                 "--upper", "0", "--budget", "5"]) == 2  # fmt: skip
    assert main(["optimize", "--problem", "ackley", "--dim", "4", "--budget", "5",
                 "--surrogate", "tabpfn"]) == 2  # fmt: skip
    folder = tmp_path / "d"
    folder.mkdir()
    assert main(["optimize", "--problem", "ackley", "--dim", "4", "--budget", "5",
                 "--history", str(folder)]) == 2  # fmt: skip
    existing = tmp_path / "file.txt"
    existing.write_text("x")
    assert main(["reproduce", "--quick", "--out", str(existing)]) == 2  # before any work
    assert main(["optimize", "--problem", "rover", "--dim", "9", "--budget", "5"]) == 2
    assert main(["optimize", "--problem", "lasso-simple", "--dim", "50", "--budget", "5"]) == 2
    assert main(["optimize", "--problem", "svm-digits", "--dim", "60", "--budget", "5"]) == 2
    assert main(["optimize", "--problem", "mujoco-hopper", "--dim", "30", "--budget", "5"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("iclr26-git-bo: error")]
    assert len(lines) == 10
    assert "mujoco-hopper has D = 33" in err
    assert "svm-digits has D = 66" in err
    assert "lasso-simple has D = 60" in err
    assert "rover needs an even D" in err
    assert "Traceback" not in err


def test_optimize_user_objective_with_resumable_history(tmp_path, monkeypatch, capsys):
    (tmp_path / "myobj.py").write_text(
        "import numpy as np\n\ndef sphere(x):\n    return float(np.sum((np.asarray(x) - 0.3) ** 2))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    hist, res = tmp_path / "run" / "h.jsonl", tmp_path / "best.json"
    args = ["optimize", "--objective", "myobj:sphere", "--dim", "6", "--lower", "-1", "--upper",
            "1", "--surrogate", "rff", "--n-init", "5", "--n-candidates", "200", "--origin",
            "best", "--history", str(hist), "--result", str(res), "--no-progress"]  # fmt: skip
    assert main([*args, "--budget", "8"]) == 0
    assert len(hist.read_text().splitlines()) == 1 + 8
    assert main([*args, "--budget", "12"]) == 0
    assert len(hist.read_text().splitlines()) == 1 + 12
    best = json.loads(res.read_text())
    assert best["n_evals"] == 12
    assert best["surrogate"] == "rff"
    assert len(best["best_x"]) == 6
    assert "best value" in capsys.readouterr().out


def test_train_pfn_writes_a_loadable_checkpoint(tmp_path):
    out = tmp_path / "p.safetensors"
    assert main(["train-pfn", "--out", str(out), "--steps", "2", "--batch", "2", "--n-points",
                 "16", "--max-dim", "8", "--no-progress"]) == 0  # fmt: skip
    from iclr26.git_bo import load_pfn

    assert load_pfn(out).max_dim == 8
    assert main(["train-pfn", "--out", str(tmp_path), "--steps", "1"]) == 2  # a folder


def test_optimize_rover(tmp_path, capsys):
    res = tmp_path / "best.json"
    args = ["optimize", "--problem", "rover", "--dim", "8", "--surrogate", "rff", "--n-init",
            "6", "--n-candidates", "100", "--budget", "8", "--result", str(res), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    best = json.loads(res.read_text())
    assert best["n_evals"] == 8
    assert len(best["best_x"]) == 8


def test_optimize_lasso_synthetic(tmp_path):
    res = tmp_path / "best.json"
    args = ["optimize", "--problem", "lasso-simple", "--surrogate", "pfn", "--n-init", "4",
            "--n-candidates", "100", "--budget", "6", "--result", str(res), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    best = json.loads(res.read_text())
    assert best["n_evals"] == 6
    assert best["surrogate"] == "pfn"
    assert len(best["best_x"]) == 60
    assert all(-1 <= v <= 1 for v in best["best_x"])


def test_optimize_mujoco_policy(tmp_path):
    pytest.importorskip("gymnasium")
    res = tmp_path / "best.json"
    args = ["optimize", "--problem", "mujoco-hopper", "--surrogate", "rff", "--n-init", "4",
            "--n-candidates", "100", "--budget", "6", "--result", str(res), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    best = json.loads(res.read_text())
    assert best["n_evals"] == 6
    assert len(best["best_x"]) == 33
    assert all(-1 <= v <= 1 for v in best["best_x"])


def test_train_pfn_continues_a_checkpoint(tmp_path):
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    base = ["--steps", "2", "--batch", "2", "--n-points", "16", "--no-progress"]
    assert main(["train-pfn", "--out", str(first), "--max-dim", "8", *base]) == 0
    assert (
        main(["train-pfn", "--out", str(second), "--init", str(first), "--seed", "1", *base]) == 0
    )
    import torch

    from iclr26.git_bo import load_pfn

    a, b = load_pfn(first), load_pfn(second)
    assert b.max_dim == 8  # the sizes of --init are kept
    assert not torch.equal(a.head.weight, b.head.weight)  # and it was trained further
    with pytest.raises(SystemExit) as info:  # refused at parse time
        main(["train-pfn", "--out", str(second), "--init", str(tmp_path / "no")])
    assert info.value.code == 2
