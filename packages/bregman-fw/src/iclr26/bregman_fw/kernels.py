"""Kernel generating distances φ and their Bregman distances D_φ (paper §2, "L-smad").

``D_φ(u, x) = φ(u) − φ(x) − ⟨∇φ(x), u − x⟩``. A function f is L-smooth relative to φ (L-smad)
when ``Lφ − f`` and ``Lφ + f`` are convex; the adaptive Bregman step then only needs D_φ along
Frank–Wolfe directions. Every kernel works on arrays of any shape (sums run over all entries) and
is a frozen dataclass, so it is hashable and can be a static argument of ``jax.jit``.

``domain`` says where φ is finite and differentiable: ``"real"`` (everywhere), ``"nonnegative"``
(D_φ(u, x) finite for u ≥ 0 and x > 0, e.g. entropy) or ``"positive"`` (u and x > 0, e.g. Burg).
The solvers use it to refuse a feasible set that leaves the kernel's domain.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy

from iclr26.bregman_fw import precision  # noqa: F401  (float64 before any array)

__all__ = [
    "Burg",
    "Entropy",
    "Euclidean",
    "Kernel",
    "Power",
    "Quartic",
    "SumKernel",
    "from_function",
]

DOMAINS = ("real", "nonnegative", "positive")


def _check_positive(value, name: str, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    ok = value >= 0 if allow_zero else value > 0
    if not (ok and math.isfinite(value)):
        kind = "nonnegative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} finite number, got {value!r}")


def _sqnorm(x: jax.Array) -> jax.Array:
    return jnp.sum(x * x)


class Kernel(abc.ABC):
    """Base class of a kernel generating distance φ.

    Subclasses define :meth:`value` and usually closed forms of :meth:`grad` and
    :meth:`divergence`; the defaults use autodiff (``jax.grad``) and the definition of D_φ.
    """

    name: str = "kernel"
    domain: str = "real"

    @abc.abstractmethod
    def value(self, x: jax.Array) -> jax.Array:
        """φ(x), a scalar."""

    def grad(self, x: jax.Array) -> jax.Array:
        """∇φ(x), same shape as x."""
        return jax.grad(self.value)(x)

    def divergence(self, u: jax.Array, x: jax.Array) -> jax.Array:
        """D_φ(u, x) = φ(u) − φ(x) − ⟨∇φ(x), u − x⟩ ≥ 0, a scalar."""
        return self.value(u) - self.value(x) - jnp.sum(self.grad(x) * (u - x))

    def __add__(self, other: Kernel) -> SumKernel:
        return SumKernel(self, other)


@dataclass(frozen=True)
class Euclidean(Kernel):
    """φ(x) = (s/2)‖x‖², D_φ(u, x) = (s/2)‖u − x‖². Scaling exponent ν = 1 (equality)."""

    scale: float = 1.0
    name: str = field(default="euclidean", init=False)
    domain: str = field(default="real", init=False)

    def __post_init__(self):
        _check_positive(self.scale, "scale")

    def value(self, x):
        return 0.5 * self.scale * _sqnorm(x)

    def grad(self, x):
        return self.scale * x

    def divergence(self, u, x):
        return 0.5 * self.scale * _sqnorm(u - x)


@dataclass(frozen=True)
class Entropy(Kernel):
    """Boltzmann–Shannon entropy φ(x) = Σ x log x; D_φ(u, x) = Σ u log(u/x) − u + x (generalised KL).

    Finite when u has zero entries (0 log 0 = 0), so it works with simplex vertices; x must be > 0.
    """

    name: str = field(default="entropy", init=False)
    domain: str = field(default="nonnegative", init=False)

    def value(self, x):
        return jnp.sum(xlogy(x, x))

    def grad(self, x):
        return jnp.log(x) + 1.0

    def divergence(self, u, x):
        return jnp.sum(xlogy(u, u) - xlogy(u, x) - u + x)


@dataclass(frozen=True)
class Burg(Kernel):
    """Burg entropy φ(x) = −Σ log x; D_φ(u, x) = Σ u/x − log(u/x) − 1 (Itakura–Saito).

    ``inf`` when u has a zero entry: the feasible set must lie inside the open orthant (use
    :class:`~iclr26.bregman_fw.lmo.TruncatedSimplex` or a :class:`~iclr26.bregman_fw.lmo.Box`
    with a positive lower bound); the solvers raise ``ValueError`` otherwise.
    """

    name: str = field(default="burg", init=False)
    domain: str = field(default="positive", init=False)

    def value(self, x):
        return -jnp.sum(jnp.log(x))

    def grad(self, x):
        return -1.0 / x

    def divergence(self, u, x):
        r = u / x
        return jnp.sum(r - jnp.log(r) - 1.0)


@dataclass(frozen=True)
class Quartic(Kernel):
    """φ(x) = (a/4)‖x‖⁴ + (s/2)‖x‖² (Bolte, Sabach, Teboulle & Vaisbourd 2018).

    The kernel of the paper's phase-retrieval experiment (a = s = 1): ¼Σ(⟨aᵢ,x⟩² − bᵢ)² is
    L-smad relative to it with L = Σᵢ 3‖aᵢ‖⁴ + ‖aᵢ‖²|bᵢ|.
    """

    a: float = 1.0
    s: float = 1.0
    name: str = field(default="quartic", init=False)
    domain: str = field(default="real", init=False)

    def __post_init__(self):
        _check_positive(self.a, "a", allow_zero=True)
        _check_positive(self.s, "s", allow_zero=True)
        if self.a == 0 and self.s == 0:
            raise ValueError("Quartic needs a > 0 or s > 0 (a strictly convex kernel)")

    def value(self, x):
        q = _sqnorm(x)
        return 0.25 * self.a * q * q + 0.5 * self.s * q

    def grad(self, x):
        return (self.a * _sqnorm(x) + self.s) * x

    def divergence(self, u, x):
        qu, qx, ux = _sqnorm(u), _sqnorm(x), jnp.sum(u * x)
        quartic = 0.25 * qu * qu + 0.75 * qx * qx - qx * ux
        return self.a * quartic + 0.5 * self.s * _sqnorm(u - x)


@dataclass(frozen=True)
class Power(Kernel):
    """φ(x) = ‖x‖₂ᵖ / p with p > 1 (p = 2 is the Euclidean kernel)."""

    p: float = 2.0
    name: str = field(default="power", init=False)
    domain: str = field(default="real", init=False)

    def __post_init__(self):
        if not self.p > 1.0:
            raise ValueError(f"Power kernel needs p > 1, got p={self.p!r}")

    def value(self, x):
        return jnp.sqrt(_sqnorm(x)) ** self.p / self.p

    def grad(self, x):
        q = _sqnorm(x)
        safe = jnp.where(q > 0, q, 1.0)
        return jnp.where(q > 0, safe ** (0.5 * self.p - 1.0), 0.0) * x


@dataclass(frozen=True)
class SumKernel(Kernel):
    """w₁φ₁ + w₂φ₂; its domain is the smaller of the two."""

    first: Kernel
    second: Kernel
    w1: float = 1.0
    w2: float = 1.0

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.w1:g}*{self.first.name}+{self.w2:g}*{self.second.name}"

    @property
    def domain(self) -> str:  # type: ignore[override]
        return max(self.first.domain, self.second.domain, key=DOMAINS.index)

    def value(self, x):
        return self.w1 * self.first.value(x) + self.w2 * self.second.value(x)

    def grad(self, x):
        return self.w1 * self.first.grad(x) + self.w2 * self.second.grad(x)

    def divergence(self, u, x):
        return self.w1 * self.first.divergence(u, x) + self.w2 * self.second.divergence(u, x)


@dataclass(frozen=True)
class _FunctionKernel(Kernel):
    phi: Callable[[jax.Array], jax.Array]
    name: str = "custom"
    domain: str = "real"

    def value(self, x):
        return self.phi(x)


def from_function(
    phi: Callable[[jax.Array], jax.Array], *, name: str = "custom", domain: str = "real"
) -> Kernel:
    """A kernel from any strictly convex, differentiable scalar function ``phi(x)``.

    ∇φ comes from ``jax.grad`` and D_φ from its definition. ``domain`` is one of ``"real"``,
    ``"nonnegative"``, ``"positive"`` (see the module docstring).
    """
    if not callable(phi):
        raise TypeError(f"phi must be callable, got {type(phi).__name__}")
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
    return _FunctionKernel(phi, name, domain)
