"""iclr26-pvo: Offline Preference-based Value Optimization (PVO, ICLR 2026) in JAX.

Fit a reward model r̂ by Bradley–Terry on segment pairs, then fit Q by aligning the two segments'
summed Bellman residuals with r̂ (value alignment) instead of TD on r̂; V by expectile
regression and the policy by advantage-weighted regression, as in IQL.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-pvo")

__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "agents": [
            "ALGOS",
            "AgentConfig",
            "AgentState",
            "act",
            "create",
            "create_states",
            "update",
        ],
        "data": [
            "DATASETS",
            "OfflineDataset",
            "load_minari",
            "load_npz_pairs",
            "make_dataset",
            "reference_returns",
            "save_minari",
            "save_npz_pairs",
        ],
        "envs": [
            "collect_episodes",
            "hidden_reward",
            "pendulum_reset",
            "pendulum_step",
            "scripted_action",
        ],
        "evaluate": [
            "bootstrap_ci",
            "evaluate_gymnasium",
            "iqm",
            "normalized_score",
            "rollout_returns",
        ],
        "losses": [
            "awr_loss",
            "bt_nll",
            "cpl_loss",
            "expectile_loss",
            "gumbel_loss",
            "ipl_loss",
            "td_loss",
            "value_alignment_loss",
        ],
        "mountaincar": [
            "MountainCarState",
            "mountaincar_obs",
            "mountaincar_pump_action",
            "mountaincar_reset",
            "mountaincar_step",
        ],
        "peers": [
            "D3rlpyIQLResult",
            "d3rlpy_version",
            "rollout_returns_numpy",
            "to_mdp_dataset",
            "train_d3rlpy_iql",
        ],
        "reward_model": ["RewardModel", "fit_reward_model", "fit_reward_models"],
        "segments": ["SegmentPairs", "label_pairs", "sample_segment_pairs"],
        "tabular": [
            "chain_mdp",
            "fit_tabular_reward",
            "fitted_td_tabular",
            "gridworld_mdp",
            "solve_pvo_tabular",
            "value_iteration",
        ],
        "train": ["TrainResult", "train_offline"],
    },
)
__all__ += ["__version__"]
