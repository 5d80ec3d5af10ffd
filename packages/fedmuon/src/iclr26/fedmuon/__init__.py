"""iclr26-fedmuon: FedMuon — federated learning with bias-corrected LMO-based optimisation.

Takezawa, Koloskova, Jiang and Stich, "FedMuon: Federated Learning with Bias-corrected LMO-based
Optimization", ICLR 2026, arXiv 2509.26337 (not the unrelated 2510.27403 or 2510.03866 papers of
the same name). Local Muon inside FedAvg is biased because the average of LMOs is not the LMO of
the average; FedMuon applies the LMO to control-variate-corrected momentum.

The Flower integration lives in :mod:`iclr26.fedmuon.flower` (extra ``flower``) and is not
imported here.
"""

from importlib.metadata import version as _version

from iclr26.fedmuon.algorithms import (
    ALGORITHMS,
    ClientState,
    FedConfig,
    ServerState,
    client_update,
    communication_bytes,
    init_clients,
    init_server,
    round_lr,
    server_update,
)
from iclr26.fedmuon.data import (
    FederatedData,
    dirichlet_partition,
    iid_partition,
    load_digits_split,
    stack_clients,
)
from iclr26.fedmuon.lmo import (
    NS_COEFFS,
    LMOSpec,
    frobenius_lmo,
    l2_lmo,
    linf_lmo,
    newton_schulz,
    nuclear_norm,
    polar,
    spectral_lmo,
    tree_lmo,
)
from iclr26.fedmuon.problems import Problem, counterexample, digits, least_squares
from iclr26.fedmuon.simulate import History, global_metrics, run_problem, simulate
from iclr26.fedmuon.transforms import (
    EmaState,
    control_variate_correction,
    ema_momentum,
    fedmuon_local,
    local_muon,
    scale_by_lmo,
)

__version__ = _version("iclr26-fedmuon")

__all__ = [
    "ALGORITHMS",
    "NS_COEFFS",
    "ClientState",
    "EmaState",
    "FedConfig",
    "FederatedData",
    "History",
    "LMOSpec",
    "Problem",
    "ServerState",
    "__version__",
    "client_update",
    "communication_bytes",
    "control_variate_correction",
    "counterexample",
    "digits",
    "dirichlet_partition",
    "ema_momentum",
    "fedmuon_local",
    "frobenius_lmo",
    "global_metrics",
    "iid_partition",
    "init_clients",
    "init_server",
    "l2_lmo",
    "least_squares",
    "linf_lmo",
    "load_digits_split",
    "local_muon",
    "newton_schulz",
    "nuclear_norm",
    "polar",
    "round_lr",
    "run_problem",
    "scale_by_lmo",
    "server_update",
    "simulate",
    "spectral_lmo",
    "stack_clients",
    "tree_lmo",
]
