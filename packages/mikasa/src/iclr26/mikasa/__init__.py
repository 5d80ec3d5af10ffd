"""iclr26-mikasa: MIKASA (ICLR 2026) memory-intensive tasks, re-implemented on MuJoCo and numpy.

The paper's memory taxonomy, the MIKASA-Robo tabletop tasks with the official timing and success
rules (a floating-gripper MuJoCo scene and a batched kinematic backend that share one rule
engine), native T-maze and memory-chain classics, scripted oracles, a leak probe and memory
baselines (behaviour cloning with MLP, frame-stack, GRU/LSTM and a causal transformer).
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-mikasa")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "taxonomy": ["MemoryType", "TaskInfo", "list_tasks", "task_info"],
        "tasks": ["TASKS", "Layout", "TaskSpec", "get_spec", "sample_layout"],
        "semantics": ["ObsLayout", "TaskBatch", "obs_layout"],
        "envs": ["all_ids", "make", "make_vec"],
        "kinematic": ["KinematicEnv", "KinematicVectorEnv"],
        "physics": ["MujocoEnv", "SpatialMujocoEnv"],
        "spatial": ["SPATIAL_TASKS", "SpatialBatch", "SpatialLayout", "SpatialSpec",
                    "sample_spatial_layout"],
        "spatial_oracles": ["SpatialOracle"],
        "ppo": ["PPO", "finite_horizon_gae"],
        "classic": ["MemoryLength", "TMaze"],
        "oracles": [
            "MemoryOracle", "MemorylessOracle", "StateOracle", "collect_demos", "evaluate",
            "make_oracle",
        ],
        "leakage": ["leak_probe"],
        "agents": ["BC", "FrameStack", "POLICIES", "make_policy"],
        "compat": ["OFFICIAL_TO_LITE", "lite_id"],
        "data": ["load_demos", "save_demos"],
        "minari_export": ["to_minari"],
        "render": ["episode_frames", "episode_strip", "write_gif"],
    },
)  # fmt: skip
__all__ += ["__version__"]
