"""Data-parallel distillation through Hugging Face accelerate: one process is bit-identical to the
plain loop; two CPU processes (gloo) take the step one process takes on the whole batch."""

import subprocess
import sys
import textwrap

import pytest
import torch

from iclr26.splat_distill import SnDConfig, SplatAndDistill, TinyViT, make_dataset, triplet_batch

accelerate = pytest.importorskip("accelerate")

CFG = {"render_size": 16, "lift_stride": 2, "n_prototypes": 32, "head_hidden": 16, "head_bottleneck": 8,
       "lr": 1e-2, "ema_every": 1, "ema_momentum": 0.9}  # fmt: skip


def _snd():
    torch.manual_seed(0)
    return SplatAndDistill(
        TinyViT(img_size=32, patch=4, dim=16, depth=1, heads=2), SnDConfig(**CFG)
    )


def _batches(n):
    data = make_dataset(2, n_views=4, size=32, seed=3)
    g = torch.Generator().manual_seed(0)
    return [triplet_batch(data, 2, generator=g) for _ in range(n)]


def _states(snd):
    return {f"{m}.{k}": v.clone() for m in ("student", "teacher", "head_s", "head_t")
            for k, v in getattr(snd, m).state_dict().items()}  # fmt: skip


def test_one_process_is_bit_identical_to_the_plain_loop():
    acc = accelerate.Accelerator(cpu=True)
    assert acc.num_processes == 1
    batches = _batches(2)
    a, b = _snd(), _snd()
    for batch in batches:
        la, loga = a.training_step(batch)
        lb, logb = b.training_step(batch, accelerator=acc)
        assert torch.equal(la, lb)
        assert loga == logb
    sa, sb = _states(a), _states(b)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_uneven_shards_are_refused():
    class Two:
        num_processes, process_index = 2, 0

    batch = _batches(1)[0]
    batch = {k: v if k == "K" else v[:1] for k, v in batch.items()}
    with pytest.raises(ValueError, match="divisible"):
        _snd().training_step(batch, accelerator=Two())


SCRIPT = textwrap.dedent(
    """
    import sys, torch
    torch.set_num_threads(1)
    import accelerate
    sys.path.insert(0, {here!r})
    from test_accelerate import _batches, _snd, _states
    acc = accelerate.Accelerator(cpu=True)
    assert acc.num_processes == 2
    snd = _snd()
    for batch in _batches(2):
        snd.training_step(batch, accelerator=acc)
    if acc.is_main_process:
        torch.save(_states(snd), {out!r})
    acc.wait_for_everyone()
    """
)


@pytest.mark.slow
def test_two_gloo_processes_equal_one_process_on_the_whole_batch(tmp_path):
    import pathlib

    here = str(pathlib.Path(__file__).parent)
    out = str(tmp_path / "two.pt")
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(here=here, out=out))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(script),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    two = torch.load(out)
    one = _snd()
    for batch in _batches(2):
        one.training_step(batch)
    ref = _states(one)
    for k in ref:
        torch.testing.assert_close(two[k], ref[k], rtol=1e-4, atol=1e-5, msg=k)
