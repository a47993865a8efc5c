"""Checkers of chapter 4's exercises: the effective rank, the Schur-normal control, the complex fraction of a
mean against the mean of the complex fractions, and the truncated funnel.

References: :func:`lib.linalg.nonnormal.effective_rank`, :func:`lib.linalg.nonnormal.schur_normal`,
:func:`lib.linalg.nonnormal.complex_fraction` and :func:`lib.linalg.nonnormal.cumulative_product` (each tested against
hand-computed cases in ``tests/unit/test_nonnormal.py``). The mistakes named: the participation ratio or σ instead
of σ², ``0·log 0`` left as NaN; a control with raw 2×2 Schur blocks, left in the Schur basis (no ``Q … Qᵀ``),
built straight from the eigenvalues, or with the rotation reversed; an absolute instead of a relative
threshold on ``Im λ``, each conjugate pair counted once, the pair returned in the wrong order, the stack
modified; a truncation applied only at the end or not at all, the product multiplied in the wrong order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_array, as_float, as_pair, call, run_cases
from lib.linalg.nonnormal import (
    complex_fraction,
    cumulative_product,
    effective_rank,
    normality_residual,
    real_schur_blocks,
    schur_normal,
)

__all__ = ["check_complex_fractions", "check_effective_rank", "check_schur_normal", "check_truncated_funnel"]


_OFF_EFFECTIVE_RANK = ("lib.linalg.nonnormal.effective_rank", "lib.linalg.nonnormal.cumulative_product", "lib.linalg.cumulative.erank_from_singular_values", "lib.linalg.cumulative.cumulative_effective_rank", "lib.linalg.nonnormal.funnel_eranks",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_effective_rank(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                         time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(M) -> float``: ``exp(−Σ p_i log p_i)`` with ``p_i = σ_i²/Σσ_j²`` (``p_i = 0`` dropped).

    Named: the participation ratio, σ for σ², the entropy itself, its sign, eigenvalues for singular values,
    mixed log bases, ``p`` that does not sum to 1, ``0·log 0`` left as NaN."""
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
                raise Wrong("got NaN: a zero singular value gives pᵢ = 0 and 0·log 0; drop the pᵢ = 0 terms")
            got, want = as_float(raw, "the effective rank"), effective_rank(M)
            if abs(got - want) <= 1e-8 * max(1.0, want):
                return
            s = np.linalg.svd(M, compute_uv=False)
            p = s[s > 0] ** 2 / np.sum(s**2)
            named = {
                "that is the participation ratio (Σσ²)²/Σσ⁴, not exp of the entropy":
                    float(np.sum(s**2) ** 2 / np.sum(s**4)),
                "use squared singular values: pᵢ = σᵢ²/Σσⱼ², not σᵢ/Σσⱼ": entropy_rank(s),
                "return exp of the entropy, not the entropy itself": math.log(want),
                "the entropy is −Σ pᵢ log pᵢ (mind the minus sign: this is 1 / erank)": 1.0 / want,
                "use the singular values (np.linalg.svd), not the moduli of the eigenvalues":
                    entropy_rank(np.abs(np.linalg.eigvals(M)) ** 2),
                "take exp of an entropy in natural logs (np.log), or 2 ** of one in log2, not exp of log2":
                    float(np.exp(-np.sum(p * np.log2(p)))),
                "pᵢ must sum to 1: σᵢ² / Σσⱼ², not σᵢ² / Σσⱼ": entropy_rank(s**2 * np.sum(s**2) / np.sum(s)),
            }
            why = next((h for h, val in named.items() if abs(got - val) <= 1e-8 * max(1.0, abs(val))), "")
            if not why and M.shape == (6, 6) and np.allclose(M, np.eye(6)):
                why = "for the identity every pᵢ = 1/6, so the effective rank is 6"
            raise Wrong(f"got {got:.6g}, expected {want:.6g}" + (f": {why}" if why else ""))
        return run

    return run_cases("check_effective_rank", fn, [Case(name, case(M)) for name, M in cases.items()],
                     verbose, time_limit, off=_OFF_EFFECTIVE_RANK)


def _block_diagonal(N: np.ndarray) -> bool:
    """Whether ``N`` is zero outside 1×1/2×2 diagonal blocks (a matrix built from eigenvalues alone)."""
    off = np.abs(np.triu(N, 2)) + np.abs(np.tril(N, -2))
    sub = np.abs(np.diag(N, -1))
    return bool(off.max(initial=0) < 1e-12 and np.all((sub[1:] < 1e-12) | (sub[:-1] < 1e-12)))


_OFF_SCHUR_NORMAL = ("lib.linalg.nonnormal.schur_normal", "lib.linalg.nonnormal.both_controls", "lib.linalg.nonnormal.control_matrices",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


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
            if np.linalg.norm(N - Q.T @ (Q.T @ want @ Q) @ Q) <= 1e-8 * np.linalg.norm(want):
                raise Wrong("you rotated the wrong way: M = Q T Qᵀ, so N = Q T_N Qᵀ, not Qᵀ T_N Q")
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
    ], verbose, time_limit, off=_OFF_SCHUR_NORMAL)


def _rotation(theta: float) -> np.ndarray:
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


_OFF_COMPLEX_FRACTIONS = ("lib.linalg.nonnormal.complex_fraction", "lib.linalg.nonnormal.layer_metrics", "lib.linalg.nonnormal.spectral_metrics",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_complex_fractions(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                            time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(Jp) -> (mean_of_fC, fC_of_mean)`` for a stack ``Jp`` of shape ``(P, d, d)``.

    ``f_C(M)`` is the share of ``M``'s eigenvalues with ``|Im λ| > 1e-8 · max|λ|`` (every eigenvalue of a
    conjugate pair counts). The first entry is the mean over the ``P`` matrices of their own ``f_C``, the
    second the ``f_C`` of their mean ``Jp.mean(0)``; ``Jp`` must not be modified. Rejected by name: an absolute
    threshold ``|Im λ| > 1e-8``, each pair counted once, the two entries swapped, either entry computed the
    other's way, a count instead of a share, a modified stack.
    """
    rng = np.random.default_rng(4)
    th = 0.7
    opposite = np.stack([scipy.linalg.block_diag(_rotation(s * th), _rotation(s * 2 * th)) for s in (1, -1)])
    random = np.eye(12) + rng.standard_normal((5, 12, 12)) / np.sqrt(12)
    cases = {
        "five random 12 × 12 Jacobians": random,
        "two opposite rotations (each all complex, their mean real)": opposite,
        "the random stack scaled by 1e-9 (the threshold is relative)": 1e-9 * random,
    }

    def want(Jp: np.ndarray) -> tuple[float, float]:
        return float(np.mean([complex_fraction(J) for J in Jp])), complex_fraction(Jp.mean(0))

    def fraction_variants(Jp: np.ndarray) -> dict[str, tuple[float, float]]:
        def fc(M: np.ndarray, rel: bool, pairs_once: bool) -> float:
            lam = np.linalg.eigvals(M)
            tol = 1e-8 * np.abs(lam).max() if rel else 1e-8
            return float(np.mean(lam.imag > tol) if pairs_once else np.mean(np.abs(lam.imag) > tol))

        def pair(rel: bool, once: bool) -> tuple[float, float]:
            return float(np.mean([fc(J, rel, once) for J in Jp])), fc(Jp.mean(0), rel, once)

        d = Jp.shape[-1]
        right = want(Jp)
        return {"the threshold is relative: |Im λ| > 1e-8 · max|λ|, not an absolute 1e-8": pair(False, False),
                "count both eigenvalues of a conjugate pair (|Im λ|, not Im λ > 0)": pair(True, True),
                "the first entry is the mean of each matrix's own f_C (f_C per matrix, then the mean), not f_C of "
                "the mean": (right[1], right[1]),
                "the second entry is f_C of the mean matrix Jp.mean(0), not the mean of the f_C":
                    (right[0], right[0]),
                f"f_C is a share of the d = {d} eigenvalues, not a count": (right[0] * d, right[1] * d)}

    def case(Jp: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            a, b = as_pair(call(fn, Jp.copy()), "the result")
            got = (as_float(a, "the mean of the per-prompt f_C"), as_float(b, "f_C of the mean"))
            ref = want(Jp)
            if np.allclose(got, ref, atol=1e-12):
                return
            if np.allclose(got[::-1], ref, atol=1e-12):
                raise Wrong(f"got {got}: the two entries are swapped; return (mean of the f_C, f_C of the mean)")
            why = next((h for h, v in fraction_variants(Jp).items() if np.allclose(got, v, atol=1e-12)), "")
            raise Wrong(f"got ({got[0]:.4g}, {got[1]:.4g}), expected ({ref[0]:.4g}, {ref[1]:.4g})"
                        + (f": {why}" if why else ""))
        return run

    def pure() -> None:
        G = random.copy()
        call(fn, G)
        if not np.array_equal(G, random):
            raise Wrong("your function modified the stack Jp in place")

    return run_cases("check_complex_fractions", fn, [Case(name, case(Jp)) for name, Jp in cases.items()]
                     + [Case("leaves Jp unchanged", pure)], verbose, time_limit, off=_OFF_COMPLEX_FRACTIONS)


_OFF_TRUNCATED_FUNNEL = ("lib.linalg.nonnormal.cumulative_product", "lib.linalg.nonnormal.funnel_variants", "lib.linalg.cumulative.cumulative_effective_rank", "lib.linalg.nonnormal.funnel_eranks",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_truncated_funnel(fn: Callable[[np.ndarray, int], Any], verbose: bool = True,
                           time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(Js, k) -> float``: the effective rank of ``P_L = J_{L−1} ⋯ J_0`` (``Js`` of shape ``(L, d, d)``,
    block order) when after *every* multiplication the product is truncated to its ``k`` largest singular
    values and rescaled to unit Frobenius norm (section 4.6); ``k = d`` is no truncation.

    Rejected by name: truncating only the final product, not truncating, multiplying in the wrong order
    (``P ← P J`` instead of ``P ← J P``), keeping ``k ± 1`` singular values, truncating each ``J`` instead of
    the product.
    """
    rng = np.random.default_rng(5)
    trap = np.stack([np.diag([1.0, 1.0, 0.01]), np.diag([1.0, 1.0, 1000.0])])
    rand = rng.standard_normal((4, 10, 10)) / np.sqrt(10) + np.eye(10)
    rand[:, :, 0] *= 2.0  # a direction that the products grow, so that truncation matters

    def variants(Js: np.ndarray, k: int) -> dict[str, float]:
        d = Js.shape[1]

        def erank_of(M: np.ndarray) -> float:
            return effective_rank(M)

        def truncate(M: np.ndarray) -> np.ndarray:
            U, s, Vh = np.linalg.svd(M)
            return (U[:, :k] * s[:k]) @ Vh[:k]

        P_end = np.eye(d)
        P_rev = np.eye(d)
        for J in Js:
            P_end = J @ P_end
            P_end /= np.linalg.norm(P_end)
            P_rev = truncate(P_rev @ J)
            P_rev /= np.linalg.norm(P_rev)
        def run(trunc: Callable[[np.ndarray], np.ndarray], each_J: bool = False) -> float:
            P = np.eye(d)
            for J in Js:
                P = J @ P if not each_J else trunc(J) @ P
                P = P if each_J else trunc(P)
                P /= np.linalg.norm(P)
            return erank_of(P)

        def keep(n: int) -> Callable[[np.ndarray], np.ndarray]:
            def cut(M: np.ndarray) -> np.ndarray:
                U, s, Vh = np.linalg.svd(M)
                return (U[:, :n] * s[:n]) @ Vh[:n]
            return cut

        return {"truncate after every step, not only the final product": erank_of(truncate(P_end)),
                "truncate to rank k: this is the untruncated product": erank_of(P_end),
                "multiply on the left, P ← J P (Pₜ = Jₜ₋₁ ⋯ J₀), not P ← P J": erank_of(P_rev),
                f"keep the k = {k} largest singular values, s[:k], not k + 1": run(keep(k + 1)),
                f"keep the k = {k} largest singular values, s[:k], not k − 1": run(keep(max(k - 1, 1))),
                "truncate the product P after each multiplication, not each Jₜ before it": run(keep(k), each_J=True)}

    def case(Js: np.ndarray, k: int) -> Callable[[], None]:
        def run() -> None:
            got = as_float(call(fn, Js.copy(), k), "the final effective rank")
            want = float(cumulative_product(Js, k).erank[-1])
            if abs(got - want) <= 1e-8 * max(1.0, want):
                return
            why = next((h for h, v in variants(Js, k).items()
                        if abs(got - v) <= 1e-8 * max(1.0, v) and abs(v - want) > 1e-6), "")
            raise Wrong(f"got {got:.6g}, expected {want:.6g}" + (f": {why}" if why else ""))
        return run

    return run_cases("check_truncated_funnel", fn, [
        Case("singular values (1, 1, 0.01), then diag(1, 1, 1000), k = 2", case(trap, 2)),
        Case("four random 10 × 10 Jacobians, k = 3", case(rand, 3)),
        Case("the same, k = d = 10 (no truncation)", case(rand, 10)),
        Case("the same in reverse block order, k = 3", case(rand[::-1].copy(), 3)),
    ], verbose, time_limit, off=_OFF_TRUNCATED_FUNNEL)
