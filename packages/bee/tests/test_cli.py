"""The command line: fast torch-free --help, ``discover`` end to end, one-line errors."""

import csv
import subprocess
import sys

import numpy as np
import pytest

from iclr26.bee import make_geometric
from iclr26.bee.cli import main


def test_help_and_version_do_not_import_torch():
    code = (
        "import sys\n"
        "from iclr26.bee.cli import main\n"
        "for a in (['--help'], ['--version'], ['discover', '--help']):\n"
        "    try:\n"
        "        main(a)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'sklearn' not in sys.modules, 'sklearn imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "discover" in out.stdout


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("disc")
    t = make_geometric(1200, 4, 4, rho=0.95, n_nuisance=30, seed=0)
    np.save(d / "X.npy", t.train.X)
    np.savetxt(d / "y.txt", t.train.y, fmt="%d")
    np.save(d / "groups.npy", t.train.a)
    (d / "vocab.txt").write_text("\n".join(t.concepts) + "\n")
    np.save(d / "E.npy", t.concept_emb)
    np.save(d / "A.npy", t.anchors)
    return d, t


def _base(d, **over):
    args = {"--embeddings": d / "X.npy", "--labels": d / "y.txt", "--vocab": d / "vocab.txt",
            "--class-names": "class_0,class_1", "--encoder": "precomputed",
            "--concept-embeddings": d / "E.npy", "--anchor-embeddings": d / "A.npy",
            "--n-null": "6", "--out": d / "out"}  # fmt: skip
    args.update(over)
    argv = ["discover"]
    for k, v in args.items():
        if v is not None:
            argv += [k, str(v)]
    return argv


def test_discover_end_to_end_finds_planted(files, capsys):
    d, _ = files
    argv = _base(d, **{"--null": "groups", "--groups": d / "groups.npy"})
    assert main(argv) == 0
    rows = list(csv.DictReader((d / "out" / "concepts.csv").open()))
    assert (d / "out" / "scores.png").stat().st_size > 1000
    for c in (0, 1):
        drift = [r for r in rows if r["class"] == f"class_{c}" and r["mode"] == "drift"]
        top = [r["concept"] for r in drift[:3]]
        assert any(k.startswith(f"planted_{c}") for k in top)
        best = next(r for r in drift if r["concept"] == f"planted_{c}")
        assert float(best["z"]) > 2
    assert "drift top-5" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("labels_rows", "rows"),
        ("single_class", "single class"),
        ("nan", "NaN"),
        ("empty_vocab", "holds no concepts"),
        ("all_filtered", "removed by the class-term filter"),
        ("dim", "dimension"),
        ("one_name", "at least 2"),
        ("out_is_file", "existing file"),
        ("groups_missing", "--groups"),
    ],
)
def test_discover_errors_are_one_line_exit_2(files, tmp_path, capsys, case, message):
    d, t = files
    over = {}
    if case == "labels_rows":
        np.savetxt(tmp_path / "y.txt", t.train.y[:-5], fmt="%d")
        over["--labels"] = tmp_path / "y.txt"
    elif case == "single_class":
        np.savetxt(tmp_path / "y.txt", 0 * t.train.y, fmt="%d")
        over["--labels"] = tmp_path / "y.txt"
    elif case == "nan":
        X = t.train.X.copy()
        X[0, 0] = np.nan
        np.save(tmp_path / "X.npy", X)
        over["--embeddings"] = tmp_path / "X.npy"
    elif case == "empty_vocab":
        (tmp_path / "v.txt").write_text("\n\n")
        over["--vocab"] = tmp_path / "v.txt"
    elif case == "all_filtered":
        (tmp_path / "v.txt").write_text("class_0\nthe class_1\n")
        np.save(tmp_path / "E.npy", t.concept_emb[:2])
        over["--vocab"] = tmp_path / "v.txt"
        over["--concept-embeddings"] = tmp_path / "E.npy"
    elif case == "dim":
        np.save(tmp_path / "E.npy", t.concept_emb[:, :10])
        over["--concept-embeddings"] = tmp_path / "E.npy"
    elif case == "one_name":
        over["--class-names"] = "class_0"
    elif case == "out_is_file":
        (tmp_path / "f").write_text("x")
        over["--out"] = tmp_path / "f"
    elif case == "groups_missing":
        over["--null"] = "groups"
    assert main(_base(d, **over)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--n-null", "0"],
        ["--n-null", "2.5"],
        ["--val-fraction", "1.5"],
        ["--seed", "-1"],
        ["--labels", "/nonexistent/y.txt"],
    ],
)
def test_discover_bad_arguments_fail_at_parse_time(files, capsys, argv):
    d, _ = files
    with pytest.raises(SystemExit) as exc:
        main(_base(d) + argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err
