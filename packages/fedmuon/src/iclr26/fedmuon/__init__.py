"""iclr26-fedmuon: FedMuon — federated learning with bias-corrected LMO-based optimisation.

Takezawa, Koloskova, Jiang and Stich, "FedMuon: Federated Learning with Bias-corrected LMO-based
Optimization", ICLR 2026, arXiv 2509.26337 (not the unrelated 2510.27403 or 2510.03866 papers of
the same name). Local Muon inside FedAvg is biased because the average of LMOs is not the LMO of
the average; FedMuon applies the LMO to control-variate-corrected momentum.

The Flower integration lives in :mod:`iclr26.fedmuon.flower` (extra ``flower``) and is not
imported here.
"""

from importlib.metadata import version as _version

import lazy_loader as lazy

__version__ = _version("iclr26-fedmuon")

# Submodules load on first attribute access, so `import iclr26.fedmuon` and the command line's
# --help never import JAX.
__getattr__, __dir__, __all__ = lazy.attach(
    __name__,
    submod_attrs={
        "algorithms": [
            "ALGORITHMS",
            "ClientState",
            "FedConfig",
            "ServerState",
            "client_update",
            "communication_bytes",
            "init_clients",
            "init_server",
            "round_lr",
            "server_update",
        ],
        "data": [
            "FederatedData",
            "dirichlet_partition",
            "iid_partition",
            "load_digits_split",
            "stack_clients",
        ],
        "lmo": [
            "NS_COEFFS",
            "LMOSpec",
            "frobenius_lmo",
            "l2_lmo",
            "linf_lmo",
            "newton_schulz",
            "nuclear_norm",
            "polar",
            "spectral_lmo",
            "tree_lmo",
        ],
        "problems": ["Problem", "counterexample", "digits", "least_squares"],
        "simulate": ["History", "global_metrics", "run_problem", "simulate"],
        "transforms": [
            "EmaState",
            "control_variate_correction",
            "ema_momentum",
            "fedmuon_local",
            "local_muon",
            "scale_by_lmo",
        ],
    },
)
__all__ += ["__version__"]
