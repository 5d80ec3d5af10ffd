"""Build members, install each wheel in a fresh venv and smoke-test it as a user would.

    python tests/check_dist.py [--uv UV] [--root DIR] [--keep DIR] [MEMBER ...]

For every member (default: all): build its wheel and sdist into a temporary folder (``dist/`` is
left alone), install the wheel with all its extras into a fresh virtual environment together with
the LOWEST ``iclr26-shared`` it declares (that version's wheel is built from the commit of this
repository that last had it, so a package that uses a newer shared helper than its lower bound
fails here instead of on a user's machine), then import it, check ``__version__``, run
``iclr26-<folder> --help`` and every ```python block of its README in an empty folder.
Exits non-zero naming each member that failed.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
SHARED = "iclr26-shared"


class DistError(RuntimeError):
    """A member failed one of the checks; the message says which and why."""


def run(cmd: list[str], *, cwd: Path | None = None, timeout: float = 900) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise DistError(
            f"`{' '.join(map(str, cmd))}` failed:\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return proc.stdout


def members(root: Path) -> dict[str, Path]:
    found = {"shared": root / "shared"}
    found.update(
        {p.parent.name: p.parent for p in sorted((root / "packages").glob("*/pyproject.toml"))}
    )
    return found


def project(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def lowest_shared(meta: dict) -> Version | None:
    """The lowest iclr26-shared version ``meta``'s dependencies admit (None: no dependency)."""
    for text in meta.get("dependencies", []):
        req = Requirement(text)
        if req.name == SHARED:
            lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
            if not lows:
                raise DistError(f"{meta['name']} declares {text!r}: no lower bound on {SHARED}")
            return max(lows)
    return None


def build(uv: list[str], src: Path, out: Path) -> Path:
    """Build wheel + sdist of the project at ``src`` into ``out``; returns the wheel."""
    before = set(out.glob("*.whl"))
    run([*uv, "build", "--quiet", "--out-dir", str(out), str(src)])
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def shared_wheel_at(uv: list[str], root: Path, version: Version, current: Path, work: Path) -> Path:
    """The wheel of iclr26-shared ``version``: the one just built, or built from git history."""
    if Version(project(root / "shared")["version"]) == version:
        return current
    commits = run(["git", "log", "--format=%H", "--", "shared/pyproject.toml"], cwd=root).split()
    for commit in commits:
        text = subprocess.run(
            ["git", "show", f"{commit}:shared/pyproject.toml"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout
        if text and Version(tomllib.loads(text)["project"]["version"]) == version:
            break
    else:
        raise DistError(f"no commit of this repository has {SHARED} {version}")
    src = work / f"shared-{version}"
    archive = work / f"shared-{version}.tar"
    run(["git", "archive", "--format=tar", "-o", str(archive), commit, "shared"], cwd=root)
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    out = work / f"shared-{version}-dist"
    out.mkdir()
    return build(uv, src / "shared", out)


def extras(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    return re.findall(r"^Provides-Extra: (\S+)$", text, re.M)


def readme_blocks(path: Path) -> str:
    """The README's ```python blocks (``python notest`` ones are shown, not run)."""
    return "\n".join(re.findall(r"```python\n(.*?)```", (path / "README.md").read_text(), re.S))


def check_member(
    uv: list[str], root: Path, folder: str, path: Path, built: Path, shared_wheel: Path, work: Path
) -> str:
    meta = project(path)
    module = folder.replace("-", "_")
    wheel = build(uv, path, built) if folder != "shared" else shared_wheel
    if not list(built.glob(f"iclr26_{module}-{meta['version']}.tar.gz")):
        raise DistError(f"{folder}: no sdist was built")
    low = lowest_shared(meta)
    venv = work / f"venv-{folder}"
    run([*uv, "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = venv / "bin" / "python"
    names = extras(wheel)
    spec = (
        f"{meta['name']}{'[' + ','.join(names) + ']' if names else ''} @ {wheel.resolve().as_uri()}"
    )
    install = [*uv, "pip", "install", "--quiet", "--python", str(python), spec]
    if low is not None:
        install.append(str(shared_wheel_at(uv, root, low, shared_wheel, work)))
    run(install)
    run(
        [
            str(python),
            "-c",
            f"import iclr26.{module} as m; assert m.__version__ == {meta['version']!r}, m.__version__",
        ]
    )
    if folder == "shared":
        run([str(python), "-m", "iclr26.shared.summary", "--help"])
    else:
        run([str(venv / "bin" / f"iclr26-{folder}"), "--help"])
    code = readme_blocks(path)
    if code:
        scratch = work / f"readme-{folder}"
        scratch.mkdir()
        (scratch / "quickstart.py").write_text(code)
        run([str(python), "quickstart.py"], cwd=scratch)
    shared_note = f" with {SHARED} {low}" if low is not None else ""
    return (
        f"ok {folder} ({wheel.name}{shared_note}, README quickstart {'ran' if code else 'absent'})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("members", nargs="*", help="member folders (default: all)")
    parser.add_argument(
        "--uv", default=shutil.which("uv") or "uv", help="the uv command (may have words)"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="workspace root")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    uv = shlex.split(args.uv)
    known = members(root)
    unknown = [m for m in args.members if m not in known]
    if unknown:
        parser.error(f"not workspace members: {', '.join(unknown)}")
    selected = args.members or list(known)
    failed = []
    with tempfile.TemporaryDirectory(prefix="check-dist-") as tmp:
        work = Path(tmp)
        built = work / "dist"
        built.mkdir()
        shared_wheel = build(uv, known["shared"], built)
        for folder in selected:
            try:
                print(
                    check_member(uv, root, folder, known[folder], built, shared_wheel, work),
                    flush=True,
                )
            except (DistError, subprocess.TimeoutExpired) as err:
                failed.append(folder)
                print(f"FAILED {folder}: {err}", file=sys.stderr, flush=True)
    if failed:
        print(f"check-dist: {len(failed)} member(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
