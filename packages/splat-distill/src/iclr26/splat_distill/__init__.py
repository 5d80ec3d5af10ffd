"""iclr26-splat-distill: Splat and Distill (ICLR 2026) — 3D-aware feature distillation through
Gaussian splatting of teacher features.

A pure-torch differentiable EWA Gaussian feature rasteriser (dense and tiled), cameras and
pixel-aligned Gaussian lifting, mask-aware upsampling and semantic blending, the EMA-teacher
prototype distillation, procedural ray-cast multi-view scenes, and 3D-awareness probes.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-splat-distill")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "geometry": [
            "Camera", "depth_to_ray_length", "denormalize_K", "intrinsics", "look_at",
            "normalize_K", "pixel_grid", "project_points", "ray_length_to_depth",
            "relative_pose", "unproject_depth",
        ],
        "gaussians": ["Gaussians", "build_covariance", "pixel_aligned_gaussians", "quat_to_rotmat"],
        "raster": ["compositing_weights", "rasterize_features"],
        "upsample": ["mask_aware_upsample", "semantic_blend"],
        "scenes": ["Scene", "View", "random_scene", "render_view", "orbit_cameras"],
        "data": ["MultiViewData", "make_dataset", "triplet_batch"],
        "models": ["DINOHead", "TimmViT", "TinyViT", "add_lora", "check_images", "load_pretrained_vfm", "merge_lora"],
        "depth": [
            "DepthNet", "constant_depth_baseline", "depth_errors", "load_depth_net", "noisy_depth",
            "train_depth_net",
        ],
        "distill": ["SnDConfig", "SplatAndDistill", "dino_ce_loss", "ema_update"],
        "baselines": ["fit3d_like", "mef_like"],
        "evaluation": [
            "correspondence_recall", "gt_correspondences", "linear_probes",
            "multiview_consistency",
        ],
        "pretrain": ["pretrain_2d"],
    },
)  # fmt: skip
__all__ += ["__version__"]
