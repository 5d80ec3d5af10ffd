"""The standard command line every package exposes as ``iclr26-<folder>``.

``reproduce`` and ``bench`` are always there, with the same options in every package::

    iclr26-<folder> reproduce [--quick] [--out DIR] [--seed N] [--no-progress] [-v]
    iclr26-<folder> bench     [--quick] [--out DIR] [--seed N] [--no-progress] [-v]

Packages add their own subcommands (``select``, ``simulate``, ``serve``...) through ``commands``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from iclr26.shared.report import Report

__all__ = ["CommandSetup", "Experiment", "make_cli"]


class Experiment(Protocol):
    """Signature of a package's ``reproduce`` and ``bench`` functions."""

    def __call__(self, *, quick: bool, seed: int, progress: bool) -> Report: ...


#: Configures a subcommand's parser and returns the handler that runs it (exit code or None).
CommandSetup = Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int | None]]


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"seed must be an integer, got {text!r}") from err
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"seed must be in [0, 2**32 - 1], got {value}")
    return value


def _add_run_options(parser: argparse.ArgumentParser, default_out: Path) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="small run (under 2 minutes on 2 CPUs)"
    )
    parser.add_argument(
        "--out", type=Path, default=default_out, help=f"output folder (default: {default_out})"
    )
    parser.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def make_cli(
    folder: str,
    *,
    reproduce: Experiment,
    bench: Experiment,
    description: str,
    commands: Mapping[str, tuple[str, CommandSetup]] | None = None,
) -> Callable[[Sequence[str] | None], int]:
    """Build the ``main(argv)`` of ``iclr26-<folder>``.

    Args:
        folder: the package's folder name, e.g. ``"refusal-index"``; the distribution is
            ``iclr26-<folder>`` and reports default to ``reports/<folder>`` (bench:
            ``reports/<folder>/bench``).
        reproduce: runs the paper's headline experiment and returns a :class:`Report`.
        bench: runs the comparison against peers and returns a :class:`Report`.
        description: one line shown by ``--help``.
        commands: extra subcommands, ``name -> (help, setup)``; ``setup(parser)`` adds the
            arguments and returns the handler.

    Returns:
        ``main(argv=None) -> int``, suitable for ``[project.scripts]`` and for tests. Errors a
        user can fix (``ValueError``, ``OSError``) print one line on stderr and exit with 2.
    """
    prog = f"iclr26-{folder}"

    def main(argv: Sequence[str] | None = None) -> int:
        parser = argparse.ArgumentParser(prog=prog, description=description)
        try:
            version = importlib.metadata.version(prog)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        parser.add_argument("--version", action="version", version=f"{prog} {version}")
        parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        handlers: dict[str, Callable[[argparse.Namespace], int | None]] = {}
        for name, experiment, default_out, help_text in (
            (
                "reproduce",
                reproduce,
                Path("reports") / folder,
                "run the paper's headline experiment",
            ),
            ("bench", bench, Path("reports") / folder / "bench", "compare against peer methods"),
        ):
            p = sub.add_parser(name, help=help_text, description=help_text)
            _add_run_options(p, default_out)
            handlers[name] = _experiment_handler(experiment)
        for name, (help_text, setup) in (commands or {}).items():
            if name in handlers:
                raise ValueError(f"command {name!r} is reserved")
            handlers[name] = setup(sub.add_parser(name, help=help_text, description=help_text))
        args = parser.parse_args(argv)
        level = logging.WARNING - 10 * min(args.verbose, 2)
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        try:
            code = handlers[args.command](args)
        except (ValueError, OSError) as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        return 0 if code is None else int(code)

    return main


def _experiment_handler(experiment: Experiment) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        report = experiment(quick=args.quick, seed=args.seed, progress=not args.no_progress)
        if not isinstance(report, Report):
            raise TypeError(f"{experiment!r} must return a Report, got {type(report).__name__}")
        path = report.write(args.out)
        print(report.to_markdown())
        print(f"wrote {path} and report.json" + (" with figures" if report.figures else ""))
        return 0

    return run
