"""Per-session checkpoints: resume after a crash gives the uninterrupted result."""

import json
import math

import pytest
import torch

from iclr26.safa_snn import (
    SAFA,
    FineTuneSNN,
    FSCILProtocol,
    SpikingMLP,
    load_digits_fscil,
    make_sessions,
    run_fscil,
    train_base,
)
from iclr26.safa_snn.checkpoint import latest_session


class Crash(RuntimeError):
    pass


@pytest.fixture(scope="module")
def setup():
    data = load_digits_fscil(seed=0)
    protocol = FSCILProtocol(base_classes=5, way=1, shot=5, sessions=4, seed=0)
    s0 = make_sessions(data, protocol)[0]
    torch.manual_seed(0)
    model = SpikingMLP(64, hidden=(32,), feat_dim=16, T=2, num_classes=5, mask_seed=0)
    x, y = data.x_train[s0.train_idx], data.y_train[s0.train_idx]
    train_base(model, x, y, s0.new_classes, epochs=1, seed=0)
    return data, protocol, model


def _same(a, b):
    for f in ("acc", "base_acc", "novel_acc", "hmean", "sops", "session_energy", "thresholds"):
        va, vb = getattr(a, f), getattr(b, f)
        assert len(va) == len(vb), f
        for p, q in zip(va, vb, strict=True):
            assert (math.isnan(p) and math.isnan(q)) or p == q, (f, va, vb)


def _crash_at(method, session_index):
    """Make ``method.learn`` raise when it reaches ``session_index`` (1-based incremental)."""
    calls = {"n": 0}
    orig = method.learn

    def learn(*a, **k):
        calls["n"] += 1
        if calls["n"] == session_index:
            raise Crash("simulated crash")
        return orig(*a, **k)

    method.learn = learn
    return calls


@pytest.mark.parametrize(
    "make", [lambda: SAFA(alpha=0.5), lambda: FineTuneSNN(epochs=2, seed=3)], ids=["safa", "ft"]
)
def test_crash_then_resume_equals_uninterrupted(setup, tmp_path, make):
    data, protocol, model = setup
    ref = run_fscil(make(), data, protocol, model, seed=1)
    folder = tmp_path / "run"
    m = make()
    _crash_at(m, 3)
    with pytest.raises(Crash):
        run_fscil(m, data, protocol, model, seed=1, checkpoint_dir=folder)
    assert latest_session(folder) == 2  # sessions 0, 1, 2 finished
    # the restarted process: a fresh method, learn() is called only for sessions 3 and 4
    m2 = make()
    calls = _crash_at(m2, 99)
    torch.manual_seed(12345)  # the restart's global RNG differs; the checkpoint restores it
    res = run_fscil(m2, data, protocol, model, seed=1, checkpoint_dir=folder, resume=True)
    assert calls["n"] == 2
    _same(res, ref)
    assert latest_session(folder) == protocol.sessions
    # a finished run resumes to the same result without learning anything
    m3 = make()
    calls = _crash_at(m3, 99)
    res3 = run_fscil(m3, data, protocol, model, seed=1, checkpoint_dir=folder, resume=True)
    assert calls["n"] == 0
    _same(res3, ref)
    meta = json.loads((folder / "session_04.json").read_text())
    assert meta["session"] == 4
    assert meta["result"]["hmean"][0] is None  # NaN stored as null


def test_checkpoint_refuses_other_config(setup, tmp_path):
    data, protocol, model = setup
    folder = tmp_path / "run"
    run_fscil(SAFA(), data, protocol, model, checkpoint_dir=folder)
    with pytest.raises(ValueError, match="already holds"):
        run_fscil(SAFA(), data, protocol, model, checkpoint_dir=folder)
    with pytest.raises(ValueError, match=r"another configuration \(differs in: method\)"):
        run_fscil(SAFA(alpha=0.3), data, protocol, model, checkpoint_dir=folder, resume=True)
    with pytest.raises(ValueError, match="differs in: seed"):
        run_fscil(SAFA(), data, protocol, model, seed=5, checkpoint_dir=folder, resume=True)
    other = FSCILProtocol(base_classes=5, way=1, shot=4, sessions=4, seed=0)
    with pytest.raises(ValueError, match="differs in: protocol"):
        run_fscil(SAFA(), data, other, model, checkpoint_dir=folder, resume=True)
    m2 = SpikingMLP(64, hidden=(32,), feat_dim=16, T=2, num_classes=5, mask_seed=1)
    with pytest.raises(ValueError, match="differs in: base_model"):
        run_fscil(SAFA(), data, protocol, m2, checkpoint_dir=folder, resume=True)
    with pytest.raises(ValueError, match="needs a checkpoint_dir"):
        run_fscil(SAFA(), data, protocol, model, resume=True)
    with pytest.raises(TypeError, match="resume"):
        run_fscil(SAFA(), data, protocol, model, checkpoint_dir=folder, resume=1)
    # a corrupted tensor file is detected
    st = folder / "session_04.safetensors"
    st.write_bytes(st.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(ValueError, match="SHA-256"):
        run_fscil(SAFA(), data, protocol, model, checkpoint_dir=folder, resume=True)


def test_run_keeps_backbone_in_eval_mode(setup):
    # regression: the energy counter's wrapper once switched the backbone to training mode, so
    # BatchNorm used test-batch statistics and updated its running statistics on test data
    data, protocol, model = setup
    m = SAFA(regulate=False)
    run_fscil(m, data, protocol, model)
    assert not m.model.training
    bn, bn0 = m.model.layers[1], model.layers[1]
    assert torch.equal(bn.running_mean, bn0.running_mean)
    assert int(bn.num_batches_tracked) == int(bn0.num_batches_tracked)
