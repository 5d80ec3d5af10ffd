"""optax gradient transformations for local Muon and the FedMuon client step.

optax convention: ``updates`` are *added* to the parameters. The LMO already returns the descent
direction ``−polar(·)``, so the learning rate is applied with ``flip_sign=False``.

FedMuon's client step (Takezawa et al., ICLR 2026, arXiv 2509.26337, Algorithm 1 lines 8–9)::

    M ← (1 − α) M + α g                         # ema_momentum(alpha)
    D ← lmo(M − C_i + C)                        # control_variate_correction() + scale_by_lmo(spec)
    X ← X + η D                                 # scale_by_learning_rate(η, flip_sign=False)

``optax.contrib.scale_by_muon`` fuses momentum and orthogonalisation, so the correction cannot be
inserted between them; these small transformations can, and compose with ``optax.chain``,
``optax.masked`` and ``optax.multi_transform`` (leaves routed elsewhere fall outside the theory).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import optax

from iclr26.fedmuon.lmo import LMOSpec, tree_lmo
from iclr26.shared import check_range

__all__ = [
    "EmaState",
    "control_variate_correction",
    "ema_momentum",
    "fedmuon_local",
    "local_muon",
    "scale_by_lmo",
]


class EmaState(NamedTuple):
    """State of :func:`ema_momentum`: the momentum ``mu`` (same pytree as the parameters)."""

    mu: Any


def ema_momentum(alpha: float) -> optax.GradientTransformation:
    """EMA momentum ``M ← (1 − α) M + α g`` (Algorithm 1, line 8), no bias correction, ``M₀ = 0``.

    ``alpha`` weights the *new* gradient (the reverse of Muon's ``β``: ``β = 1 − α``).

    Args:
        alpha: in ``(0, 1]``; ``1`` means no momentum.
    """
    alpha = check_range(alpha, "alpha", low=0.0, high=1.0, low_inclusive=False)

    def init_fn(params: Any) -> EmaState:
        return EmaState(mu=optax.tree.zeros_like(params))

    def update_fn(updates: Any, state: EmaState, params: Any = None) -> tuple[Any, EmaState]:
        del params
        mu = jax.tree.map(lambda m, g: (1 - alpha) * m + alpha * g, state.mu, updates)
        return mu, EmaState(mu=mu)

    return optax.GradientTransformation(init_fn, update_fn)


def control_variate_correction() -> optax.GradientTransformationExtraArgs:
    """``u ↦ u − C_i + C``: the bias correction of Algorithm 1, line 9 (and SCAFFOLD's).

    Stateless. Every ``update`` call needs the keyword arguments ``c_local`` (the client's
    ``C_i``) and ``c_global`` (the server's ``C``), pytrees shaped like the parameters; inside
    ``optax.chain`` pass them to the chain's ``update``.
    """

    def init_fn(params: Any) -> optax.EmptyState:
        del params
        return optax.EmptyState()

    def update_fn(
        updates: Any,
        state: optax.EmptyState,
        params: Any = None,
        *,
        c_local: Any = None,
        c_global: Any = None,
        **extra_args: Any,
    ) -> tuple[Any, optax.EmptyState]:
        del params, extra_args
        if c_local is None or c_global is None:
            raise ValueError(
                "control_variate_correction needs update(..., c_local=C_i, c_global=C)"
            )
        return jax.tree.map(lambda u, ci, c: u - ci + c, updates, c_local, c_global), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def scale_by_lmo(spec: LMOSpec | None = None) -> optax.GradientTransformation:
    """Replace the updates by the per-leaf LMO of :class:`~iclr26.fedmuon.lmo.LMOSpec` (stateless).

    With the default spec, 2-D leaves become ``−NS_5(u)`` (Jordan's coefficients) and vectors
    ``−u/‖u‖₂``.
    """
    spec = LMOSpec() if spec is None else spec
    if not isinstance(spec, LMOSpec):
        raise TypeError(f"spec must be an LMOSpec, got {type(spec).__name__}")

    def init_fn(params: Any) -> optax.EmptyState:
        del params
        return optax.EmptyState()

    def update_fn(updates: Any, state: optax.EmptyState, params: Any = None) -> tuple[Any, Any]:
        del params
        return tree_lmo(updates, spec), state

    return optax.GradientTransformation(init_fn, update_fn)


def _check_lr(learning_rate: Any) -> None:
    if callable(learning_rate) or isinstance(learning_rate, jax.core.Tracer):
        return  # an optax schedule, or a step size traced under jit
    if hasattr(learning_rate, "shape") and learning_rate.shape == ():
        learning_rate = float(learning_rate)
    lr = check_range(learning_rate, "learning_rate", low=0.0, low_inclusive=False)
    if not math.isfinite(lr):
        raise ValueError(f"learning_rate must be finite, got {learning_rate!r}")


def local_muon(
    learning_rate: optax.ScalarOrSchedule, alpha: float = 0.1, spec: LMOSpec | None = None
) -> optax.GradientTransformation:
    """Muon as an LMO method: ``X ← X + η · lmo((1 − α)M + α g)``; the client step of LocalMuon.

    Args:
        learning_rate: ``η`` (paper's reproduction: 0.01) or an optax schedule.
        alpha: EMA weight on the new gradient (spec default 0.1, i.e. Muon's ``β = 0.9``).
        spec: per-leaf LMO policy (default :class:`LMOSpec()`: NS_5 with Jordan's coefficients).
    """
    _check_lr(learning_rate)
    return optax.chain(
        ema_momentum(alpha),
        scale_by_lmo(spec),
        optax.scale_by_learning_rate(learning_rate, flip_sign=False),
    )


def fedmuon_local(
    learning_rate: optax.ScalarOrSchedule, alpha: float = 0.1, spec: LMOSpec | None = None
) -> optax.GradientTransformationExtraArgs:
    """FedMuon's client step: ``X ← X + η · lmo(M − C_i + C)`` (Algorithm 1, lines 8–9).

    Call ``update(grads, state, params, c_local=C_i, c_global=C)`` at every local step. After the
    ``K`` local steps the client's new control variate is its momentum, ``state[0].mu`` (line 11).

    Args:
        learning_rate: ``η`` or an optax schedule.
        alpha: EMA weight on the new gradient.
        spec: per-leaf LMO policy.
    """
    _check_lr(learning_rate)
    return optax.chain(
        ema_momentum(alpha),
        control_variate_correction(),
        scale_by_lmo(spec),
        optax.scale_by_learning_rate(learning_rate, flip_sign=False),
    )
