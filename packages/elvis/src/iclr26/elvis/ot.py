"""Entropic optimal transport with a per-descriptor dustbin (ELViS §1.2 steps 3–4).

Two Sinkhorn paths that compute the same plan: a log-domain one (``u ← log a − LSE(M + v)``) and an
exp-domain one (matrix–vector scaling after subtracting the maximum), both batched over pairs and
both honouring padding masks. The exp path is safe in float32 because the augmented scores are
bounded, ``|S̄| ≤ max(1, |α|)``, so ``τ·|S̄|`` stays far from float32's exponent limits for
τ ≤ 40; use the log path beyond that.
"""

from __future__ import annotations

import torch
from torch import Tensor

from iclr26.shared import check_choice, check_int

__all__ = [
    "DOMAINS",
    "MASKED",
    "augment_scores",
    "dustbin_transport",
    "exp_sinkhorn",
    "log_sinkhorn",
]

DOMAINS = ("log", "exp")
# Padded cells get this finite score instead of -inf: exp() of it is exactly 0 in float32, and
# unlike -inf it keeps every log-sum-exp finite, so no NaN leaks into the gradients.
MASKED = -1e6


def _tensor(x: object, name: str, ndim: int, *, finite: bool = True) -> Tensor:
    """A floating torch tensor with ``ndim`` dims (and finite values), else TypeError/ValueError
    naming ``name``; integer tensors are refused (never silently truncated or cast)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {x.dtype}")
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if finite and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or inf")
    return x


def _shape(x: Tensor, name: str, want: tuple[int, ...], what: str) -> None:
    if tuple(x.shape) != want:
        raise ValueError(f"{name} must have shape {want} ({what}), got {tuple(x.shape)}")


def _mask(mask: object, name: str, want: tuple[int, int]) -> Tensor | None:
    """A padding mask: bool (or 0/1 integer, converted) tensor of shape ``want``."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a bool torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        if mask.is_floating_point() or mask.is_complex():
            raise TypeError(f"{name} must be a bool tensor (True = padding), got {mask.dtype}")
        if bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError(f"{name} must hold only 0/1 (True = padding)")
        mask = mask.bool()
    if tuple(mask.shape) != want:
        raise ValueError(f"{name} must have shape {want}, got {tuple(mask.shape)}")
    if bool(mask.all(dim=1).any()):
        raise ValueError(f"{name} masks every descriptor of some pair (an empty descriptor set)")
    return mask


def _positive(value: Tensor | float, name: str) -> None:
    v = torch.as_tensor(value)
    if v.numel() != 1 or v.is_complex() or v.dtype == torch.bool:
        raise TypeError(f"{name} must be a real scalar, got {value!r}")
    if not bool(torch.isfinite(v)) or float(v) <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {float(v)!r}")


def _check_sinkhorn(scores: Tensor, a: Tensor, b: Tensor, names: tuple[str, str], n_iters: int):
    _tensor(scores, "scores", 3)
    bsz, m, n = scores.shape
    _tensor(a, names[0], 2)
    _tensor(b, names[1], 2)
    _shape(a, names[0], (bsz, m), "one entry per row of scores")
    _shape(b, names[1], (bsz, n), "one entry per column of scores")
    check_int(n_iters, "n_iters", low=0)


def _valid(mask: Tensor | None, shape: tuple[int, int], device: torch.device) -> Tensor:
    """Padding mask (True = padding) → validity (True = real descriptor), shape (B, L)."""
    if mask is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return ~mask.bool()


def log_sinkhorn(scores: Tensor, log_a: Tensor, log_b: Tensor, n_iters: int = 10) -> Tensor:
    """Log-domain Sinkhorn (§1.2 step 4), starting from ``u = v = 0``, u-update first.

    Args:
        scores: (B, M, N) float tensor ``M = S̄/ε``; padded cells hold a very negative finite
            value (:data:`MASKED`), so that every log-sum-exp stays finite.
        log_a: (B, M) log row marginals (:data:`MASKED` for padded rows).
        log_b: (B, N) log column marginals (:data:`MASKED` for padded columns).
        n_iters: number of (u, v) updates; the paper's default is 10.

    Returns:
        (B, M, N) log transport plan ``M_ij + u_i + v_j`` (≈ :data:`MASKED` where padded).

    Raises:
        TypeError: a non-tensor or non-floating argument, or a non-integer ``n_iters``.
        ValueError: wrong dimensions or shapes (named), NaN/inf, ``n_iters < 0``.
    """
    _check_sinkhorn(scores, log_a, log_b, ("log_a", "log_b"), n_iters)
    return _log_sinkhorn(scores, log_a, log_b, n_iters)


def _log_sinkhorn(scores: Tensor, log_a: Tensor, log_b: Tensor, n_iters: int) -> Tensor:
    u = torch.zeros_like(log_a)
    v = torch.zeros_like(log_b)
    for _ in range(n_iters):
        u = log_a - torch.logsumexp(scores + v.unsqueeze(1), dim=2)
        v = log_b - torch.logsumexp(scores + u.unsqueeze(2), dim=1)
    return scores + u.unsqueeze(2) + v.unsqueeze(1)


def exp_sinkhorn(scores: Tensor, a: Tensor, b: Tensor, n_iters: int = 10) -> Tensor:
    """Exp-domain Sinkhorn with the same iterates as :func:`log_sinkhorn` (``u = a / K v``).

    Args:
        scores: (B, M, N) float tensor ``S̄/ε``; :data:`MASKED` marks padded cells.
        a: (B, M) row marginals (0 for padded rows).
        b: (B, N) column marginals (0 for padded columns).
        n_iters: number of (u, v) updates.

    Returns:
        (B, M, N) transport plan ``diag(u) K diag(v)`` (0 where padded).

    Raises:
        TypeError: a non-tensor or non-floating argument, or a non-integer ``n_iters``.
        ValueError: wrong dimensions or shapes (named), NaN/inf, negative marginals,
            ``n_iters < 0``.
    """
    _check_sinkhorn(scores, a, b, ("a", "b"), n_iters)
    for x, name in ((a, "a"), (b, "b")):
        if bool((x < 0).any()):
            raise ValueError(f"{name} must be non-negative (marginal masses)")
    return _exp_sinkhorn(scores, a, b, n_iters)


def _exp_sinkhorn(scores: Tensor, a: Tensor, b: Tensor, n_iters: int) -> Tensor:
    shift = scores.amax(dim=(1, 2), keepdim=True)
    kernel = torch.exp(scores - shift)
    tiny = torch.finfo(scores.dtype).tiny
    v = torch.ones_like(b)
    u = torch.ones_like(a)
    for _ in range(n_iters):
        u = a / (kernel @ v.unsqueeze(2)).squeeze(2).clamp_min(tiny)
        v = b / (kernel.transpose(1, 2) @ u.unsqueeze(2)).squeeze(2).clamp_min(tiny)
    return u.unsqueeze(2) * kernel * v.unsqueeze(1)


def augment_scores(sim: Tensor, row_gain: Tensor, col_gain: Tensor, corner: Tensor) -> Tensor:
    """The augmented (m+1)×(n+1) matrix S̄ of §1.2 step 3.

    ``S̄_ij = S_ij``, last column ``z_i`` (query gains), last row ``z'_j`` (database gains),
    corner ``α``. Shapes: sim (B, m, n), row_gain (B, m), col_gain (B, n), corner scalar.
    """
    bsz = sim.shape[0]
    top = torch.cat([sim, row_gain.unsqueeze(2)], dim=2)
    corner = corner.reshape(1, 1, 1).expand(bsz, 1, 1).to(sim.dtype)
    bottom = torch.cat([col_gain.unsqueeze(1), corner], dim=2)
    return torch.cat([top, bottom], dim=1)


def dustbin_transport(
    sim: Tensor,
    row_gain: Tensor,
    col_gain: Tensor,
    corner: Tensor | float = 1.0,
    *,
    temperature: Tensor | float = 10.0,
    n_iters: int = 10,
    row_mask: Tensor | None = None,
    col_mask: Tensor | None = None,
    domain: str = "log",
    return_full: bool = False,
) -> Tensor:
    """Rescaled transport plan ``P̃ = (m+n)·P`` of the real block (§1.2 steps 3–4).

    Marginals ``a = (1/(m+n), …, n/(m+n))`` and ``b = (1/(m+n), …, m/(m+n))`` use each pair's own
    real counts m, n (padding excluded), and ``M = τ·S̄`` (``ε = 1/τ``).

    Args:
        sim: (B, m, n) descriptor cosine similarities S.
        row_gain: (B, m) query gains z ∈ (−1, 1).
        col_gain: (B, n) database gains z'.
        corner: the dustbin–dustbin score α (learnable in :class:`~iclr26.elvis.ELViS`, init 1).
        temperature: τ, default 10 (the official ``sh_temp``, not learned there).
        n_iters: Sinkhorn iterations T, default 10.
        row_mask, col_mask: (B, m) / (B, n) bool, True = padding (the official convention).
        domain: ``"log"`` or ``"exp"``; they agree to float32 precision.
        return_full: return the (B, m+1, n+1) plan P including dustbins instead of P̃.

    Raises:
        TypeError: a non-tensor or integer ``sim``/gain, a non-bool mask, a non-integer
            ``n_iters``.
        ValueError: NaN/inf in ``sim``, the gains, ``corner`` or ``temperature``; gains or
            masks whose shape does not match ``sim`` (the argument is named); a mask hiding
            every descriptor of a pair; an empty descriptor set; ``temperature <= 0``;
            ``n_iters < 0``; an unknown ``domain``.
    """
    check_choice(domain, "domain", DOMAINS)
    _tensor(sim, "sim", 3)
    bsz, m, n = sim.shape
    if m == 0 or n == 0:
        raise ValueError(f"sim holds an empty descriptor set, shape {tuple(sim.shape)}")
    _tensor(row_gain, "row_gain", 2)
    _tensor(col_gain, "col_gain", 2)
    _shape(row_gain, "row_gain", (bsz, m), "one gain per query descriptor, sim is (B, m, n)")
    _shape(col_gain, "col_gain", (bsz, n), "one gain per database descriptor, sim is (B, m, n)")
    row_mask = _mask(row_mask, "row_mask", (bsz, m))
    col_mask = _mask(col_mask, "col_mask", (bsz, n))
    c = torch.as_tensor(corner)
    if c.numel() != 1 or not bool(torch.isfinite(c).all()):
        raise ValueError(f"corner must be a finite scalar, got {corner!r}")
    _positive(temperature, "temperature")
    check_int(n_iters, "n_iters", low=0)
    return dustbin_transport_unchecked(
        sim, row_gain, col_gain, corner, temperature=temperature, n_iters=n_iters,
        row_mask=row_mask, col_mask=col_mask, domain=domain, return_full=return_full,
    )  # fmt: skip


def dustbin_transport_unchecked(
    sim: Tensor,
    row_gain: Tensor,
    col_gain: Tensor,
    corner: Tensor | float,
    *,
    temperature: Tensor | float,
    n_iters: int,
    row_mask: Tensor | None,
    col_mask: Tensor | None,
    domain: str,
    return_full: bool = False,
) -> Tensor:
    """:func:`dustbin_transport` without the input checks, for callers that validated their
    inputs already (:class:`~iclr26.elvis.ELViS` checks once per call; this runs inside its
    training loop). Masks must be bool tensors or None; no argument is checked."""
    bsz, m, n = sim.shape
    row_ok = _valid(row_mask, (bsz, m), sim.device)
    col_ok = _valid(col_mask, (bsz, n), sim.device)
    m_b = row_ok.sum(1).to(sim.dtype)
    n_b = col_ok.sum(1).to(sim.dtype)
    total = (m_b + n_b).clamp_min(1.0)
    ones = torch.ones(bsz, 1, dtype=torch.bool, device=sim.device)
    row_full = torch.cat([row_ok, ones], dim=1)
    col_full = torch.cat([col_ok, ones], dim=1)
    a = torch.cat([row_ok.to(sim.dtype) / total[:, None], (n_b / total)[:, None]], dim=1)
    b = torch.cat([col_ok.to(sim.dtype) / total[:, None], (m_b / total)[:, None]], dim=1)
    corner_t = torch.as_tensor(corner, dtype=sim.dtype, device=sim.device)
    scores = augment_scores(sim, row_gain, col_gain, corner_t) * temperature
    cell_ok = row_full.unsqueeze(2) & col_full.unsqueeze(1)
    scores = scores.masked_fill(~cell_ok, MASKED)
    if domain == "log":
        log_a = torch.where(row_full, a.clamp_min(1e-30).log(), MASKED)
        log_b = torch.where(col_full, b.clamp_min(1e-30).log(), MASKED)
        plan = _log_sinkhorn(scores, log_a, log_b, n_iters).exp()
    else:
        plan = _exp_sinkhorn(scores, a, b, n_iters)
    if return_full:
        return plan
    return plan[:, :m, :n] * total[:, None, None]
