import json

import numpy as np
import pytest

from iclr26.safa_snn.cli import main


def test_fscil_command_on_npz(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.random((60, 12)).astype(np.float32)
    y = np.repeat(np.arange(4), 15)
    x[np.arange(60), y] += 2.0  # separable
    path = tmp_path / "d.npz"
    np.savez(path, x_train=x, y_train=y, x_test=x, y_test=y)
    out = tmp_path / "m.json"
    args = ["fscil", "--data", str(path), "--base-classes", "2", "--way", "1", "--shot", "3",
            "--sessions", "2", "--epochs", "3", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    res = json.loads(out.read_text())
    assert len(res["acc"]) == 3
    assert res["method"] == "SAFA"
    assert main([*args[:-1], str(tmp_path)]) == 2  # a folder as --out fails before training
    assert "is a folder" in capsys.readouterr().err


def test_cli_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["fscil", "--data", str(tmp_path / "missing.npz")])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["fscil", "--way", "0"])
    with pytest.raises(SystemExit):
        main(["reproduce", "--seed", "-1"])
    # more shots than a class has: a clear error before training
    rng = np.random.default_rng(0)
    path = tmp_path / "d.npz"
    y = np.repeat(np.arange(3), 4)
    np.savez(path, x_train=rng.random((12, 5)), y_train=y, x_test=rng.random((12, 5)), y_test=y)
    capsys.readouterr()
    assert main(["fscil", "--data", str(path), "--base-classes", "2", "--shot", "9",
                 "--sessions", "1"]) == 2  # fmt: skip
    assert "fewer than shot" in capsys.readouterr().err
