import json
import subprocess
import sys

import pytest

from iclr26.fastcar.cli import main


def test_help_does_not_import_torch():
    code = ("import sys; from iclr26.fastcar.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "--videos", "0"],
        ["decode", "--thresholds", "a,b"],
        ["decode", "--rate", "1.5"],
        ["decode", "--thresholds", "0", "--rate", "0.5"],
        ["decode", "--model", "/nonexistent/folder"],
        ["calibrate"],
        ["calibrate", "--rate", "nan"],
        ["reproduce", "--seed", "-1"],
        ["train-toy", "--videos", "0", "--out", "x"],
    ],
)
def test_bad_arguments_fail_at_parse_time(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_decode_and_calibrate_commands(tmp_path, capsys):
    out = tmp_path / "dec"
    assert main(["decode", "--videos", "2", "--frames", "3", "--thresholds=-inf",
                 "--backend", "native", "--out", str(out)]) == 0  # fmt: skip
    rep = json.loads((out / "replay.json").read_text())
    assert rep["replay_rate_eligible"] == 1.0
    assert (out / "frames.gif").stat().st_size > 0
    assert (out / "frames.png").stat().st_size > 0
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["decode", "--videos", "1", "--frames", "2", "--out", str(f)]) == 2
    assert "existing file" in capsys.readouterr().err
    th = tmp_path / "th.json"
    assert main(["calibrate", "--videos", "2", "--frames", "3", "--rate", "0.5",
                 "--out", str(th)]) == 0  # fmt: skip
    assert len(json.loads(th.read_text())["thresholds"]) == 3
    assert main(["decode", "--videos", "1", "--frames", "2", "--thresholds", "0,0",
                 "--out", str(out)]) == 2  # fmt: skip
    assert "3 layers" in capsys.readouterr().err
