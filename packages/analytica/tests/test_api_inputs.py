"""Bad input at every entry of the README API table gives a ValueError/TypeError naming the argument."""

import math

import numpy as np
import pandas as pd
import pytest

import iclr26.analytica as A


def tree():
    return A.PropositionTree.from_spec(
        {"sentence": "r", "children": [{"sentence": "a"}, {"sentence": "b"}]}
    )


def df():
    return pd.DataFrame({"x": [1.0, 2.0]}, index=pd.date_range("2020-03-31", periods=2, freq="QE"))


CASES = [
    ("Proof p_true > 1", lambda: A.Proof(1.5), ValueError, "p_true"),
    ("Proof p_true NaN", lambda: A.Proof(math.nan), ValueError, "p_true"),
    ("Proof p_true str", lambda: A.Proof("0.3"), TypeError, "p_true"),
    ("Proposition empty pid", lambda: A.Proposition("", "s"), ValueError, "pid"),
    ("Proposition empty sentence", lambda: A.Proposition("P0", " "), ValueError, "sentence"),
    ("PropositionTree non-node", lambda: A.PropositionTree(["P0"]), TypeError, "Proposition"),
    (
        "PropositionTree dangling",
        lambda: A.PropositionTree([A.Proposition("P0", "s", children=["P1"])]),
        ValueError,
        "dangling",
    ),
    (
        "check_linear_answer mode",
        lambda: A.check_linear_answer({}, {}, mode="fix"),
        ValueError,
        "mode",
    ),
    ("evaluate_formula empty", lambda: A.evaluate_formula("", {}), ValueError, "formula"),
    ("evaluate_formula prob", lambda: A.evaluate_formula("a", {"a": 2.0}), ValueError, "probs"),
    (
        "evaluate_formula unknown var",
        lambda: A.evaluate_formula("a AND b", {"a": 0.5}),
        ValueError,
        "unknown variable",
    ),
    ("LinearSynthesizer mode", lambda: A.LinearSynthesizer(mode="x"), ValueError, "mode"),
    (
        "LinearSynthesizer bounds",
        lambda: A.LinearSynthesizer(coef_bounds=(1, -1)),
        ValueError,
        "coef_bounds",
    ),
    (
        "FittedLinearSynthesizer method",
        lambda: A.FittedLinearSynthesizer("lasso"),
        ValueError,
        "method",
    ),
    (
        "FittedLinearSynthesizer NaN",
        lambda: A.FittedLinearSynthesizer().fit_xy(
            np.array([[np.nan], [1.0]]), np.array([0.0, 1.0])
        ),
        ValueError,
        "finite",
    ),
    (
        "FittedLinearSynthesizer shapes",
        lambda: A.FittedLinearSynthesizer().fit_xy(np.ones((3, 2)), np.ones(2)),
        ValueError,
        "x must be",
    ),
    (
        "FittedLinearSynthesizer empty",
        lambda: A.FittedLinearSynthesizer().fit(tree(), []),
        ValueError,
        "samples",
    ),
    (
        "LogicalSynthesizer assumption",
        lambda: A.LogicalSynthesizer(assumption=1.2),
        ValueError,
        "assumption",
    ),
    ("NoisyGrounder sigma", lambda: A.NoisyGrounder(None, -0.1), ValueError, "sigma"),
    ("NoisyGrounder seed float", lambda: A.NoisyGrounder(None, 0.1, seed=1.5), ValueError, "seed"),
    (
        "DataFrameGrounder frame",
        lambda: A.DataFrameGrounder([1, 2], {"r": len}),
        TypeError,
        "frame",
    ),
    (
        "DataFrameGrounder lag",
        lambda: A.DataFrameGrounder(df(), {"r": len}, publication_lag=-1),
        ValueError,
        "publication_lag",
    ),
    ("DataFrameGrounder rule", lambda: A.DataFrameGrounder(df(), {"r": 3}), TypeError, "rule"),
    (
        "NotebookGrounder steps",
        lambda: A.NotebookGrounder(None, max_steps=0),
        ValueError,
        "max_steps",
    ),
    (
        "NotebookGrounder timeout",
        lambda: A.NotebookGrounder(None, cell_timeout=0),
        ValueError,
        "cell_timeout",
    ),
    (
        "TemplateDecomposer template",
        lambda: A.TemplateDecomposer({"sentence": "x"}),
        ValueError,
        "template",
    ),
    (
        "Analytica concurrency",
        lambda: A.Analytica(None, None, None, max_concurrency=0),
        ValueError,
        "max_concurrency",
    ),
    (
        "Analytica retries float",
        lambda: A.Analytica(None, None, None, max_retries=1.0),
        ValueError,
        "max_retries",
    ),
    ("scenario unknown", lambda: A.scenario(tree(), {"P5": 0.1}), KeyError, "P5"),
    ("scenario value", lambda: A.scenario(tree(), {"P1": -1}), ValueError, "overrides"),
    ("sensitivity method", lambda: A.sensitivity(tree(), "P1", method="x"), ValueError, "method"),
    ("choose threshold", lambda: A.choose([0.5, 0.5], threshold=2), ValueError, "threshold"),
    ("choose negative", lambda: A.choose([-0.5, 0.5]), ValueError, "weights"),
    ("brier lengths", lambda: A.brier([0.5, 0.5], [1]), ValueError, "outcomes"),
    ("brier range", lambda: A.brier([1.5], [1]), ValueError, "p"),
    ("log_loss labels", lambda: A.log_loss([0.5], [0.5]), ValueError, "outcomes"),
    ("score NaN", lambda: A.score([[0.5, math.nan]], [0, 1]), ValueError, "runs"),
    ("across_run_std 1 run", lambda: A.across_run_std([[0.1]]), ValueError, "2 runs"),
    ("option_scores lengths", lambda: A.option_scores([[0.5, 0.5]], []), ValueError, "weights"),
    ("logit_mean range", lambda: A.logit_mean([0.5, 1.5]), ValueError, "probs"),
    ("aggregate method", lambda: A.aggregate([0.5], "mode"), ValueError, "method"),
    ("SelfConsistency k", lambda: A.SelfConsistency(None, k=0), ValueError, "k"),
    ("SelfConsistency k float", lambda: A.SelfConsistency(None, k=2.5), TypeError, "k"),
    (
        "LogisticLeaves one class",
        lambda: A.LogisticLeaves().fit(np.ones((4, 2)), np.zeros(4)),
        ValueError,
        "classes",
    ),
    ("make_spr_world depth", lambda: A.make_spr_world(5, depth=0), ValueError, "depth"),
    ("make_spr_world n float", lambda: A.make_spr_world(5.5), TypeError, "n_questions"),
    (
        "make_spr_world range",
        lambda: A.make_spr_world(5, truth_range=(0.8, 0.2)),
        ValueError,
        "truth_range",
    ),
    (
        "synthesize_batch shape",
        lambda: A.synthesize_batch(A.make_spr_world(2).tree, np.ones((2, 2))),
        ValueError,
        "leaf_values",
    ),
    (
        "make_macro_benchmark n_train",
        lambda: A.make_macro_benchmark(n_train=5),
        ValueError,
        "n_train",
    ),
    (
        "OpenAICompatibleClient url",
        lambda: A.OpenAICompatibleClient("localhost:8000", "m"),
        ValueError,
        "base_url",
    ),
    (
        "OpenAICompatibleClient retries",
        lambda: A.OpenAICompatibleClient("http://x", "m", max_retries=-1),
        ValueError,
        "max_retries",
    ),
    (
        "LoopbackChatServer fault",
        lambda: A.LoopbackChatServer(str, script=["teapot"]),
        ValueError,
        "fault",
    ),
    ("SimulatedJudge noise", lambda: A.SimulatedJudge(float, noise_sd=-1), ValueError, "noise_sd"),
    (
        "SimulatedLLM rate",
        lambda: A.SimulatedLLM({}, unparseable_rate=2),
        ValueError,
        "unparseable_rate",
    ),
    ("extract_json none", lambda: A.extract_json("no json"), ValueError, "JSON"),
    ("CallLedger bad file", None, ValueError, "ledger entry"),
]


@pytest.mark.parametrize(("name", "call", "exc", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_named_error(name, call, exc, match, tmp_path):
    if call is None:
        path = tmp_path / "ledger.jsonl"
        path.write_text('{"nope": 1}\n')

        def call():
            return A.CallLedger(path)

    with pytest.raises(exc, match=match):
        call()


def test_every_public_name_resolves():
    for name in A.__all__:
        assert getattr(A, name) is not None
