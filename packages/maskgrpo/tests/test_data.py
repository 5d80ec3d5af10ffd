"""The shipped denoisers: loadable, and pre-trained just far enough to leave RL headroom."""

import pytest
import torch

from iclr26.maskgrpo import MaskGRPOConfig, MaskGRPOTrainer, get_task, load_pretrained
from iclr26.maskgrpo.data import PRETRAIN_DEFAULTS


@pytest.mark.parametrize("name", ["sort8", "add3", "sudoku4", "digits", "digits4"])
def test_shipped_checkpoint_has_rl_headroom(name):
    """Held-out success of the shipped file lies in the spec's headroom band (20–50 %, with
    sampling noise of 32 prompts × 4 rollouts): neither nothing learned nor nothing to gain
    (Digits-T2I: the mean class probability of emerge samples)."""
    torch.manual_seed(0)
    task = get_task(name)
    policy = load_pretrained(name)
    assert policy.config.get("pos_std", 0.02) == PRETRAIN_DEFAULTS[name]["pos_std"]
    assert policy.config["max_len"] == task.prompt_len + task.completion_len
    from iclr26.maskgrpo.experiments import TASK_CONFIG

    tr = MaskGRPOTrainer(policy, task, MaskGRPOConfig(seed=0, **TASK_CONFIG.get(name, {})))
    success = tr.evaluate(task.sample_prompts(32, 10**6))
    assert 0.12 <= success <= 0.6, success


@pytest.mark.slow
def test_pretrain_toy_rebuilds_the_shipped_sudoku_file(tmp_path):
    """`pretrain-toy --task sudoku4` with its defaults writes the shipped weights bit for bit."""
    from safetensors.torch import load_file

    from iclr26.maskgrpo.cli import main
    from iclr26.maskgrpo.data import pretrained_path

    out = tmp_path / "s.safetensors"
    assert main(["pretrain-toy", "--task", "sudoku4", "--out", str(out), "--no-progress"]) == 0
    new, old = load_file(str(out)), load_file(str(pretrained_path("sudoku4")))
    assert new.keys() == old.keys()
    assert all(torch.equal(new[k], old[k]) for k in old)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["digits4", "digits"])
def test_pretrain_toy_rebuilds_the_shipped_digits_file(tmp_path, name):
    """`pretrain-toy --task digits4` / `--task digits` with their defaults write the shipped
    weights bit for bit."""
    from safetensors.torch import load_file

    from iclr26.maskgrpo.cli import main
    from iclr26.maskgrpo.data import pretrained_path

    out = tmp_path / "d.safetensors"
    assert main(["pretrain-toy", "--task", name, "--out", str(out), "--no-progress"]) == 0
    new, old = load_file(str(out)), load_file(str(pretrained_path(name)))
    assert new.keys() == old.keys()
    assert all(torch.equal(new[k], old[k]) for k in old)


def test_shipped_digits_files_fit_the_size_limit():
    """Shipped weights stay small (< 2 MB each)."""
    from iclr26.maskgrpo.data import pretrained_path

    for name in ("sort8", "add3", "sudoku4", "digits", "digits4"):
        assert pretrained_path(name).stat().st_size < 2_000_000, name
