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


def test_fscil_checkpoint_and_resume(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x = rng.random((60, 12)).astype(np.float32)
    y = np.repeat(np.arange(4), 15)
    x[np.arange(60), y] += 2.0
    path = tmp_path / "d.npz"
    np.savez(path, x_train=x, y_train=y, x_test=x, y_test=y)
    ck = tmp_path / "ck"
    base = ["fscil", "--data", str(path), "--base-classes", "2", "--way", "1", "--shot", "3",
            "--sessions", "2", "--epochs", "2", "--T", "2"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a.json")]) == 0
    ref = json.loads((tmp_path / "a.json").read_text())
    assert main([*base, "--checkpoint-dir", str(ck)]) == 0
    assert (ck / "base_model.json").is_file()
    assert (ck / "session_02.json").is_file()
    # simulate a crash after session 0: drop the later sessions, then resume
    for s in (1, 2):
        (ck / f"session_0{s}.json").unlink()
    capsys.readouterr()
    out = tmp_path / "b.json"
    assert main([*base, "--checkpoint-dir", str(ck), "--resume", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["acc"] == ref["acc"]
    # without --resume a used folder is refused; another config is refused on resume
    assert main([*base, "--checkpoint-dir", str(ck)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main([*base[:-1], "3", "--checkpoint-dir", str(ck), "--resume"]) == 2
    assert "differs in: T" in capsys.readouterr().err
    assert main([*base, "--resume"]) == 2
    assert "--resume needs --checkpoint-dir" in capsys.readouterr().err


@pytest.mark.slow
def test_fscil_command_on_glyphs(tmp_path):
    out = tmp_path / "g.json"
    args = ["fscil", "--task", "glyphs", "--base-classes", "10", "--way", "5", "--shot", "5",
            "--sessions", "2", "--epochs", "3", "--T", "2", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    res = json.loads(out.read_text())
    assert len(res["acc"]) == 3
    assert res["acc"][0] > 0.3  # 10 classes on unseen fonts, well above chance (0.1)


@pytest.mark.slow
def test_fscil_command_on_events_with_conv_backbone(tmp_path, capsys):
    out = tmp_path / "e.json"
    args = ["fscil", "--task", "events", "--base-classes", "6", "--way", "1", "--shot", "1",
            "--sessions", "2", "--epochs", "1", "--T", "3", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    res = json.loads(out.read_text())
    assert len(res["acc"]) == 3
    assert res["method"] == "SAFA"
    # image backbones need image data
    capsys.readouterr()
    assert main(["fscil", "--backbone", "resnet20", "--epochs", "1"]) == 2
    assert "needs image data" in capsys.readouterr().err
