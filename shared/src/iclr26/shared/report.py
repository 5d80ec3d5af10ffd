"""The report every ``reproduce`` and ``bench`` run writes: claim, measured tables, verdict, environment.

A :class:`Report` is built by an experiment function (plain Python, no I/O) and written by the
CLI with :meth:`Report.write`, which produces ``report.md``, ``report.json`` and one PNG per
figure in the output folder. :func:`write_summary` collects the reports of many packages into
one ``SUMMARY.md``.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from iclr26.shared.jsonio import to_jsonable, write_json
from iclr26.shared.validation import check_choice, check_nonempty

__all__ = ["Check", "Report", "Table", "environment", "format_value", "write_summary"]

KINDS = ("reproduce", "bench")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS")


@dataclass(frozen=True)
class Check:
    """One tested sub-claim: its name, whether it held, and the numbers behind the verdict."""

    name: str
    held: bool
    detail: str = ""


@dataclass(frozen=True)
class Table:
    """A titled table of measured rows (dicts with the same or overlapping keys)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]

    def to_markdown(self) -> str:
        """GitHub-flavoured markdown, numbers shown with :func:`format_value`."""
        head = "| " + " | ".join(self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = [
            "| " + " | ".join(format_value(row.get(c)) for c in self.columns) + " |"
            for row in self.rows
        ]
        return "\n".join([f"### {self.title}", "", head, rule, *body])


def format_value(value: Any) -> str:
    """How a table cell is shown: 4 significant digits for floats, ``—`` for missing/NaN."""
    if value is None:
        return "—"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        v = float(value)
        if math.isnan(v):
            return "—"
        return f"{v:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(packages: Iterable[str] = ()) -> dict[str, Any]:
    """Facts needed to read a measurement: Python, platform, CPU count, thread settings, versions.

    Args:
        packages: distribution names whose installed versions are recorded (missing ones are
            recorded as ``None``); ``iclr26-shared`` and ``numpy`` are always included.
    """
    names = dict.fromkeys(["iclr26-shared", "numpy", *packages])
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": {v: os.environ[v] for v in _THREAD_VARS if v in os.environ},
        "versions": {name: _version(name) for name in names},
    }


class Report:
    """Results of one ``reproduce`` or ``bench`` run.

    Build it inside the experiment function, then let the CLI :meth:`write` it::

        report = Report("iclr26-x", "reproduce", "Method beats baseline.", seed=0,
                        backends=["torch"], config={"quick": True})
        report.add_table("E1", rows)
        report.check("beats baseline", gain > 0, f"gain {gain:.3f}")
        report.metric("gain", gain)
        return report

    Args:
        package: distribution name, e.g. ``"iclr26-refusal-index"``.
        kind: ``"reproduce"`` or ``"bench"``.
        claim: the paper's claim under test, in one sentence.
        seed: the seed the run used.
        backends: distributions whose versions belong in the report (torch, jax, ...).
        config: the run's settings (quick, sizes, ...), recorded verbatim.
    """

    def __init__(
        self,
        package: str,
        kind: str,
        claim: str,
        *,
        seed: int,
        backends: Sequence[str] = (),
        config: Mapping[str, Any] | None = None,
    ) -> None:
        check_choice(kind, "kind", KINDS)
        check_nonempty(claim.strip(), "claim")
        self.package = package
        self.kind = kind
        self.claim = claim
        self.seed = seed
        self.backends = tuple(backends)
        self.config = dict(config or {})
        self.tables: list[Table] = []
        self.checks: list[Check] = []
        self.metrics: dict[str, Any] = {}
        self.notes: list[str] = []
        self.figures: dict[str, Any] = {}
        self._started = time.perf_counter()
        self._created = datetime.now(UTC)
        self.wall_time_s: float | None = None

    def add_table(
        self, title: str, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None
    ) -> Table:
        """Add a table; columns default to the keys of the rows in first-seen order."""
        rows = tuple(dict(r) for r in rows)
        check_nonempty(rows, f"rows of table {title!r}")
        if columns is None:
            columns = list(dict.fromkeys(k for r in rows for k in r))
        table = Table(title, tuple(columns), rows)
        self.tables.append(table)
        return table

    def add_figure(self, name: str, figure: Any) -> None:
        """Keep a matplotlib figure; :meth:`write` saves it as ``<name>.png``."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"figure name must be a plain file stem, got {name!r}")
        if not hasattr(figure, "savefig"):
            raise TypeError(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
        self.figures[name] = figure

    def check(self, name: str, held: bool, detail: str = "") -> bool:
        """Record whether one sub-claim held, with the numbers behind it; returns ``held``."""
        self.checks.append(Check(name, bool(held), detail))
        return bool(held)

    def metric(self, name: str, value: Any) -> None:
        """Record a headline number (shown in ``SUMMARY.md``)."""
        self.metrics[name] = value

    def note(self, text: str) -> None:
        """Add a remark to the report (deviations, caveats)."""
        self.notes.append(text)

    @property
    def held(self) -> bool | None:
        """``True`` if every check held, ``False`` if any failed, ``None`` if nothing was checked."""
        if not self.checks:
            return None
        return all(c.held for c in self.checks)

    def finish(self) -> None:
        """Stop the wall clock (called by :meth:`write` if not called before)."""
        if self.wall_time_s is None:
            self.wall_time_s = time.perf_counter() - self._started

    def to_dict(self) -> dict[str, Any]:
        """Everything in the report as JSON-safe data (the content of ``report.json``)."""
        return to_jsonable(
            {
                "package": self.package,
                "kind": self.kind,
                "claim": self.claim,
                "held": self.held,
                "checks": [vars(c) for c in self.checks],
                "metrics": self.metrics,
                "tables": [
                    {"title": t.title, "columns": list(t.columns), "rows": list(t.rows)}
                    for t in self.tables
                ],
                "figures": [f"{name}.png" for name in self.figures],
                "notes": self.notes,
                "config": self.config,
                "seed": self.seed,
                "wall_time_s": self.wall_time_s,
                "created": self._created.isoformat(timespec="seconds"),
                "environment": environment([self.package, *self.backends]),
            }
        )

    def to_markdown(self) -> str:
        """The human-readable report (the content of ``report.md``)."""
        verdict = {True: "HELD", False: "DID NOT HOLD", None: "not checked"}[self.held]
        lines = [f"# {self.package} {self.kind}", "", f"**Claim.** {self.claim}", ""]
        lines += [f"**Verdict: {verdict}.**", ""]
        for c in self.checks:
            mark = "held" if c.held else "did not hold"
            lines.append(f"- {c.name}: **{mark}**" + (f" ({c.detail})" if c.detail else ""))
        if self.checks:
            lines.append("")
        for table in self.tables:
            lines += [table.to_markdown(), ""]
        for name in self.figures:
            lines += [f"![{name}]({name}.png)", ""]
        if self.notes:
            lines += ["## Notes", "", *[f"- {n}" for n in self.notes], ""]
        env = environment([self.package, *self.backends])
        versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
        wall = "—" if self.wall_time_s is None else f"{self.wall_time_s:.1f} s"
        lines += [
            "## Run",
            "",
            f"- seed {self.seed}; wall time {wall}; config {json.dumps(to_jsonable(self.config))}",
            f"- Python {env['python']} on {env['platform']}, {env['cpu_count']} CPUs",
            f"- {versions}",
            "",
        ]
        return "\n".join(lines)

    def write(self, out: str | os.PathLike[str]) -> Path:
        """Write ``report.md``, ``report.json`` and the figures into ``out`` (created if needed).

        Returns the path of ``report.md``. Figures are closed after saving.
        """
        self.finish()
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in self.figures.items():
            fig.savefig(out / f"{name}.png", dpi=120, bbox_inches="tight")
            _close(fig)
        write_json(out / "report.json", self.to_dict())
        path = out / "report.md"
        path.write_text(self.to_markdown())
        return path


def _close(fig: Any) -> None:
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close(fig)


def _summary_row(folder: str, data: Mapping[str, Any]) -> str:
    held = {True: "held", False: "**did not hold**", None: "not checked"}[data.get("held")]
    numbers = "; ".join(
        f"{format_value(k)} = {format_value(v)}" for k, v in data.get("metrics", {}).items()
    )
    claim = format_value(data.get("claim", ""))
    wall = data.get("wall_time_s")
    wall_s = "—" if wall is None else f"{wall:.0f} s"
    return f"| [{folder}]({folder}/report.md) | {claim} | {numbers or '—'} | {held} | {wall_s} |"


def write_summary(reports: str | os.PathLike[str]) -> Path:
    """Collect ``<reports>/<folder>/report.json`` (reproduce) and ``.../bench/report.json`` into
    ``<reports>/SUMMARY.md``: one row per package with its claim, headline numbers and verdict.

    Returns the path of ``SUMMARY.md``.
    """
    root = Path(reports)
    root.mkdir(parents=True, exist_ok=True)
    header = ["| package | claim | key numbers | verdict | wall |", "|---|---|---|---|---|"]
    sections = []
    for title, pattern in (("Reproduce", "*/report.json"), ("Bench", "*/bench/report.json")):
        rows = []
        for path in sorted(root.glob(pattern)):
            folder = path.relative_to(root).parts[0]
            link = folder if title == "Reproduce" else f"{folder}/bench"
            rows.append(_summary_row(link, json.loads(path.read_text())))
        sections += [f"## {title}", ""]
        sections += [*header, *rows] if rows else ["No reports yet."]
        sections.append("")
    text = "\n".join(["# iclr26 results", "", *sections])
    path = root / "SUMMARY.md"
    path.write_text(text)
    return path
