"""The release gate and the lowest-shared-version install check fail when they should."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = shutil.which("uv") or f"{sys.executable} -m uv"


def release_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "release_check.py"), *args],
        capture_output=True,
        text=True,
    )


def current(folder: str) -> str:
    path = ROOT / ("shared" if folder == "shared" else f"packages/{folder}")
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]["version"]


def test_release_check_accepts_the_current_version_of_every_member():
    for path in [ROOT / "shared", *sorted((ROOT / "packages").glob("*/"))]:
        if (path / "pyproject.toml").exists():
            folder = path.name
            run = release_check(folder, f"{folder}-v{current(folder)}")
            assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(
    ("folder", "tag", "message"),
    [
        ("shared", "shared-v9.9.9", "has version"),
        ("shared", "shared-0.2.0", "is not '<folder>-v<version>'"),
        ("shared", "spice-v0.1.0", "names 'spice', not 'shared'"),
        ("nope", "nope-v0.1.0", "is not a workspace member"),
    ],
)
def test_release_check_rejects_a_wrong_tag(folder, tag, message):
    run = release_check(folder, tag)
    assert run.returncode == 1
    assert message in run.stderr
    assert run.stderr.count("\n") == 1


def fake_member(
    root: Path, folder: str, version: str, *, deps: list[str], code: str, changelog: str
) -> None:
    path = root / ("shared" if folder == "shared" else f"packages/{folder}")
    module = folder.replace("-", "_")
    src = path / "src" / "iclr26" / module
    src.mkdir(parents=True, exist_ok=True)
    scripts = (
        ""
        if folder == "shared"
        else f'[project.scripts]\niclr26-{folder} = "iclr26.{module}:main"\n'
    )
    (path / "pyproject.toml").write_text(
        f'[project]\nname = "iclr26-{folder}"\nversion = "{version}"\nrequires-python = ">=3.11"\n'
        f"dependencies = {deps!r}\n{scripts}"
        '[build-system]\nrequires = ["uv_build>=0.9.0,<0.14.0"]\nbuild-backend = "uv_build"\n'
        f'[tool.uv.build-backend]\nmodule-name = "iclr26.{module}"\n'
    )
    (path / "README.md").write_text(f"# {folder}\n")
    (path / "CHANGELOG.md").write_text(changelog)
    (src / "__init__.py").write_text(
        f"from importlib.metadata import version\n__version__ = version('iclr26-{folder}')\n{code}"
    )


def test_release_check_rejects_a_missing_or_empty_changelog_entry(tmp_path):
    fake_member(
        tmp_path, "demo", "0.2.0", deps=[], code="", changelog="# Changelog\n\n## 0.1.0\n\n- x\n"
    )
    run = release_check("demo", "demo-v0.2.0", "--root", str(tmp_path))
    assert run.returncode == 1
    assert "has no '## 0.2.0' entry" in run.stderr
    fake_member(
        tmp_path, "demo", "0.2.0", deps=[], code="", changelog="## 0.2.0\n\n## 0.1.0\n\n- x\n"
    )
    run = release_check("demo", "demo-v0.2.0", "--root", str(tmp_path))
    assert "entry is empty" in run.stderr
    fake_member(tmp_path, "demo", "0.2.0", deps=[], code="", changelog="## 0.2.0\n\n- y\n")
    assert release_check("demo", "demo-v0.2.0", "--root", str(tmp_path)).returncode == 0


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_check_dist_installs_the_lowest_declared_shared_and_catches_a_stale_bound(tmp_path):
    """shared 0.1.0 lacks `new`, added in 0.2.0: a package that imports it but declares
    iclr26-shared>=0.1.0 must fail the check; with >=0.2.0 it passes."""
    git(tmp_path, "init", "-q")
    fake_member(
        tmp_path,
        "shared",
        "0.1.0",
        deps=[],
        code="def old(): return 1\n",
        changelog="## 0.1.0\n- a\n",
    )
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "shared 0.1.0")
    fake_member(
        tmp_path,
        "shared",
        "0.2.0",
        deps=[],
        code="def old(): return 1\ndef new(): return 2\n",
        changelog="## 0.2.0\n- b\n",
    )
    code = "from iclr26.shared import new\ndef main():\n    print('usage: demo')\n"
    fake_member(
        tmp_path,
        "demo",
        "0.1.0",
        deps=["iclr26-shared>=0.1.0"],
        code=code,
        changelog="## 0.1.0\n- c\n",
    )
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "shared 0.2.0 and demo")

    def check() -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests" / "check_dist.py"),
                "--uv",
                UV,
                "--root",
                str(tmp_path),
                "demo",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )

    stale = check()
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "FAILED demo" in stale.stderr
    assert "cannot import name 'new'" in stale.stderr
    fake_member(
        tmp_path,
        "demo",
        "0.1.0",
        deps=["iclr26-shared>=0.2.0"],
        code=code,
        changelog="## 0.1.0\n- c\n",
    )
    honest = check()
    assert honest.returncode == 0, honest.stderr
    assert "ok demo (iclr26_demo-0.1.0-py3-none-any.whl with iclr26-shared 0.2.0" in honest.stdout
