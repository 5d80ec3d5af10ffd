"""Every function of the README API table refuses bad input with a ValueError/TypeError naming it."""

import pytest
import torch

import iclr26.splat_distill as sd

K = sd.intrinsics(8, 8)
CAM = sd.Camera(K, torch.eye(4), 8, 8)
EYE = torch.eye(3)


def _g(**kw):
    base = {
        "means": torch.tensor([[0.0, 0, 2]]),
        "covs": 0.01 * EYE[None],
        "opacities": torch.tensor([0.5]),
        "features": torch.ones(1, 2),
    }
    base.update(kw)
    return base


CASES = [
    ("Camera K shape", lambda: sd.Camera(torch.eye(4), torch.eye(4), 8, 8), ValueError, "K"),
    ("Camera K NaN", lambda: sd.Camera(K * float("nan"), torch.eye(4), 8, 8), ValueError, "K"),
    ("Camera int K", lambda: sd.Camera(torch.eye(3, dtype=torch.long), torch.eye(4), 8, 8), TypeError, "K"),
    ("Camera not rotation", lambda: sd.Camera(K, 2 * torch.eye(4), 8, 8), ValueError, "c2w"),
    ("Camera float height", lambda: sd.Camera(K, torch.eye(4), 8.0, 8), TypeError, "height"),
    ("Camera zero width", lambda: sd.Camera(K, torch.eye(4), 8, 0), ValueError, "width"),
    ("Gaussians non-PD", lambda: sd.Gaussians(**_g(covs=torch.diag(torch.tensor([1.0, -1, 1]))[None])), ValueError, "positive definite"),
    ("Gaussians asymmetric", lambda: sd.Gaussians(**_g(covs=torch.tensor([[[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]]))), ValueError, "symmetric"),
    ("Gaussians opacity > 1", lambda: sd.Gaussians(**_g(opacities=torch.tensor([1.5]))), ValueError, "opacities"),
    ("Gaussians opacity < 0", lambda: sd.Gaussians(**_g(opacities=torch.tensor([-0.1]))), ValueError, "opacities"),
    ("Gaussians length mismatch", lambda: sd.Gaussians(**_g(features=torch.ones(2, 2))), ValueError, "features"),
    ("Gaussians NaN mean", lambda: sd.Gaussians(**_g(means=torch.tensor([[0.0, float("nan"), 2]]))), ValueError, "means"),
    ("build_covariance zero scale", lambda: sd.build_covariance(torch.zeros(1, 3), torch.tensor([[1.0, 0, 0, 0]])), ValueError, "scales"),
    ("quat_to_rotmat zero", lambda: sd.quat_to_rotmat(torch.zeros(1, 4)), ValueError, "quats"),
    ("rasterize backend", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, backend="cuda"), ValueError, "backend"),
    ("rasterize near/far", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, near=2.0, far=1.0), ValueError, "near"),
    ("rasterize not Gaussians", lambda: sd.rasterize_features(torch.zeros(3), CAM), TypeError, "g must"),
    ("rasterize background", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, background=torch.zeros(3)), ValueError, "background"),
    ("rasterize tile", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, tile=0), ValueError, "tile"),
    ("rasterize no cutoff tiled", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, cutoff_sigma=None), ValueError, "cutoff_sigma"),
    ("gsplat on CPU", lambda: sd.rasterize_features(sd.Gaussians(**_g()), CAM, backend="gsplat"), ImportError, "gsplat"),
    ("compositing_weights cam", lambda: sd.compositing_weights(sd.Gaussians(**_g()), K), TypeError, "cam"),
    ("lift size mismatch", lambda: sd.pixel_aligned_gaussians(torch.ones(8, 8), CAM, torch.ones(2, 4, 4)), ValueError, "does not match"),
    ("lift depth shape", lambda: sd.pixel_aligned_gaussians(torch.ones(4, 8), CAM, torch.ones(2, 4, 8)), ValueError, "depth"),
    ("lift negative depth", lambda: sd.pixel_aligned_gaussians(-torch.ones(8, 8), CAM, torch.ones(2, 8, 8)), ValueError, "depth"),
    ("lift stride", lambda: sd.pixel_aligned_gaussians(torch.ones(8, 8), CAM, torch.ones(2, 8, 8), stride=3), ValueError, "stride"),
    ("lift opacity", lambda: sd.pixel_aligned_gaussians(torch.ones(8, 8), CAM, torch.ones(2, 8, 8), opacity=0.0), ValueError, "opacity"),
    ("unproject shape", lambda: sd.unproject_depth(torch.ones(4, 4), CAM), ValueError, "depth"),
    ("project shape", lambda: sd.project_points(torch.ones(4, 2), CAM), ValueError, "X"),
    ("normalize_K shape", lambda: sd.normalize_K(torch.eye(4), 8, 8), ValueError, "K"),
    ("look_at same", lambda: sd.look_at(torch.zeros(3), torch.zeros(3)), ValueError, "coincide"),
    ("upsample float mask", lambda: sd.mask_aware_upsample(torch.ones(2, 4, 4), torch.zeros(8, 8)), TypeError, "mask_hi"),
    ("upsample fallback", lambda: sd.mask_aware_upsample(torch.ones(2, 4, 4), torch.zeros(8, 8, dtype=torch.long), fallback="x"), ValueError, "fallback"),
    ("upsample NaN", lambda: sd.mask_aware_upsample(torch.full((2, 4, 4), float("nan")), torch.zeros(8, 8, dtype=torch.long)), ValueError, "f_lo"),
    ("blend mask size", lambda: sd.semantic_blend(torch.ones(2, 4, 4), torch.zeros(8, 8, dtype=torch.long)), ValueError, "mask"),
    ("blend alpha", lambda: sd.semantic_blend(torch.ones(2, 4, 4), torch.zeros(4, 4, dtype=torch.long), 1.5), ValueError, "alpha"),
    ("config lr", lambda: sd.SnDConfig(lr=0.0), ValueError, "lr"),
    ("config target", lambda: sd.SnDConfig(target="other"), ValueError, "target"),
    ("config ema", lambda: sd.SnDConfig(ema_momentum=1.5), ValueError, "ema_momentum"),
    ("config float steps", lambda: sd.SnDConfig(ema_every=2.5), ValueError, "ema_every"),
    ("SnD student", lambda: sd.SplatAndDistill("vit"), TypeError, "student"),
    ("SnD feature_dim", lambda: sd.SplatAndDistill(torch.nn.Linear(2, 2)), ValueError, "feature_dim"),
    ("dino_ce shapes", lambda: sd.dino_ce_loss(torch.ones(2, 3), torch.ones(2, 4)), ValueError, "teacher_logits"),
    ("ema momentum", lambda: sd.ema_update(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), -0.1), ValueError, "momentum"),
    ("TinyViT patch", lambda: sd.TinyViT(img_size=30, patch=4), ValueError, "patch"),
    ("TinyViT input", lambda: sd.TinyViT(img_size=32, patch=4, dim=8, depth=1, heads=2)(torch.ones(1, 1, 32, 32)), ValueError, "x must"),
    ("make_dataset n", lambda: sd.make_dataset(0), ValueError, "n_scenes"),
    ("make_dataset float", lambda: sd.make_dataset(2.0), ValueError, "n_scenes"),
    ("orbit n_views", lambda: sd.orbit_cameras(0), ValueError, "n_views"),
    ("render_view scene", lambda: sd.render_view("scene", CAM), TypeError, "scene"),
    ("gt_correspondences n", lambda: sd.gt_correspondences(torch.ones(8, 8), CAM, torch.ones(8, 8), CAM, num_corr=0), ValueError, "num_corr"),
    ("recall channels", lambda: sd.correspondence_recall(torch.ones(2, 4, 4), torch.ones(3, 4, 4), torch.zeros(1, 2), torch.zeros(1, 2), (4, 4)), ValueError, "channels"),
    ("recall uv shape", lambda: sd.correspondence_recall(torch.ones(2, 4, 4), torch.ones(2, 4, 4), torch.zeros(1, 3), torch.zeros(1, 3), (4, 4)), ValueError, "uv0"),
    ("pretrain images", lambda: sd.pretrain_2d(sd.TinyViT(), torch.ones(0, 3, 64, 64)), ValueError, "images"),
    ("load_pretrained_vfm bad file", lambda: sd.load_pretrained_vfm(__file__), ValueError, "safetensors"),
    ("config lora_rank", lambda: sd.SnDConfig(lora_rank=-1), ValueError, "lora_rank"),
    ("config lora_dropout", lambda: sd.SnDConfig(lora_dropout=1.0), ValueError, "lora_dropout"),
    ("config lora_targets", lambda: sd.SnDConfig(lora_targets="qkv"), ValueError, "lora_targets"),
    ("config depth", lambda: sd.SnDConfig(depth="mvsplat"), ValueError, "depth"),
    ("config depth_noise", lambda: sd.SnDConfig(depth_noise=float("nan")), ValueError, "depth_noise"),
    ("add_lora module", lambda: sd.add_lora("vit"), TypeError, "model"),
    ("add_lora rank", lambda: sd.add_lora(torch.nn.Linear(2, 2), rank=0), ValueError, "rank"),
    ("add_lora targets", lambda: sd.add_lora(sd.TinyViT(img_size=16, patch=4, dim=8, depth=1, heads=2), targets=("fc9",)), ValueError, "targets"),
    ("merge_lora module", lambda: sd.merge_lora(3), TypeError, "model"),
    ("TimmViT not a ViT", lambda: sd.TimmViT(torch.nn.Linear(2, 2)), TypeError, "model"),
    ("TimmViT unknown name", lambda: sd.TimmViT("no_such_vit"), ValueError, "model"),
    ("TimmViT pretrained", lambda: sd.TimmViT("vit_tiny_patch16_224", pretrained=True), ValueError, "pretrained"),
    ("noisy_depth sigma", lambda: sd.noisy_depth(torch.ones(4, 4), -0.1, generator=torch.Generator()), ValueError, "sigma"),
    ("noisy_depth negative", lambda: sd.noisy_depth(-torch.ones(4, 4), 0.1, generator=torch.Generator()), ValueError, "depth"),
    ("noisy_depth int", lambda: sd.noisy_depth(torch.ones(4, 4, dtype=torch.long), 0.1, generator=torch.Generator()), TypeError, "depth"),
    ("noisy_depth generator", lambda: sd.noisy_depth(torch.ones(4, 4), 0.1, generator=0), TypeError, "generator"),
    ("noisy_depth smooth", lambda: sd.noisy_depth(torch.ones(4, 4), 0.1, generator=torch.Generator(), smooth=0), ValueError, "smooth"),
    ("DepthNet width", lambda: sd.DepthNet(width=6), ValueError, "width"),
    ("DepthNet input", lambda: sd.DepthNet(width=4)(torch.ones(1, 3, 30, 32)), ValueError, "multiple of 4"),
    ("DepthNet channels", lambda: sd.DepthNet(width=4)(torch.ones(1, 1, 32, 32)), ValueError, "x must"),
    ("depth_errors shape", lambda: sd.depth_errors(torch.ones(2, 2), torch.ones(3, 3)), ValueError, "pred"),
    ("depth_errors zero", lambda: sd.depth_errors(torch.zeros(2, 2), torch.ones(2, 2)), ValueError, "positive"),
    ("constant_depth empty", lambda: sd.constant_depth_baseline(torch.ones(0), (2, 2)), ValueError, "train_depth"),
    ("train_depth_net empty", lambda: sd.train_depth_net(torch.ones(0, 3, 8, 8), torch.ones(0, 8, 8)), ValueError, "images"),
    ("train_depth_net mismatch", lambda: sd.train_depth_net(torch.ones(2, 3, 8, 8), torch.ones(3, 8, 8)), ValueError, "depth"),
    ("train_depth_net steps", lambda: sd.train_depth_net(torch.ones(2, 3, 8, 8), torch.ones(2, 8, 8), steps=0), ValueError, "steps"),
    ("load_depth_net bad file", lambda: sd.load_depth_net(__file__), ValueError, "safetensors"),
    ("SnD depth_net type", lambda: sd.SplatAndDistill(sd.TinyViT(img_size=16, patch=4, dim=8, depth=1, heads=2), sd.SnDConfig(depth="learned"), depth_net="net"), TypeError, "depth_net"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "call", "exc", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_triplet_batch_and_baselines_validate():
    d = sd.make_dataset(1, n_views=3, size=16, seed=0)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="gap"):
        sd.triplet_batch(d, 1, generator=g, gap=3)
    with pytest.raises(ValueError, match="batch"):
        sd.triplet_batch(d, 0, generator=g)
    vit = sd.TinyViT(img_size=16, patch=4, dim=8, depth=1, heads=2)
    with pytest.raises(ValueError, match="steps"):
        sd.fit3d_like(vit, d, steps=0)
    with pytest.raises(TypeError, match="data"):
        sd.mef_like(vit, "data")
