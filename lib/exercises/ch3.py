"""Checker of chapter 3's exercise: γ and ρ of one layer.

The reference is :func:`lib.alignment_stats.gamma_rho` (vectorised over prompts and layers, tested
on its own); the mistakes named are the signed cosine, the dot product without the token norms and a
non-strict increase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lib.alignment_stats import TokenStates, gamma_rho, random_directions
from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_float, as_pair, call, run_cases

__all__ = ["check_gamma_rho"]


def _variants(Xi: np.ndarray, Xo: np.ndarray, v: np.ndarray) -> dict[str, tuple[float, float]]:
    """(γ, ρ) of the plausible wrong definitions, each with the feedback naming its mistake."""
    def cos(X: np.ndarray, signed: bool = False, normed: bool = True) -> np.ndarray:
        c = (X @ v) / (np.linalg.norm(X, axis=1) if normed else 1.0)
        return c if signed else np.abs(c)

    ci, co = cos(Xi), cos(Xo)
    si, so = cos(Xi, signed=True), cos(Xo, signed=True)
    di, do = cos(Xi, normed=False), cos(Xo, normed=False)
    return {
        "take the absolute cosine |x·v|/‖x‖ (the sign of an eigenvector is arbitrary)":
            (float(so.mean()), float((so > si).mean())),
        "divide by the token norms: γ is a mean |cosine|, not a mean |x·v|":
            (float(do.mean()), float((do > di).mean())),
        "ρ counts tokens whose |cosine| strictly increases (>, not ≥)":
            (float(co.mean()), float((co >= ci).mean())),
    }


def check_gamma_rho(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], Any], verbose: bool = True,
                    time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check a student's ``fn(X_in, X_out, v) -> (gamma, rho)`` for one layer.

    ``X_in`` and ``X_out`` are ``(N, d)`` token states (rows) entering and leaving the layer, ``v`` a unit
    ``(d,)`` direction. ``gamma`` is the mean absolute cosine of the outputs with ``v`` and ``rho`` the
    fraction of tokens whose absolute cosine strictly increases.
    """
    rng = np.random.default_rng(7)
    d, N = 16, 40
    v = random_directions(d, 1, seed=3)[0]
    X_in = rng.standard_normal((N, d))
    X_out = X_in + 1.5 * rng.standard_normal((N, 1)) * v  # pushed along ±v: mostly increases

    def reference(Xi: np.ndarray, Xo: np.ndarray, u: np.ndarray) -> tuple[float, float]:
        row = gamma_rho(TokenStates.from_trajectories([np.stack([Xi, Xo])]), u[:, None], n_boot=0).iloc[0]
        return float(row.gamma), float(row.rho)

    def compare(Xi: np.ndarray, Xo: np.ndarray, u: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            g, r = as_pair(call(fn, Xi.copy(), Xo.copy(), u.copy()), "the result (gamma, rho)")
            g, r = as_float(g, "gamma"), as_float(r, "rho")
            G, R = reference(Xi, Xo, u)
            if abs(g - G) < 1e-10 and abs(r - R) < 1e-10:
                return
            why = next((hint for hint, (vg, vr) in _variants(Xi, Xo, u).items()
                        if abs(g - vg) < 1e-10 and abs(r - vr) < 1e-10), "")
            raise Wrong(f"got (γ, ρ) = ({g:.4f}, {r:.4f}), expected ({G:.4f}, {R:.4f})" + (f": {why}" if why else ""))
        return run

    return run_cases("check_gamma_rho", fn, [
        Case("random tokens, pushed along ±v", compare(X_in, X_out, v)),
        Case("sign of v does not matter (absolute cosine)", compare(X_in, X_out, -v)),
        Case("token norms do not matter (cosine, not dot product)", compare(3.0 * X_in, 0.1 * X_out, v)),
        Case("no change gives ρ = 0 (strict increase)", compare(X_in, X_in.copy(), v)),
    ], verbose, time_limit)
