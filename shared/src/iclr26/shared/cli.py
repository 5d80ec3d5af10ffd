"""The standard command line every package exposes as ``iclr26-<folder>``.

``reproduce`` and ``bench`` are always there, with the same options in every package::

    iclr26-<folder> reproduce [--quick] [--out DIR] [--seed N] [--no-progress] [-v]
    iclr26-<folder> bench     [--quick] [--out DIR] [--seed N] [--no-progress] [-v]

Packages add their own subcommands (``select``, ``simulate``, ``serve``...) through ``commands``.
The experiment functions may be given as ``"module:function"`` strings so that ``--help``,
``--version`` and argument errors never import torch or JAX. The output folder is checked and
created before any experiment starts; argument types below (:func:`int_arg`, :func:`float_arg`,
:func:`int_list_arg`, :func:`existing_file`) reject bad values at parse time, naming the option.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import logging
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from iclr26.shared.optional import MissingDependencyError

if TYPE_CHECKING:  # the report (and NumPy) load only when an experiment runs
    from iclr26.shared.report import Report

__all__ = [
    "CommandSetup",
    "Experiment",
    "existing_file",
    "float_arg",
    "int_arg",
    "int_list_arg",
    "make_cli",
    "prepare_output_dir",
    "prepare_output_file",
]


class Experiment(Protocol):
    """Signature of a package's ``reproduce`` and ``bench`` functions."""

    def __call__(self, *, quick: bool, seed: int, progress: bool) -> Report: ...


#: Configures a subcommand's parser and returns the handler that runs it (exit code or None).
CommandSetup = Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int | None]]

#: Exit status of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


# --- argument types: each raises ArgumentTypeError, which argparse shows as
# "iclr26-x cmd: error: argument --name: <message>" with exit status 2.


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    def show(v: float) -> str:
        return str(v) if isinstance(v, int) else f"{v:g}"

    left = "(-inf" if low is None else ("(" if low_open else "[") + show(low)
    right = "inf)" if high is None else show(high) + (")" if high_open else "]")
    return f"{left}, {right}"


def int_arg(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for an integer in ``[low, high]`` (``None``: unbounded)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"expected an integer in {_interval(low, high, False, False)}, got {value}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def float_arg(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Callable[[str], float]:
    """An argparse ``type`` for a finite real number in an interval (closed unless ``*_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and (value >= high if high_open else value > high)
        if not math.isfinite(value) or below or above:
            raise argparse.ArgumentTypeError(
                f"expected a number in {_interval(low, high, low_open, high_open)}, got {text!r}"
            )
        return value

    parse.__name__ = "number"
    return parse


def int_list_arg(low: int | None = None, high: int | None = None) -> Callable[[str], list[int]]:
    """An argparse ``type`` for a comma-separated list of integers in ``[low, high]``."""
    one = int_arg(low, high)

    def parse(text: str) -> list[int]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        return [one(p) for p in parts]

    parse.__name__ = "integer list"
    return parse


def existing_file(text: str) -> Path:
    """An argparse ``type`` for an input file that must exist (and not be a folder)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, expected a file")
    return path


def prepare_output_dir(path: str | os.PathLike[str], option: str = "--out") -> Path:
    """Create output folder ``path`` (and parents) and check it is writable, before any work.

    Raises:
        ValueError: ``path`` (or a parent) is an existing file, or the folder is not writable;
            the message names ``option``.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is an existing file, expected a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ValueError(f"{option} {path}: a parent of it is a file, not a folder") from None
    except PermissionError:
        raise ValueError(f"{option} {path}: permission denied creating it") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path} is not writable")
    return path


def prepare_output_file(path: str | os.PathLike[str], option: str) -> Path:
    """Check that output file ``path`` can be written and create its folder, before any work.

    The file itself is not created or truncated (a log may be appended to and resumed).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{option} {path} is a folder, expected a file path")
    prepare_output_dir(path.parent, f"the folder of {option}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {path} is not writable")
    return path


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default unless its help already does, or it is a plain flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" in text.lower()
            or action.default is None
            or action.default is False
            or action.default == argparse.SUPPRESS
            or isinstance(
                action, argparse._StoreTrueAction | argparse._VersionAction | argparse._CountAction
            )
        ):
            return text
        return super()._get_help_string(action)


def _resolve(experiment: Experiment | str) -> Experiment:
    if not isinstance(experiment, str):
        return experiment
    module, _, name = experiment.partition(":")
    if not module or not name:
        raise ValueError(f"experiment must be 'module:function', got {experiment!r}")
    return getattr(importlib.import_module(module), name)


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    print(f"warning: {message}", file=sys.stderr if file is None else file)


def make_cli(
    folder: str,
    *,
    reproduce: Experiment | str,
    bench: Experiment | str,
    description: str,
    commands: Mapping[str, tuple[str, CommandSetup]] | None = None,
) -> Callable[[Sequence[str] | None], int]:
    """Build the ``main(argv)`` of ``iclr26-<folder>``.

    Args:
        folder: the package's folder name, e.g. ``"refusal-index"``; the distribution is
            ``iclr26-<folder>`` and reports default to ``reports/<folder>`` (bench:
            ``reports/<folder>/bench``).
        reproduce: runs the paper's headline experiment and returns a :class:`Report`; a
            ``"module:function"`` string is imported only when the command runs.
        bench: runs the comparison against peers, as ``reproduce``.
        description: one line shown by ``--help``.
        commands: extra subcommands, ``name -> (help, setup)``; ``setup(parser)`` adds the
            arguments and returns the handler. Handlers import heavy modules themselves.

    Returns:
        ``main(argv=None) -> int``, suitable for ``[project.scripts]`` and for tests; its
        ``build_parser()`` attribute returns the parser. Errors a user can fix (``ValueError``,
        ``OSError``, :class:`MissingDependencyError`) print one line on stderr and exit with 2;
        Ctrl-C prints one line and exits with 130. Warnings print as one line each.
    """
    prog = f"iclr26-{folder}"

    def build_parser() -> tuple[
        argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int | None]]
    ]:
        parser = argparse.ArgumentParser(
            prog=prog, description=description, formatter_class=_HelpFormatter
        )
        try:
            version = importlib.metadata.version(prog)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        parser.add_argument("--version", action="version", version=f"{prog} {version}")
        parser.add_argument(
            "-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"
        )
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
            p = sub.add_parser(
                name, help=help_text, description=help_text, formatter_class=_HelpFormatter
            )
            _add_run_options(p, default_out)
            handlers[name] = _experiment_handler(experiment)
        for name, (help_text, setup) in (commands or {}).items():
            if name in handlers:
                raise ValueError(f"command {name!r} is reserved")
            p = sub.add_parser(
                name, help=help_text, description=help_text, formatter_class=_HelpFormatter
            )
            handlers[name] = setup(p)
        return parser, handlers

    def main(argv: Sequence[str] | None = None) -> int:
        parser, handlers = build_parser()
        args = parser.parse_args(argv)
        level = logging.WARNING - 10 * min(args.verbose, 2)
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        previous_show = warnings.showwarning
        warnings.showwarning = _one_line_warning
        try:
            code = handlers[args.command](args)
        except KeyboardInterrupt:
            print(f"{prog}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except (ValueError, OSError, MissingDependencyError) as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        finally:
            warnings.showwarning = previous_show
        return 0 if code is None else int(code)

    main.build_parser = lambda: build_parser()[0]  # type: ignore[attr-defined]
    return main


def _add_run_options(parser: argparse.ArgumentParser, default_out: Path) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="small run (under 2 minutes on 2 CPUs)"
    )
    parser.add_argument("--out", type=Path, default=default_out, help="output folder")
    parser.add_argument("--seed", type=int_arg(0, 2**32 - 1), default=0, help="random seed")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _experiment_handler(experiment: Experiment | str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        from iclr26.shared.report import Report

        out = prepare_output_dir(args.out)  # before the experiment: fail in a second, not later
        fn = _resolve(experiment)
        report = fn(quick=args.quick, seed=args.seed, progress=not args.no_progress)
        if not isinstance(report, Report):
            raise TypeError(f"{fn!r} must return a Report, got {type(report).__name__}")
        report.finish()
        print(report.to_markdown(), flush=True)  # shown even if writing then fails
        path = report.write(out)
        print(f"wrote {path} and report.json" + (" with figures" if report.figures else ""))
        return 0

    return run
