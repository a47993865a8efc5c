"""The power method from scratch, and the measurements used to compare token dynamics with it.

Column convention: one step is ``x ← F x / ‖F x‖`` for a ``(d, d)`` float64 matrix ``F`` and a
vector ``x ∈ R^d``. Measurement helpers take token states as rows, shape ``(..., d)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lib.linalg.spectra import TIE_TOL, alignment, as_float64, eig, is_complex, principal, subspace_alignment

__all__ = [
    "alignment_frame",
    "convergence_runs",
    "convergence_table",
    "distance_frame",
    "distance_to_subspace",
    "dominant_basis",
    "first_below",
    "fitted_ratio",
    "fitted_ratios",
    "eigen_plane_angle",
    "mode_curves",
    "plane_coordinates",
    "plane_measures",
    "power_method",
    "signed_alignment",
    "steps_needed",
    "window_ratio",
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


def convergence_runs(matrices: Sequence[Any], x0: Any, steps: int) -> pd.DataFrame:
    """:func:`convergence_table` of the power method on each matrix from the same start, concatenated.

    Args:
        matrices: ``(d, d)`` matrices (e.g. toys with different gap ratios).
        x0: the ``(d,)`` start vector shared by all runs.
        steps: number of steps T of each run.

    Returns:
        The rows of every run's :func:`convergence_table` (``t``, ``measured``, ``predicted``,
        ``gap_ratio``), one run after the other.
    """
    tables = [convergence_table(F, power_method(F, x0, steps)) for F in matrices]
    return pd.concat(tables, ignore_index=True)


def fitted_ratios(table: pd.DataFrame, start: int = 0) -> pd.Series:
    """The :func:`fitted_ratio` of each run of a :func:`convergence_runs` table, indexed by its gap ratio."""
    return table.groupby("gap_ratio").measured.apply(lambda e: fitted_ratio(e, start=start)).rename("fitted ratio")


def dominant_basis(F: Any) -> np.ndarray:
    """Orthonormal basis ``(d, k)`` of the dominant invariant subspace of ``F``: the span of the
    eigenvectors whose eigenvalue has the largest modulus (ties within :data:`lib.linalg.spectra.TIE_TOL`).

    One real ``λ₁`` or one complex pair gives :func:`lib.linalg.spectra.principal`'s basis (``v₁``, or the
    plane of ``Re v₁, Im v₁``); a tie such as ``λ₁ = −λ₂`` gives the QR basis of the tied eigenvectors'
    real (and imaginary) parts, the subspace the power method then settles in without converging.
    """
    lams, V = eig(F)
    top = np.abs(lams) >= np.abs(lams[0]) * (1 - TIE_TOL)
    if top.sum() == 1 or (top.sum() == 2 and bool(is_complex(lams[0], abs(lams[0])))
                          and np.isclose(lams[1], np.conj(lams[0]))):
        return principal(F).basis
    cols = [V[:, j].real for j in np.flatnonzero(top)]
    cols += [V[:, j].imag for j in np.flatnonzero(top) if bool(is_complex(lams[j], abs(lams[0])))]
    q, _ = np.linalg.qr(np.stack(cols, axis=1))
    return q


def mode_curves(F: Any, x0: Any, steps: int) -> pd.DataFrame:
    """The power method on ``F`` seen from its dominant subspace (:func:`dominant_basis` ``B``), step by step.

    Returns:
        Columns ``t``; ``signed cos with b₁``, the signed cosine of ``x_t`` with the first basis vector
        (it flips for a negative ``λ₁`` and turns for a complex pair); ``alignment with dominant subspace``,
        ``‖Bᵀx_t‖/‖x_t‖`` (it goes to 1 in every case).
    """
    B = dominant_basis(F)
    X = power_method(F, x0, steps)
    return pd.DataFrame({"t": np.arange(steps + 1), "signed cos with b₁": signed_alignment(X, B[:, 0]),
                         "alignment with dominant subspace": subspace_alignment(X, B)})


def alignment_frame(X: Any, directions: Mapping[str, Any], value: str = "mean alignment") -> pd.DataFrame:
    """The mean over tokens of each token's alignment :func:`lib.linalg.spectra.alignment` with each direction.

    Args:
        X: token states ``(T+1, n, d)`` (a trajectory) or ``(T+1, d)`` (one vector per step).
        directions: name → ``(d,)`` direction.
        value: the name of the value column.

    Returns:
        Long format: columns ``t``, ``direction`` and ``value``, the directions one after the other.
    """
    X = as_float64(X)
    frames = []
    for name, v in directions.items():
        a = alignment(X, v)
        frames.append(pd.DataFrame({"t": np.arange(X.shape[0]), "direction": name,
                                    value: a.mean(axis=1) if a.ndim == 2 else a}))
    return pd.concat(frames, ignore_index=True)


def first_below(errors: Any, level: float) -> int | None:
    """The first step ``t`` with ``errors[t] < level``, or ``None`` when no step gets there (a run that has
    not converged within its steps is not one that converged at step 0)."""
    below = np.asarray(errors, dtype=np.float64) < level
    return int(np.argmax(below)) if below.any() else None


def window_ratio(errors: Any, hi: float = 1e-2, lo: float = 1e-12) -> float:
    """:func:`fitted_ratio` of an error curve on its window between ``hi`` and ``lo``.

    The fit uses the steps from where the error first falls below ``hi`` (the transient is over) up to,
    not including, the first step below ``lo`` (the rounding level is near); the whole curve after the
    transient when it never falls below ``lo``.
    """
    e = np.asarray(errors, dtype=np.float64)
    end = first_below(e, lo) or None
    return fitted_ratio(np.where(e < hi, e, np.nan)[:end])


def distance_frame(X: Any, bases: Mapping[str, Any], value: str = "mean sin∠") -> pd.DataFrame:
    """The mean over tokens of :func:`distance_to_subspace` to each subspace, step by step.

    Args:
        X: token states ``(T+1, n, d)``.
        bases: name → orthonormal basis ``(d, k)`` (e.g. ``{"distance to v₁": v1[:, None]}``).
        value: the name of the value column.

    Returns:
        Long format: columns ``t``, ``measure`` (the names of ``bases``) and ``value``.
    """
    X = as_float64(X)
    frames = [pd.DataFrame({"t": np.arange(X.shape[0]), "measure": name,
                            value: distance_to_subspace(X, B).mean(axis=1)}) for name, B in bases.items()]
    return pd.concat(frames, ignore_index=True)


def plane_measures(X: Any, B: Any) -> pd.DataFrame:
    """How tokens ``(T+1, n, d)`` approach a plane with orthonormal basis ``B = [b₁, b₂]``, step by step.

    Returns:
        Long format: ``t``, ``measure`` and ``mean over tokens``, for the measures ``planar alignment a₂``
        (``‖Bᵀx‖/‖x‖``, which goes to 1 when the tokens reach the plane) and ``alignment with b₁`` (which
        keeps turning when the tokens rotate inside it).
    """
    X, B = as_float64(X), as_float64(B)
    t = np.arange(X.shape[0])
    return pd.DataFrame({"t": t, "planar alignment a₂": subspace_alignment(X, B).mean(1),
                         "alignment with b₁": alignment(X, B[:, 0]).mean(1)}).melt(
        "t", var_name="measure", value_name="mean over tokens")
