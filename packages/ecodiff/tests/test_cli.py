import subprocess
import sys

import pytest
import torch

from iclr26.ecodiff.cli import main


def test_help_imports_no_torch():
    code = (
        "import sys; from iclr26.ecodiff.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules and 'diffusers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["prune", "--out", "x", "--sparsity", "1.5"], "--sparsity"),
        (["prune", "--out", "x", "--steps", "0"], "--steps"),
        (["prune", "--out", "x", "--resume", "missing.safetensors"], "does not exist"),
        (["reproduce", "--seed", "-1"], "--seed"),
        (["method-check", "--sparsity", "0"], "--sparsity"),
        (["method-check", "--seeds", "0"], "--seeds"),
        (["method-check", "--calibration", "2.5"], "--calibration"),
    ],
)
def test_bad_arguments_fail_at_parse_time(argv, text, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert text in capsys.readouterr().err


def test_prune_refuses_bad_model_and_nonempty_out(tmp_path, capsys):
    assert main(["prune", "--model", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "config.json" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    assert main(["prune", "--out", str(tmp_path / "full")]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "full" / "keep.txt").read_text() == "x"
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["reproduce", "--out", str(f)]) == 2


def test_prune_toy_writes_a_smaller_loadable_model(tmp_path):
    from diffusers import DiTTransformer2DModel

    from iclr26.ecodiff.materialize import load_pruned
    from iclr26.ecodiff.toy import load_toy

    out = tmp_path / "pruned"
    argv = ["prune", "--out", str(out), "--steps", "2", "--calibration", "2", "--batch", "2",
            "--epochs", "1", "--sparsity", "0.3", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    model = load_pruned(DiTTransformer2DModel, out / "model")
    dense = sum(p.numel() for p in load_toy("ddpm").parameters())
    n = sum(p.numel() for p in model.parameters())
    assert 0.69 * dense <= n <= 0.71 * dense
    x = torch.randn(2, 1, 8, 8)
    assert (
        model(x, torch.tensor([10, 20]), class_labels=torch.tensor([1, 2])).sample.shape == x.shape
    )
    assert (out / "gate_logits.safetensors").is_file()
    assert (out / "summary.json").is_file()
