"""Data parallelism through accelerate: one process is the plain trainer; two CPU processes
(gloo) take the same update as one process on the whole batch."""

import pytest
import torch

pytest.importorskip("accelerate")

from iclr26.maskgrpo import MaskGRPOConfig, MaskGRPOTrainer, Sort8, TinyMaskedDenoiser

TASK = Sort8(n_digits=4)


def _model():
    torch.manual_seed(0)
    return TinyMaskedDenoiser(TASK.mask_id + 1, 9, d_model=16, n_layers=1, n_heads=2)


def _config(**kw):
    return MaskGRPOConfig(num_generations=4, num_iterations=2, learning_rate=1e-3, seed=0, **kw)


def test_one_process_accelerator_is_the_plain_trainer(tmp_path):
    from accelerate import Accelerator

    plain = MaskGRPOTrainer(_model(), TASK, _config())
    acc = MaskGRPOTrainer(_model(), TASK, _config(), accelerator=Accelerator(cpu=True))
    assert acc.num_processes == 1
    h1 = plain.train(2, prompts_per_step=2)
    h2 = acc.train(2, prompts_per_step=2, checkpoint_path=tmp_path / "run.pt")
    for a, b in zip(h1, h2, strict=True):
        for k in ("reward", "clip_frac", "kl", "loss", "masked_frac"):
            assert a[k] == pytest.approx(b[k], rel=1e-12, abs=1e-15), k
    for p, q in zip(plain.policy.parameters(), acc.policy.parameters(), strict=True):
        assert torch.equal(p, q)
    assert (tmp_path / "run.pt").is_file()


def test_accelerator_is_checked():
    with pytest.raises(TypeError, match="accelerator"):
        MaskGRPOTrainer(_model(), TASK, _config(), accelerator="cpu")


def _batch():
    prompts = TASK.sample_prompts(4, 0)
    g = torch.Generator().manual_seed(1)
    seqs = torch.cat(
        [prompts.repeat_interleave(4, 0), torch.randint(0, 10, (16, 4), generator=g)], 1
    )
    return seqs, TASK.score(seqs[:, :5], seqs[:, 5:]).double()


_WORKER = """
import sys

import torch
from accelerate import Accelerator, notebook_launcher

from iclr26.maskgrpo import MaskGRPOConfig, MaskGRPOTrainer, Sort8, TinyMaskedDenoiser

TASK = Sort8(n_digits=4)


def model():
    torch.manual_seed(0)
    return TinyMaskedDenoiser(TASK.mask_id + 1, 9, d_model=16, n_layers=1, n_heads=2)


def worker(out_dir):
    torch.set_num_threads(1)
    acc = Accelerator(cpu=True)
    config = MaskGRPOConfig(
        num_generations=4, num_iterations=2, learning_rate=1e-3, seed=0, beta=0.04
    )
    policy = model()
    sgd = torch.optim.SGD(policy.parameters(), lr=0.5)
    tr = MaskGRPOTrainer(policy, TASK, config, optimizer=sgd, accelerator=acc)
    batch = torch.load(f"{out_dir}/batch.pt", weights_only=True)
    rows = slice(8 * acc.process_index, 8 * (acc.process_index + 1))  # two whole groups each
    rec = tr.update(batch["seqs"][rows], batch["rewards"][rows])
    if acc.is_main_process:
        torch.save({"state": tr.policy.state_dict(), "rec": rec}, f"{out_dir}/two.pt")
    acc.wait_for_everyone()


if __name__ == "__main__":
    notebook_launcher(worker, (sys.argv[1],), num_processes=2, use_port=sys.argv[2])
"""


@pytest.mark.slow
def test_two_cpu_processes_take_the_single_process_update(tmp_path):
    import socket
    import subprocess
    import sys

    seqs, rewards = _batch()
    torch.save({"seqs": seqs, "rewards": rewards}, tmp_path / "batch.pt")
    (tmp_path / "worker.py").write_text(_WORKER)
    with socket.socket() as sock:  # a free port for the gloo rendezvous
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    subprocess.run(
        [sys.executable, str(tmp_path / "worker.py"), str(tmp_path), port],
        check=True, timeout=600, capture_output=True,
    )  # fmt: skip
    two = torch.load(tmp_path / "two.pt", weights_only=True)
    # SGD: Adam would turn rounding-level differences of zero gradients (the key bias) into
    # full-size steps; with SGD the parameters differ only as much as the gradients do
    policy = _model()
    sgd = torch.optim.SGD(policy.parameters(), lr=0.5)
    one = MaskGRPOTrainer(policy, TASK, _config(beta=0.04), optimizer=sgd)
    rec = one.update(seqs, rewards)
    for k, v in one.policy.state_dict().items():
        torch.testing.assert_close(two["state"][k], v, rtol=1e-5, atol=1e-6)
    for k in ("reward", "zero_std_frac", "masked_frac", "clip_frac", "kl", "loss"):
        assert two["rec"][k] == pytest.approx(rec[k], rel=1e-5, abs=1e-7), k
    start = _model().state_dict()
    assert max(float((v - start[k]).abs().max()) for k, v in two["state"].items()) > 1e-4
