"""The top-level README's package table tells the truth about what is implemented."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(
    r"^\| (?P<folder>.+?) \| `(?P<dist>iclr26-[a-z0-9-]+)` \| .+ \| (?P<status>.+) \|$"
)


def package_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in (ROOT / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            folder = re.sub(r"[`\[\]]|\(.*?\)", "", match["folder"])
            rows.append((folder, match["dist"], match["status"]))
    return rows


def test_readme_lists_the_nineteen_packages_of_the_conventions():
    conventions = re.findall(
        r"^\| `([a-z0-9-]+)` \| `iclr26-", (ROOT / "CONVENTIONS.md").read_text(), re.M
    )
    assert len(conventions) == 19
    rows = package_rows()
    assert [folder for folder, _, _ in rows] == conventions  # once each, in the conventions' order
    for folder, dist, _ in rows:
        assert dist == f"iclr26-{folder}"


def test_readme_has_no_merge_conflict_markers():
    text = (ROOT / "README.md").read_text()
    assert not re.search(r"^(<<<<<<<|=======|>>>>>>>)", text, flags=re.M)


def test_status_matches_the_packages_folder():
    existing = {p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml")}
    for folder, _, status in package_rows():
        if folder in existing:
            assert status == f"[implemented](packages/{folder}/README.md)", folder
        else:
            assert status == "planned", f"{folder} is marked {status!r} but has no package folder"
