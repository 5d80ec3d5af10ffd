"""Pose-graph optimisation (spec §4.4): priors, odometry (between) factors and relocalisation
anchors with optional Huber/Cauchy kernels, solved by Levenberg–Marquardt on SE(3) with right
perturbations ``X ← X·Exp(δ)``. Two backends: numpy (sparse normal equations, batched
central-difference Jacobians) and gtsam (``PriorFactorPose3``, ``BetweenFactorPose3``,
``noiseModel.Robust``). Both minimise the same cost; twists are (ω, v) in both."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import spsolve

from iclr26.cognimap3d.se3 import check_poses, exp_se3, invert, log_se3
from iclr26.shared.validation import check_array, check_choice, check_int, check_range

__all__ = ["PoseGraph", "robust_weight"]

ROBUST = (None, "huber", "cauchy")


def robust_weight(e: np.ndarray, kind: str | None, k: float) -> np.ndarray:
    """IRLS weight of a whitened residual norm ``e`` (gtsam's ``mEstimator`` weights)."""
    e = np.asarray(e, dtype=float)
    if kind is None:
        return np.ones_like(e)
    if kind == "huber":
        return np.where(e <= k, 1.0, k / np.maximum(e, 1e-300))
    return 1.0 / (1.0 + (e / k) ** 2)


def robust_cost(e: np.ndarray, kind: str | None, k: float) -> np.ndarray:
    """ρ(e) with ρ = ½e² for no kernel (gtsam's ``loss``)."""
    if kind is None:
        return 0.5 * e**2
    if kind == "huber":
        return np.where(e <= k, 0.5 * e**2, k * e - 0.5 * k * k)
    return 0.5 * k * k * np.log1p((e / k) ** 2)


@dataclass
class _Factor:
    i: int
    j: int  # -1 for unary
    Z: np.ndarray
    sigmas: np.ndarray
    robust: str | None
    k: float


def _check_sigmas(s: object, name: str = "sigmas6") -> np.ndarray:
    check_array(s, name, shape=(6,))
    s = np.asarray(s, dtype=float)
    if np.any(s <= 0):
        raise ValueError(f"{name} must be > 0, got {s}")
    return s


class PoseGraph:
    """A pose graph over integer keys with SE(3) poses (camera-to-world).

    Residuals (whitened by ``sigmas6`` in (ω, v) order): prior ``Log(Z⁻¹X_i)``, between
    ``Log(Z⁻¹X_i⁻¹X_j)``; a relocalisation anchor is a prior with a robust kernel.
    """

    def __init__(self) -> None:
        self.factors: list[_Factor] = []

    def _add(
        self, i: int, j: int, Z: object, sigmas6: object, robust: str | None, k: float
    ) -> None:
        check_choice(robust, "robust", ROBUST)
        check_range(k, "k", low=0, low_inclusive=False)
        Zc = check_poses(Z, "T", batch=False)
        self.factors.append(_Factor(i, j, Zc, _check_sigmas(sigmas6), robust, float(k)))

    def add_prior(
        self,
        i: int,
        T: np.ndarray,
        sigmas6: np.ndarray,
        robust: str | None = None,
        k: float = 1.345,
    ) -> None:
        """Unary factor ``‖Log(T⁻¹X_i)‖²_Σ`` (gtsam ``PriorFactorPose3``)."""
        check_int(i, "i", low=0)
        self._add(i, -1, T, sigmas6, robust, k)

    def add_between(
        self,
        i: int,
        j: int,
        T_ij: np.ndarray,
        sigmas6: np.ndarray,
        robust: str | None = None,
        k: float = 1.345,
    ) -> None:
        """Odometry factor ``‖Log(T_ij⁻¹X_i⁻¹X_j)‖²_Σ`` (gtsam ``BetweenFactorPose3``)."""
        check_int(i, "i", low=0)
        check_int(j, "j", low=0)
        if i == j:
            raise ValueError("a between factor needs two different keys")
        self._add(i, j, T_ij, sigmas6, robust, k)

    def add_pose_anchor(
        self,
        i: int,
        T_world_cam: np.ndarray,
        sigmas6: np.ndarray,
        robust: str | None = "huber",
        k: float = 1.345,
    ) -> None:
        """Relocalisation anchor from a verified memory recall: a robust prior (Huber k = 1.345)."""
        self.add_prior(i, T_world_cam, sigmas6, robust, k)

    def keys(self) -> list[int]:
        """The keys any factor touches, sorted."""
        return sorted({f.i for f in self.factors} | {f.j for f in self.factors if f.j >= 0})

    def _validate_initial(self, initial: dict[int, np.ndarray]) -> list[int]:
        if not self.factors:
            raise ValueError("the graph has no factors")
        if not any(f.j < 0 for f in self.factors):
            raise ValueError("the graph needs at least one prior or anchor (gauge freedom)")
        keys = self.keys()
        missing = [k for k in keys if k not in initial]
        if missing:
            raise ValueError(f"initial has no pose for keys {missing[:5]}")
        for k in keys:
            check_poses(initial[k], f"initial[{k}]", batch=False)
        return keys

    def cost(self, poses: dict[int, np.ndarray]) -> float:
        """Total robust cost ``Σ ρ(‖r‖_Σ)`` (½‖r‖² without kernel), as gtsam's ``graph.error``."""
        keys = self._validate_initial(poses)
        X = np.stack([poses[k] for k in keys])
        index = {k: n for n, k in enumerate(keys)}
        return self._cost_X(X, index)

    def _residuals(self, X: np.ndarray, index: dict[int, int], delta: tuple | None = None):
        fs = self.factors
        ii = np.array([index[f.i] for f in fs])
        jj = np.array([index[f.j] if f.j >= 0 else -1 for f in fs])
        Zinv = invert(np.stack([f.Z for f in fs]))
        sig = np.stack([f.sigmas for f in fs])
        Xi = X[ii]
        Xj = X[np.maximum(jj, 0)]
        if delta is not None:
            which, d = delta
            if which == "i":
                Xi = Xi @ exp_se3(d)
            else:
                Xj = Xj @ exp_se3(d)
        unary = jj < 0
        E = np.where(unary[:, None, None], Zinv @ Xi, Zinv @ invert(Xi) @ Xj)
        return log_se3(E) / sig, ii, jj, fs

    def optimize(
        self,
        initial: dict[int, np.ndarray],
        backend: str = "numpy",
        max_iters: int = 50,
        tol: float = 1e-10,
    ) -> dict[int, np.ndarray]:
        """Minimise the cost from ``initial`` (``{key: 4×4}``) with Levenberg–Marquardt.

        Args:
            backend: ``"numpy"`` (always available) or ``"gtsam"`` (extra ``[gtsam]``).
            max_iters: iteration cap.
            tol: relative cost decrease that stops the numpy solver.
        """
        check_choice(backend, "backend", ("numpy", "gtsam"))
        check_int(max_iters, "max_iters", low=1)
        keys = self._validate_initial(initial)
        if backend == "gtsam":
            return self._optimize_gtsam(initial, keys, max_iters)
        index = {k: n for n, k in enumerate(keys)}
        X = np.stack([np.asarray(initial[k], dtype=float) for k in keys])
        n = len(keys)
        lam = 1e-4
        h = 1e-6
        cost = self._cost_X(X, index)
        eye6 = np.eye(6)
        for _ in range(max_iters):
            r, ii, jj, fs = self._residuals(X, index)
            e = np.linalg.norm(r, axis=1)
            w = self._weights(e, fs)
            m = len(fs)
            Ji = np.empty((m, 6, 6))
            Jj = np.empty((m, 6, 6))
            for a in range(6):
                dp = np.broadcast_to(h * eye6[a], (m, 6))
                Ji[:, :, a] = (
                    self._residuals(X, index, ("i", dp))[0]
                    - self._residuals(X, index, ("i", -dp))[0]
                ) / (2 * h)
                Jj[:, :, a] = (
                    self._residuals(X, index, ("j", dp))[0]
                    - self._residuals(X, index, ("j", -dp))[0]
                ) / (2 * h)
            unary = jj < 0
            Jj[unary] = 0.0
            # normal equations, block-sparse: H = Σ w JᵀJ, g = Σ w Jᵀr
            bi = ~unary
            g6 = np.zeros((n, 6))
            np.add.at(g6, ii, w[:, None] * np.einsum("mka,mk->ma", Ji, r))
            np.add.at(g6, jj[bi], (w[:, None] * np.einsum("mka,mk->ma", Jj, r))[bi])
            g = g6.ravel()
            blocks, rows, cols = [], [], []
            everything = np.ones(m, bool)
            for A, ia, B, ib, sel in (
                (Ji, ii, Ji, ii, everything),
                (Jj, jj, Jj, jj, bi),
                (Ji, ii, Jj, jj, bi),
                (Jj, jj, Ji, ii, bi),
            ):
                blk = w[sel, None, None] * np.einsum("mka,mkb->mab", A[sel], B[sel])
                ra = 6 * ia[sel][:, None, None] + np.arange(6)[None, :, None]
                cb = 6 * ib[sel][:, None, None] + np.arange(6)[None, None, :]
                blocks.append(blk.ravel())
                rows.append(np.broadcast_to(ra, blk.shape).ravel())
                cols.append(np.broadcast_to(cb, blk.shape).ravel())
            Hm = coo_matrix(
                (np.concatenate(blocks), (np.concatenate(rows), np.concatenate(cols))),
                shape=(6 * n, 6 * n),
            ).tocsc()
            diag = Hm.diagonal()
            improved = False
            for _ in range(10):
                Hd = (
                    Hm
                    + coo_matrix(
                        (lam * np.maximum(diag, 1e-9), (np.arange(6 * n), np.arange(6 * n))),
                        shape=Hm.shape,
                    ).tocsc()
                )
                step = -spsolve(Hd, g).reshape(n, 6)
                X_new = X @ exp_se3(step)
                c_new = self._cost_X(X_new, index)
                if c_new <= cost:
                    improved = True
                    rel = (cost - c_new) / max(cost, 1e-300)
                    X, cost = X_new, c_new
                    lam = max(lam / 10, 1e-12)
                    break
                lam *= 10
            if not improved or rel < tol or np.abs(step).max() < 1e-12:
                break
        return {k: X[index[k]] for k in keys}

    @staticmethod
    def _kernels(fs: list[_Factor]) -> tuple[np.ndarray, np.ndarray]:
        kind = np.array([ROBUST.index(f.robust) for f in fs])
        return kind, np.array([f.k for f in fs])

    def _weights(self, e: np.ndarray, fs: list[_Factor]) -> np.ndarray:
        kind, k = self._kernels(fs)
        return np.select(
            [kind == 0, kind == 1],
            [np.ones_like(e), np.where(e <= k, 1.0, k / np.maximum(e, 1e-300))],
            1.0 / (1.0 + (e / k) ** 2),
        )

    def _cost_X(self, X: np.ndarray, index: dict[int, int]) -> float:
        r, _, _, fs = self._residuals(X, index)
        e = np.linalg.norm(r, axis=1)
        kind, k = self._kernels(fs)
        huber = np.where(e <= k, 0.5 * e**2, k * e - 0.5 * k * k)
        cauchy = 0.5 * k * k * np.log1p((e / k) ** 2)
        return float(np.select([kind == 0, kind == 1], [0.5 * e**2, huber], cauchy).sum())

    def _optimize_gtsam(
        self, initial: dict[int, np.ndarray], keys: list[int], max_iters: int
    ) -> dict[int, np.ndarray]:
        from iclr26.shared.optional import import_optional

        gtsam = import_optional(
            "gtsam", dist="iclr26-cognimap3d", extra="gtsam", purpose="backend='gtsam'"
        )
        graph = gtsam.NonlinearFactorGraph()
        for f in self.factors:
            noise = gtsam.noiseModel.Diagonal.Sigmas(f.sigmas)
            if f.robust == "huber":
                noise = gtsam.noiseModel.Robust.Create(
                    gtsam.noiseModel.mEstimator.Huber.Create(f.k), noise
                )
            elif f.robust == "cauchy":
                noise = gtsam.noiseModel.Robust.Create(
                    gtsam.noiseModel.mEstimator.Cauchy.Create(f.k), noise
                )
            if f.j < 0:
                graph.add(gtsam.PriorFactorPose3(f.i, gtsam.Pose3(f.Z), noise))
            else:
                graph.add(gtsam.BetweenFactorPose3(f.i, f.j, gtsam.Pose3(f.Z), noise))
        values = gtsam.Values()
        for k in keys:
            values.insert(k, gtsam.Pose3(np.asarray(initial[k], dtype=float)))
        params = gtsam.LevenbergMarquardtParams()
        params.setMaxIterations(max_iters)
        params.setRelativeErrorTol(1e-12)
        params.setAbsoluteErrorTol(1e-15)
        result = gtsam.LevenbergMarquardtOptimizer(graph, values, params).optimize()
        return {k: result.atPose3(k).matrix() for k in keys}
