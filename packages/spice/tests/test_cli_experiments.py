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
    with pytest.raises(SystemExit):  # neither --k nor --budget: a parse error
        main(["select", str(path)])


def _one_line_error(capsys, argv, *needles):
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse: exit 2 with a usage line
        code = stop.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    last = err.splitlines()[-1]
    assert "Traceback" not in err
    for needle in needles:
        assert needle in last, last
    return last


def test_select_refuses_bad_files_in_one_line(tmp_path, capsys):
    text = tmp_path / "grads.csv"
    text.write_text("1,2\n3,4\n")
    line = _one_line_error(capsys, ["select", str(text), "--k", "1"], str(text), "not a NumPy .npy")
    assert "pickle" not in line.lower()
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    line = _one_line_error(capsys, ["select", str(objects), "--k", "1"], str(objects))
    assert "pickle" not in line.lower()
    npz = tmp_path / "g.npz"
    np.savez(npz, G=np.ones((3, 2)))
    _one_line_error(capsys, ["select", str(npz), "--k", "1"], str(npz), ".npz")
    truncated = tmp_path / "cut.npy"
    np.save(truncated, np.ones((50, 4)))
    truncated.write_bytes(truncated.read_bytes()[:200])
    _one_line_error(capsys, ["select", str(truncated), "--k", "1"], str(truncated))
    for name, array, needle in (
        ("nan.npy", np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN"),
        ("vec.npy", np.ones(4), "shape (4,)"),
        ("empty.npy", np.ones((0, 3)), "empty"),
        ("bool.npy", np.ones((3, 2), dtype=bool), "bool"),
    ):
        np.save(tmp_path / name, array)
        _one_line_error(capsys, ["select", str(tmp_path / name), "--k", "1"], name, needle)
    _one_line_error(capsys, ["select", str(tmp_path / "missing.npy"), "--k", "1"], "does not exist")
    _one_line_error(capsys, ["select", str(tmp_path), "--k", "1"], "is a folder")


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["--budget", "1.5"], "--budget"), (["--budget", "0"], "--budget"), (["--budget", "nan"], "--budget"),
     (["--k", "0"], "--k"), (["--k", "2.5"], "--k"), (["--k", "abc"], "--k"), (["--k", "2", "--budget", "0.5"], "--budget"),
     (["--k", "2", "--alpha", "0"], "--alpha"), (["--k", "2", "--alpha", "inf"], "--alpha"),
     (["--k", "2", "--conflict-penalty", "-1"], "--conflict-penalty"),
     (["--k", "2", "--halflife", "1.5"], "--halflife"), (["--k", "2", "--mode", "fast"], "--mode")],
)  # fmt: skip
def test_select_rejects_bad_options_at_parse_time(tmp_path, capsys, args, needle):
    path = tmp_path / "g.npy"
    np.save(path, np.ones((5, 3)))
    _one_line_error(capsys, ["select", str(path), *args], needle)


def test_select_output_checked_before_work(tmp_path, capsys):
    path = tmp_path / "g.npy"
    np.save(path, np.random.default_rng(0).normal(size=(6, 3)))
    _one_line_error(
        capsys, ["select", str(path), "--k", "2", "--out", str(tmp_path)], "--out", "folder"
    )
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(
        capsys, ["select", str(path), "--k", "2", "--out", str(blocker / "s.json")], "--out"
    )
    nested = tmp_path / "new" / "deeper" / "s.json"  # parents are created
    assert main(["select", str(path), "--k", "2", "--out", str(nested)]) == 0
    assert json.loads(nested.read_text())["indices"]


def test_help_and_errors_are_fast_and_do_not_import_torch():
    import subprocess
    import sys
    import time

    code = (
        "import sys\n"
        "from iclr26.spice.cli import main\n"
        "for argv in (['--help'], ['select', '--help'], ['select', 'nope.npy', '--k', '1']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules)\n"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
    assert (
        time.perf_counter() - start < 5
    )  # generous on a busy machine; the workspace test asks < 1 s


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
