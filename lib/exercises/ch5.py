"""Checker of chapter 5's exercise: the steering vector ``w`` of the eigen-edit.

References: ``pinv(V)ᵀ u`` (SVD-based, float64) and the projection of ``u`` on the row space of ``V``,
never :func:`lib.steering.choose_w`. The mistakes named: a ``w`` that solves ``Vᵀw = u`` but carries a
component in the null space of ``Vᵀ`` (not the minimum-norm one), ``V w`` or ``V⁻¹u`` instead of the
transpose, and an exact solve where the system has no solution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_array, call, run_cases
from lib.models.weights import expand_kv

__all__ = ["check_steering_w"]


def _gqa(rng: np.random.Generator, n_heads: int, n_kv: int, head_dim: int, d: int) -> np.ndarray:
    """A random grouped-query value matrix, expanded to ``(H·d_h, d)`` (rank ``n_kv·d_h``)."""
    V_kv = torch.from_numpy(rng.standard_normal((n_kv * head_dim, d)))
    return expand_kv(V_kv, n_heads, n_kv, head_dim).numpy()


def check_steering_w(fn: Callable[[np.ndarray, np.ndarray], Any], verbose: bool = True,
                     time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check the student's ``fn(V, u) -> w``: the minimum-norm least-squares solution of ``V_Lᵀ w = u``.

    ``V`` is ``(H·d_h, d)`` (expanded value matrix), ``u`` a unit ``(d,)``. Each case checks ``z = Vᵀ w``
    (``u`` itself when ``V`` has full column rank, else the projection of ``u`` on the row space of
    ``V``) and then ``w`` itself against ``pinv(V)ᵀ u``: a ``w`` shifted along the null space of
    ``Vᵀ`` gives the same ``z`` but is rejected, with feedback naming the null-space component.
    Cases: square invertible (MHA); grouped-query with ``H·d_h = d`` (the book decoder: rank
    ``n_kv·d_h = d/2``); ``H·d_h = 2d`` with distinct heads (full column rank, a null space of
    dimension ``d``); Gemma-2-9B-like grouped-query (``H·d_h = 8d/7 > d`` but rank
    ``n_kv·d_h = 4d/7 < d``: ``z ≠ u``).
    """
    rng = np.random.default_rng(5)

    def unit(d: int) -> np.ndarray:
        u = rng.standard_normal(d)
        return u / np.linalg.norm(u)

    d = 12
    V_sq = rng.standard_normal((d, d))
    V_gqa = _gqa(rng, 4, 2, 3, d)        # 4 query heads, 2 KV heads of width 3
    V_tall = rng.standard_normal((2 * d, d))                            # 4 distinct heads of width 6
    V_gemma = _gqa(rng, 4, 2, 4, 14)      # d = 14, H·d_h = 16, n_kv·d_h = 8

    def case(V: np.ndarray, u: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            w = as_array(call(fn, V.copy(), u.copy()), (V.shape[0],), "w (shape (H·d_h,))")
            full_rank = np.linalg.matrix_rank(V) == V.shape[1]
            want_z = u if full_rank else np.linalg.pinv(V) @ V @ u
            err = float(np.abs(V.T @ w - want_z).max())
            if err > 1e-8:
                if V.shape[0] == V.shape[1] and np.abs(V @ w - u).max() < 1e-8:
                    raise Wrong("you solved V w = u; the edit needs Vᵀ w = u (solve with V.T)")
                what = "Vᵀw − u" if full_rank else "z − P_row u (V is rank-deficient: z is the projection of u)"
                hint = "solve Vᵀ w = u (do not form an inverse)" if V.shape[0] == V.shape[1] and full_rank else \
                    "no w solves Vᵀ w = u exactly here; use the minimum-norm least-squares solution " \
                    "w = pinv(V)ᵀ u (np.linalg.lstsq(V.T, u))"
                raise Wrong(f"max |{what}| = {err:.2e}; {hint}")
            w_min = np.linalg.pinv(V).T @ u
            off = float(np.linalg.norm(w - w_min))
            if off > 1e-8 * max(1.0, float(np.linalg.norm(w_min))):
                raise Wrong(f"z = Vᵀw is right, but w is not the minimum-norm solution: it has a component of norm "
                            f"{off:.2e} in the null space of Vᵀ. That component leaves F_L' unchanged but changes "
                            "wᵀo_i, hence the real layer's output; return w = pinv(V)ᵀ u (np.linalg.lstsq(V.T, u))")
        return run

    return run_cases("check_steering_w", fn, [
        Case("square, invertible V (MHA): z = u", case(V_sq, unit(d))),
        Case("grouped-query V, H·d_h = d (book decoder: rank n_kv·d_h = d/2): z = projection of u",
             case(V_gqa, unit(d))),
        Case("H·d_h = 2d, distinct heads (full column rank): z = u, w of minimum norm", case(V_tall, unit(d))),
        Case("grouped-query, H·d_h > d > n_kv·d_h (Gemma-2-9B-like, rank 4d/7): z = projection of u",
             case(V_gemma, unit(14))),
    ], verbose, time_limit)
