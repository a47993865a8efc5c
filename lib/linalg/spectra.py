"""Eigenvalues and eigenvectors in the book's conventions (float64, LAPACK).

Every function here follows the book's notation page (``book/notation.md``):

* matrices are column convention (``y = M x``), shape ``(..., d, d)``;
* every decomposition runs in float64 / complex128 on the CPU through LAPACK (NumPy);
* eigenvalues are sorted by modulus, descending; moduli within ``1e-10 · max|λ|`` are tied and
  ties are ordered by ``|arg λ|`` ascending, then ``Im λ`` descending;
* an eigenvalue is complex iff ``|Im λ| > τ_C · max|λ|`` with ``τ_C = 1e-8``;
* eigenvectors have unit 2-norm; real ones are signed so that their largest-magnitude entry is
  positive; complex ones are phase-fixed so that ``Re v ⊥ Im v`` and ``‖Re v‖ ≥ ‖Im v‖``.

Inputs may be NumPy arrays or torch tensors; outputs are NumPy arrays.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from scipy.special import gammaln

from lib.errors import InputError
from lib.parallel import map_matrices

TAU_COMPLEX = 1e-8
"""τ_C: relative threshold above which an eigenvalue counts as complex."""

TIE_TOL = 1e-10
"""Moduli within ``TIE_TOL · max|λ|`` of each other count as tied."""

RESIDUAL_TOL = 1e-10
""":func:`eig` warns when an eigenpair's relative residual ``‖M v − λ v‖/‖M‖_F`` exceeds this, for the pair as
LAPACK returns it (the real vector the book keeps for an eigenvalue that counts as real, :data:`TAU_COMPLEX`,
differs from it by a residual up to about ``τ_C``, by convention)."""


class SpectralAccuracyWarning(UserWarning):
    """An eigen-decomposition whose residual is larger than :data:`RESIDUAL_TOL`."""

__all__ = [
    "RESIDUAL_TOL",
    "TAU_COMPLEX",
    "TIE_TOL",
    "SpectralAccuracyWarning",
    "Principal",
    "alignment",
    "as_float64",
    "baseline_alignment",
    "eig",
    "eig_condition",
    "eig_residual",
    "eigvals",
    "gap_ratio",
    "is_complex",
    "normalize_eigvec",
    "plane_basis",
    "principal",
    "sort_order",
    "spectral_radius",
    "subspace_alignment",
]


def as_float64(M: Any) -> np.ndarray:
    """Return ``M`` (NumPy array or torch tensor, any float dtype) as a float64 NumPy array."""
    if hasattr(M, "detach"):
        M = M.detach().cpu().double().numpy()
    arr = np.asarray(M)
    if np.iscomplexobj(arr):
        return arr.astype(np.complex128)
    return arr.astype(np.float64)


def _check_square(M: np.ndarray) -> None:
    if M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        raise InputError(f"expected square matrices of shape (..., d, d), got shape {M.shape}")
    if M.shape[-1] == 0:
        raise InputError("expected a non-empty matrix, got d = 0")
    if not np.all(np.isfinite(M)):
        raise InputError("matrix contains NaN or infinite entries")


def sort_order(lams: np.ndarray) -> np.ndarray:
    """Indices that sort a 1-D array of eigenvalues by the book's convention.

    Modulus descending (ties within ``TIE_TOL · max|λ|``), then ``|arg λ|`` ascending, then
    ``Im λ`` descending.
    """
    lams = np.asarray(lams, dtype=np.complex128)
    mod = np.abs(lams)
    scale = mod.max() if mod.size else 0.0
    if scale == 0.0:
        return np.arange(lams.size)
    # Group moduli into tie classes: walk the moduli in descending order and start a new class
    # whenever the gap to the class's first member exceeds the tolerance.
    desc = np.argsort(-mod, kind="stable")
    cls = np.empty(lams.size, dtype=np.int64)
    current, anchor = 0, mod[desc[0]]
    for idx in desc:
        if anchor - mod[idx] > TIE_TOL * scale:
            current += 1
            anchor = mod[idx]
        cls[idx] = current
    arg = np.abs(np.angle(lams))
    # Treat eigenvalues that are real up to τ_C as exactly real for the tie-break.
    real = np.abs(lams.imag) <= TAU_COMPLEX * scale
    arg = np.where(real & (lams.real >= 0), 0.0, np.where(real, np.pi, arg))
    return np.lexsort((-lams.imag, arg, cls))


def is_complex(lam: complex | np.ndarray, scale: float) -> np.ndarray | bool:
    """Whether ``λ`` counts as complex: ``|Im λ| > τ_C · scale`` (``scale = max|λ|``)."""
    return np.abs(np.imag(lam)) > TAU_COMPLEX * scale


def normalize_eigvec(v: np.ndarray, complex_pair: bool) -> np.ndarray:
    """Normalize one eigenvector by the book's convention.

    Args:
        v: complex vector, shape ``(d,)``.
        complex_pair: whether its eigenvalue counts as complex.

    Returns:
        float64 ``(d,)`` for a real eigenvalue, complex128 ``(d,)`` for a complex one.
    """
    v = np.asarray(v, dtype=np.complex128)
    v = v / np.linalg.norm(v)
    if not complex_pair:
        r = v.real.copy()
        r /= np.linalg.norm(r)
        return _sign_fix(r)
    vv = v @ v  # plain transpose, no conjugate
    if abs(vv) >= 1e-12:
        # After this rotation vᵀv is real and positive: Re v ⊥ Im v and ‖Re v‖ ≥ ‖Im v‖.
        v = v * np.exp(-0.5j * np.angle(vv))
    i = int(np.argmax(np.abs(v.real)))
    if v.real[i] < 0:
        v = -v
    return v


def _sign_fix(r: np.ndarray) -> np.ndarray:
    """Flip ``r`` so that its entry of largest absolute value (the first such) is positive."""
    i = int(np.argmax(np.abs(r)))
    return -r if r[i] < 0 else r


def eigvals(M: Any, *, workers: int | None = None) -> np.ndarray:
    """Sorted eigenvalues of ``M``, shape ``(..., d)``, complex128 (float64 LAPACK).

    A stack ``(..., d, d)`` is spread over the cores, one matrix per thread
    (:func:`lib.parallel.map_matrices`; ``workers`` threads, default one per core); the values
    are those of a one-thread loop whatever ``workers`` is.
    """
    A = as_float64(M)
    _check_square(A)
    if A.ndim == 2:
        lams = np.linalg.eigvals(A)
        return lams[sort_order(lams)]
    d = A.shape[-1]
    rows = map_matrices(np.linalg.eigvals, A.reshape(-1, d, d), workers=workers)
    out = np.stack([row[sort_order(row)] for row in rows]) if rows else np.zeros((0, d), np.complex128)
    return out.reshape(A.shape[:-1])


def eig(M: Any) -> tuple[np.ndarray, np.ndarray]:
    """Sorted eigenvalues and normalized right eigenvectors of one matrix.

    Args:
        M: ``(d, d)`` array or tensor.

    Returns:
        ``(lams, V)``: ``lams`` complex128 ``(d,)`` in the book's order and ``V`` complex128
        ``(d, d)`` whose column k is the normalized eigenvector of ``lams[k]`` (real vectors are
        stored with zero imaginary part).
    """
    A = as_float64(M)
    _check_square(A)
    if A.ndim != 2:
        raise InputError(f"eig expects one (d, d) matrix, got shape {A.shape}; use eigvals for stacks")
    lams, V = np.linalg.eig(A)
    order = sort_order(lams)
    lams, V = lams[order], V[:, order]
    norm = np.linalg.norm(A)
    # the decomposition's own accuracy, measured on LAPACK's vectors: the book's real vector of an eigenvalue
    # that counts as real (|Im λ| ≤ τ_C · max|λ|, normalize_eigvec) drops an imaginary part of that order by
    # convention, which is no inaccuracy of the decomposition
    worst = float(np.linalg.norm(A @ V - V * lams, axis=0).max() / norm) if norm > 0 else 0.0
    scale = np.abs(lams).max()
    cols = [normalize_eigvec(V[:, k], bool(is_complex(lams[k], scale))) for k in range(A.shape[0])]
    V = np.stack([np.asarray(c, dtype=np.complex128) for c in cols], axis=1)
    if worst > RESIDUAL_TOL:
        warnings.warn(
            f"eigen-decomposition residual {worst:.1e} exceeds {RESIDUAL_TOL:.0e} (relative to ‖M‖_F): "
            "the matrix may be defective or badly conditioned; treat its eigenvectors with care.",
            SpectralAccuracyWarning,
            stacklevel=2,
        )
    return lams, V


def eig_condition(M: Any, k: int = 0) -> float:
    """Condition number ``κ(λ_k) = ‖x‖‖y‖ / |yᴴ x|`` of the k-th sorted eigenvalue (float64 LAPACK).

    ``x`` and ``y`` are the right and left eigenvectors. ``κ = 1`` for a normal matrix; a large ``κ``
    means a perturbation ``E`` can move ``λ_k`` by about ``κ ‖E‖_2``. ``inf`` for a defective
    eigenvalue.
    """
    A = as_float64(M)
    _check_square(A)
    lams, Y, X = scipy.linalg.eig(A, left=True, right=True)
    i = sort_order(lams)[k]
    x, y = X[:, i], Y[:, i]
    denom = abs(np.vdot(y, x))
    return float(np.linalg.norm(x) * np.linalg.norm(y) / denom) if denom > 0 else float("inf")


def spectral_radius(M: Any) -> np.ndarray | float:
    """``|λ_1|`` of each matrix in a ``(..., d, d)`` stack."""
    return np.abs(eigvals(M))[..., 0]


def gap_ratio(lams: np.ndarray) -> np.ndarray | float:
    """``|λ_next| / |λ_1|`` for sorted eigenvalues ``(..., d)``.

    ``λ_next`` is the first eigenvalue after the principal real eigenvalue or after the principal
    conjugate pair (a conjugate partner never counts as the second eigenvalue).
    """
    lams = np.asarray(lams, dtype=np.complex128)
    flat = lams.reshape(-1, lams.shape[-1])
    out = np.empty(flat.shape[0])
    for r, row in enumerate(flat):
        top = abs(row[0])
        if top == 0.0:
            out[r] = np.nan
            continue
        nxt = 2 if is_complex(row[0], top) else 1
        out[r] = abs(row[nxt]) / top if nxt < row.size else 0.0
    return out.reshape(lams.shape[:-1]) if lams.ndim > 1 else float(out[0])


def plane_basis(v: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``(d, 2)`` of ``span{Re v, Im v}`` for a normalized complex eigenvector."""
    v = np.asarray(v, dtype=np.complex128)
    re, im = v.real, v.imag
    if np.linalg.norm(im) < 1e-12 or abs(v @ v) < 1e-12:
        q, _ = np.linalg.qr(np.stack([re, im], axis=1))
        return q
    return np.stack([re / np.linalg.norm(re), im / np.linalg.norm(im)], axis=1)


@dataclass(frozen=True)
class Principal:
    """The principal eigen-structure of one matrix.

    Attributes:
        eigval: ``λ_1`` (complex128; the ``+i`` member of a pair).
        is_complex: whether ``λ_1`` is a complex pair.
        vector: unit ``v_1`` as float64 ``(d,)`` if real; complex128 ``(d,)`` if complex.
        basis: orthonormal float64 basis ``(d, k)``: ``k = 1`` (``v_1``) for a real ``λ_1``, ``k = 2``
            (the rotation plane) for a complex pair.
        gap_ratio: ``|λ_next| / |λ_1|``.
        eigvals: all eigenvalues, sorted.
        residual: ``‖M v − λ v‖ / ‖M‖_F``.
        condition: ``κ(λ_1)`` from :func:`eig_condition` when requested, else ``nan``.
    """

    eigval: complex
    is_complex: bool
    vector: np.ndarray
    basis: np.ndarray
    gap_ratio: float
    eigvals: np.ndarray
    residual: float
    condition: float = float("nan")


def eig_residual(M: Any, lam: complex, v: np.ndarray) -> float:
    """Relative residual ``‖M v − λ v‖ / (‖M‖_F ‖v‖)`` of an eigenpair."""
    A = as_float64(M)
    v = np.asarray(v, dtype=np.complex128)
    denom = np.linalg.norm(A) * np.linalg.norm(v)
    return float(np.linalg.norm(A @ v - lam * v) / denom) if denom > 0 else 0.0


def principal(M: Any, *, condition: bool = False) -> Principal:
    """Principal eigenvalue, eigenvector (or plane) and gap ratio of one ``(d, d)`` matrix.

    With ``condition=True`` also the condition number of ``λ_1`` (one more LAPACK call, with left
    eigenvectors).
    """
    lams, V = eig(M)
    scale = abs(lams[0])
    cplx = bool(is_complex(lams[0], scale))
    v = V[:, 0] if cplx else V[:, 0].real.copy()
    basis = plane_basis(v) if cplx else v[:, None]
    return Principal(
        eigval=complex(lams[0]),
        is_complex=cplx,
        vector=v,
        basis=basis,
        gap_ratio=float(gap_ratio(lams)),
        eigvals=lams,
        residual=eig_residual(M, lams[0], V[:, 0]),
        condition=eig_condition(M, 0) if condition else float("nan"),
    )


def alignment(X: Any, v: Any) -> np.ndarray:
    """Absolute cosine ``a(x, v) = |<x, v>| / (‖x‖ ‖v‖)`` along the last axis.

    Args:
        X: vectors, shape ``(..., d)``.
        v: one direction, shape ``(d,)``.

    Returns:
        float64 array of shape ``(...)``.
    """
    X, v = as_float64(X), as_float64(v)
    if X.shape[-1] != v.shape[-1]:
        raise InputError(f"dimension mismatch: vectors have d = {X.shape[-1]}, direction has d = {v.shape[-1]}")
    return np.abs(X @ v) / (np.linalg.norm(X, axis=-1) * np.linalg.norm(v))


def subspace_alignment(X: Any, B: Any) -> np.ndarray:
    """``a_2(x, B) = ‖Bᵀ x‖ / ‖x‖`` for an orthonormal basis ``B`` of shape ``(d, k)``.

    Returns a float64 array of shape ``X.shape[:-1]``.
    """
    X, B = as_float64(X), as_float64(B)
    if X.shape[-1] != B.shape[0]:
        raise InputError(f"dimension mismatch: vectors have d = {X.shape[-1]}, basis has d = {B.shape[0]}")
    return np.linalg.norm(X @ B, axis=-1) / np.linalg.norm(X, axis=-1)


def baseline_alignment(d: int) -> float:
    """Expected ``|cos|`` between a fixed direction and a uniformly random one in ``R^d``.

    ``b_d = Γ(d/2) / (sqrt(π) Γ((d+1)/2)) ≈ sqrt(2/(π d))`` (exact, computed in log space).
    """
    if d < 1:
        raise InputError(f"d must be a positive integer, got {d}")
    return float(np.exp(gammaln(d / 2) - gammaln((d + 1) / 2) - 0.5 * np.log(np.pi)))
