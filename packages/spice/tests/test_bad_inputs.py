"""Every function of the README API table refuses bad input with a ValueError/TypeError naming
the argument: wrong shape, NaN/inf, empty, non-integer counts or indices (refused, never
truncated), out-of-range hyper-parameters. Integer gradient matrices are converted."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import iclr26.spice as S
from iclr26.spice.models import MLP

G = np.random.default_rng(0).normal(size=(12, 5))
NAN = G.copy()
NAN[3, 2] = np.nan
INF = G.copy()
INF[0, 0] = np.inf

# name -> call taking the gradient matrix (each table entry that takes one)
MATRIX_FUNCTIONS = {
    "logdet_utility": lambda g: S.logdet_utility(g),
    "FisherState": lambda g: S.FisherState(g),
    "greedy_logdet": lambda g: S.greedy_logdet(g, 3),
    "spice": lambda g: S.spice(g, 3),
    "topk": lambda g: S.topk(g, 3),
    "describe": lambda g: S.describe(g, [0, 1]),
    "topk_norm": lambda g: S.topk_norm(g, 3),
    "less_cosine": lambda g: S.less_cosine(g, G[:2], 3),
    "tracin_dot": lambda g: S.tracin_dot(g, G[:2], 3),
    "kcenter_greedy": lambda g: S.kcenter_greedy(g, 3),
    "facility_location": lambda g: S.facility_location(g, 3),
    "dpp_greedy": lambda g: S.dpp_greedy(g, 3),
    "conflict_stats": lambda g: S.conflict_stats(g, [0, 1]),
}
BAD_MATRICES = {
    "NaN": (NAN, ValueError, "NaN|finite"),
    "inf": (INF, ValueError, "NaN|finite|inf"),
    "1-D": (G[0], ValueError, "dimension|shape"),
    "3-D": (G[None], ValueError, "dimension|shape"),
    "text": (np.full((12, 5), "a"), ValueError, "could not convert|number|real"),
}


@pytest.mark.parametrize("bad", sorted(BAD_MATRICES))
@pytest.mark.parametrize("name", sorted(MATRIX_FUNCTIONS))
def test_bad_matrix(name, bad):
    value, error, match = BAD_MATRICES[bad]
    with pytest.raises(error, match=match):
        MATRIX_FUNCTIONS[name](value)


@pytest.mark.parametrize("name", sorted(set(MATRIX_FUNCTIONS) - {"logdet_utility"}))
def test_empty_matrix(name):
    with pytest.raises(ValueError, match="empty"):
        MATRIX_FUNCTIONS[name](np.zeros((0, 5)))


@pytest.mark.parametrize("name", sorted(MATRIX_FUNCTIONS))
def test_integer_matrix_is_converted_not_truncated(name):
    Gi = np.arange(60).reshape(12, 5) % 7 - 3
    a, b = MATRIX_FUNCTIONS[name](Gi), MATRIX_FUNCTIONS[name](Gi.astype(float))
    if isinstance(a, S.Selection):
        assert a.indices.tolist() == b.indices.tolist()
    elif isinstance(a, S.FisherState):
        np.testing.assert_allclose(a.gains_, b.gains_)
    elif isinstance(a, dict):
        assert a == b
    else:
        np.testing.assert_allclose(a, b)


K_TAKERS = ["greedy_logdet", "spice", "topk", "topk_norm", "kcenter_greedy", "facility_location", "dpp_greedy"]  # fmt: skip


@pytest.mark.parametrize(("k", "error"), [(0, ValueError), (-1, ValueError), (13, ValueError),
                                      (2.5, TypeError), (True, TypeError), ("3", TypeError)])  # fmt: skip
@pytest.mark.parametrize("name", K_TAKERS)
def test_bad_k(name, k, error):
    with pytest.raises(error, match="k"):
        getattr(S, name)(G, k)


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("name", ["logdet_utility", "FisherState", "greedy_logdet", "spice", "topk", "dpp_greedy"])  # fmt: skip
def test_bad_alpha(name, alpha):
    fn = getattr(S, name)
    args = (G,) if name in ("logdet_utility", "FisherState") else (G, 3)
    with pytest.raises(ValueError, match="alpha"):
        fn(*args, alpha=alpha)


@pytest.mark.parametrize(
    ("indices", "error", "match"),
    [([0, 0], ValueError, "distinct"), ([12], ValueError, r"\[0, 12\)"), ([-1], ValueError, r"\[0, 12\)"),
     ([0.5, 1.0], TypeError, "integers"), ([], ValueError, "non-empty"), ([[0, 1]], ValueError, "1-D")],
)  # fmt: skip
@pytest.mark.parametrize("name", ["describe", "conflict_stats"])
def test_bad_indices(name, indices, error, match):
    with pytest.raises(error, match=match):
        getattr(S, name)(G, indices)


def test_selector_options():
    with pytest.raises(ValueError, match="mode"):
        S.greedy_logdet(G, 3, mode="nope")
    with pytest.raises(ValueError, match="halflife"):
        S.spice(G, 3, halflife=1.5)
    with pytest.raises(ValueError, match="conflict_penalty"):
        S.spice(G, 3, conflict_penalty=-0.1)
    with pytest.raises(ValueError, match="conflict_penalty"):
        S.spice(G, 3, conflict_penalty=float("inf"))
    with pytest.raises(ValueError, match="penalty_scale"):
        S.spice(G, 3, penalty_scale="huge")
    with pytest.raises(ValueError, match="reference"):
        S.spice(G, 3, reference=np.ones(4))  # wrong length
    with pytest.raises(ValueError, match="larger than the pool"):
        S.random_subset(10, 11, seed=0)
    with pytest.raises(ValueError, match="G_target"):
        S.less_cosine(G, np.ones((2, 4)), 3)  # target dimension differs
    with pytest.raises(ValueError, match="G_target"):
        S.less_cosine(G, np.full((2, 5), np.nan), 3)


def _xent(call, sample):
    x, y = sample
    return nn.functional.cross_entropy(call(x), y, reduction="none")


def test_per_sample_grads_bad_inputs():
    model = MLP(4, 3, hidden=0).eval()
    X, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    with pytest.raises(TypeError, match="model"):
        S.per_sample_grads("model", _xent, (X, y))
    with pytest.raises(TypeError, match="compute_loss"):
        S.per_sample_grads(model, None, (X, y))
    with pytest.raises(ValueError, match="method"):
        S.per_sample_grads(model, _xent, (X, y), method="fast")
    with pytest.raises(ValueError, match="first dimension"):
        S.per_sample_grads(model, _xent, (X, y[:3]))
    with pytest.raises(ValueError, match="empty"):
        S.per_sample_grads(model, _xent, (X[:0], y[:0]))
    Xn = X.clone()
    Xn[1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        S.per_sample_grads(model, _xent, (Xn, y))
    with pytest.raises(ValueError, match="chunk_size"):
        S.per_sample_grads(model, _xent, (X, y), method="vmap", chunk_size=0)
    with pytest.raises(TypeError, match="projector"):
        S.per_sample_grads(model, _xent, (X, y), projector=np.eye(15))
    with pytest.raises(ValueError, match=r"shape \(n, 7\)"):
        S.per_sample_grads(model, _xent, (X, y), projector=S.RandomProjector(7, 2))
    with pytest.raises(ValueError, match="unknown parameter names"):
        S.per_sample_grads(model, _xent, (X, y), params=["nope"])
    with pytest.raises(ValueError, match="scalar"):  # a per-example loss on one sample is fine,
        S.per_sample_grads(model, lambda c, s: torch.zeros(2), (X, y), method="loop")


@pytest.mark.parametrize("cls", [S.RandomProjector, S.KroneckerProjector])
def test_projector_bad_arguments(cls):
    with pytest.raises(ValueError, match=r"d_in|k_in"):
        cls(0, 4)
    with pytest.raises(TypeError):
        cls(4.5, 4)
    with pytest.raises(ValueError, match="seed"):
        cls(4, 4, seed=-1)
    with pytest.raises(ValueError, match="kind"):
        cls(4, 4, kind="sparse")


def test_lm_and_stream_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="examples"):
        S.lm_per_sample_grads(None, None, [])
    with pytest.raises(TypeError, match=r"examples\[0\]"):
        S.lm_per_sample_grads(None, None, ["just a string"])
    with pytest.raises(ValueError, match="data"):
        S.stream_select([], lambda b: np.ones((len(b), 2)))
    with pytest.raises(ValueError, match="budget"):
        S.stream_select([1, 2], lambda b: np.ones((len(b), 2)), budget=1.5)
    with pytest.raises(ValueError, match="budget"):
        S.stream_select([1, 2], lambda b: np.ones((len(b), 2)), budget=0)
    with pytest.raises(TypeError, match="pool_size"):
        S.stream_select([1, 2], lambda b: np.ones((len(b), 2)), pool_size=2.0)
    with pytest.raises(ValueError, match="selector"):
        S.stream_select([1, 2], lambda b: np.ones((len(b), 2)), selector="best")
    called = []
    with pytest.raises(ValueError, match="log_path"):  # a folder: refused before any gradient
        S.stream_select(
            [1, 2], lambda b: called.append(1) or np.ones((len(b), 2)), log_path=tmp_path
        )
    assert not called
    with pytest.raises(ValueError, match="rows"):
        S.stream_select([1, 2, 3], lambda b: np.ones((1, 2)), pool_size=3)
    with pytest.raises(ValueError, match="NaN"):
        S.stream_select([1, 2, 3], lambda b: np.full((len(b), 2), np.nan), pool_size=3)


def test_import_does_not_load_torch():
    code = "import sys, iclr26.spice as s; s.greedy_logdet; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
