"""The CLI: package commands work, bad arguments fail in one line before any work."""

from __future__ import annotations

import pytest

from iclr26.mikasa import cli


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["play", "MikasaLite/ShellGameTouch-v0", "--episodes", "0"], "argument --episodes"),
        (["play", "MikasaLite/ShellGameTouch-v0", "--policy", "psychic"], "argument --policy"),
        (["play", "MikasaLite/ShellGameTouch-v0", "--seed", "-1"], "argument --seed"),
        (["list", "--memory-type", "episodic"], "argument --memory-type"),
        (["reproduce", "--seed", "x"], "argument --seed"),
        (["ppo", "--seeds", "0"], "argument --seeds"),
    ],
)
def test_bad_arguments_fail_at_parse_time(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_user_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["play", "Nope-v0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "valid ids" in err
    assert cli.main(["play", "ShellGameTouch-v0", "--png", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    (tmp_path / "f").write_text("keep")
    assert cli.main(["reproduce", "--quick", "--out", str(tmp_path / "f")]) == 2
    assert "existing file" in capsys.readouterr().err
    assert (tmp_path / "f").read_text() == "keep"


def test_list_and_play(tmp_path, capsys):
    assert cli.main(["list", "--memory-type", "sequential"]) == 0
    out = capsys.readouterr().out
    assert "ChainOfColors7" in out
    assert "RememberColor3" not in out
    png = tmp_path / "strip.png"
    assert cli.main(["play", "RememberColor3-v0", "--episodes", "5", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "success at end 1.000" in out
    assert png.stat().st_size > 1000
