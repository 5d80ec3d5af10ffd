"""The CLI fails before work on a bad --out, resolves lazy experiments, handles Ctrl-C,
prints warnings as one line, and its argument types name the option."""

from __future__ import annotations

import argparse
import sys
import warnings

import pytest

from iclr26.shared import (
    MissingDependencyError,
    Report,
    existing_file,
    float_arg,
    import_optional,
    int_arg,
    int_list_arg,
    make_cli,
    prepare_output_dir,
    prepare_output_file,
)

CALLS: list[str] = []


def recorded_experiment(*, quick, seed, progress):
    CALLS.append("ran")
    r = Report("iclr26-shared", "reproduce", "Claim.", seed=seed)
    r.add_table("t", [{"a": 1}])
    return r


def interrupted_experiment(*, quick, seed, progress):
    raise KeyboardInterrupt


def warning_experiment(*, quick, seed, progress):
    warnings.warn("the pool is small", UserWarning, stacklevel=1)
    return recorded_experiment(quick=quick, seed=seed, progress=progress)


def _main(reproduce, **kw):
    return make_cli("demo", reproduce=reproduce, bench=reproduce, description="d", **kw)


@pytest.mark.parametrize("make_bad", ["file", "file_parent"])
def test_bad_out_fails_before_the_experiment(tmp_path, capsys, make_bad):
    CALLS.clear()
    blocker = tmp_path / "taken"
    blocker.write_text("keep me")
    out = blocker if make_bad == "file" else blocker / "sub"
    code = _main(recorded_experiment)(["reproduce", "--out", str(out)])
    assert code == 2
    assert CALLS == []  # nothing ran
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--out" in err
    assert blocker.read_text() == "keep me"


def test_out_is_created_with_parents_and_report_printed_before_writing(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert _main(recorded_experiment)(["reproduce", "--out", str(out)]) == 0
    assert (out / "report.json").exists()
    text = capsys.readouterr().out
    assert text.index("### t") < text.index("wrote")


def test_lazy_experiment_string_is_imported_only_when_run(tmp_path):
    CALLS.clear()
    main = _main(f"{__name__}:recorded_experiment")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert CALLS == []
    assert main(["reproduce", "--out", str(tmp_path)]) == 0
    assert CALLS == ["ran"]


def test_bad_experiment_string_is_an_error(tmp_path, capsys):
    assert _main("no_colon_here")(["reproduce", "--out", str(tmp_path)]) == 2
    assert "module:function" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(tmp_path, capsys):
    assert _main(interrupted_experiment)(["reproduce", "--out", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "iclr26-demo: interrupted\n"


def test_warnings_print_as_one_line(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert _main(warning_experiment)(["reproduce", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err == "warning: the pool is small\n"


def test_missing_dependency_is_one_line(capsys):
    def setup(parser):
        def handler(args):
            import_optional(
                "surely_not_installed_mod", dist="iclr26-demo", extra="x", purpose="--e"
            )

        return handler

    main = _main(recorded_experiment, commands={"go": ("go", setup)})
    assert main(["go"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--e needs 'surely_not_installed_mod'" in err
    assert "iclr26-demo[x]" in err


def test_import_optional_returns_the_module():
    assert import_optional("json", dist="d", extra="e") is sys.modules["json"]
    with pytest.raises(MissingDependencyError, match=r"pip install 'd\[e\]'"):
        import_optional("surely_not_installed_mod", dist="d", extra="e")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["reproduce", "--seed", "-1"], "argument --seed: expected an integer in [0, 4294967295]"),
        (["reproduce", "--seed", "1.5"], "argument --seed: expected an integer, got '1.5'"),
        (["reproduce", "--seed", str(2**32)], "argument --seed"),
    ],
)
def test_seed_is_validated_at_parse_time(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        _main(recorded_experiment)(argv)
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_help_shows_defaults_once():
    parser = _main(recorded_experiment).build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["reproduce"].format_help()
    assert "(default: 0)" in text  # --seed
    assert "(default: reports/demo)" in text  # --out
    assert "(default: False)" not in text
    assert "(default: 0)" not in parser.format_help()  # -v counts from 0: no default shown


def test_argument_types():
    assert int_arg(1)("3") == 3
    assert float_arg(0, 1)("0.5") == 0.5
    assert int_list_arg(1)("1, 5,10") == [1, 5, 10]
    for parse, text in [
        (int_arg(1), "0"),
        (int_arg(), "abc"),
        (float_arg(0, 1), "1.5"),
        (float_arg(0, 1, low_open=True), "0"),
        (float_arg(), "nan"),
        (float_arg(), "inf"),
        (int_list_arg(1), "abc"),
        (int_list_arg(1), "1,0"),
        (int_list_arg(), ","),
        (existing_file, "/surely/not/here.npy"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_existing_file(tmp_path):
    f = tmp_path / "x.npy"
    f.write_bytes(b"")
    assert existing_file(str(f)) == f
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder"):
        existing_file(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match="does not exist"):
        existing_file(str(tmp_path / "missing.npy"))


def test_prepare_output_paths(tmp_path):
    assert prepare_output_dir(tmp_path / "x" / "y").is_dir()
    log = prepare_output_file(tmp_path / "logs" / "run.jsonl", "--log")
    assert log.parent.is_dir()
    assert not log.exists()
    with pytest.raises(ValueError, match=r"--log .* is a folder"):
        prepare_output_file(tmp_path, "--log")
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="the folder of --log"):
        prepare_output_file(tmp_path / "f" / "run.jsonl", "--log")
