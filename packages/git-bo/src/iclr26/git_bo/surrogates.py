"""Surrogates behind one protocol: ``condition(X, y)`` then a posterior differentiable in ``X``.

GIT-BO needs from its surrogate only the predictive mean and variance at candidate points, and
the autograd gradient of the mean with respect to the inputs. The paper uses a frozen TabPFN v2
(context in, prediction out, no training). Here:

- :class:`PFNSurrogate`: an in-context prior-fitted network (this package's own, trained on GP
  prior samples by :func:`iclr26.git_bo.pfn.train_pfn` and shipped as a small checkpoint). Like
  TabPFN it is conditioned by passing the observations as context: nothing is fitted online.
- :class:`TabPFNSurrogate`: TabPFN v2 from a local checkpoint the user supplies (never a download).
- :class:`GPSurrogate`: BoTorch ``SingleTaskGP`` (refit by marginal likelihood every iteration).
- :class:`RFFSurrogate`: Bayesian linear regression on random Fourier features (one solve).

All inputs live in the unit cube ``[0, 1]^D`` (the optimiser rescales the user's box); values
``y`` are maximised and returned in their own units.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from iclr26.shared import check_int, check_range

__all__ = [
    "CheckpointMissing",
    "GPSurrogate",
    "PFNSurrogate",
    "RFFSurrogate",
    "Surrogate",
    "TabPFNSurrogate",
    "make_surrogate",
]

log = logging.getLogger(__name__)


@runtime_checkable
class Surrogate(Protocol):
    """What GIT-BO asks of a surrogate.

    ``condition(X, y)`` takes ``(n, D)`` inputs in ``[0, 1]^D`` and ``(n,)`` values;
    ``posterior(X)`` returns ``(mean, var)``, each ``(m,)``, differentiable with respect to ``X``
    (the GI subspace is built from ``∇_X mean``). ``name`` labels every reported number.
    An optional ``dtype`` attribute names the precision the optimiser should query in (default
    float64; the PFN uses float32).
    """

    name: str

    def condition(self, X: torch.Tensor, y: torch.Tensor) -> None: ...

    def posterior(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...


def _check_xy(X, y) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("X and y must be torch tensors")
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must have shape (n, D) with n, D >= 1, got {tuple(X.shape)}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},), got {tuple(y.shape)}")
    if not X.is_floating_point() or not y.is_floating_point():
        raise TypeError("X and y must have floating dtypes")
    if not bool(torch.isfinite(X).all()) or not bool(torch.isfinite(y).all()):
        raise ValueError("X and y must be finite")
    return X, y


def _check_query(X, dim: int | None) -> torch.Tensor:
    if not isinstance(X, torch.Tensor) or not X.is_floating_point():
        raise TypeError("X must be a floating torch tensor")
    if dim is None:
        raise RuntimeError("call condition(X, y) before posterior(X)")
    if X.ndim != 2 or X.shape[1] != dim or X.shape[0] == 0:
        raise ValueError(f"X must have shape (m, {dim}) with m >= 1, got {tuple(X.shape)}")
    return X


def _standardize(y: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    mu = float(y.mean())
    sd = float(y.std()) if y.numel() > 1 else 1.0
    if not math.isfinite(sd) or sd < 1e-12:
        sd = 1.0
    return (y - mu) / sd, mu, sd


class GPSurrogate:
    """BoTorch ``SingleTaskGP`` with its default (dimension-scaled) priors, refit every time it
    is conditioned (the paper's "GI-subspace with a GP" appendix; not retraining-free).

    Args:
        maxiter: L-BFGS iterations of the marginal-likelihood fit (BoTorch's own default runs
            to convergence: 19 s vs 1.4 s for one fit at D = 100, n = 50 on 2 busy CPU cores;
            ``None`` restores it).
        chunk: candidates per posterior call (memory bound).
        **gp_kwargs: passed to ``SingleTaskGP`` (e.g. ``covar_module``).
    """

    name = "gp"

    def __init__(self, maxiter: int | None = 50, chunk: int = 2048, **gp_kwargs) -> None:
        if maxiter is not None:
            check_int(maxiter, "maxiter", low=1)
        check_int(chunk, "chunk", low=1)
        self.maxiter = maxiter
        self.chunk = chunk
        self.gp_kwargs = gp_kwargs
        self.model_ = None
        self.dim_: int | None = None

    def condition(self, X: torch.Tensor, y: torch.Tensor) -> None:
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from botorch.models.transforms.outcome import Standardize
        from gpytorch.mlls import ExactMarginalLogLikelihood

        X, y = _check_xy(X, y)
        Xd, yd = X.detach().double(), y.detach().double().unsqueeze(-1)
        model = SingleTaskGP(Xd, yd, outcome_transform=Standardize(m=1), **self.gp_kwargs)
        mll = ExactMarginalLogLikelihood(model.likelihood, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.maxiter is None:
                fit_gpytorch_mll(mll)
            else:
                fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": self.maxiter}})
        model.eval()
        self.model_, self.dim_ = model, X.shape[1]

    def posterior(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        X = _check_query(X, self.dim_)
        means, variances = [], []
        for Xc in X.split(self.chunk):
            post = self.model_.posterior(Xc.double())
            means.append(post.mean.squeeze(-1))
            variances.append(post.variance.squeeze(-1).clamp_min(0))
        return torch.cat(means).to(X.dtype), torch.cat(variances).to(X.dtype)


class RFFSurrogate:
    """Bayesian linear regression on random Fourier features of an RBF kernel.

    ``φ(x) = √(2/F) cos(x W / ℓ + b)``, ``W ~ N(0, I)``, ``b ~ U[0, 2π]``; weights ``~ N(0, I)``
    on standardised ``y``, Gaussian noise ``noise``. The posterior is computed in its dual
    ``(n × n)`` form: one Cholesky per conditioning, no iterative training.

    Args:
        num_features: ``F``.
        lengthscale: ``"median"`` (median pairwise distance of the context) or a positive number.
        noise: observation-noise variance on standardised ``y``.
        seed: draws ``W`` and ``b``.
    """

    name = "rff"

    def __init__(
        self,
        num_features: int = 1024,
        lengthscale: float | str = "median",
        noise: float = 1e-2,
        seed: int = 0,
    ) -> None:
        check_int(num_features, "num_features", low=1)
        if isinstance(lengthscale, str):
            if lengthscale != "median":
                raise ValueError(f"lengthscale must be 'median' or a number, got {lengthscale!r}")
        else:
            check_range(lengthscale, "lengthscale", low=0.0, low_inclusive=False)
        check_range(noise, "noise", low=0.0, low_inclusive=False)
        check_int(seed, "seed", low=0)
        self.num_features, self.lengthscale, self.noise, self.seed = (
            num_features,
            lengthscale,
            float(noise),
            seed,
        )
        self.dim_: int | None = None

    def _features(self, X: torch.Tensor) -> torch.Tensor:
        W, b = self.W_.to(X), self.b_.to(X)
        return math.sqrt(2.0 / self.num_features) * torch.cos(X @ W / self.lengthscale_ + b)

    def condition(self, X: torch.Tensor, y: torch.Tensor) -> None:
        X, y = _check_xy(X, y)
        X, y = X.detach().double(), y.detach().double()
        n, D = X.shape
        if self.dim_ != D:
            g = torch.Generator().manual_seed(self.seed)
            self.W_ = torch.randn(D, self.num_features, generator=g, dtype=torch.float64)
            self.b_ = 2 * math.pi * torch.rand(self.num_features, generator=g, dtype=torch.float64)
        if self.lengthscale == "median":
            d = torch.pdist(X) if n > 1 else torch.ones(1, dtype=X.dtype)
            ell = float(d.median()) if d.numel() else 1.0
            self.lengthscale_ = ell if ell > 1e-9 else 1.0
        else:
            self.lengthscale_ = float(self.lengthscale)
        ys, self.mu_, self.sd_ = _standardize(y)
        Phi = self._features(X)
        K = Phi @ Phi.T + self.noise * torch.eye(n, dtype=X.dtype)
        self.L_ = torch.linalg.cholesky(K)
        self.alpha_ = torch.cholesky_solve(ys.unsqueeze(-1), self.L_).squeeze(-1)
        self.Phi_, self.dim_ = Phi, D

    def posterior(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        X = _check_query(X, self.dim_)
        phi = self._features(X.double())
        cross = phi @ self.Phi_.T  # (m, n)
        mean = cross @ self.alpha_
        v = torch.linalg.solve_triangular(self.L_, cross.T, upper=False)
        var = (phi.pow(2).sum(-1) - v.pow(2).sum(0)).clamp_min(1e-12)
        return (mean * self.sd_ + self.mu_).to(X.dtype), (var * self.sd_**2).to(X.dtype)


class PFNSurrogate:
    """The package's in-context prior-fitted network (see :mod:`iclr26.git_bo.pfn`).

    Conditioning encodes the context once (its per-layer attention keys and values, see
    :meth:`~iclr26.git_bo.pfn.InContextPFN.context_cache`); each posterior call is then one
    forward pass of the frozen network over the queries (float32, in chunks), the paper's "no
    online retraining" property.

    Args:
        model: an :class:`~iclr26.git_bo.pfn.InContextPFN`, or ``None`` for the shipped one.
        path: a checkpoint to load instead (``.safetensors`` written by ``save_pfn``).
        device: where the network runs; inputs are moved there and results moved back.
        chunk: queries per forward pass.
    """

    name = "pfn"
    dtype = torch.float32

    def __init__(self, model=None, path: str | os.PathLike[str] | None = None,
                 device: str | torch.device = "cpu", chunk: int = 4096) -> None:  # fmt: skip
        from iclr26.git_bo.pfn import InContextPFN, load_pfn

        if model is not None and path is not None:
            raise ValueError("give model or path, not both")
        if model is None:
            model = load_pfn(path, device=device)
        elif not isinstance(model, InContextPFN):
            raise TypeError(f"model must be an InContextPFN, got {type(model).__name__}")
        check_int(chunk, "chunk", low=1)
        self.model = model.to(device).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.device = torch.device(device)
        self.chunk = chunk
        self.dim_: int | None = None

    def condition(self, X: torch.Tensor, y: torch.Tensor) -> None:
        X, y = _check_xy(X, y)
        if X.shape[1] > self.model.max_dim:
            raise ValueError(
                f"X has {X.shape[1]} features but this PFN was trained for at most "
                f"{self.model.max_dim}"
            )
        ys, self.mu_, self.sd_ = _standardize(y.detach().double())
        self.X_ = X.detach().to(self.device, torch.float32)
        self.y_ = ys.to(self.device, torch.float32)
        # the context's per-layer keys/values do not depend on the queries: computed once here
        # (no graph: GIT-BO differentiates with respect to the queries only)
        with torch.no_grad():
            self.cache_ = self.model.context_cache(self.X_.unsqueeze(0), self.y_.unsqueeze(0))
        self.dim_ = X.shape[1]

    def posterior(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        X = _check_query(X, self.dim_)
        means, variances = [], []
        for Xc in X.split(self.chunk):
            logits = self.model.forward_cached(self.cache_, Xc.to(self.device, torch.float32)[None])
            m, v = self.model.moments(logits[0])
            means.append(m)
            variances.append(v)
        mean = torch.cat(means).to(X.device, X.dtype) * self.sd_ + self.mu_
        var = torch.cat(variances).to(X.device, X.dtype) * self.sd_**2
        return mean, var


class CheckpointMissing(FileNotFoundError):
    """A TabPFN checkpoint was asked for but is not on disk; the message says how to supply one."""


_TABPFN_HOWTO = (
    "GIT-BO never downloads weights. Download the TabPFN v2 regressor checkpoint "
    "(file name 'tabpfn-v2-regressor.ckpt', from the Prior-Labs/TabPFN-v2-reg model page, under "
    "Prior Labs' licence) on a machine with network access, copy it here and pass its path "
    "(or set TABPFN_MODEL_CACHE_DIR to its folder)."
)


class TabPFNSurrogate:
    """TabPFN v2 (the paper's surrogate) from a local checkpoint, through the ``tabpfn`` package.

    The checkpoint is checked before ``tabpfn`` is imported, and hub access is switched off
    (``HF_HUB_OFFLINE=1``), so a missing file is our :class:`CheckpointMissing`, never a
    download. The regressor runs with one estimator and ``differentiable_input=True`` so that
    the predictive mean is differentiable in the queries.

    Args:
        model_path: the ``.ckpt`` file; ``None`` looks in ``$TABPFN_MODEL_CACHE_DIR``.
        device: torch device for TabPFN.
        n_estimators: TabPFN ensemble size (the official GIT-BO code uses 1).
    """

    name = "tabpfn"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        n_estimators: int = 1,
    ) -> None:
        check_int(n_estimators, "n_estimators", low=1)
        self.path = resolve_tabpfn_checkpoint(model_path)
        self.device, self.n_estimators = device, n_estimators
        self.dim_: int | None = None
        self._reg = None

    def condition(self, X: torch.Tensor, y: torch.Tensor) -> None:
        from iclr26.shared import MissingDependencyError

        X, y = _check_xy(X, y)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from tabpfn import TabPFNRegressor
        except ImportError as err:
            raise MissingDependencyError(
                f"TabPFNSurrogate needs the 'tabpfn' package ({err}): pip install 'tabpfn>=2.1'"
            ) from err
        if self._reg is None:
            self._reg = TabPFNRegressor(
                model_path=str(self.path),
                n_estimators=self.n_estimators,
                device=self.device,
                differentiable_input=True,
                ignore_pretraining_limits=True,
            )
        self._reg.fit_with_differentiable_input(X.detach().float(), y.detach().float())
        self.dim_ = X.shape[1]

    def posterior(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        X = _check_query(X, self.dim_)
        out = self._reg.forward(X.float(), use_inference_mode=False)
        # ``forward`` returns the bar-distribution logits and its criterion (tabpfn >= 2.1)
        logits, crit = out if isinstance(out, tuple) else (out, self._reg.bardist_)
        mean = crit.mean(logits)
        var = crit.variance(logits)
        return mean.reshape(-1).to(X.dtype), var.reshape(-1).clamp_min(0).to(X.dtype)


def resolve_tabpfn_checkpoint(model_path: str | os.PathLike[str] | None) -> Path:
    """The TabPFN checkpoint to use, or :class:`CheckpointMissing` saying how to supply one."""
    if model_path is None:
        cache = os.environ.get("TABPFN_MODEL_CACHE_DIR")
        if not cache:
            raise CheckpointMissing(f"no TabPFN checkpoint given. {_TABPFN_HOWTO}")
        path = Path(cache) / "tabpfn-v2-regressor.ckpt"
    else:
        path = Path(model_path)
    if not path.is_file():
        raise CheckpointMissing(f"TabPFN checkpoint {path} does not exist. {_TABPFN_HOWTO}")
    with path.open("rb") as f:
        head = f.read(4)
    # torch checkpoints are zip archives (PK\x03\x04) or legacy pickles (\x80)
    if not (head.startswith(b"PK") or head.startswith(b"\x80")):
        raise ValueError(f"{path} is not a torch checkpoint (a TabPFN .ckpt is a torch archive)")
    return path


def make_surrogate(name: str | Surrogate, **kwargs) -> Surrogate:
    """A surrogate by name (``"gp"``, ``"rff"``, ``"pfn"``, ``"tabpfn"``) or pass one through."""
    if not isinstance(name, str):
        if not isinstance(name, Surrogate):
            raise TypeError(
                "surrogate must be a name or an object with condition(X, y) and posterior(X)"
            )
        return name
    table = {
        "gp": GPSurrogate,
        "rff": RFFSurrogate,
        "pfn": PFNSurrogate,
        "tabpfn": TabPFNSurrogate,
    }
    if name not in table:
        raise ValueError(f"surrogate must be one of {', '.join(table)}; got {name!r}")
    return table[name](**kwargs)
