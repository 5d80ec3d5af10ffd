import subprocess
import sys

import pytest

from iclr26.cognimap3d.cli import main


def test_help_and_version_do_not_import_heavy_modules():
    code = "import sys; from iclr26.cognimap3d.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\nprint(sorted(m for m in ('torch', 'jax', 'scipy', 'cv2', 'matplotlib') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().endswith("[]")


@pytest.mark.parametrize(
    "argv",
    [
        ["reproduce", "--seed", "-1"],
        ["run", "/nonexistent/folder"],
        ["run", __file__],
        ["demo-data", "x", "--frames", "2"],
        ["run", ".", "--flow", "raft"],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as err:
        main(argv)
    assert err.value.code == 2


def test_out_is_existing_file(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("x")
    assert main(["reproduce", "--quick", "--out", str(f)]) == 2
    assert "existing file" in capsys.readouterr().err


def test_demo_data_then_run(tmp_path, capsys):
    assert main(["demo-data", str(tmp_path / "d"), "--frames", "8"]) == 0
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                str(tmp_path / "d" / "visit0"),
                str(tmp_path / "d" / "visit1"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    for name in (
        "map.ply",
        "memory.npz",
        "poses_visit0.txt",
        "poses_visit1.txt",
        "report.md",
        "trajectories.png",
    ):
        assert (out / name).exists()
    # the memory of that run is loaded and used by a second run
    assert (
        main(
            [
                "run",
                str(tmp_path / "d" / "visit1"),
                "--memory",
                str(out / "memory.npz"),
                "--out",
                str(tmp_path / "run2"),
            ]
        )
        == 0
    )
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert (
        main(
            [
                "run",
                str(tmp_path / "d" / "visit1"),
                "--memory",
                str(tmp_path / "bad.npz"),
                "--out",
                str(tmp_path / "run3"),
            ]
        )
        == 2
    )
    assert "corrupted" in capsys.readouterr().err
