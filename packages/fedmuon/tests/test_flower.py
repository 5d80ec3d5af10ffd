"""Message-level tests of the Flower strategy and ClientApp (no network, no Ray)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from iclr26.fedmuon import (
    ClientState,
    FedConfig,
    LMOSpec,
    ServerState,
    client_update,
    least_squares,
    server_update,
)
from iclr26.fedmuon.flower import (
    FedMuonStrategy,
    arrays_to_params,
    config_from_record,
    config_to_record,
    enable_compilation_cache,
    make_client_app,
    make_server_app,
    params_to_arrays,
)

NODES = [11, 22, 33, 44]


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    # Flower stamps messages with the identity of the running task; a test has none
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)


class FakeGrid:
    def get_node_ids(self):
        return list(NODES)


@pytest.fixture(scope="module")
def problem():
    return least_squares(n_clients=4, examples=8, d_in=4, d_out=3, seed=0)


def node_data(problem, node_id):
    i = NODES.index(node_id)
    return jax.tree.map(lambda a: np.asarray(a[i]), problem.clients.data)


CFG = FedConfig(
    n_clients=4,
    clients_per_round=2,
    local_steps=3,
    batch_size=None,
    lr=0.05,
    alpha=0.5,
    lmo=LMOSpec(ns_steps=None),
)


def test_config_and_arrays_round_trip():
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    back = arrays_to_params(params_to_arrays(params), params)
    jax.tree.map(np.testing.assert_array_equal, back, params)
    cfg = FedConfig(
        local_steps=4, batch_size=16, lr=0.2, alpha=0.3, lmo=LMOSpec(ns_steps=3, coeffs="cubic")
    )
    got = config_from_record(config_to_record(cfg))
    assert (got.local_steps, got.batch_size, got.lr, got.alpha, got.lmo) == (
        4,
        16,
        0.2,
        0.3,
        cfg.lmo,
    )
    with pytest.raises(ValueError, match="shape"):
        arrays_to_params(params_to_arrays({"w": jnp.zeros((3, 2)), "b": jnp.ones(3)}), params)


def test_three_rounds_match_the_in_process_algorithm(problem):
    strategy = FedMuonStrategy(CFG, problem.init_params, fraction_train=0.5, seed=0)
    app = make_client_app(
        problem.loss_fn, lambda ctx: node_data(problem, ctx.node_id), problem.init_params
    )
    contexts = {
        n: Context(run_id=1, node_id=n, node_config={}, state=RecordDict(), run_config={})
        for n in NODES
    }
    arrays = params_to_arrays(problem.init_params)
    # reference: the pure functions with the same sampled nodes
    x, c = problem.init_params, jnp.zeros_like(problem.init_params)
    states = {n: ClientState(jnp.zeros_like(x), jnp.zeros_like(x)) for n in NODES}
    for r in (1, 2, 3):
        msgs = list(strategy.configure_train(r, arrays, ConfigRecord(), FakeGrid()))
        assert len(msgs) == 2
        replies = [app(m, contexts[m.metadata.dst_node_id]) for m in msgs]
        arrays, metrics = strategy.aggregate_train(r, replies)
        xs, dcs = [], []
        for m in msgs:
            n = m.metadata.dst_node_id
            data = jax.tree.map(jnp.asarray, node_data(problem, n))
            batches = jax.tree.map(lambda a: jnp.broadcast_to(a, (3, *a.shape)), data)
            y, states[n], dc, _ = client_update(
                "fedmuon", x, states[n], c, batches, problem.loss_fn, CFG
            )
            xs.append(y)
            dcs.append(dc)
        server = server_update(
            "fedmuon",
            ServerState(x, c, jnp.int32(0), optax.EmptyState()),
            jnp.stack(xs),
            jnp.stack(dcs),
            4,
            CFG,
        )
        x, c = server.params, server.c_global
        np.testing.assert_allclose(arrays_to_params(arrays, x), x, atol=1e-6)
        np.testing.assert_allclose(strategy.c_global, c, atol=1e-6)
        assert metrics["participants"] == 2
        # timings: the round as the strategy saw it, and the slowest node's train handler
        assert metrics["round_s"] >= metrics["client_train_s"] > 0
        assert metrics["client_train_s"] >= metrics["client_compile_s"] > 0
    # C_i and M_i persisted in the node's context, never sent to the server
    for n in NODES:
        if "fedmuon_c_local" in contexts[n].state:
            np.testing.assert_allclose(
                arrays_to_params(contexts[n].state["fedmuon_c_local"], x),
                states[n].c_local,
                atol=1e-6,
            )


def _reply(msg, x, dc, loss=1.0):
    content = RecordDict({"arrays": params_to_arrays(x), "delta_c": params_to_arrays(dc),
                          "metrics": MetricRecord({"train_loss": loss, "num-examples": 10})})  # fmt: skip
    return Message(content, reply_to=msg)


def test_aggregate_train_by_hand_with_a_failed_node():
    template = jnp.zeros((1, 2))
    strategy = FedMuonStrategy(CFG, template, fraction_train=0.75, seed=1)
    x0 = jnp.asarray([[4.0, 0.0]])
    msgs = list(
        strategy.configure_train(1, params_to_arrays(x0), ConfigRecord({"extra": 1}), FakeGrid())
    )
    assert len(msgs) == 3
    assert msgs[0].content["config"]["extra"] == 1
    assert msgs[0].content["config"]["server-round"] == 1
    replies = [
        _reply(msgs[0], jnp.asarray([[0.0, 4.0]]), jnp.asarray([[1.0, 0.0]])),
        _reply(msgs[1], jnp.asarray([[4.0, 4.0]]), jnp.asarray([[0.0, 2.0]])),
        Message(Error(code=0, reason="timeout"), reply_to=msgs[2]),
    ]
    arrays, metrics = strategy.aggregate_train(1, replies)
    # n = 4 known nodes, S = 2 valid replies: X⁺ = (2/4)X + (1/4)ΣX_i, C⁺ = 0 + (1/4)ΣΔC_i
    np.testing.assert_allclose(arrays_to_params(arrays, template), [[2.0 + 1.0, 0.0 + 2.0]])
    np.testing.assert_allclose(strategy.c_global, [[0.25, 0.5]])
    assert metrics["participants"] == 2
    assert metrics["n_clients"] == 4
    assert "round_s" in metrics
    assert "client_train_s" not in metrics  # the replies carried no train_s
    assert strategy.aggregate_train(2, []) == (None, None)


def test_client_evaluate_reports_the_loss(problem):
    app = make_client_app(
        problem.loss_fn,
        functools.partial(lambda ctx: node_data(problem, ctx.node_id)),
        problem.init_params,
    )
    ctx = Context(run_id=1, node_id=11, node_config={}, state=RecordDict(), run_config={})
    msg = Message(
        RecordDict({"arrays": params_to_arrays(problem.init_params), "config": ConfigRecord()}),
        dst_node_id=11,
        message_type="evaluate",
    )
    reply = app(msg, ctx)
    expected = float(
        problem.loss_fn(problem.init_params, jax.tree.map(jnp.asarray, node_data(problem, 11)))
    )
    assert reply.content["metrics"]["eval_loss"] == pytest.approx(expected, rel=1e-6)
    assert reply.content["metrics"]["num-examples"] == 8


FLOWER_CASES = [
    ("strategy-cfg", lambda p: FedMuonStrategy({}, p.init_params), TypeError, "cfg"),
    (
        "strategy-n",
        lambda p: FedMuonStrategy(CFG, p.init_params, n_clients=0),
        ValueError,
        "n_clients",
    ),
    (
        "arrays-count",
        lambda p: arrays_to_params(params_to_arrays([p.init_params] * 2), p.init_params),
        ValueError,
        "expected 1 arrays",
    ),
    (
        "arrays-shape",
        lambda p: arrays_to_params(params_to_arrays(p.init_params.T), p.init_params),
        ValueError,
        "shape",
    ),
    (
        "client-seed",
        lambda p: make_client_app(p.loss_fn, lambda c: None, p.init_params, seed=-1),
        ValueError,
        "seed",
    ),
    (
        "client-loss",
        lambda p: make_client_app(None, lambda c: None, p.init_params),
        TypeError,
        "loss_fn",
    ),
    (
        "server-rounds",
        lambda p: make_server_app(FedMuonStrategy(CFG, p.init_params), p.init_params, num_rounds=0),
        ValueError,
        "num_rounds",
    ),
    ("cache-type", lambda p: enable_compilation_cache(3), TypeError, "path"),
    (
        "cache-time",
        lambda p: enable_compilation_cache("c", min_compile_time_s=-1.0),
        ValueError,
        "min_compile_time_s",
    ),
]


@pytest.mark.parametrize(("call", "exc", "match"), [c[1:] for c in FLOWER_CASES],
                         ids=[c[0] for c in FLOWER_CASES])  # fmt: skip
def test_flower_api_refuses_bad_input(problem, call, exc, match):
    with pytest.raises(exc, match=match):
        call(problem)


def test_enable_compilation_cache_refuses_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(ValueError, match="is a file"):
        enable_compilation_cache(f)


@pytest.fixture
def restore_jax_cache():
    from jax.experimental.compilation_cache import compilation_cache as cc

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")  # fmt: skip
    saved = {n: getattr(jax.config, n) for n in names}
    yield
    for n, v in saved.items():
        jax.config.update(n, v)
    cc.reset_cache()


def test_the_client_step_is_loaded_from_the_cache_after_the_first_compile(
    tmp_path, problem, restore_jax_cache
):
    """What a SuperNode's fresh ClientApp process sees each round: after the first, no compiling."""
    from jax import monitoring

    from iclr26.fedmuon.flower import _compiled_client

    events = []
    monitoring.register_event_listener(lambda name, **kw: events.append(name))
    enable_compilation_cache(tmp_path / "cache")
    cfg = FedConfig(local_steps=5, batch_size=None, lr=0.05, alpha=0.5).static_key()
    x = problem.init_params
    z = jnp.zeros_like(x)
    batches = jax.tree.map(
        lambda a: jnp.broadcast_to(a[0], (5, *a.shape[1:])), problem.clients.data
    )
    args = (x, ClientState(z, z), z, batches, jnp.float32(0.05))
    hits = []
    for _ in range(2):
        jax.clear_caches()  # forget in-memory executables, as a new process would
        _compiled_client.cache_clear()
        events.clear()
        _compiled_client(problem.loss_fn, cfg).lower(*args).compile()
        hits.append(events.count("/jax/compilation_cache/cache_hits"))
    assert any((tmp_path / "cache").iterdir()), "nothing was written to the cache"
    assert hits == [0, 1], hits  # the client step compiles in well under JAX's default 1 s
