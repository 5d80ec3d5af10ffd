"""``python -m iclr26.shared.summary [REPORTS]``: write ``REPORTS/SUMMARY.md`` from the reports."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from iclr26.shared.report import write_summary


def main(argv: Sequence[str] | None = None) -> int:
    """Collect every package's ``report.json`` under the folder into ``SUMMARY.md`` and print it."""
    parser = argparse.ArgumentParser(prog="python -m iclr26.shared.summary", description=__doc__)
    parser.add_argument("reports", nargs="?", default="reports", help="reports folder")
    args = parser.parse_args(argv)
    path = write_summary(args.reports)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
