"""The power method from scratch, and the measurements used to compare token dynamics with it.

Column convention: one step is ``x ← F x / ‖F x‖`` for a ``(d, d)`` float64 matrix ``F`` and a
vector ``x ∈ R^d``. Measurement helpers take token states as rows, shape ``(..., d)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lib.spectra import as_float64, principal

__all__ = [
    "convergence_table",
    "distance_to_subspace",
    "fitted_ratio",
    "eigen_plane_angle",
    "plane_coordinates",
    "power_method",
    "signed_alignment",
    "steps_needed",
]


def power_method(F: Any, x0: Any, steps: int, *, radius: float = 1.0) -> np.ndarray:
    """Iterates of the power method ``x_{t+1} = r F x_t / ‖F x_t‖``.

    Args:
        F: ``(d, d)`` matrix (NumPy or torch), used in float64.
        x0: ``(d,)`` start vector, or ``(m, d)`` for m independent starts.
        steps: number of steps T.
        radius: norm r of every iterate (``x0`` is rescaled too).

    Returns:
        float64 ``(T+1, d)`` (or ``(T+1, m, d)``): entry t is ``x_t``.
    """
    F = as_float64(F)
    x = as_float64(x0)
    x = radius * x / np.linalg.norm(x, axis=-1, keepdims=True)
    out = np.empty((steps + 1, *x.shape))
    out[0] = x
    for t in range(steps):
        y = x @ F.T
        x = radius * y / np.linalg.norm(y, axis=-1, keepdims=True)
        out[t + 1] = x
    return out


def signed_alignment(X: Any, v: Any) -> np.ndarray:
    """Signed cosine ``<x, v>/(‖x‖‖v‖)`` along the last axis (shows sign flips that |cos| hides)."""
    X, v = as_float64(X), as_float64(v)
    return (X @ v) / (np.linalg.norm(X, axis=-1) * np.linalg.norm(v))


def plane_coordinates(X: Any, B: Any) -> np.ndarray:
    """Coordinates ``Bᵀ x / ‖x‖`` of unit-normalized states in an orthonormal basis ``B (d, k)``: ``(..., k)``."""
    X, B = as_float64(X), as_float64(B)
    return (X @ B) / np.linalg.norm(X, axis=-1, keepdims=True)


def eigen_plane_angle(X: Any, v: Any) -> np.ndarray:
    """Angle (radians) of each state in the eigen-coordinates of a complex eigenvector's plane.

    Writes ``x ≈ a Re v + b Im v`` (least squares) and returns ``atan2(b, a)``, shape ``X.shape[:-1]``.
    In these coordinates ``F`` acts on the plane as ``|λ|`` times a rotation by ``−arg λ``
    (``F Re v = |λ|(cos θ Re v − sin θ Im v)``), so a state in the plane turns by exactly ``−θ`` per step.
    """
    X, v = as_float64(X), np.asarray(v, dtype=np.complex128)
    basis = np.stack([v.real, v.imag], axis=1)  # (d, 2)
    flat = X.reshape(-1, X.shape[-1])
    coef, *_ = np.linalg.lstsq(basis, flat.T, rcond=None)  # (2, m)
    return np.arctan2(coef[1], coef[0]).reshape(X.shape[:-1])


def distance_to_subspace(X: Any, B: Any) -> np.ndarray:
    """Sine of the angle between each row of ``X (..., d)`` and the span of an orthonormal ``B (d, k)``."""
    X, B = as_float64(X), as_float64(B)
    R = X - (X @ B) @ B.T
    return np.linalg.norm(R, axis=-1) / np.linalg.norm(X, axis=-1)


def steps_needed(ratio: float, tol: float = 1e-6) -> int:
    """Steps ``⌈log(tol)/log(ratio)⌉`` for an error shrinking like ``ratio^t`` to reach ``tol``.

    ``ratio = |λ_2/λ_1|`` for convergence to ``v_1`` (or ``|λ_3/λ_1|`` for a dominant plane). Returns
    0 for ``ratio = 0`` and raises for ``ratio ≥ 1`` (no convergence). Reaching ``tol`` exactly counts:
    a relative slack of ``1e-9`` in the logarithm keeps rounding from adding a step when ``tol`` is an
    exact power of ``ratio`` (``log(1e-10)/log(0.1)`` is ``10.000000000000002`` in floating point).
    """
    if not 0 <= ratio < 1:
        raise ValueError(f"the error only shrinks for 0 ≤ ratio < 1, got {ratio}")
    if ratio == 0:
        return 0
    return max(0, math.ceil(math.log(tol) / math.log(ratio) * (1 - 1e-9)))


def fitted_ratio(errors: Any, start: int = 0, floor: float = 1e-13) -> float:
    """Per-step contraction fitted to an error curve: ``exp`` of the least-squares slope of ``log e_t``.

    Points at or below ``floor`` (rounding level), before ``start``, or NaN are ignored.
    """
    e = np.asarray(errors, dtype=np.float64)
    t = np.arange(e.size)
    keep = (t >= start) & (e > floor) & np.isfinite(e)
    if keep.sum() < 2:
        raise ValueError("need at least two error values above the floor to fit a rate")
    slope = np.polyfit(t[keep], np.log(e[keep]), 1)[0]
    return float(np.exp(slope))


def convergence_table(F: Any, iterates: Any) -> pd.DataFrame:
    """Measured distance to the principal direction (or plane) against the predicted ``ratio^t``.

    The error is ``sin∠(x_t, v_1) = ‖(I − v_1 v_1ᵀ) x_t‖/‖x_t‖`` for a real ``λ_1``, and the distance to
    the plane ``‖(I − B Bᵀ) x_t‖/‖x_t‖`` for a complex pair (computed without the cancellation of
    ``sqrt(1 − a²)``, so it resolves errors down to 1e-16). The prediction is anchored at ``t = 0`` in the
    eigenbasis: ``e_t ≈ C · g^t`` with ``g`` the gap ratio and ``C`` fitted on the later half.

    Args:
        F: ``(d, d)`` matrix.
        iterates: ``(T+1, d)`` states (from :func:`power_method` or one token's trajectory).

    Returns:
        DataFrame with columns ``t``, ``measured``, ``predicted``, ``gap_ratio``.
    """
    P = principal(F)
    X = as_float64(iterates)
    err = distance_to_subspace(X, P.basis)
    t = np.arange(err.size)
    g = P.gap_ratio
    late = (t >= t.size // 2) & (err > 1e-13)
    c = float(np.exp(np.median(np.log(err[late]) - t[late] * np.log(g)))) if late.any() and g > 0 else err[0]
    return pd.DataFrame({"t": t, "measured": err, "predicted": c * g**t, "gap_ratio": g})
