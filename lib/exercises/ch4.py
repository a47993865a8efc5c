"""Checkers of chapter 4's exercises: the effective rank and the Schur-normal control.

References: :func:`lib.nonnormal.effective_rank` and :func:`lib.nonnormal.schur_normal` (each tested
against hand-computed cases in ``tests/test_nonnormal.py``). The mistakes named: the participation ratio
or σ instead of σ², ``0·log 0`` left as NaN; a control with raw 2×2 Schur blocks, left in the Schur basis
(no ``Q … Qᵀ``), built straight from the eigenvalues, or with the rotation reversed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_array, as_float, call, run_cases
from lib.nonnormal import effective_rank, normality_residual, real_schur_blocks, schur_normal

__all__ = ["check_effective_rank", "check_schur_normal"]


def check_effective_rank(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                         time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(M) -> float``: ``exp(−Σ p_i log p_i)`` with ``p_i = σ_i²/Σσ_j²`` (``p_i = 0`` dropped)."""
    rng = np.random.default_rng(0)
    cases = {
        "identity (d = 6)": np.eye(6),
        "rank one": np.outer(np.arange(1.0, 5.0), np.ones(4)),
        "random 8 × 8": rng.standard_normal((8, 8)),
        "scaled by 1e6": 1e6 * rng.standard_normal((5, 5)),
        "with a zero singular value": np.diag([3.0, 1.0, 0.0]),
    }

    def entropy_rank(p: np.ndarray) -> float:
        p = p[p > 0] / p.sum()
        return float(np.exp(-np.sum(p * np.log(p))))

    def case(M: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            raw = call(fn, M.copy())
            if isinstance(raw, float) and math.isnan(raw):
                raise Wrong("got NaN: a zero singular value gives p_i = 0 and 0·log 0; drop the p_i = 0 terms")
            got, want = as_float(raw, "the effective rank"), effective_rank(M)
            if abs(got - want) <= 1e-8 * max(1.0, want):
                return
            s = np.linalg.svd(M, compute_uv=False)
            named = {
                "that is the participation ratio (Σσ²)²/Σσ⁴, not exp of the entropy":
                    float(np.sum(s**2) ** 2 / np.sum(s**4)),
                "use squared singular values: p_i = σ_i²/Σσ_j², not σ_i/Σσ_j": entropy_rank(s),
                "return exp of the entropy, not the entropy itself": math.log(want),
            }
            why = next((h for h, val in named.items() if abs(got - val) <= 1e-8 * max(1.0, abs(val))), "")
            raise Wrong(f"got {got:.6g}, expected {want:.6g}" + (f": {why}" if why else ""))
        return run

    return run_cases("check_effective_rank", fn, [Case(name, case(M)) for name, M in cases.items()],
                     verbose, time_limit)


def _block_diagonal(N: np.ndarray) -> bool:
    """Whether ``N`` is zero outside 1×1/2×2 diagonal blocks (a matrix built from eigenvalues alone)."""
    off = np.abs(np.triu(N, 2)) + np.abs(np.tril(N, -2))
    sub = np.abs(np.diag(N, -1))
    return bool(off.max(initial=0) < 1e-12 and np.all((sub[1:] < 1e-12) | (sub[:-1] < 1e-12)))


def check_schur_normal(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(M) -> N``: the normal control ``Q T_N Qᵀ`` with ``M = Q T Qᵀ`` from
    ``scipy.linalg.schur(M, output="real")``.

    ``T_N`` keeps the 1×1 blocks of ``T``, replaces each 2×2 block ``[[a, b], [c, a]]`` by
    ``[[a, s], [−s, a]]`` with ``s = sign(b)·sqrt(−bc)`` and is zero elsewhere. ``N`` must have ``M``'s
    eigenvalues, be normal, and equal the reference: a normal matrix with the right eigenvalues in another
    basis (the Schur basis itself, or blocks built straight from the eigenvalues) is rejected by name.
    """
    rng = np.random.default_rng(1)
    mats = {d: np.eye(d) + rng.standard_normal((d, d)) / np.sqrt(d) for d in (4, 9, 30)}

    def case(d: int) -> Callable[[], None]:
        def run() -> None:
            M = mats[d]
            N = as_array(call(fn, M.copy()), (d, d), "N")
            la, lb = np.sort_complex(np.linalg.eigvals(M)), np.sort_complex(np.linalg.eigvals(N))
            err = float(np.max(np.abs(la - lb)) / np.max(np.abs(la)))
            if err > 1e-8:
                raise Wrong(f"the eigenvalues moved (relative error {err:.2e}); a 2×2 block [[a, b], [c, a]] has "
                            "eigenvalues a ± i·sqrt(−bc): keep a and the product bc")
            res = normality_residual(N)
            if res > 1e-10:
                raise Wrong(f"N Nᵀ ≠ Nᵀ N (residual {res:.2e}): did you keep the raw 2×2 Schur blocks? Replace "
                            "[[a, b], [c, a]] by [[a, s], [−s, a]] with s = sign(b)·sqrt(−bc), and zero the rest")
            want = schur_normal(M)
            if np.linalg.norm(N - want) <= 1e-8 * np.linalg.norm(want):
                return
            T, Q = scipy.linalg.schur(M, output="real")
            if np.linalg.norm(N - Q.T @ want @ Q) <= 1e-8 * np.linalg.norm(want):
                raise Wrong("N is T_N in the Schur basis: rotate back, N = Q T_N Qᵀ (the control must act on the "
                            "same coordinates as M)")
            if np.linalg.norm(N - Q @ (Q.T @ want @ Q).T @ Q.T) <= 1e-8 * np.linalg.norm(want):
                raise Wrong("each 2×2 block turns the wrong way: s = sign(b)·sqrt(−bc) keeps the sign of b")
            if _block_diagonal(N):
                raise Wrong("N is built straight from the eigenvalues (block diagonal in the standard basis); the "
                            "control keeps M's Schur vectors: N = Q T_N Qᵀ with Q from scipy.linalg.schur(M)")
            raise Wrong(f"N has M's eigenvalues and is normal, but is not Q T_N Qᵀ (relative difference "
                        f"{np.linalg.norm(N - want) / np.linalg.norm(want):.2e}): use M's own real Schur vectors Q, "
                        "from scipy.linalg.schur(M, output=\"real\") with its default ordering")
        return run

    def n_pairs(d: int) -> int:
        return sum(n == 2 for _, n in real_schur_blocks(scipy.linalg.schur(mats[d], output="real")[0]))

    return run_cases("check_schur_normal", fn, [
        Case(f"d = {d} ({n_pairs(d)} complex pair{'s' if n_pairs(d) != 1 else ''})", case(d)) for d in mats
    ], verbose, time_limit)
