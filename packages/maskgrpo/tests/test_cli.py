import json

import pytest

from iclr26.maskgrpo.cli import main


def test_pretrain_and_train_resume(tmp_path, capsys):
    w = tmp_path / "m.safetensors"
    assert (
        main(
            [
                "pretrain-toy",
                "--task",
                "add3",
                "--steps",
                "3",
                "--batch-size",
                "8",
                "--out",
                str(w),
                "--no-progress",
            ]
        )
        == 0
    )
    assert w.is_file()
    ck, log = tmp_path / "ck.pt", tmp_path / "log.jsonl"
    args = ["train", "--task", "add3", "--init", str(w), "--prompts", "2", "--generations", "2",
            "--iterations", "2", "--eval-every", "0", "--checkpoint", str(ck), "--log", str(log),
            "--no-progress"]  # fmt: skip
    assert main([*args, "--steps", "2"]) == 0
    assert main([*args, "--steps", "3"]) == 0  # resumes at step 2
    steps = [json.loads(x)["step"] for x in log.read_text().splitlines()]
    assert steps == [0, 1, 2]
    out = capsys.readouterr().out
    assert "checkpoint at step 3" in out


def test_cli_bad_arguments(tmp_path, capsys):
    for argv in (
        ["train", "--checkpoint", str(tmp_path / "c.pt"), "--generations", "1"],
        ["train", "--checkpoint", str(tmp_path / "c.pt"), "--min-mask-rate", "1"],
        [
            "train",
            "--checkpoint",
            str(tmp_path / "c.pt"),
            "--init",
            str(tmp_path / "missing.safetensors"),
        ],
        ["pretrain-toy", "--task", "chess", "--out", "x"],
        ["reproduce", "--seed", "-1"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    capsys.readouterr()
    # a folder where a file is expected: one line, exit 2, before any work
    assert main(["pretrain-toy", "--task", "sort8", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    bad = tmp_path / "bad.safetensors"
    bad.write_text("nope")
    assert main(["train", "--init", str(bad), "--checkpoint", str(tmp_path / "c.pt")]) == 2
    assert "safetensors" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["reproduce", "--quick", "--out", str(f)]) == 2
