import numpy as np
import pytest

from iclr26.lifrseg.cli import main


def test_simulate_train_predict(tmp_path, capsys):
    data = tmp_path / "data"
    assert (
        main(
            [
                "simulate",
                "--out",
                str(data),
                "--sequences",
                "1",
                "--duration",
                "0.3",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (data / "seq_000" / "events.h5").is_file()
    assert (data / "seq_000" / "frame.png").is_file()
    ck = tmp_path / "ck"
    args = ["train", "--data", str(data), "--out", str(ck), "--seg-steps", "2", "--flow-steps", "1",
            "--steps", "1", "--dt", "0.01,0.05", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    assert (ck / "lifrseg.safetensors").is_file()
    out = tmp_path / "pred.png"
    pred = ["predict", "--checkpoint", str(ck / "lifrseg.safetensors"), "--image",
            str(data / "seq_000" / "frame.png"), "--events", str(data / "seq_000" / "events.h5"),
            "--t-frame", "0.05", "--dt", "0.01,0.05", "--out", str(out)]  # fmt: skip
    assert main(pred) == 0
    from skimage.io import imread

    img = imread(out)
    assert img.shape == (64, 128, 3)
    capsys.readouterr()
    # an existing folder as --out, a non-image, a δt list out of order: one line, exit 2
    assert main([*pred[:-1], str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    assert main([*pred[:4], str(bad), *pred[5:-1], str(tmp_path / "p2.png")]) == 2
    assert "not a readable image" in capsys.readouterr().err
    assert main([*pred[:-4], "--dt", "0.05,0.01", "--out", str(tmp_path / "p3.png")]) == 2
    assert "increasing" in capsys.readouterr().err
    assert main([*pred[:6], str(bad), *pred[7:-1], str(tmp_path / "p4.png")]) == 2
    assert "HDF5" in capsys.readouterr().err


def test_cli_bad_arguments(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["predict", "--checkpoint", str(tmp_path / "missing"), "--image", "x", "--events", "y",
              "--t-frame", "0", "--out", "o.png"])  # fmt: skip
    assert e.value.code == 2
    for argv in (
        ["reproduce", "--seed", "-1"],
        ["simulate", "--out", str(tmp_path), "--sequences", "0"],
        ["simulate", "--out", str(tmp_path), "--duration", "nan"],
        ["train", "--out", str(tmp_path), "--dt", "a,b"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_simulate_size_checked(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path / "d"), "--size", "40"]) == 2
    assert "multiple of 32" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("")
    assert main(["simulate", "--out", str(f)]) == 2
    np.testing.assert_equal(f.read_text(), "")


def test_pretrain_flow_command_is_deterministic_and_loads(tmp_path, capsys):
    """The code path that wrote the shipped E-RAFT-lite, at a tiny size: the command and the API
    with the same seed give bit-identical weights, and they load with their settings."""
    import torch
    from safetensors.torch import load_file

    from iclr26.lifrseg.train import load_pretrained_flow, pretrain_flow

    out = tmp_path / "flow.safetensors"
    args = ["pretrain-flow", "--out", str(out), "--seed", "3", "--steps", "2", "--sequences", "1",
            "--no-progress"]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    again = pretrain_flow(seed=3, steps=2, sequences=1)
    saved = load_file(str(out))
    state = again.state_dict()
    assert saved.keys() == state.keys()
    assert all(torch.equal(saved[k], state[k]) for k in saved)
    net, meta = load_pretrained_flow(out)
    assert (meta["seed"], meta["steps"], meta["sequences"]) == (3, 2, 1)
    assert all(torch.equal(net.state_dict()[k], state[k]) for k in state)
    other = pretrain_flow(seed=4, steps=1, sequences=1)
    k0 = next(iter(state))
    assert not torch.equal(other.state_dict()[k0], state[k0])
