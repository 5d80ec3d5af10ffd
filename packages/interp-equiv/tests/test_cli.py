"""The command line: compare two folders; careless-user errors exit 2 with one line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from iclr26.interp_equiv.cli import main


def _groups(tmp_path):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((150, 3))
    g1, g2 = tmp_path / "g1", tmp_path / "g2"
    g1.mkdir()
    g2.mkdir()
    for i in range(3):
        np.save(
            g1 / f"a{i}.npy", z @ rng.standard_normal((3, 8)) + 0.05 * rng.standard_normal((150, 8))
        )
        np.save(
            g2 / f"b{i}.npy", z @ rng.standard_normal((3, 8)) + 0.05 * rng.standard_normal((150, 8))
        )
    return g1, g2


def test_compare_two_folders(tmp_path, capsys):
    g1, g2 = _groups(tmp_path)
    assert main(["compare", str(g1), str(g2), "--n-boot", "10"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["equivalent"] is True
    assert out["group1"] == ["a0", "a1", "a2"]
    assert main(["compare", str(g1), str(g2), "--method", "permutation", "--measure", "cka"]) == 0


def test_careless_user(tmp_path, capsys):
    g1, _ = _groups(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["compare", str(g1), str(empty)]) == 2
    assert "holds no .npy" in capsys.readouterr().err
    for argv, msg in [
        (["compare", str(g1), str(tmp_path / "nope")], "no such folder"),
        (["compare", str(g1), str(g1), "--n-boot", "0"], "--n-boot"),
        (["compare", str(g1), str(g1), "--measure", "euclid"], "invalid choice"),
        (["reproduce", "--seed", "-3"], "--seed"),
        (["compare", str(g1), str(g1), "--margin", "nan"], "--margin"),
        (["speed", "--rounds", "0"], "--rounds"),
        (["speed", "--seed", "x"], "--seed"),
        (["speed", "--kernels", "cka,svd"], "--kernels"),
        (["speed", "--kernels", ","], "--kernels"),
    ]:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert msg in capsys.readouterr().err


def test_help_does_not_import_torch():
    code = "import sys; from iclr26.interp_equiv.cli import main; import iclr26.interp_equiv.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_compare_reports_models_that_fail_the_gate_as_not_comparable(tmp_path, capsys):
    import torch

    from iclr26.interp_equiv import ModSum, Site, TinyMLP, save_implementation, train_implementation

    task = ModSum(3, 4)
    for group in ("g1", "g2"):
        (tmp_path / group).mkdir()
        for i in range(2):
            torch.manual_seed(i)
            impl = train_implementation(
                task, "total", TinyMLP(3, 4, (16, 16), 3), {"total": Site("hidden.0")}, steps=0
            )
            save_implementation(impl, tmp_path / group / f"m{i}.safetensors")
    code = main(["compare", str(tmp_path / "g1"), str(tmp_path / "g2"), "--n-probe", "50"])
    out = capsys.readouterr().out
    assert code == 1
    assert "m0.safetensors: not comparable (accuracy" in out
    assert '"comparable": false' in out


def test_speed_kernel_names_match_the_experiments():
    from iclr26.interp_equiv import cli, experiments

    assert cli._SPEED_KERNELS == experiments.SPEED_KERNELS
    with pytest.raises(ValueError, match="kernels"):
        experiments.speed_rows(kernels=("svd",))
