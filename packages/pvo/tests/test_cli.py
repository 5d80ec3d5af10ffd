"""The CLI refuses bad arguments in one line before any work, and its lists match the library."""

from __future__ import annotations

import pytest

from iclr26.pvo import cli
from iclr26.pvo.agents import ALGOS
from iclr26.pvo.data import DATASETS


def test_cli_choices_match_the_library():
    parser = cli.main.build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    choices = {a.dest: a.choices for a in train._actions if a.choices}
    assert tuple(choices["algo"]) == ALGOS
    assert tuple(choices["dataset"]) == DATASETS


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["train", "--steps", "0"], "argument --steps"),
        (["train", "--seeds", "abc"], "argument --seeds"),
        (["train", "--pairs", "1"], "argument --pairs"),
        (["train", "--prefs", "missing.npz"], "missing.npz does not exist"),
        (["train", "--algo", "sac"], "argument --algo"),
    ],
)
def test_bad_arguments_fail_at_parse_time(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_user_errors_are_one_line_before_any_work(tmp_path, capsys):
    assert cli.main(["train", "--steps", "10", "--eval-every", "3"]) == 2
    assert "multiple of --eval-every" in capsys.readouterr().err
    (tmp_path / "f").write_text("keep")
    assert cli.main(["train", "--checkpoint", str(tmp_path / "f" / "c.msgpack")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--checkpoint" in err
    assert cli.main(["train", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert (tmp_path / "f").read_text() == "keep"


def test_a_missing_minari_dataset_is_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    assert (
        cli.main(["train", "--minari", "pendulum/none-v0", "--steps", "10", "--eval-every", "10"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no local minari dataset" in err
