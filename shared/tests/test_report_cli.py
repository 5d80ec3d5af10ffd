import json

import numpy as np
import pytest

from iclr26.shared import Report, make_cli, write_summary
from iclr26.shared.report import format_value


def make_report(held=True, seed=0):
    r = Report(
        "iclr26-shared",
        "reproduce",
        "Sorting is faster than bogosort.",
        seed=seed,
        config={"quick": True, "n": np.int64(5)},
    )
    r.add_table(
        "E1 timings",
        [{"method": "sort", "s": 0.5}, {"method": "bogo", "s": np.float32(9.0), "extra": 1}],
    )
    r.check("sort wins", held, "0.5 s vs 9 s")
    r.metric("speedup", np.float64(18.0))
    r.metric("undefined", float("nan"))
    r.metric("max |z|", 2.5)
    r.note("measured on 2 CPUs")
    return r


def test_report_json_has_claim_rows_verdict_env_and_json_safe_numbers(tmp_path):
    path = make_report().write(tmp_path)
    assert path == tmp_path / "report.md"
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["claim"] == "Sorting is faster than bogosort."
    assert data["held"] is True
    assert data["seed"] == 0
    assert data["config"] == {"quick": True, "n": 5}
    assert data["metrics"] == {"speedup": 18.0, "undefined": None, "max |z|": 2.5}
    assert data["tables"][0]["columns"] == ["method", "s", "extra"]
    assert data["tables"][0]["rows"][1] == {"method": "bogo", "s": 9.0, "extra": 1}
    assert data["wall_time_s"] >= 0
    env = data["environment"]
    assert env["cpu_count"] >= 1
    assert env["versions"]["numpy"] == np.__version__
    assert env["python"].count(".") == 2


def test_report_markdown_shows_verdict_table_and_notes(tmp_path):
    md = make_report(held=False).write(tmp_path).read_text()
    assert "**Verdict: DID NOT HOLD.**" in md
    assert "- sort wins: **did not hold** (0.5 s vs 9 s)" in md
    assert "| method | s | extra |" in md
    assert "| bogo | 9 | 1 |" in md
    assert "| sort | 0.5 | — |" in md
    assert "measured on 2 CPUs" in md


def test_report_without_checks_is_not_checked():
    r = Report("iclr26-shared", "bench", "x", seed=1)
    assert r.held is None
    assert "not checked" in r.to_markdown()


def test_report_validates_inputs():
    with pytest.raises(ValueError, match="kind must be one of"):
        Report("p", "train", "claim", seed=0)
    with pytest.raises(ValueError, match="claim must not be empty"):
        Report("p", "bench", "  ", seed=0)
    r = Report("p", "bench", "c", seed=0)
    with pytest.raises(ValueError, match="rows of table 'T' must not be empty"):
        r.add_table("T", [])
    with pytest.raises(TypeError, match="matplotlib Figure"):
        r.add_figure("fig", object())
    with pytest.raises(ValueError, match="plain file stem"):
        r.add_figure("../fig", object())


def test_report_saves_figures_as_png(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    r = make_report()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    r.add_figure("curve", fig)
    r.write(tmp_path)
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![curve](curve.png)" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text())["figures"] == ["curve.png"]
    assert not plt.get_fignums()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "—"),
        (float("nan"), "—"),
        (True, "yes"),
        (np.bool_(False), "no"),
        (3, "3"),
        (0.000123456, "0.0001235"),
        (np.float32(2.5), "2.5"),
        ("a|b", "a\\|b"),
    ],
)
def test_format_value(value, shown):
    assert format_value(value) == shown


def test_write_summary_one_row_per_package(tmp_path):
    make_report(held=True).write(tmp_path / "alpha")
    make_report(held=False).write(tmp_path / "beta")
    Report("iclr26-beta", "bench", "fast", seed=0).write(tmp_path / "beta" / "bench")
    text = write_summary(tmp_path).read_text()
    assert (
        "| [alpha](alpha/report.md) | Sorting is faster than bogosort. | speedup = 18; undefined = —; max \\|z\\| = 2.5 | held |"
        in text
    )
    assert "| [beta](beta/report.md) |" in text
    assert "**did not hold**" in text
    assert "| [beta/bench](beta/bench/report.md) | fast | — | not checked |" in text


def test_write_summary_empty(tmp_path):
    assert "No reports yet." in write_summary(tmp_path / "none").read_text()


def fake_experiment(calls):
    def experiment(*, quick, seed, progress):
        calls.append((quick, seed, progress))
        r = Report("iclr26-shared", "reproduce", "Claim.", seed=seed, config={"quick": quick})
        r.add_table("t", [{"a": 1}])
        r.check("ok", True)
        return r

    return experiment


def test_cli_reproduce_passes_options_and_writes_report(tmp_path, capsys):
    calls = []
    main = make_cli(
        "demo", reproduce=fake_experiment(calls), bench=fake_experiment(calls), description="d"
    )
    assert (
        main(["reproduce", "--quick", "--seed", "5", "--out", str(tmp_path), "--no-progress"]) == 0
    )
    assert calls == [(True, 5, False)]
    assert json.loads((tmp_path / "report.json").read_text())["seed"] == 5
    out = capsys.readouterr().out
    assert "**Verdict: HELD.**" in out
    assert "wrote" in out


def test_cli_defaults(tmp_path, monkeypatch):
    calls = []
    monkeypatch.chdir(tmp_path)
    main = make_cli(
        "demo", reproduce=fake_experiment(calls), bench=fake_experiment(calls), description="d"
    )
    main(["bench"])
    assert calls == [(False, 0, True)]
    assert (tmp_path / "reports" / "demo" / "bench" / "report.json").exists()


@pytest.mark.parametrize(
    "argv", [["reproduce", "--seed", "-1"], ["reproduce", "--seed", "x"], [], ["train"]]
)
def test_cli_rejects_bad_arguments(argv, capsys):
    main = make_cli(
        "demo", reproduce=fake_experiment([]), bench=fake_experiment([]), description="d"
    )
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2


def test_cli_extra_command_and_user_errors(capsys):
    def setup(parser):
        parser.add_argument("--k", type=int, required=True)

        def handler(args):
            if args.k < 0:
                raise ValueError(f"k must be >= 0, got {args.k}")
            print("k", args.k)

        return handler

    main = make_cli(
        "demo",
        reproduce=fake_experiment([]),
        bench=fake_experiment([]),
        description="d",
        commands={"select": ("pick items", setup)},
    )
    assert main(["select", "--k", "3"]) == 0
    assert capsys.readouterr().out == "k 3\n"
    assert main(["select", "--k", "-1"]) == 2
    assert capsys.readouterr().err == "iclr26-demo: error: k must be >= 0, got -1\n"


def test_cli_rejects_experiment_not_returning_report(tmp_path):
    main = make_cli(
        "demo", reproduce=lambda **kw: {"a": 1}, bench=fake_experiment([]), description="d"
    )
    with pytest.raises(TypeError, match="must return a Report"):
        main(["reproduce", "--out", str(tmp_path)])
