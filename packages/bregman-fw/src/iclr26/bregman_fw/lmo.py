"""Linear minimization oracles ``v = argmin_{v ∈ P} ⟨g, v⟩`` (Algorithm 1 line 3 of the paper).

Each LMO is a frozen dataclass (hashable, a static argument of ``jax.jit``) called as ``lmo(g)``
with a gradient ``g`` of the iterate's shape; it returns a point of P (a vertex for polytopes).
``lower_bound`` is a number every coordinate of P is at least (``-inf`` if none): the solvers
compare it with a kernel's domain. ``contains(x)`` (NumPy, outside jit) checks feasibility.
``is_polytope`` says whether the returned points are vertices of a polytope, which the away-step
solver needs.
"""

from __future__ import annotations

import abc
import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from iclr26.bregman_fw import precision  # noqa: F401  (float64 before any array)

__all__ = [
    "LMO",
    "Box",
    "KSparse",
    "L1Ball",
    "L2Ball",
    "LpBall",
    "NuclearBall",
    "Product",
    "Simplex",
    "Spectrahedron",
    "TruncatedSimplex",
]


def _positive(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


class LMO(abc.ABC):
    """Base class of a linear minimization oracle."""

    is_polytope: bool = False
    lower_bound: float = -math.inf

    @abc.abstractmethod
    def __call__(self, g: jax.Array) -> jax.Array:
        """A minimiser ``v ∈ argmin_{v ∈ P} ⟨g, v⟩``."""

    @abc.abstractmethod
    def contains(self, x, atol: float = 1e-9) -> bool:
        """Whether ``x`` lies in P (up to ``atol``); NumPy, call outside ``jax.jit``."""

    # Vertex enumeration (polytopes with few vertices: simplex, truncated simplex, ℓ1 ball). The
    # away-step solver then keeps its active set as one weight per vertex id, O(#vertices) per
    # iteration, instead of a buffer of dense atoms. Sets without one return None here.

    def vertex_count(self, shape: tuple[int, ...]) -> int | None:
        """Number of vertices for iterates of ``shape``, or ``None`` (no enumeration)."""
        return None

    def vertex_id(self, g: jax.Array) -> jax.Array:
        """Id of the vertex ``self(g)`` returns."""
        raise TypeError(
            f"{type(self).__name__} does not enumerate its vertices (vertex_count is None)"
        )

    def vertex(self, i: jax.Array, like: jax.Array) -> jax.Array:
        """Vertex number ``i`` (shape and dtype of ``like``); ``vertex(vertex_id(g), g) == self(g)``."""
        raise TypeError(
            f"{type(self).__name__} does not enumerate its vertices (vertex_count is None)"
        )

    def vertex_scores(self, g: jax.Array) -> jax.Array:
        """``⟨g, vertex(i)⟩`` for every id ``i``, shape ``(vertex_count,)``."""
        raise TypeError(
            f"{type(self).__name__} does not enumerate its vertices (vertex_count is None)"
        )

    def vertex_ids_of(self, atoms) -> np.ndarray | None:
        """Ids of the vertices equal to the rows of ``atoms`` (shape ``(k, *x.shape)``; NumPy,
        outside jit), or ``None`` if the LMO has no enumeration or some row is not a vertex."""
        atoms = np.asarray(atoms, dtype=float)
        if self.vertex_count(atoms.shape[1:]) is None:
            return None
        ids, verts = _ids_and_vertices(self, jnp.asarray(atoms))
        ok = np.allclose(np.asarray(verts), atoms, rtol=0.0, atol=1e-12)
        return np.asarray(ids) if ok else None


@functools.partial(jax.jit, static_argnums=0)
def _ids_and_vertices(lmo: LMO, atoms):
    # the vertex maximising ⟨x, v⟩ is the one equal to x when x is a vertex
    ids = jax.vmap(lambda x: lmo.vertex_id(-x))(atoms)
    return ids, jax.vmap(lmo.vertex)(ids, atoms)


@dataclass(frozen=True)
class Simplex(LMO):
    """Probability simplex scaled by ``radius``: {x ≥ 0, Σx = radius}. Vertices radius·eᵢ."""

    radius: float = 1.0
    is_polytope = True
    lower_bound = 0.0

    def __post_init__(self):
        _positive(self.radius, "radius")

    def __call__(self, g):
        flat = g.reshape(-1)
        i = jnp.argmin(flat)
        return jnp.zeros_like(flat).at[i].set(self.radius).reshape(g.shape)

    def contains(self, x, atol=1e-9):
        x = np.asarray(x, dtype=float)
        return bool(np.all(x >= -atol) and abs(x.sum() - self.radius) <= atol * max(1, x.size))

    def vertex_count(self, shape):
        return math.prod(shape)

    def vertex_id(self, g):
        return jnp.argmin(g.reshape(-1))

    def vertex(self, i, like):
        flat = like.reshape(-1)
        return jnp.zeros_like(flat).at[i].set(self.radius).reshape(like.shape)

    def vertex_scores(self, g):
        return self.radius * g.reshape(-1)


@dataclass(frozen=True)
class TruncatedSimplex(LMO):
    """{x ≥ eps, Σx = 1}: the simplex pulled inside the open orthant (needed by the Burg kernel).

    Vertices eps·1 + (1 − n·eps)eᵢ; requires n·eps < 1 for the dimension n it is used with.
    """

    eps: float = 1e-3
    is_polytope = True

    def __post_init__(self):
        _positive(self.eps, "eps")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return self.eps

    def __call__(self, g):
        flat = g.reshape(-1)
        n = flat.shape[0]
        if n * self.eps >= 1.0:
            raise ValueError(f"TruncatedSimplex needs n*eps < 1, got n={n}, eps={self.eps}")
        i = jnp.argmin(flat)
        v = jnp.full_like(flat, self.eps).at[i].add(1.0 - n * self.eps)
        return v.reshape(g.shape)

    def contains(self, x, atol=1e-9):
        x = np.asarray(x, dtype=float)
        return bool(np.all(x >= self.eps - atol) and abs(x.sum() - 1.0) <= atol * max(1, x.size))

    def vertex_count(self, shape):
        return math.prod(shape)

    def vertex_id(self, g):
        return jnp.argmin(g.reshape(-1))

    def vertex(self, i, like):
        flat = like.reshape(-1)
        n = flat.shape[0]
        return jnp.full_like(flat, self.eps).at[i].add(1.0 - n * self.eps).reshape(like.shape)

    def vertex_scores(self, g):
        flat = g.reshape(-1)
        return self.eps * jnp.sum(flat) + (1.0 - flat.shape[0] * self.eps) * flat


@dataclass(frozen=True)
class L1Ball(LMO):
    """{‖x‖₁ ≤ radius}. Vertices ±radius·eᵢ."""

    radius: float = 1.0
    is_polytope = True

    def __post_init__(self):
        _positive(self.radius, "radius")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return -self.radius

    def __call__(self, g):
        flat = g.reshape(-1)
        i = jnp.argmax(jnp.abs(flat))
        val = jnp.where(flat[i] >= 0, -self.radius, self.radius)
        return jnp.zeros_like(flat).at[i].set(val).reshape(g.shape)

    def contains(self, x, atol=1e-9):
        return bool(np.abs(np.asarray(x, dtype=float)).sum() <= self.radius + atol)

    # ids 0..n-1: +radius·eᵢ, ids n..2n-1: −radius·eᵢ
    def vertex_count(self, shape):
        return 2 * math.prod(shape)

    def vertex_id(self, g):
        flat = g.reshape(-1)
        i = jnp.argmax(jnp.abs(flat))
        return jnp.where(flat[i] >= 0, i + flat.shape[0], i)

    def vertex(self, i, like):
        flat = like.reshape(-1)
        n = flat.shape[0]
        val = jnp.where(i >= n, -self.radius, self.radius).astype(flat.dtype)
        return jnp.zeros_like(flat).at[i % n].set(val).reshape(like.shape)

    def vertex_scores(self, g):
        flat = self.radius * g.reshape(-1)
        return jnp.concatenate([flat, -flat])


@dataclass(frozen=True)
class L2Ball(LMO):
    """{‖x‖₂ ≤ radius}: v = −radius·g/‖g‖ (0 when g = 0)."""

    radius: float = 1.0

    def __post_init__(self):
        _positive(self.radius, "radius")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return -self.radius

    def __call__(self, g):
        nrm = jnp.sqrt(jnp.sum(g * g))
        return jnp.where(nrm > 0, -self.radius * g / jnp.where(nrm > 0, nrm, 1.0), 0.0)

    def contains(self, x, atol=1e-9):
        return bool(np.linalg.norm(np.asarray(x, dtype=float)) <= self.radius + atol)


@dataclass(frozen=True)
class LpBall(LMO):
    """{‖x‖_p ≤ radius}, 1 < p < ∞: v = −radius·sign(g)|g|^{q−1}/‖g‖_q^{q−1}, 1/p + 1/q = 1."""

    p: float = 2.0
    radius: float = 1.0

    def __post_init__(self):
        _positive(self.radius, "radius")
        if not (isinstance(self.p, int | float) and 1.0 < self.p < math.inf):
            raise ValueError(f"LpBall needs 1 < p < inf (use L1Ball or Box), got p={self.p!r}")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return -self.radius

    def __call__(self, g):
        q = self.p / (self.p - 1.0)
        a = jnp.abs(g)
        scale = jnp.max(a)
        safe = jnp.where(scale > 0, scale, 1.0)
        a = a / safe  # scale-free powers avoid overflow for large q
        w = a ** (q - 1.0)
        nq = jnp.sum(a**q) ** (1.0 / q)
        v = -self.radius * jnp.sign(g) * w / jnp.where(nq > 0, nq, 1.0) ** (q - 1.0)
        return jnp.where(scale > 0, v, 0.0)

    def contains(self, x, atol=1e-9):
        x = np.abs(np.asarray(x, dtype=float))
        return bool(np.sum(x**self.p) ** (1 / self.p) <= self.radius + atol)


@dataclass(frozen=True)
class Box(LMO):
    """{lo ≤ x ≤ hi} with scalar bounds: v = lo where g > 0, hi elsewhere."""

    lo: float = 0.0
    hi: float = 1.0
    is_polytope = True

    def __post_init__(self):
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise ValueError(f"Box needs finite lo < hi, got lo={self.lo!r}, hi={self.hi!r}")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return self.lo

    def __call__(self, g):
        return jnp.where(g > 0, self.lo, self.hi).astype(g.dtype)

    def contains(self, x, atol=1e-9):
        x = np.asarray(x, dtype=float)
        return bool(np.all(x >= self.lo - atol) and np.all(x <= self.hi + atol))


@dataclass(frozen=True)
class KSparse(LMO):
    """The K-sparse polytope {‖x‖_∞ ≤ τ, ‖x‖₁ ≤ Kτ} = conv{±τ on K coordinates}.

    v puts −τ·sign(gᵢ) on the K largest |gᵢ| (``jax.lax.top_k``), 0 elsewhere.
    """

    k: int = 1
    tau: float = 1.0
    is_polytope = True

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be a positive integer, got {self.k!r}")
        _positive(self.tau, "tau")

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return -self.tau

    def __call__(self, g):
        flat = g.reshape(-1)
        k = min(self.k, flat.shape[0])
        _, idx = jax.lax.top_k(jnp.abs(flat), k)
        vals = jnp.where(flat[idx] >= 0, -self.tau, self.tau)
        return jnp.zeros_like(flat).at[idx].set(vals).reshape(g.shape)

    def contains(self, x, atol=1e-9):
        x = np.abs(np.asarray(x, dtype=float))
        return bool(x.max() <= self.tau + atol and x.sum() <= self.k * self.tau + atol)


@dataclass(frozen=True)
class NuclearBall(LMO):
    """{‖X‖_* ≤ radius} for matrices: v = −radius·u₁v₁ᵀ (top singular pair of G).

    ``method="svd"`` uses a full SVD; ``"power"`` runs ``iters`` power iterations on GᵀG from a
    fixed start (deterministic, cheaper for large matrices, approximate).
    """

    radius: float = 1.0
    method: str = "svd"
    iters: int = 50

    def __post_init__(self):
        _positive(self.radius, "radius")
        if self.method not in ("svd", "power"):
            raise ValueError(f"method must be 'svd' or 'power', got {self.method!r}")

    def __call__(self, g):
        if g.ndim != 2:
            raise ValueError(f"NuclearBall works on matrices, got shape {g.shape}")
        if self.method == "svd":
            u, _, vt = jnp.linalg.svd(g, full_matrices=False)
            return -self.radius * jnp.outer(u[:, 0], vt[0])

        def body(_, v):
            w = g.T @ (g @ v)
            return w / jnp.maximum(jnp.linalg.norm(w), 1e-300)

        v0 = jnp.ones(g.shape[1], g.dtype) / math.sqrt(g.shape[1])
        v = jax.lax.fori_loop(0, self.iters, body, v0)
        u = g @ v
        u = u / jnp.maximum(jnp.linalg.norm(u), 1e-300)
        return -self.radius * jnp.outer(u, v)

    def contains(self, x, atol=1e-9):
        return bool(
            np.linalg.svd(np.asarray(x, dtype=float), compute_uv=False).sum() <= self.radius + atol
        )


@dataclass(frozen=True)
class Spectrahedron(LMO):
    """{X ⪰ 0, tr X = trace}: v = trace·u uᵀ with u the eigenvector of the smallest eigenvalue of
    (G + Gᵀ)/2."""

    trace: float = 1.0

    def __post_init__(self):
        _positive(self.trace, "trace")

    def __call__(self, g):
        if g.ndim != 2 or g.shape[0] != g.shape[1]:
            raise ValueError(f"Spectrahedron works on square matrices, got shape {g.shape}")
        _, vecs = jnp.linalg.eigh(0.5 * (g + g.T))
        u = vecs[:, 0]
        return self.trace * jnp.outer(u, u)

    def contains(self, x, atol=1e-9):
        x = np.asarray(x, dtype=float)
        sym = np.allclose(x, x.T, atol=atol)
        return bool(
            sym and np.linalg.eigvalsh(x).min() >= -atol and abs(np.trace(x) - self.trace) <= atol
        )


@dataclass(frozen=True)
class Product(LMO):
    """Cartesian product P₁ × … × P_k on a flat vector split into blocks of ``sizes``."""

    lmos: tuple[LMO, ...]
    sizes: tuple[int, ...]

    def __post_init__(self):
        if len(self.lmos) != len(self.sizes) or not self.lmos:
            raise ValueError("Product needs one size per LMO and at least one LMO")
        if any(not isinstance(s, int) or s < 1 for s in self.sizes):
            raise ValueError(f"sizes must be positive integers, got {self.sizes!r}")

    @property
    def is_polytope(self) -> bool:  # type: ignore[override]
        return all(m.is_polytope for m in self.lmos)

    @property
    def lower_bound(self) -> float:  # type: ignore[override]
        return min(m.lower_bound for m in self.lmos)

    def _split(self, x):
        out, start = [], 0
        for s in self.sizes:
            out.append(x[start : start + s])
            start += s
        return out

    def __call__(self, g):
        if g.shape != (sum(self.sizes),):
            raise ValueError(
                f"Product expects a flat vector of size {sum(self.sizes)}, got {g.shape}"
            )
        return jnp.concatenate([m(b) for m, b in zip(self.lmos, self._split(g), strict=True)])

    def contains(self, x, atol=1e-9):
        x = np.asarray(x, dtype=float)
        return all(m.contains(b, atol) for m, b in zip(self.lmos, self._split(x), strict=True))
