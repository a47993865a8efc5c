"""Chapter 6's test of claim TV2 by layer [ours]: is ``v₁(F_t)`` closer than chance to *any* of the Jacobian's subspaces?

Section 6.2 compares ``v₁(F_t)`` with four subspaces of the Jacobian view in every layer
(:data:`lib.chapters.two_views.ANGLE_TARGETS`). The four are not independent (the eigenvectors, the singular
vectors and the funnel image of one ``J̄_t`` overlap), so counting (layer, subspace) pairs counts the same
evidence up to four times. Here each layer is one test: the smallest of its four marginal p-values, against
the joint null of the same random directions compared with all four subspaces at once
(:func:`lib.stats.min_p_joint`), then Benjamini–Hochberg across the layers of a model, as for each subspace
alone. Angles in degrees; float64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lib.methods import bridge as br
from lib.stats import benjamini_hochberg, min_p_joint

if TYPE_CHECKING:
    from lib.chapters.two_views import ModelViews, TwinViews

__all__ = ["ANGLE_CLOSE", "JOINT_DRAWS", "angle_layers", "layer_angle_test"]

ANGLE_CLOSE = 30.0
"""Degrees under which ``v₁(F_t)`` is *near-parallel* to a subspace [ours: cos θ₁ > 0.87], a much stronger
statement than "closer than chance" in these widths, whose chance medians exercise 6.2 computes)."""

JOINT_DRAWS = 2000
"""Random directions per layer in the joint null of :func:`layer_angle_test`."""


def layer_angle_test(v1: np.ndarray, bases: dict[str, np.ndarray], *, m: int = JOINT_DRAWS,
                     seed: int = 0) -> dict[str, float | str]:
    """One layer: is the subspace ``v1`` ``(d, p)`` closer than chance to at least one of ``bases``?

    The statistic per base is the smallest principal angle θ₁ (:func:`lib.methods.bridge.principal_angles`).
    The joint null draws ``m`` uniformly random ``p``-dimensional subspaces (:func:`lib.methods.bridge.random_subspaces`,
    the same draws for every layer of a width) and measures each against every base, so that the dependence
    between the bases is in the null.

    Args:
        v1: ``(d, p)`` basis of ``v₁(F_t)`` (a line or the plane of a complex pair, ``p ≤ 2``).
        bases: name → ``(d, q)`` basis of a Jacobian-view subspace.
        m, seed: draws of the joint null and their seed.
    Returns:
        ``p_joint`` (:func:`lib.stats.min_p_joint`), ``p_min`` (the smallest marginal p, uncorrected),
        ``best`` (the name of the base that gives it) and ``theta_best`` (its angle, degrees).
    """
    names = list(bases)
    theta = np.array([br.principal_angles(v1, bases[n])[0] for n in names])
    null = _smallest_angles(_draws(v1.shape[0], v1.shape[1], m, seed), [bases[n] for n in names])  # (m, k)
    marginal = br.empirical_p(theta, null.T)  # (k,)
    i = int(np.argmin(marginal))
    return {"p_joint": min_p_joint(theta, null), "p_min": float(marginal[i]), "best": names[i],
            "theta_best": float(np.degrees(theta[i]))}


_DRAWS: dict[tuple[int, int, int, int], np.ndarray] = {}


def _draws(d: int, p: int, m: int, seed: int) -> np.ndarray:
    """``m`` random orthonormal ``(d, p)`` bases, cached per ``(d, p, m, seed)``."""
    key = (d, p, m, seed)
    if key not in _DRAWS:
        _DRAWS[key] = br.random_subspaces(d, p, m, seed)
    return _DRAWS[key]


def _smallest_angles(R: np.ndarray, bases: list[np.ndarray]) -> np.ndarray:
    """θ₁ (radians) between each orthonormal ``R[i]`` ``(d, p)``, ``p ≤ 2``, and each of ``bases``: ``(m, k)``.

    The cosine is the largest singular value of ``Q_Bᵀ R[i]``, the square root of the largest eigenvalue of its
    ``p × p`` Gram matrix, in closed form (one matrix product for every base instead of
    :func:`lib.methods.bridge.principal_angles`' QR of every draw; the cosine formula is accurate here, where
    chance angles are far from 0)."""
    Qs = [np.linalg.qr(np.asarray(B, dtype=np.float64))[0] for B in bases]
    M = np.concatenate(Qs, axis=1).T @ R  # (m, Σq, p)
    out = []
    for part in np.split(M, np.cumsum([Q.shape[1] for Q in Qs])[:-1], axis=1):
        G = np.swapaxes(part, 1, 2) @ part  # (m, p, p)
        if G.shape[-1] == 1:
            top = G[:, 0, 0]
        else:
            a, b, c = G[:, 0, 0], G[:, 0, 1], G[:, 1, 1]
            top = (a + c) / 2 + np.sqrt(((a - c) / 2) ** 2 + b * b)
        out.append(np.arccos(np.clip(np.sqrt(np.maximum(top, 0.0)), 0.0, 1.0)))
    return np.stack(out, axis=1)


def _model_layers(v: ModelViews, m: int, seed: int) -> pd.DataFrame:
    rows = []
    for t in range(len(v.jv.k1)):
        v1 = v.eb_F.v1[t][:, : int(v.eb_F.k1[t])]
        bases = {name: bs[t] for name, bs in v.jv.targets.items()}
        rows.append({"layer": t + 1, **layer_angle_test(v1, bases, m=m, seed=seed)})
    df = pd.DataFrame(rows)
    df["q_joint"] = benjamini_hochberg(df.p_joint.to_numpy())
    return v.tag(df)


def angle_layers(views: TwinViews, *, m: int = JOINT_DRAWS, seed: int = 0) -> pd.DataFrame:
    """:func:`layer_angle_test` of every layer of every model of ``views``, with ``q_joint``, the
    Benjamini–Hochberg adjusted ``p_joint`` across the layers of one model (FDR 5%: ``q_joint < 0.05``).

    Returns:
        one row per (model, layer): ``layer`` (1-based), ``p_joint``, ``q_joint``, ``p_min``, ``best``,
        ``theta_best``, tagged with ``model``, ``series`` and ``random`` (:meth:`ModelViews.tag`).
    """
    return pd.concat([_model_layers(v, m, seed) for v in views.values()], ignore_index=True)
