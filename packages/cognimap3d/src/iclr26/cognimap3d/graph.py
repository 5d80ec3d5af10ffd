"""Pose-graph optimisation (spec §4.4): priors, odometry (between) factors, relocalisation
anchors and static-landmark terms (recalled memory points seen again) with optional Huber/Cauchy
kernels, solved by Levenberg–Marquardt on SE(3) with right
perturbations ``X ← X·Exp(δ)``. Two backends: numpy (sparse normal equations, batched
central-difference Jacobians; analytic landmark Jacobians) and gtsam (``PriorFactorPose3``,
``BetweenFactorPose3``, ``noiseModel.Robust``, a ``CustomFactor`` per landmark). Both minimise the same cost; twists are (ω, v) in both."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace

import numpy as np
from scipy.linalg import LinAlgError, cho_solve_banded, cholesky_banded
from scipy.sparse import coo_matrix, csc_matrix
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.sparse.linalg import splu
from threadpoolctl import ThreadpoolController

from iclr26.cognimap3d.se3 import adjoint_se3, check_poses, exp_se3, hat, jr_inv_se3, log_se3
from iclr26.shared.validation import check_array, check_choice, check_int, check_range

__all__ = ["PoseGraph", "robust_weight"]

ROBUST = (None, "huber", "cauchy")
BACKENDS = ("numpy", "gtsam", "pypose")
LINEAR_SOLVERS = ("auto", "banded", "superlu")
_BAND_MAX = 96  # "auto" solves banded up to this bandwidth (unknowns); wider goes to SuperLU


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


@dataclass
class _Landmarks:
    i: int
    p_world: np.ndarray  # (M, 3)
    q_cam: np.ndarray  # (M, 3)
    sigma: float
    robust: str | None
    k: float


def _inv_rigid(T: np.ndarray) -> np.ndarray:
    R = np.swapaxes(T[..., :3, :3], -1, -2)
    out = np.zeros_like(T)
    out[..., :3, :3] = R
    out[..., :3, 3] = -(R @ T[..., :3, 3][..., None])[..., 0]
    out[..., 3, 3] = 1.0
    return out


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


class _NormalEquations:
    """The damped normal equations ``(H + λ diag H) δ = −g`` of an LM solve over ``n`` poses
    whose 6×6 Hessian blocks sit at fixed node pairs ``(brow, bcol)`` (duplicates summed). The
    sparsity pattern, a reverse Cuthill–McKee ordering of the poses and the scatter indices are
    built once per solve and reused at every iteration and damping trial. A narrow band (pose
    chains with priors, anchors and landmarks) is factored by LAPACK's banded Cholesky; other
    patterns by SuperLU in symmetric mode."""

    def __init__(self, n: int, brow: np.ndarray, bcol: np.ndarray, solver: str) -> None:
        size = 6 * n
        self.size = size
        a = np.arange(6)
        rows = np.broadcast_to(6 * brow[:, None, None] + a[:, None], (len(brow), 6, 6)).ravel()
        cols = np.broadcast_to(6 * bcol[:, None, None] + a, (len(brow), 6, 6)).ravel()
        nodes = coo_matrix((np.ones(len(brow)), (brow, bcol)), shape=(n, n)).tocsr()
        perm = reverse_cuthill_mckee(nodes, symmetric_mode=True).astype(int)
        iperm = np.empty(n, dtype=int)
        iperm[perm] = np.arange(n)
        width = 6 * int(np.abs(iperm[brow] - iperm[bcol]).max(initial=0)) + 5
        self.banded = solver == "banded" or (solver == "auto" and width <= _BAND_MAX)
        if self.banded:
            self.perm = (6 * perm[:, None] + a).ravel()
            iperm6 = (6 * iperm[:, None] + a).ravel()
            pr, pc = iperm6[rows], iperm6[cols]
            self.keep = np.flatnonzero(pr >= pc)  # lower band, in the RCM order
            self.index = (pr - pc)[self.keep] * size + pc[self.keep]
            self.n_slots = (width + 1) * size
        else:
            key = cols * size + rows  # column-major: CSC order
            uniq, self.index = np.unique(key, return_inverse=True)
            self.indices = uniq % size
            self.indptr = np.r_[0, np.cumsum(np.bincount(uniq // size, minlength=size))]
            self.diag = np.flatnonzero(self.indices == uniq // size)
            self.keep = slice(None)
            self.n_slots = len(uniq)
        self.data = np.zeros(self.n_slots)

    def assemble(self, blocks: np.ndarray) -> None:
        """Sum the ``(nb, 6, 6)`` blocks (in the ``brow, bcol`` order) into the matrix."""
        vals = blocks.ravel()[self.keep]
        self.data = np.bincount(self.index, vals, minlength=self.n_slots)

    def solve(self, rhs: np.ndarray, lam: float) -> np.ndarray | None:
        """``(H + λ max(diag H, 1e-9)) x = rhs``; ``None`` if the factorisation fails."""
        if self.banded:
            ab = self.data.reshape(-1, self.size).copy()
            ab[0] += lam * np.maximum(ab[0], 1e-9)
            try:
                c = cholesky_banded(ab, lower=True, check_finite=False)
            except LinAlgError:
                return None
            x = np.empty(self.size)
            x[self.perm] = cho_solve_banded((c, True), rhs[self.perm], check_finite=False)
            return x
        data = self.data.copy()
        data[self.diag] += lam * np.maximum(data[self.diag], 1e-9)
        A = csc_matrix((data, self.indices, self.indptr), shape=(self.size, self.size))
        try:
            lu = splu(
                A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )  # fmt: skip
        except RuntimeError:  # exactly singular
            return None
        return lu.solve(rhs)


def _check_sigmas(s: object, name: str = "sigmas6") -> np.ndarray:
    check_array(s, name, shape=(6,))
    s = np.asarray(s, dtype=float)
    if np.any(s <= 0):
        raise ValueError(f"{name} must be > 0, got {s}")
    return s


class PoseGraph:
    """A pose graph over integer keys with SE(3) poses (camera-to-world).

    Residuals (whitened by ``sigmas6`` in (ω, v) order): prior ``Log(Z⁻¹X_i)``, between
    ``Log(Z⁻¹X_i⁻¹X_j)``; a relocalisation anchor is a prior with a robust kernel; a landmark
    term ``(X_i⁻¹p − q)/σ`` per recalled memory point ``p`` (world) seen at ``q`` (camera i).
    """

    def __init__(self) -> None:
        self.factors: list[_Factor] = []
        self.landmarks: list[_Landmarks] = []

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

    def add_landmarks(
        self,
        i: int,
        p_world: np.ndarray,
        q_cam: np.ndarray,
        sigma: float,
        robust: str | None = "huber",
        k: float = 1.345,
    ) -> None:
        """Static-landmark terms ``Σ_m ρ(‖X_i⁻¹p_m − q_m‖/σ)`` (spec §4.4): recalled memory
        points ``p_world`` ``(M, 3)`` matched to points ``q_cam`` ``(M, 3)`` of keyframe ``i``
        in its camera frame (e.g. ICP inliers of a verified recall); ``sigma`` in metres."""
        check_int(i, "i", low=0)
        check_array(p_world, "p_world", shape=(None, 3))
        check_array(q_cam, "q_cam", shape=(len(p_world), 3))
        check_range(sigma, "sigma", low=0, low_inclusive=False)
        check_choice(robust, "robust", ROBUST)
        check_range(k, "k", low=0, low_inclusive=False)
        self.landmarks.append(
            _Landmarks(
                i, np.asarray(p_world, float).copy(), np.asarray(q_cam, float).copy(),
                float(sigma), robust, float(k),
            )
        )  # fmt: skip

    def keys(self) -> list[int]:
        """The keys any factor touches, sorted."""
        return sorted(
            {f.i for f in self.factors}
            | {f.j for f in self.factors if f.j >= 0}
            | {lm.i for lm in self.landmarks}
        )

    def _validate_initial(self, initial: dict[int, np.ndarray]) -> list[int]:
        if not self.factors and not self.landmarks:
            raise ValueError("the graph has no factors")
        if not any(f.j < 0 for f in self.factors) and not self.landmarks:
            raise ValueError(
                "the graph needs at least one prior, anchor or landmark set (gauge freedom)"
            )
        keys = self.keys()
        missing = [k for k in keys if k not in initial]
        if missing:
            raise ValueError(f"initial has no pose for keys {missing[:5]}")
        try:
            stacked = np.stack([np.asarray(initial[k], dtype=float) for k in keys])
        except ValueError:
            stacked = None
        if stacked is None or stacked.shape[1:] != (4, 4):
            for k in keys:  # find the culprit
                check_poses(initial[k], f"initial[{k}]", batch=False)
        try:
            check_poses(stacked, "initial", batch=True)
        except ValueError:
            for k in keys:
                check_poses(initial[k], f"initial[{k}]", batch=False)
            raise
        return keys

    def cost(self, poses: dict[int, np.ndarray]) -> float:
        """Total robust cost ``Σ ρ(‖r‖_Σ)`` (½‖r‖² without kernel), as gtsam's ``graph.error``."""
        keys = self._validate_initial(poses)
        X = np.stack([poses[k] for k in keys])
        return self._cost(X, self._prep(keys))

    def _prep(self, keys: list[int]) -> SimpleNamespace:
        """Factor arrays, built once per solve."""
        index = {k: n for n, k in enumerate(keys)}
        fs = self.factors
        Z = np.stack([f.Z for f in fs]) if fs else np.zeros((0, 4, 4))
        jj = np.array([index[f.j] if f.j >= 0 else -1 for f in fs], dtype=int)
        lms = self.landmarks
        count = [len(lm.p_world) for lm in lms]
        return SimpleNamespace(
            ii=np.array([index[f.i] for f in fs], dtype=int),
            jj=jj,
            unary=jj < 0,
            Z=Z,
            Zinv=_inv_rigid(Z),
            sig=np.stack([f.sigmas for f in fs]) if fs else np.zeros((0, 6)),
            kind=np.array([ROBUST.index(f.robust) for f in fs], dtype=int),
            k=np.array([f.k for f in fs], dtype=float),
            l_ii=np.repeat([index[lm.i] for lm in lms], count).astype(int),
            l_p=np.concatenate([lm.p_world for lm in lms]) if lms else np.zeros((0, 3)),
            l_q=np.concatenate([lm.q_cam for lm in lms]) if lms else np.zeros((0, 3)),
            l_sig=np.repeat([lm.sigma for lm in lms], count).astype(float),
            l_kind=np.repeat([ROBUST.index(lm.robust) for lm in lms], count).astype(int),
            l_k=np.repeat([lm.k for lm in lms], count).astype(float),
        )

    @staticmethod
    def _landmark_residuals(X: np.ndarray, p: SimpleNamespace) -> tuple[np.ndarray, np.ndarray]:
        """Whitened landmark residuals ``(M, 3)`` and the points in camera frame ``y = X⁻¹p``."""
        Xi = X[p.l_ii]
        y = np.einsum("mba,mb->ma", Xi[:, :3, :3], p.l_p - Xi[:, :3, 3])
        return (y - p.l_q) / p.l_sig[:, None], y

    @staticmethod
    def _errors(X: np.ndarray, p: SimpleNamespace) -> np.ndarray:
        """E = Z⁻¹X_i (unary) or Z⁻¹X_i⁻¹X_j (between), so that r = Log(E)/σ."""
        Xi = X[p.ii]
        E = p.Zinv @ Xi
        b = ~p.unary
        E[b] = p.Zinv[b] @ _inv_rigid(Xi[b]) @ X[p.jj[b]]
        return E

    @staticmethod
    def _robust(e: np.ndarray, kind: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ρ(e), IRLS weight) per factor."""
        huber_c = np.where(e <= k, 0.5 * e**2, k * e - 0.5 * k * k)
        huber_w = np.where(e <= k, 1.0, k / np.maximum(e, 1e-300))
        cauchy_c = 0.5 * k * k * np.log1p((e / k) ** 2)
        cauchy_w = 1.0 / (1.0 + (e / k) ** 2)
        none, hub = kind == 0, kind == 1
        cost = np.select([none, hub], [0.5 * e**2, huber_c], cauchy_c)
        w = np.select([none, hub], [np.ones_like(e), huber_w], cauchy_w)
        return cost, w

    def _cost(self, X: np.ndarray, p: SimpleNamespace) -> float:
        total = 0.0
        if len(p.Z):
            e = np.linalg.norm(log_se3(self._errors(X, p)) / p.sig, axis=1)
            total += float(self._robust(e, p.kind, p.k)[0].sum())
        if len(p.l_p):
            rl, _ = self._landmark_residuals(X, p)
            total += float(self._robust(np.linalg.norm(rl, axis=1), p.l_kind, p.l_k)[0].sum())
        return total

    def optimize(
        self,
        initial: dict[int, np.ndarray],
        backend: str = "numpy",
        max_iters: int = 50,
        tol: float = 1e-10,
        *,
        linear_solver: str = "auto",
    ) -> dict[int, np.ndarray]:
        """Minimise the cost from ``initial`` (``{key: 4×4}``) with Levenberg–Marquardt.

        Args:
            backend: ``"numpy"`` (always available), ``"gtsam"`` (extra ``[gtsam]``) or
                ``"pypose"`` (extra ``[pypose]``: ``pp.optim.LM`` on ``pp.SE3`` in float64 on
                the CPU, dense Jacobians, so meant for graphs of up to a few hundred poses).
            max_iters: iteration cap.
            tol: relative cost decrease that stops the numpy solver.
            linear_solver: how the numpy backend solves its damped normal equations:
                ``"banded"`` (banded Cholesky after a reverse Cuthill–McKee ordering, for
                chains: odometry, anchors, landmarks, short loops), ``"superlu"`` (scipy's
                sparse LU, any pattern) or ``"auto"`` (banded when the ordered bandwidth is at
                most 96 unknowns). Both give the same steps.
        """
        check_choice(backend, "backend", BACKENDS)
        check_choice(linear_solver, "linear_solver", LINEAR_SOLVERS)
        check_int(max_iters, "max_iters", low=1)
        check_range(tol, "tol", low=0)
        keys = self._validate_initial(initial)
        if backend == "gtsam":
            return self._optimize_gtsam(initial, keys, max_iters)
        if backend == "pypose":
            return self._optimize_pypose(initial, keys, max_iters, tol)
        # the factorisations are small: BLAS threads only add synchronisation (on a busy
        # 2-core machine a threaded banded Cholesky of 360 unknowns took 0.3 s instead of 1 ms)
        with _blas().limit(limits=1, user_api="blas"):
            return self._optimize_numpy(initial, keys, max_iters, tol, linear_solver)

    def _optimize_numpy(
        self,
        initial: dict[int, np.ndarray],
        keys: list[int],
        max_iters: int,
        tol: float,
        linear_solver: str,
    ) -> dict[int, np.ndarray]:
        p = self._prep(keys)
        X = np.stack([np.asarray(initial[k], dtype=float) for k in keys])
        n, m = len(keys), len(self.factors)
        b = ~p.unary
        ii, jj = p.ii, p.jj
        ib, jb = ii[b], jj[b]
        # Hessian blocks at fixed node pairs: (i, i) per factor, then (j, j), (i, j), (j, i) per
        # between factor, then (i, i) per landmark point; pattern and ordering built once
        brow = np.concatenate((ii, jb, ib, jb, p.l_ii))
        bcol = np.concatenate((ii, jb, jb, ib, p.l_ii))
        normal = _NormalEquations(n, brow, bcol, linear_solver)
        gidx = np.concatenate((6 * ii[:, None], 6 * jb[:, None], 6 * p.l_ii[:, None])) + np.arange(
            6
        )
        lam = 1e-4
        cost = self._cost(X, p)
        for _ in range(max_iters):
            blocks, grads = [], []
            if m:
                # r = Log(E)/σ with analytic Jacobians (gtsam's): a right perturbation of X_j
                # (or of X_i in a prior) gives J_r⁻¹(ξ); of X_i in a between factor
                # −J_r⁻¹(ξ)·Ad(X_j⁻¹X_i)
                xi = log_se3(self._errors(X, p))
                r = xi / p.sig
                _, w = self._robust(np.linalg.norm(r, axis=1), p.kind, p.k)
                Jr = jr_inv_se3(xi) / p.sig[:, :, None]
                JA = Jr.copy()
                JA[b] = -Jr[b] @ adjoint_se3(_inv_rigid(X[jb]) @ X[ib])
                JB, wb = Jr[b], w[b]
                # batched 6×6 products: matmul, far faster than einsum on these shapes
                wJAt = w[:, None, None] * JA.transpose(0, 2, 1)
                wJBt = wb[:, None, None] * JB.transpose(0, 2, 1)
                grads += [(wJAt @ r[:, :, None])[..., 0], (wJBt @ r[b][:, :, None])[..., 0]]
                BA = wJBt @ JA[b]
                blocks += [wJAt @ JA, wJBt @ JB, BA.transpose(0, 2, 1), BA]
            if len(p.l_p):
                # y = X⁻¹p; right perturbation: Exp(δ)⁻¹y ≈ y + [y]×ω − v, so J = [[y]×, −I]/σ
                rl, y = self._landmark_residuals(X, p)
                _, wl = self._robust(np.linalg.norm(rl, axis=1), p.l_kind, p.l_k)
                JL = np.concatenate((hat(y), np.broadcast_to(-np.eye(3), (*y.shape, 3))), axis=2)
                JL = JL / p.l_sig[:, None, None]
                wJLt = wl[:, None, None] * JL.transpose(0, 2, 1)
                grads.append((wJLt @ rl[:, :, None])[..., 0])
                blocks.append(wJLt @ JL)
            g = np.bincount(gidx.ravel(), np.concatenate(grads).ravel(), minlength=6 * n)
            normal.assemble(np.concatenate(blocks))
            improved, rel = False, 0.0
            step = np.zeros((n, 6))
            for _ in range(10):
                sol = normal.solve(-g, lam)
                if sol is not None:
                    step = sol.reshape(n, 6)
                    X_new = X @ exp_se3(step)
                    c_new = self._cost(X_new, p)
                    if c_new <= cost:
                        improved = True
                        rel = (cost - c_new) / max(cost, 1e-300)
                        X, cost = X_new, c_new
                        lam = max(lam / 10, 1e-12)
                        break
                lam *= 10
            if not improved or rel < tol or np.abs(step).max() < 1e-12:
                break
        return {k: X[n_] for n_, k in enumerate(keys)}

    def _optimize_pypose(
        self, initial: dict[int, np.ndarray], keys: list[int], max_iters: int, tol: float
    ) -> dict[int, np.ndarray]:
        from iclr26.shared.optional import import_optional

        pp = import_optional(
            "pypose", dist="iclr26-cognimap3d", extra="pypose", purpose="backend='pypose'"
        )
        import torch

        model, kernels = _pypose_model(torch, pp, self, keys, initial)
        robust = any(k is not None for k in kernels)
        optimizer = pp.optim.LM(
            model,
            solver=pp.optim.solver.Cholesky(),
            strategy=pp.optim.strategy.TrustRegion(),
            kernel=kernels if robust else None,
            vectorize=True,
        )
        # pypose's loss is Σ ρ(‖r‖²) = 2 × our (and gtsam's) cost
        last = None
        for _ in range(max_iters):
            loss = float(optimizer.step(()))
            if last is not None and last - loss <= tol * max(last, 1e-300):
                break
            last = loss
        X = model.nodes.matrix().detach().numpy()
        return {k: X[n] for n, k in enumerate(keys)}

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
        for lm in self.landmarks:
            base = gtsam.noiseModel.Isotropic.Sigma(3, lm.sigma)
            if lm.robust is not None:
                est = gtsam.noiseModel.mEstimator
                kernel = (est.Huber if lm.robust == "huber" else est.Cauchy).Create(lm.k)
                base = gtsam.noiseModel.Robust.Create(kernel, base)
            for pw, qc in zip(lm.p_world, lm.q_cam, strict=True):
                graph.add(gtsam.CustomFactor(base, [lm.i], _landmark_error(pw, qc)))
        values = gtsam.Values()
        for k in keys:
            values.insert(k, gtsam.Pose3(np.asarray(initial[k], dtype=float)))
        params = gtsam.LevenbergMarquardtParams()
        params.setMaxIterations(max_iters)
        params.setRelativeErrorTol(1e-12)
        params.setAbsoluteErrorTol(1e-15)
        result = gtsam.LevenbergMarquardtOptimizer(graph, values, params).optimize()
        return {k: result.atPose3(k).matrix() for k in keys}


def _pypose_model(torch, pp, graph: PoseGraph, keys: list[int], initial: dict[int, np.ndarray]):
    """A torch module whose outputs are the whitened residual groups of ``graph`` (one output per
    factor type and kernel) and the matching pypose kernels. pypose's ``Log`` is (v, ω); ours
    and gtsam's (ω, v), so the residual is reordered before whitening."""
    index = {k: n for n, k in enumerate(keys)}
    f64 = torch.float64

    def tensor(x):
        return torch.as_tensor(np.asarray(x), dtype=f64)

    groups: dict[tuple, list] = {}
    for f in graph.factors:
        groups.setdefault(("prior" if f.j < 0 else "between", f.robust, f.k), []).append(f)
    pose_groups = []
    for (kind, robust, k), fs in groups.items():
        pose_groups.append(
            (
                kind,
                robust,
                k,
                torch.as_tensor([index[f.i] for f in fs]),
                torch.as_tensor([index[f.j] if f.j >= 0 else 0 for f in fs]),
                pp.mat2SE3(tensor(_inv_rigid(np.stack([f.Z for f in fs]))), check=False),
                tensor(np.stack([f.sigmas for f in fs])),
            )
        )
    lm_groups: dict[tuple, list] = {}
    for lm in graph.landmarks:
        lm_groups.setdefault((lm.robust, lm.k), []).append(lm)
    lms = []
    for (robust, k), ls in lm_groups.items():
        count = [len(lm.p_world) for lm in ls]
        lms.append(
            (
                robust,
                k,
                torch.as_tensor(np.repeat([index[lm.i] for lm in ls], count)),
                tensor(np.concatenate([lm.p_world for lm in ls])),
                tensor(np.concatenate([lm.q_cam for lm in ls])),
                tensor(np.repeat([lm.sigma for lm in ls], count))[:, None],
            )
        )
    order = [3, 4, 5, 0, 1, 2]  # pypose (v, ω) -> (ω, v)

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            X0 = tensor(np.stack([initial[k] for k in keys]))
            self.nodes = pp.Parameter(pp.mat2SE3(X0, check=False))

        def forward(self, *_):
            out = []
            for kind, _r, _k, ii, jj, Zinv, sig in pose_groups:
                Xi = self.nodes[ii]
                E = Zinv @ Xi if kind == "prior" else Zinv @ Xi.Inv() @ self.nodes[jj]
                out.append(E.Log().tensor()[:, order] / sig)
            for _r, _k, ii, p, q, sig in lms:
                out.append((self.nodes[ii].Inv().Act(p) - q) / sig)
            return tuple(out)

    def kernel(robust, k):
        if robust == "huber":
            return pp.optim.kernel.Huber(delta=k)
        if robust == "cauchy":
            return pp.optim.kernel.Cauchy(delta=k)
        return None

    kernels = [kernel(g[1], g[2]) for g in pose_groups] + [kernel(g[0], g[1]) for g in lms]
    return Graph(), kernels


def _landmark_error(p_world: np.ndarray, q_cam: np.ndarray):
    """gtsam ``CustomFactor`` error ``X⁻¹p − q`` with its Jacobian ``[[y]×, −I]`` (gtsam's Pose3
    tangent is (ω, v) with right perturbations, as ours)."""

    def error(this, values, H):
        T = values.atPose3(this.keys()[0]).matrix()
        y = T[:3, :3].T @ (p_world - T[:3, 3])
        if H is not None:
            H[0] = np.hstack((hat(y), -np.eye(3)))
        return y - q_cam

    return error
