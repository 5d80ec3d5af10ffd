"""Check that a release tag matches a workspace member before it is built and published.

    python tests/release_check.py <folder> <tag> [--root DIR]

A tag is ``<folder>-v<version>`` (``shared-v0.2.0``, ``bee-v0.1.0``). The check passes when the
folder is a workspace member, the tag names it, the version in the tag is the one in the member's
``pyproject.toml``, and its ``CHANGELOG.md`` has a ``## <version>`` entry with some text under it.
It prints one line and exits 0, or prints what is wrong and exits 1. ``make release-check`` runs
it, then builds the member alone and runs its tests in its own environment; the release workflow
runs the same target before publishing.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = re.compile(r"^(?P<folder>[a-z0-9][a-z0-9-]*?)-v(?P<version>\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)$")


class ReleaseError(ValueError):
    """The tag does not match the member's metadata or changelog."""


def member_dir(root: Path, folder: str) -> Path:
    path = root / "shared" if folder == "shared" else root / "packages" / folder
    if not (path / "pyproject.toml").is_file():
        raise ReleaseError(
            f"{folder!r} is not a workspace member (no {path.relative_to(root)}/pyproject.toml)"
        )
    return path


def changelog_entry(changelog: str, version: str) -> str:
    """The text under ``## <version>`` up to the next ``## `` heading."""
    match = re.search(rf"^## {re.escape(version)}\s*$(.*?)(?=^## |\Z)", changelog, re.M | re.S)
    if match is None:
        raise ReleaseError(f"CHANGELOG.md has no '## {version}' entry")
    if not match.group(1).strip():
        raise ReleaseError(f"CHANGELOG.md's '## {version}' entry is empty")
    return match.group(1).strip()


def check_release(root: Path, folder: str, tag: str) -> str:
    """Validate ``tag`` for member ``folder``; returns the version. Raises :class:`ReleaseError`."""
    match = TAG.match(tag)
    if match is None:
        raise ReleaseError(f"tag {tag!r} is not '<folder>-v<version>' (e.g. {folder}-v0.1.0)")
    if match["folder"] != folder:
        raise ReleaseError(f"tag {tag!r} names {match['folder']!r}, not {folder!r}")
    path = member_dir(root, folder)
    project = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if project["name"] != f"iclr26-{folder}":
        raise ReleaseError(
            f"{path}/pyproject.toml names {project['name']!r}, not 'iclr26-{folder}'"
        )
    version = match["version"]
    if project["version"] != version:
        raise ReleaseError(
            f"tag {tag!r} says {version} but {folder}/pyproject.toml has version {project['version']}"
        )
    changelog = path / "CHANGELOG.md"
    if not changelog.is_file():
        raise ReleaseError(f"{folder} has no CHANGELOG.md")
    changelog_entry(changelog.read_text(encoding="utf-8"), version)
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="workspace member folder (shared or a package folder)")
    parser.add_argument("tag", help="release tag, <folder>-v<version>")
    parser.add_argument("--root", type=Path, default=ROOT, help="workspace root")
    args = parser.parse_args(argv)
    try:
        version = check_release(args.root, args.folder, args.tag)
    except ReleaseError as err:
        print(f"release-check: {err}", file=sys.stderr)
        return 1
    print(f"release-check: {args.tag} matches iclr26-{args.folder} {version} and its changelog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
