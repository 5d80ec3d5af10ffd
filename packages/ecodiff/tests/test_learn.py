"""Mask learning: it finds dead units, is seeded, order-invariant, resumable and stops on NaN."""

import pytest
import torch
from diffusers import DDIMScheduler

from iclr26.ecodiff.learn import EcoDiffConfig, NonFiniteLossError, learn_masks
from iclr26.ecodiff.sampler import diffusers_model_fn, from_scheduler
from iclr26.ecodiff.select import select
from iclr26.ecodiff.units import find_prunable_units


def _cal(n_batches=2, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 1, 8, 8, generator=g, dtype=torch.float64),
             torch.randint(0, 10, (batch,), generator=g)) for _ in range(n_batches)]  # fmt: skip


def _cfg(**kw):
    base = {"epochs": 3, "lr_attn": 0.2, "lr_ffn": 0.2, "warmup": 1, "beta": 0.05, "reg": "l1", "init_logit": 1.0,
                "noise_eps": 0.5, "grad_accum": 1, "seed": 0}  # fmt: skip
    base.update(kw)
    return EcoDiffConfig(**base)


@pytest.fixture
def sampler():
    return from_scheduler(DDIMScheduler(clip_sample=False), 3)


@pytest.mark.parametrize("objective", ["end_to_end", "local"])
def test_learning_ranks_dead_units_last(dit, sampler, objective):
    units = find_prunable_units(dit, kinds=("ffn",))
    ff = units[0]
    dead = torch.zeros(ff.size, dtype=torch.bool)
    dead[::2] = True
    with torch.no_grad():  # neurons whose output column is zero cannot matter
        dit.get_submodule(ff.consumers[0][0]).weight[:, dead] = 0
    scores = learn_masks(dit, sampler, _cal(), units=units, config=_cfg(objective=objective))
    lam = scores.logits[ff.key]
    assert float(lam[~dead].mean()) > float(lam[dead].mean()) + 0.1
    # at the dead fraction of that module, selection removes dead neurons first
    if objective == "end_to_end":
        keep = select(scores, 0.5, scope="local", budget="units")
        assert int((~keep[ff.key] & ~dead).sum()) <= 2
    assert len(scores.history) == 3 * 2
    assert all("recon" in h for h in scores.history)


def test_learning_is_seeded_and_order_invariant(dit, sampler):
    units = find_prunable_units(dit)
    cfg = _cfg(epochs=1)
    a = learn_masks(dit, sampler, _cal(), units=units, config=cfg)
    b = learn_masks(dit, sampler, _cal(), units=units, config=cfg)
    for u in units:
        assert torch.equal(a.logits[u.key], b.logits[u.key])
    # logits are keyed by module, not by call order: reversing the unit list gives the same
    # scores (noise-free sigmoid gate, so the draw order does not matter either)
    sig = _cfg(epochs=1, gate="sigmoid")
    fwd = learn_masks(dit, sampler, _cal(), units=units, config=sig)
    rev = learn_masks(dit, sampler, _cal(), units=units[::-1], config=sig)
    for u in units:
        assert torch.allclose(fwd.logits[u.key], rev.logits[u.key], rtol=0, atol=1e-12)
    d = learn_masks(dit, sampler, _cal(), units=units, config=_cfg(epochs=1, seed=1))
    assert any(not torch.equal(a.logits[u.key], d.logits[u.key]) for u in units)
    assert all(p.requires_grad for p in dit.parameters())  # model restored


def test_resume_and_checkpoint_file(dit, sampler, tmp_path):
    from safetensors.torch import load_file

    units = find_prunable_units(dit)
    path = tmp_path / "logits.safetensors"
    first = learn_masks(dit, sampler, _cal(), units=units, config=_cfg(epochs=1),
                        checkpoint_path=path)  # fmt: skip
    saved = load_file(str(path))
    assert all(torch.equal(saved[u.key], first.logits[u.key]) for u in units)
    resumed = learn_masks(dit, sampler, _cal(), units=units, config=_cfg(epochs=1, lr_attn=1e-9,
                          lr_ffn=1e-9, beta=0.0), init_scores=first)  # fmt: skip
    for u in units:
        assert torch.allclose(resumed.logits[u.key], first.logits[u.key], atol=1e-6)


def test_non_finite_loss_stops_with_last_good_logits(dit, sampler, tmp_path):
    units = find_prunable_units(dit)
    fn = diffusers_model_fn(dit)
    calls = {"n": 0}

    def poisoned(z, t, cond):
        calls["n"] += 1
        out = fn(z, t, cond)
        return out * float("nan") if calls["n"] > 12 else out

    path = tmp_path / "last.safetensors"
    with pytest.raises(NonFiniteLossError, match="last good logits"):
        learn_masks(dit, sampler, _cal(n_batches=4), units=units, config=_cfg(epochs=2),
                    model_fn=poisoned, checkpoint_path=path)  # fmt: skip
    assert path.is_file()
    from safetensors.torch import load_file

    assert all(torch.isfinite(v).all() for v in load_file(str(path)).values())


def test_calibration_is_validated(dit, sampler):
    bad = [(torch.randn(2, 1, 8, 8, dtype=torch.float64), torch.tensor([1, 2, 3]))]
    with pytest.raises(ValueError, match="cond has batch 3"):
        learn_masks(dit, sampler, bad)
    with pytest.raises(ValueError, match="at least one"):
        learn_masks(dit, sampler, [])
    nan = [(torch.full((2, 1, 8, 8), float("nan"), dtype=torch.float64), torch.tensor([1, 2]))]
    with pytest.raises(ValueError, match="not finite"):
        learn_masks(dit, sampler, nan)


class _FakeProcess:
    """One process of a data-parallel group whose all-reduce is the identity (the other
    processes would hold the same values): enough to check sharding, seeding and writes."""

    def __init__(self, index, world):
        self.process_index, self.num_processes = index, world
        self.is_main_process = index == 0
        self.reduced = 0

    def reduce(self, tensor, reduction="mean"):
        assert reduction == "mean"
        self.reduced += 1
        return tensor


def test_accelerate_single_process_equals_plain_run(dit, sampler, tmp_path):
    accelerate = pytest.importorskip("accelerate")
    units = find_prunable_units(dit)
    cfg = _cfg(epochs=1)
    plain = learn_masks(dit, sampler, _cal(), units=units, config=cfg)
    acc = accelerate.Accelerator(cpu=True)
    path = tmp_path / "logits.safetensors"
    dp = learn_masks(dit, sampler, _cal(), units=units, config=cfg, accelerator=acc,
                     checkpoint_path=path)  # fmt: skip
    for u in units:
        assert torch.equal(plain.logits[u.key], dp.logits[u.key])
    assert path.exists()


def test_data_parallel_shards_batches_and_only_the_main_process_writes(dit, sampler, tmp_path):
    units = find_prunable_units(dit)
    cal = _cal(n_batches=4)
    for rank in (1,):  # rank 0 of one process is the plain run (test above)
        proc = _FakeProcess(rank, 2)
        path = tmp_path / f"rank{rank}.safetensors"
        dp = learn_masks(dit, sampler, cal, units=units, config=_cfg(epochs=1), accelerator=proc,
                         checkpoint_path=path)  # fmt: skip
        # rank r sees batches r, r+2 with the gate noise seeded by seed + r
        ref = learn_masks(dit, sampler, cal[rank::2], units=units, config=_cfg(epochs=1, seed=rank))
        for u in units:
            assert torch.equal(dp.logits[u.key], ref.logits[u.key])
        assert proc.reduced > 0
        assert path.exists() == (rank == 0)
    with pytest.raises(ValueError, match="evenly"):
        learn_masks(dit, sampler, _cal(n_batches=3), units=units, config=_cfg(epochs=1),
                    accelerator=_FakeProcess(0, 2))  # fmt: skip
    with pytest.raises(TypeError, match="accelerator"):
        learn_masks(dit, sampler, cal, units=units, config=_cfg(epochs=1), accelerator=object())
