"""JSON is RFC 8259 (no NaN), written atomically; JSONL errors name file and line; appends survive."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from iclr26.shared import JsonlAppender, dumps_json, read_jsonl, to_jsonable, write_json


def test_non_finite_numbers_become_null():
    text = dumps_json({"a": float("nan"), "b": np.float32("inf"), "c": np.array([1.0, np.nan])})
    assert "NaN" not in text
    assert "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": None, "c": [1.0, None]}


@given(st.recursive(st.floats() | st.integers() | st.text() | st.booleans() | st.none(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4),
                    max_leaves=20))  # fmt: skip
def test_dumps_json_is_strict_and_round_trips(value):
    text = dumps_json(value)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}"))

    def finite(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, list):
            return [finite(x) for x in v]
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        return v

    assert json.loads(text) == finite(value) == to_jsonable(value)


def test_write_json_atomic_and_creates_parent(tmp_path):
    path = write_json(tmp_path / "a" / "r.json", {"x": np.int64(3)})
    assert json.loads(path.read_text()) == {"x": 3}
    with pytest.raises(IsADirectoryError):
        write_json(tmp_path, {})
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["r.json"]  # no temp left


def test_read_jsonl_errors_name_file_and_line(tmp_path):
    p = tmp_path / "x.jsonl"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_jsonl(p)
    p.write_text('{"id": 1}\n\n{"id": 2, "v": 3}\n')
    assert read_jsonl(p, required=["id"]) == [{"id": 1}, {"id": 2, "v": 3}]
    with pytest.raises(ValueError, match=r"x.jsonl:1: missing key\(s\) 'v'"):
        read_jsonl(p, required=["v"])
    p.write_text('{"id": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"x.jsonl:2: not valid JSON"):
        read_jsonl(p)
    p.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="expected a JSON object"):
        read_jsonl(p)
    p.write_text("\n")
    with pytest.raises(ValueError, match="holds no records"):
        read_jsonl(p)
    assert read_jsonl(p, allow_empty=True) == []


def test_appender_flushes_each_record_and_repairs_a_torn_line(tmp_path):
    p = tmp_path / "logs" / "run.jsonl"
    with JsonlAppender(p) as log:
        log.append({"id": "a", "x": float("nan")})
        assert read_jsonl(p) == [{"id": "a", "x": None}]  # visible before close
    with p.open("a") as f:
        f.write('{"id": "torn"')  # a crash mid-line
    with JsonlAppender(p) as log:
        log.append({"id": "b"})
    lines = p.read_text().splitlines()
    assert lines[0] == '{"id": "a", "x": null}'
    assert lines[-1] == '{"id": "b"}'
    assert log.written == 1
