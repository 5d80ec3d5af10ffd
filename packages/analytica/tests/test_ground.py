"""Spec tests 10 and 12: the data grounder's no-lookahead guard, the LLM prover's parsing, and the
notebook prover on a local kernel (two-cell proof, timeout, no network, scratch folder)."""

import asyncio

import numpy as np
import pandas as pd
import pytest

from iclr26.analytica import (
    CallableClient,
    DataFrameGrounder,
    GroundingError,
    LLMGrounder,
    LookaheadError,
    NotebookGrounder,
    ParseFailure,
    Proposition,
    ScriptedClient,
    SimulatedLLM,
    make_macro_benchmark,
)


def frame():
    idx = pd.date_range("2020-03-31", periods=8, freq="QE")
    return pd.DataFrame({"x": np.arange(8.0)}, index=idx)


def prop(rule, date="2020-12-31"):
    return Proposition("P1", f"rule {rule}", date=date, meta={"rule": rule})


RULES = {
    "last_up": lambda h, d: float(h["x"].iloc[-1] > h["x"].iloc[-2]),
    "peek_label": lambda h, d: float(h.loc[d + pd.offsets.QuarterEnd(1), "x"] > 3),
    "peek_shift": lambda h, d: h["x"].shift(-1).iloc[-1] / 10,
    "peek_iloc": lambda h, d: float(h["x"].iloc[len(h)] > 3),
    "share": lambda h, d: float(len(h)) / 8,
}


def test_rules_see_only_rows_up_to_the_query_date():
    seen = []
    g = DataFrameGrounder(frame(), {**RULES, "spy": lambda h, d: seen.append(h.index.max()) or 0.5})
    g.evaluate(prop("spy"))
    assert seen == [pd.Timestamp("2020-12-31")]
    assert g.evaluate(prop("share")) == 4 / 8  # 2020Q1..Q4
    assert g.evaluate(prop("last_up")) == 1.0
    lagged = DataFrameGrounder(frame(), RULES, publication_lag=1)
    assert lagged.evaluate(prop("share")) == 3 / 8


@pytest.mark.parametrize("rule", ["peek_label", "peek_shift", "peek_iloc"])
def test_lookahead_raises(rule):
    with pytest.raises(LookaheadError, match="2020-12-31"):
        DataFrameGrounder(frame(), RULES).evaluate(prop(rule))


def test_macro_rules_give_the_same_value_with_or_without_future_rows():
    mb = make_macro_benchmark()
    date = mb.test_dates[5]
    tree = mb.tree(date)
    cut = DataFrameGrounder(mb.features.loc[: pd.Timestamp(date)], mb.grounder.rules)
    for pid in tree.leaves():
        node = tree.get(pid)
        assert mb.grounder.evaluate(node) == cut.evaluate(node)
    # the outcome resolves one quarter after the query date
    assert pd.Timestamp(mb.test_dates[6]) > pd.Timestamp(date)


def test_dataframe_grounder_validates():
    with pytest.raises(TypeError):
        DataFrameGrounder(frame().reset_index(drop=True), RULES)
    with pytest.raises(ValueError, match="rules"):
        DataFrameGrounder(frame(), {})
    with pytest.raises(ValueError, match="not a date"):
        DataFrameGrounder(frame(), RULES).evaluate(prop("share", date="someday"))
    with pytest.raises(KeyError):
        DataFrameGrounder(frame(), RULES).evaluate(prop("missing"))


def test_llm_grounder_parses_fenced_json_and_repairs():
    client = ScriptedClient(
        ["Likely.", '{"p_true": 1.7}', 'Sure:\n```json\n{"p_true": 0.72, "key_factor": "k"}\n```']
    )
    proof = asyncio.run(
        LLMGrounder(client).ground(Proposition("P1", "It rains", date="2024-01-01"))
    )
    assert proof.p_true == 0.72
    assert proof.key_factor == "k"
    assert len(client.calls) == 3
    with pytest.raises(ParseFailure):
        asyncio.run(
            LLMGrounder(ScriptedClient(["nope"] * 4), max_repairs=3).ground(Proposition("P1", "x"))
        )


CELLS = [
    "x = 21",
    "import os\nprint(os.path.basename(os.getcwd()))",
    "while True:\n    pass",
    "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)",
    "print(x * 2)",
]


def test_notebook_grounder_runs_cells_with_timeout_and_no_network(tmp_path):
    pytest.importorskip("ipykernel")
    llm = SimulatedLLM({"The answer is 42": 0.9}, notebook_cells=CELLS)
    g = NotebookGrounder(CallableClient(llm), cell_timeout=2.0, workdir=tmp_path, max_debug=3)
    proof = asyncio.run(g.ground(Proposition("P1", "The answer is 42", date="2024-01-01")))
    cells = proof.meta["cells"]
    assert proof.p_true == 0.9
    assert [c["ok"] for c in cells] == [True, True, False, False, True]
    assert cells[1]["output"].startswith("proof-P1-")
    assert "TimeoutError" in cells[2]["output"]
    assert "PermissionError" in cells[3]["output"]
    assert cells[4]["output"].strip() == "42"  # the kernel survived the interrupt with its state
    assert list(tmp_path.iterdir()) == []  # scratch folder removed


@pytest.mark.slow  # a second kernel start
def test_notebook_grounder_gives_up_after_max_debug(tmp_path):
    pytest.importorskip("ipykernel")
    llm = SimulatedLLM({}, notebook_cells=["1/0"] * 5)
    g = NotebookGrounder(CallableClient(llm), cell_timeout=5.0, workdir=tmp_path, max_debug=2)
    with pytest.raises(GroundingError, match="2 failing cells"):
        asyncio.run(g.ground(Proposition("P1", "x", date="2024-01-01")))
