"""Lie-group helpers for SE(3) and Sim(3): exp/log, inverse, validation and Umeyama alignment.

Conventions: poses are 4×4 camera-to-world matrices (OpenCV camera: x right, y down, z forward).
Twists are 6-vectors ordered **(ω, v)** — rotation first, as gtsam's ``Pose3.Logmap`` — so the
gtsam boundary needs no reordering (a test checks it). Every function accepts a single matrix or
vector, or a batch with leading dimensions.
"""

from __future__ import annotations

import numpy as np

from iclr26.shared.validation import check_array

__all__ = [
    "adjoint_se3",
    "check_poses",
    "exp_se3",
    "exp_so3",
    "hat",
    "invert",
    "jr_inv_se3",
    "log_se3",
    "log_so3",
    "umeyama",
]

_EPS = 1e-9


def hat(w: np.ndarray) -> np.ndarray:
    """Skew-symmetric matrices ``[w]×`` of shape ``(..., 3, 3)`` from vectors ``(..., 3)``."""
    w = np.asarray(w, dtype=float)
    out = np.zeros((*w.shape[:-1], 3, 3))
    out[..., 0, 1], out[..., 0, 2] = -w[..., 2], w[..., 1]
    out[..., 1, 0], out[..., 1, 2] = w[..., 2], -w[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -w[..., 1], w[..., 0]
    return out


def _coeffs(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A = sinθ/θ, B = (1−cosθ)/θ², C = (θ−sinθ)/θ³ with Taylor series near 0."""
    t2 = theta * theta
    small = theta < 1e-4
    ts = np.where(small, 1.0, theta)
    a = np.where(small, 1 - t2 / 6 + t2 * t2 / 120, np.sin(ts) / ts)
    b = np.where(small, 0.5 - t2 / 24 + t2 * t2 / 720, (1 - np.cos(ts)) / ts**2)
    c = np.where(small, 1 / 6 - t2 / 120 + t2 * t2 / 5040, (ts - np.sin(ts)) / ts**3)
    return a, b, c


def exp_so3(w: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: rotation matrices ``(..., 3, 3)`` from axis-angle vectors ``(..., 3)``."""
    w = np.asarray(w, dtype=float)
    theta = np.linalg.norm(w, axis=-1)
    a, b, _ = _coeffs(theta)
    k = hat(w)
    return np.eye(3) + a[..., None, None] * k + b[..., None, None] * (k @ k)


def log_so3(R: np.ndarray) -> np.ndarray:
    """Axis-angle vectors ``(..., 3)`` of rotation matrices; stable near 0 and near π.

    At exactly π the sign of the axis is arbitrary (both are valid logarithms).
    """
    R = np.asarray(R, dtype=float)
    tr = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)
    theta = np.arccos(tr)
    vee = np.stack(
        [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]],
        axis=-1,
    )
    sin = np.sin(theta)
    small = theta < 1e-4
    near_pi = theta > np.pi - 1e-3
    scale = np.where(small, 0.5 + theta**2 / 12, theta / (2 * np.where(small, 1.0, sin) + 1e-300))
    out = scale[..., None] * vee
    if np.any(near_pi):
        # Near π: the axis from the symmetric part, sign from the skew part.
        Rp = R[near_pi]
        th = theta[near_pi]
        B = (Rp + np.swapaxes(Rp, -1, -2)) / 2 - np.cos(th)[..., None, None] * np.eye(3)
        diag = np.clip(np.diagonal(B, axis1=-2, axis2=-1) / (1 - np.cos(th))[..., None], 0, None)
        idx = np.argmax(diag, axis=-1)
        rows = np.take_along_axis(B, idx[..., None, None].repeat(3, -1), axis=-2)[..., 0, :]
        axis = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
        v = vee[near_pi]
        sign = np.where(np.sum(axis * v, axis=-1) < 0, -1.0, 1.0)
        out[near_pi] = axis * (sign * th)[..., None]
    return out


def exp_se3(xi: np.ndarray) -> np.ndarray:
    """4×4 rigid transforms from twists ``(..., 6)`` ordered (ω, v)."""
    xi = np.asarray(xi, dtype=float)
    w, v = xi[..., :3], xi[..., 3:]
    theta = np.linalg.norm(w, axis=-1)
    a, b, c = _coeffs(theta)
    k = hat(w)
    k2 = k @ k
    R = np.eye(3) + a[..., None, None] * k + b[..., None, None] * k2
    V = np.eye(3) + b[..., None, None] * k + c[..., None, None] * k2
    T = np.zeros((*xi.shape[:-1], 4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = (V @ v[..., None])[..., 0]
    T[..., 3, 3] = 1.0
    return T


def log_se3(T: np.ndarray) -> np.ndarray:
    """Twists ``(..., 6)`` ordered (ω, v) of 4×4 rigid transforms (inverse of :func:`exp_se3`)."""
    T = np.asarray(T, dtype=float)
    w = log_so3(T[..., :3, :3])
    theta = np.linalg.norm(w, axis=-1)
    a, b, _ = _coeffs(theta)
    k = hat(w)
    small = theta < 1e-4
    ts = np.where(small, 1.0, theta)
    # V⁻¹ = I − ½K + (1/θ²)(1 − A/(2B)) K²
    d = np.where(small, 1 / 12 + theta**2 / 720, (1 - a / (2 * np.where(small, 1.0, b))) / ts**2)
    Vinv = np.eye(3) - 0.5 * k + d[..., None, None] * (k @ k)
    v = (Vinv @ T[..., :3, 3][..., None])[..., 0]
    return np.concatenate([w, v], axis=-1)


def adjoint_se3(T: np.ndarray) -> np.ndarray:
    """Adjoint matrices ``Ad_T`` ``(..., 6, 6)`` of rigid transforms ``(..., 4, 4)`` for twists
    ordered (ω, v): ``T·Exp(ξ)·T⁻¹ = Exp(Ad_T ξ)``, ``Ad_T = [[R, 0], [[t]×R, R]]``."""
    check_array(T, "T")
    T = np.asarray(T, dtype=float)
    if T.shape[-2:] != (4, 4):
        raise ValueError(f"T must have shape (..., 4, 4), got {T.shape}")
    R, t = T[..., :3, :3], T[..., :3, 3]
    out = np.zeros((*T.shape[:-2], 6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., 3:, :3] = hat(t) @ R
    return out


def jr_inv_se3(xi: np.ndarray) -> np.ndarray:
    """Inverse right Jacobians ``(..., 6, 6)`` of SE(3) at twists ``(..., 6)`` ordered (ω, v):
    ``Log(Exp(ξ)·Exp(δ)) = ξ + J_r⁻¹(ξ) δ + O(δ²)`` (gtsam's ``Pose3::LogmapDerivative``).

    Closed form (Barfoot, *State Estimation for Robotics*, §7.1.5, with ``J_r(ξ) = J_l(−ξ)``):
    ``J_r⁻¹ = [[J⁻¹, 0], [−J⁻¹ Q J⁻¹, J⁻¹]]`` with the SO(3) inverse right Jacobian
    ``J⁻¹ = I + ½W + (1 − (θ/2)cot(θ/2))/θ² W²`` (``W = [ω]×``, ``θ = |ω|``) and
    ``Q = −½V + a(WV + VW − WVW) − b(W²V + VW² − 3WVW) + c(WVW² + W²VW)`` (``V = [v]×``,
    ``a = (θ − sin θ)/θ³``, ``b = (θ² + 2cos θ − 2)/(2θ⁴)``,
    ``c = (2θ − 3 sin θ + θ cos θ)/(2θ⁵)``; Taylor series for small θ). Valid for θ < 2π.
    """
    check_array(xi, "xi")
    xi = np.asarray(xi, dtype=float)
    if xi.shape[-1] != 6:
        raise ValueError(f"xi must have shape (..., 6), got {xi.shape}")
    W, V = hat(xi[..., :3]), hat(xi[..., 3:])
    th = np.linalg.norm(xi[..., :3], axis=-1)
    t2 = th * th
    small = th < 2e-2
    ts = np.where(small, 1.0, th)
    sin, cos = np.sin(ts), np.cos(ts)
    d = np.where(small, 1 / 12 + t2 / 720, (1 - 0.5 * ts / np.tan(0.5 * ts)) / ts**2)
    a = np.where(small, 1 / 6 - t2 / 120, (ts - sin) / ts**3)
    b = np.where(small, 1 / 24 - t2 / 720, (ts * ts + 2 * cos - 2) / (2 * ts**4))
    c = np.where(small, 1 / 120 - t2 / 2520, (2 * ts - 3 * sin + ts * cos) / (2 * ts**5))
    W2 = W @ W
    WV, VW = W @ V, V @ W
    WVW = WV @ W
    Q = (
        -0.5 * V
        + a[..., None, None] * (WV + VW - WVW)
        - b[..., None, None] * (W2 @ V + VW @ W - 3 * WVW)
        + c[..., None, None] * (WVW @ W + W @ WVW)
    )
    Ji = np.eye(3) + 0.5 * W + d[..., None, None] * W2
    out = np.zeros((*xi.shape[:-1], 6, 6))
    out[..., :3, :3] = Ji
    out[..., 3:, 3:] = Ji
    out[..., 3:, :3] = -Ji @ Q @ Ji
    return out


def invert(T: np.ndarray) -> np.ndarray:
    """Inverse of rigid (or similarity) 4×4 transforms, batched."""
    T = np.asarray(T, dtype=float)
    A = T[..., :3, :3]
    Ainv = np.linalg.inv(A)
    out = np.zeros_like(T)
    out[..., :3, :3] = Ainv
    out[..., :3, 3] = -(Ainv @ T[..., :3, 3][..., None])[..., 0]
    out[..., 3, 3] = 1.0
    return out


def check_poses(
    T: object, name: str, *, tol: float = 1e-4, batch: bool | None = None
) -> np.ndarray:
    """Validate 4×4 rigid poses: shape ``(4, 4)`` or ``(N, 4, 4)``, finite, orthonormal rotation
    with det +1 (within ``tol``), last row ``[0, 0, 0, 1]``. Returns a float64 array.

    Raises:
        ValueError: naming ``name`` and what is wrong.
    """
    check_array(T, name)
    arr = np.asarray(T, dtype=float)
    if arr.shape[-2:] != (4, 4) or arr.ndim not in (2, 3):
        raise ValueError(f"{name} must have shape (4, 4) or (N, 4, 4), got {arr.shape}")
    if batch is True and arr.ndim != 3:
        raise ValueError(f"{name} must have shape (N, 4, 4), got {arr.shape}")
    if batch is False and arr.ndim != 2:
        raise ValueError(f"{name} must have shape (4, 4), got {arr.shape}")
    R = arr[..., :3, :3]
    err = np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max(axis=(-2, -1))
    if np.any(err > tol) or np.any(np.linalg.det(R) < 0):
        raise ValueError(
            f"{name} must hold rotations (RᵀR = I, det R = +1); worst |RᵀR − I| = {err.max():.3g}"
        )
    if np.any(np.abs(arr[..., 3, :] - [0, 0, 0, 1]) > tol):
        raise ValueError(f"{name} must have last row [0, 0, 0, 1]")
    return arr


def umeyama(
    src: np.ndarray,
    dst: np.ndarray,
    with_scale: bool = True,
    weights: np.ndarray | None = None,
    *,
    check_input: bool = True,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ≈ s R src + t`` (Umeyama 1991), reflections excluded.

    Args:
        src, dst: corresponding points ``(N, 3)``, N >= 3, finite.
        with_scale: estimate ``s`` (Sim(3)); else ``s = 1`` (SE(3), the Kabsch solution).
        weights: optional non-negative weights ``(N,)``.
        check_input: validate the inputs (as scikit-learn's ``check_input``); callers that
            already hold validated float arrays (ICP's inner loop) pass ``False``.

    Returns:
        ``(s, R, t)`` with ``R`` a proper rotation (det +1).
    """
    if not check_input and weights is None:
        return _umeyama(src, dst, with_scale)
    check_array(src, "src", shape=(None, 3))
    check_array(dst, "dst", shape=(None, 3))
    src = np.asarray(src, dtype=float)
    dst = np.asarray(dst, dtype=float)
    if src.shape != dst.shape:
        raise ValueError(f"src and dst must have the same shape, got {src.shape} and {dst.shape}")
    if src.shape[0] < 3:
        raise ValueError(f"src must hold at least 3 points, got {src.shape[0]}")
    if weights is None:
        w = np.full(src.shape[0], 1.0 / src.shape[0])
    else:
        check_array(weights, "weights", shape=(src.shape[0],))
        w = np.asarray(weights, dtype=float)
        if np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be non-negative with a positive sum")
        w = w / w.sum()
    mu_s, mu_d = w @ src, w @ dst
    xs, xd = src - mu_s, dst - mu_d
    cov = (xd * w[:, None]).T @ xs
    U, D, Vt = np.linalg.svd(cov)
    S = np.eye(3)
    if np.linalg.det(U) * np.linalg.det(Vt) < 0:
        S[2, 2] = -1.0
    R = U @ S @ Vt
    var_s = float(w @ np.sum(xs * xs, axis=1))
    s = float(np.sum(D * np.diag(S)) / var_s) if with_scale and var_s > _EPS else 1.0
    t = mu_d - s * R @ mu_s
    return s, R, t


def _det3(M: np.ndarray) -> float:
    """Determinant of a 3×3 matrix by cofactors (no LAPACK call: ICP takes one per step)."""
    (a, b, c), (d, e, f), (g, h, i) = M.tolist()
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def _umeyama(
    src: np.ndarray, dst: np.ndarray, with_scale: bool
) -> tuple[float, np.ndarray, np.ndarray]:
    """Unweighted Umeyama on validated ``(N, 3)`` float arrays (same maths as :func:`umeyama`)."""
    n = src.shape[0]
    mu_s, mu_d = np.add.reduce(src, axis=0) / n, np.add.reduce(dst, axis=0) / n  # = mean
    xs = src - mu_s
    cov = (dst - mu_d).T @ xs / n
    U, D, Vt = np.linalg.svd(cov)
    S = np.ones(3)
    if _det3(U) * _det3(Vt) < 0:
        S[2] = -1.0
    R = (U * S) @ Vt
    s = 1.0
    if with_scale:
        var_s = float(np.einsum("ij,ij->", xs, xs) / n)
        if var_s > _EPS:
            s = float(np.sum(D * S) / var_s)
    t = mu_d - s * R @ mu_s
    return s, R, t
