"""iclr26-cognimap3d: a clean-room CogniMap3D-style system (ICLR 2026, "Cognitive 3D Mapping
and Rapid Retrieval"; no official code was released).

Depth and pose priors → multi-stage motion cues separate dynamic from static pixels → static
scenes go into a memory bank indexed by 2D and 3D global descriptors → on a revisit the scene is
retrieved by voting, verified by ICP, the camera relocalised, the memory updated → a pose graph
refines the visit's poses with the relocalisation anchors.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-cognimap3d")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "camera": ["backproject", "intrinsics", "median_depth", "project"],
        "data": ["RevisitWorld", "Sequence", "load_tum", "look_at", "make_visits", "save_tum"],
        "flow": ["ego_flow", "fb_consistency", "gray_u8", "observed_flow", "warp_depth"],
        "graph": ["PoseGraph"],
        "icp": [
            "THREADED_QUERY_MIN",
            "IcpResult",
            "estimate_normals",
            "icp",
            "kdtree",
            "tree_points",
        ],
        "memory": ["MemoryBank", "RelocResult", "descriptor_2d", "descriptor_3d"],
        "metrics": [
            "align_trajectory",
            "ate",
            "depth_metrics",
            "ghost_ratio",
            "mask_iou",
            "recon_metrics",
            "rpe",
        ],
        "motion": ["MotionCueConfig", "MotionCueDetector", "single_threshold_mask"],
        "pipeline": ["CogniMap3D", "CogniMap3DConfig", "VisitResult"],
        "priors": ["NoisyOraclePrior", "PriorProvider", "Priors"],
        "se3": [
            "adjoint_se3",
            "exp_se3",
            "exp_so3",
            "invert",
            "jr_inv_se3",
            "log_se3",
            "log_so3",
            "umeyama",
        ],
    },
)
__all__ += ["__version__"]
