import pytest
import torch
from safetensors.torch import save_file

from iclr26.splat_distill.cli import main


def test_render_command_writes_a_png(tmp_path, capsys):
    torch.manual_seed(0)
    N = 40
    g = {"means": torch.randn(N, 3) * 0.3 + torch.tensor([0, 0, 3.0]), "covs": 0.01 * torch.eye(3).expand(N, 3, 3).contiguous(),
         "opacities": torch.full((N,), 0.8), "features": torch.randn(N, 6)}  # fmt: skip
    save_file(g, tmp_path / "g.safetensors")
    save_file(
        {"K": torch.tensor([[20.0, 0, 12], [0, 20, 12], [0, 0, 1]]), "c2w": torch.eye(4)},
        tmp_path / "c.safetensors",
    )
    out = tmp_path / "r.png"
    args = [
        "render",
        str(tmp_path / "g.safetensors"),
        str(tmp_path / "c.safetensors"),
        "--height",
        "24",
        "--width",
        "24",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert out.stat().st_size > 100
    assert "6 channels" in capsys.readouterr().out
    # an existing folder as --out, a file lacking tensors, a non-safetensors file: one line, exit 2
    assert main([*args[:-1], str(tmp_path)]) == 2
    save_file({"means": g["means"]}, tmp_path / "bad.safetensors")
    assert (
        main(
            [
                "render",
                str(tmp_path / "bad.safetensors"),
                str(tmp_path / "c.safetensors"),
                "--out",
                str(tmp_path / "x.png"),
            ]
        )
        == 2
    )
    assert "lacks tensor" in capsys.readouterr().err
    (tmp_path / "t.txt").write_text("hello")
    assert (
        main(
            [
                "render",
                str(tmp_path / "t.txt"),
                str(tmp_path / "c.safetensors"),
                "--out",
                str(tmp_path / "y.png"),
            ]
        )
        == 2
    )
    # non-PD covariance: a clear error
    g["covs"] = -g["covs"]
    save_file(g, tmp_path / "npd.safetensors")
    assert (
        main(
            [
                "render",
                str(tmp_path / "npd.safetensors"),
                str(tmp_path / "c.safetensors"),
                "--out",
                str(tmp_path / "z.png"),
            ]
        )
        == 2
    )
    assert "positive definite" in capsys.readouterr().err


def test_bad_arguments_fail_at_parse_time(tmp_path):
    for argv in (
        ["render", str(tmp_path / "missing"), str(tmp_path / "missing"), "--out", "x.png"],
        ["distill", "--steps", "0", "--out", "x"],
        ["distill", "--blend-alpha", "2", "--out", "x"],
        ["distill", "--ema", "nan", "--out", "x"],
        ["reproduce", "--seed", "-1"],
        ["probe", "--scenes", "1.5"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_distill_and_resume(tmp_path):
    out, ck = tmp_path / "s.safetensors", tmp_path / "c.pt"
    base = ["distill", "--scenes", "2", "--batch", "1", "--no-progress", "--seed", "1"]
    assert main([*base, "--steps", "1", "--out", str(out), "--checkpoint", str(ck)]) == 0
    assert (
        main(
            [*base, "--steps", "2", "--resume", str(ck), "--out", str(tmp_path / "s2.safetensors")]
        )
        == 0
    )
    assert main([*base, "--steps", "2", "--out", str(tmp_path / "s3.safetensors")]) == 0
    from iclr26.splat_distill import load_pretrained_vfm

    a = load_pretrained_vfm(str(tmp_path / "s2.safetensors")).state_dict()
    b = load_pretrained_vfm(str(tmp_path / "s3.safetensors")).state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k])  # resumed run == uninterrupted run


def test_lora_distill_writes_a_merged_backbone_and_train_depth_writes_a_net(tmp_path, capsys):
    pytest.importorskip("peft")
    from iclr26.splat_distill import load_depth_net, load_pretrained_vfm

    out = tmp_path / "s.safetensors"
    argv = ["distill", "--scenes", "1", "--batch", "1", "--steps", "1", "--no-progress",
            "--lora-rank", "2", "--depth", "noisy", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    m = load_pretrained_vfm(str(out))  # strict load: merged, original keys
    assert not torch.equal(
        m.state_dict()["blocks.0.qkv.weight"],
        load_pretrained_vfm().state_dict()["blocks.0.qkv.weight"],
    )
    d = tmp_path / "d.safetensors"
    argv = ["train-depth", "--scenes", "1", "--test-scenes", "1", "--steps", "2", "--width", "4",
            "--no-progress", "--out", str(d)]  # fmt: skip
    assert main(argv) == 0
    assert "constant depth" in capsys.readouterr().out
    assert load_depth_net(str(d))(torch.rand(1, 3, 32, 32)).shape == (1, 32, 32)
    assert main([*argv[:-2], "--width", "6", "--out", str(tmp_path / "e.safetensors")]) == 2
