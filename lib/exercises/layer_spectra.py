"""Checkers of chapter 0's exercises: a layer's spectral summary, the rank bound of ``F = OV``, the energy ratio.

The references are LAPACK's eigenvalues and SVDs of matrices built here with a prescribed spectrum
(:func:`lib.theory.toys.matrix_with_spectrum`), not the formulas the student writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lib.exercises.runner import (
    DEFAULT_TIME_LIMIT,
    Case,
    Wrong,
    as_array,
    as_bool,
    as_float,
    as_int,
    call,
    run_cases,
)
from lib.linalg import spectra
from lib.theory import toys

__all__ = ["check_energy_ratio", "check_rank_bound", "check_spectral_summary"]


def _triple(value: Any) -> tuple[Any, Any, Any]:
    if isinstance(value, (tuple, list)) and len(value) == 3:
        return value[0], value[1], value[2]
    raise Wrong(f"return the triple (radius, gap_ratio, is_complex), got {type(value).__name__}")


_OFF_SPECTRAL_SUMMARY = ("lib.linalg.spectra.spectral_radius", "lib.linalg.spectra.gap_ratio", "lib.methods.layer_spectra.summary_table",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_spectral_summary(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                           time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(F) -> (radius, gap_ratio, is_complex)`` for a real ``(d, d)`` matrix ``F``.

    ``radius = |λ₁|``; ``gap_ratio = |λ_next| / |λ₁|`` where ``λ_next`` is the largest eigenvalue in modulus
    that is not ``λ₁`` or its conjugate partner; ``is_complex`` says whether ``λ₁`` is non-real. Rejected by
    name: counting the conjugate partner as "next" (gap ratio 1), skipping a real eigenvalue of the same modulus
    (``λ = 2, −2``: gap ratio 1), sorting by real part instead of modulus, a signed ratio ``λ₂/λ₁``, an
    ``is_complex`` that looks at other eigenvalues than ``λ₁``.
    """
    d = 12
    rest = list(np.linspace(0.5, 0.05, d - 3))
    real = toys.matrix_with_spectrum([2.0, 1.2, 0.9] + rest[:-2] + [0.3 * np.exp(1j)], seed=1, cond=3.0)
    tie = toys.matrix_with_spectrum([2.0, -2.0, 0.9] + rest, seed=4, cond=3.0)
    negative = toys.matrix_with_spectrum([-2.0, 1.5, 0.7] + rest, seed=2, cond=3.0)
    pair = 1.5 * np.exp(1j * np.pi / 5)
    cplx = toys.matrix_with_spectrum([pair, 0.9] + rest, seed=3, cond=3.0)

    def case(F: np.ndarray, radius: float, gap: float, is_cplx: bool) -> Callable[[], None]:
        def run() -> None:
            r, g, c = _triple(call(fn, F.copy()))
            r, g, c = as_float(r, "radius"), as_float(g, "gap_ratio"), as_bool(c, "is_complex")
            if abs(r - radius) > 1e-8 * radius:
                lams = spectra.eigvals(F)
                if abs(r - abs(max(lams, key=lambda z: z.real))) < 1e-8:
                    raise Wrong(f"radius {r:.6g}: you took the eigenvalue with the largest real part; λ₁ is the "
                                f"largest in modulus, |λ₁| = {radius:.6g}")
                raise Wrong(f"radius {r:.6g}, expected |λ₁| = {radius:.6g}")
            if is_cplx and abs(g - 1) < 1e-8:
                raise Wrong("gap ratio 1: λ₁'s conjugate partner has the same modulus and is not 'next'; skip it")
            if not is_cplx and abs(gap - 1) < 1e-8 and abs(g - 1) > 1e-8:
                raise Wrong(f"gap ratio {g:.6g}, expected 1: −2 has the modulus of λ₁ = 2 but is real, not λ₁'s "
                            "conjugate partner; only a non-real λ₁'s partner is skipped")
            if g < 0:
                raise Wrong(f"gap ratio {g:.6g} is negative: it is a ratio of moduli, |λ_next| / |λ₁|")
            if abs(g - gap) > 1e-8:
                raise Wrong(f"gap ratio {g:.6g}, expected |λ_next| / |λ₁| = {gap:.6g}")
            if c != is_cplx:
                raise Wrong(f"is_complex = {c}, but λ₁ is {'non-real' if is_cplx else 'real'}"
                            + ("" if is_cplx else " (other eigenvalues are complex here: test λ₁ alone)"))
        return run

    return run_cases("check_spectral_summary", fn, [
        Case("real λ₁ = 2, next 1.2 (a complex pair further down)", case(real, 2.0, 0.6, False)),
        Case("real λ₁ = 2 and λ₂ = −2, a tie that is no conjugate pair (gap ratio 1)", case(tie, 2.0, 1.0, False)),
        Case("negative λ₁ = −2, next 1.5 (order by modulus)", case(negative, 2.0, 0.75, False)),
        Case("complex pair 1.5·exp(±iπ/5), next 0.9 (skip the partner)", case(cplx, 1.5, 0.6, True)),
    ], verbose, time_limit, off=_OFF_SPECTRAL_SUMMARY)


def check_rank_bound(fn: Callable[[int, int, int], Any], verbose: bool = True,
                     time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(d, n_heads, head_dim) -> int``: the largest possible rank of ``F = Σ_h O_h V_h``, and that
    it is attained by random heads (LAPACK's rank of a sampled ``F``). Rejected by name: ``d`` alone (too
    high when ``H d_h < d``), ``H d_h`` alone (too high when ``H d_h > d``), ``d_h`` (one head's rank)."""
    rng = np.random.default_rng(0)

    def case(d: int, H: int, dh: int) -> Callable[[], None]:
        def run() -> None:
            got = as_int(call(fn, d, H, dh), "the rank bound")
            O, V = rng.standard_normal((d, H * dh)), rng.standard_normal((H * dh, d))
            want = int(np.linalg.matrix_rank(O @ V))
            if got == want:
                return
            if got == d:
                raise Wrong(f"{got} = d, but a sum of {H} heads of rank ≤ {dh} has rank ≤ H·dₕ = {H * dh} < d")
            if got == H * dh:
                raise Wrong(f"{got} = H·dₕ, but F is d × d = {d} × {d}: its rank is at most d")
            if got == dh:
                raise Wrong(f"{got} is one head's rank; F sums {H} heads")
            raise Wrong(f"the rank bound is {got}; a random F of this shape has rank {want}")
        return run

    return run_cases("check_rank_bound", fn, [
        Case("MiniLM: d = 384, 12 heads of width 32", case(384, 12, 32)),
        Case("d = 64, 2 heads of width 16 (H·dₕ < d)", case(64, 2, 16)),
        Case("d = 24, 4 heads of width 8 (H·dₕ > d)", case(24, 4, 8)),
    ], verbose, time_limit)


def check_energy_ratio(fn: Callable[[np.ndarray], Any], verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(F) -> (L,)``: ``‖F_t‖_F / |λ_{1,t}|`` for every matrix of an ``(L, d, d)`` stack.

    Rejected by name: the spectral norm ``σ₁`` in place of ``|λ₁|`` (they differ for a non-normal matrix),
    the squared Frobenius norm, a signed ``λ₁``, the first eigenvalue LAPACK returns (unsorted: the fourth
    layer's is not ``λ₁``), and a stack modified in place.
    """
    d = 10
    rest = list(np.linspace(0.6, 0.1, d - 2))
    F = np.stack([toys.matrix_with_spectrum([s * 2.0, 1.0] + rest, seed=k, cond=8.0)
                  for k, s in enumerate((1, -1, 1))]
                 + [toys.matrix_with_spectrum([1.5, -1.2, 0.9] + rest[:-1], seed=3, cond=8.0)])  # LAPACK: −1.2 first
    lam1 = np.array([abs(spectra.eigvals(M)[0]) for M in F])
    want = np.linalg.norm(F, axis=(1, 2)) / lam1

    def values() -> None:
        got = as_array(call(fn, F.copy()), (len(F),), "the ratios")
        if np.allclose(got, want, rtol=1e-8):
            return
        if np.allclose(got, np.linalg.norm(F, axis=(1, 2)) / np.abs(np.linalg.eigvals(F)[:, 0]), rtol=1e-8):
            raise Wrong("np.linalg.eigvals returns the eigenvalues in no particular order (layer 4's first is −1.2, "
                        "its λ₁ is 1.5): take the largest modulus, np.abs(...).max(axis=-1)")
        if np.allclose(got, np.linalg.norm(F, axis=(1, 2)) / np.linalg.norm(F, 2, axis=(1, 2)), rtol=1e-8):
            raise Wrong("you divided by the spectral norm σ₁ = ‖F‖₂; the exercise asks for |λ₁|, which is "
                        "smaller for a non-normal matrix")
        if np.allclose(got, np.linalg.norm(F, axis=(1, 2)) ** 2 / lam1, rtol=1e-8):
            raise Wrong("you squared the Frobenius norm; use ‖F‖_F = sqrt(Σ F_ij²)")
        if np.allclose(np.abs(got), want, rtol=1e-8):
            raise Wrong("a ratio is negative: divide by the modulus |λ₁|, not λ₁ itself")
        raise Wrong(f"max relative error {np.max(np.abs(got / want - 1)):.2e} against ‖Fₜ‖_F / |λ₁,t|")

    def pure() -> None:
        G = F.copy()
        call(fn, G)
        if not np.array_equal(G, F):
            raise Wrong("your function modified the stack F in place")

    return run_cases("check_energy_ratio", fn, [
        Case("four non-normal layers (one with λ₁ < 0, one whose eigenvalues LAPACK lists unsorted)", values),
        Case("leaves F unchanged", pure),
    ], verbose, time_limit)
