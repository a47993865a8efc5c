"""Checkers of chapter 2's exercises: steps to a tolerance, the bipartite condition, the linearized radius.

References: a brute-force count of steps, one step of the single-head simulator from a bipartite
state, and the spectral radius of the autograd Jacobian of a multi-head softmax layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lib import dynamics, spectra, toys
from lib.exercises.runner import (DEFAULT_TIME_LIMIT, Case, Wrong, as_bool, as_float, as_int, call, run_cases,
                                  subscript)

__all__ = ["check_bipartite_condition", "check_linearization_radius", "check_steps_needed"]


def _brute_steps(ratio: float, tol: float) -> int:
    """Fewest ``T ≥ 0`` with ``ratio^T ≤ tol``, counting a power equal to ``tol`` up to rounding as reached."""
    T, e = 0, 1.0
    while e > tol * (1 + 1e-12):
        e *= ratio
        T += 1
    return T


def check_steps_needed(fn: Callable[[float, float], Any], verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(ratio, tol) -> int``: the fewest steps ``T`` with ``ratio^T ≤ tol`` (``0 < ratio < 1``).

    The reference counts by brute force. Two cases have ``tol`` an exact power of ``ratio``
    (``0.5^10`` in binary, ``0.1^10`` in decimal): there ``T`` is that power, which a ``while e >= tol``
    loop overshoots by one, and so does ``ceil(log(tol)/log(ratio))`` when the quotient rounds to
    ``10.000000000000002``.
    """
    def case(ratio: float, tol: float) -> Callable[[], None]:
        def run() -> None:
            got, want = as_int(call(fn, ratio, tol), "T"), _brute_steps(ratio, tol)
            if got == want:
                return
            if got == want + 1 and abs(ratio**want - tol) <= 1e-12 * tol:
                quotient = math.log(tol) / math.log(ratio)
                how = "a loop `while e >= tol` stops one step late"
                if math.ceil(quotient) == got:
                    how += (f"; ceil(log(tol)/log(ratio)) rounds {quotient!r} up to {got}: subtract a small slack "
                            "before rounding up")
                raise Wrong(f"got {got}, expected {want}: here tol = ratio^{want} exactly, and ≤ counts equality ({how})")
            if got == want - 1:
                raise Wrong(f"got {got}, expected {want}: ratio^{got} = {ratio**got:.3g} is still > tol; round up")
            raise Wrong(f"got {got}, expected {want}: the fewest T with ratio^T ≤ tol")
        return run

    grid = [(0.5, 1e-3), (0.9, 1e-6), (0.99, 1e-3), (0.1, 0.5), (0.5, 0.5**10), (0.1, 1e-10)]
    names = {(0.5, 0.5**10): "ratio = 0.5, tol = 0.5^10 (an exact power)",
             (0.1, 1e-10): "ratio = 0.1, tol = 1e-10 (an exact power)"}
    return run_cases("check_steps_needed", fn, [
        Case(names.get((r, t), f"ratio = {r}, tol = {t:g}"), case(r, t)) for r, t in grid
    ], verbose, time_limit)


def check_bipartite_condition(fn: Callable[[float, int, int], Any], verbose: bool = True,
                              time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(c, n_plus, n_minus) -> bool``: is the bipartite state ``x_j = r s_j v₁`` a fixed point?

    The truth is measured by running one step of the single-head simulator from the bipartite state
    with a head whose bipartite score equals ``c`` (chapter 2, section 2.5). The grid has cases with
    ``n₋ > n₊`` (the condition is symmetric in the groups) and with ``e^c < n₊/n₋ < e^{2c}``.
    """
    F = toys.toy_matrix("real", 12, gap=0.5, seed=3)
    v1 = spectra.principal(F).vector
    c_unit = float(toys.bipartite_scores(toys.weights_from_matrix(F, 1, qk="aligned", seed=3), v1)[0])

    def simulated(c: float, n_plus: int, n_minus: int) -> bool:
        w = toys.weights_from_matrix(F, 1, qk="aligned", seed=3, qk_gain=math.sqrt(c / c_unit))
        X0 = toys.bipartite_state(v1, [1] * n_plus + [-1] * n_minus)
        return bool(np.allclose(dynamics.layer_step(w, X0).numpy(), X0, atol=1e-9))

    def case(c: float, n_plus: int, n_minus: int) -> Callable[[], None]:
        def run() -> None:
            got, want = as_bool(call(fn, c, n_plus, n_minus), "the answer"), simulated(c, n_plus, n_minus)
            if got == want:
                return
            big = max(n_plus / n_minus, n_minus / n_plus)
            if n_minus > n_plus:
                why = ("both groups must hold together, so the larger group ratio counts: n₋/n₊ here "
                       "(compare e^(2c) with max(n₊/n₋, n₋/n₊))")
            elif math.exp(c) < big < math.exp(2 * c):
                why = f"the threshold is e^(2c) = {math.exp(2 * c):.3g}, not e^c = {math.exp(c):.3g}"
            else:
                why = f"e^(2c) = {math.exp(2 * c):.3g} against the group ratio {big:.3g}"
            raise Wrong(f"you said {got}, the simulator says {want}: {why}")
        return run

    grid = [(0.3, 5, 5), (0.3, 7, 3), (0.5, 7, 3), (0.2, 2, 8), (1.0, 2, 8), (0.6, 1, 9), (1.2, 1, 9)]
    return run_cases("check_bipartite_condition", fn, [
        Case(f"c = {c}, n₊ = {p}, n₋ = {m}", case(c, p, m)) for c, p, m in grid
    ], verbose, time_limit)


def check_linearization_radius(fn: Callable[[np.ndarray, int], Any], verbose: bool = True,
                               time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(eigvals, k) -> float``: the spectral radius of the one-layer Jacobian at consensus on v_{k+1}.

    ``eigvals`` are the eigenvalues of ``F`` sorted by modulus (all real here, one negative among the
    leading three) and ``k`` is 0-based; the truth is the spectral radius of the autograd Jacobian of a
    multi-head softmax layer at ``x_i = r v_{k+1}`` (n = 3 tokens).
    """
    d, n = 8, 3
    eigs = [1.0, -0.7, 0.5, 0.3, -0.2, 0.1, 0.05, 0.0]
    F = toys.matrix_with_spectrum(eigs, seed=5, cond=2.0)
    lams, V = spectra.eig(F)
    w = toys.weights_from_matrix(F, 2, seed=5, qk_gain=1.5)

    def case(k: int) -> Callable[[], None]:
        def run() -> None:
            x = torch.tensor(np.tile(math.sqrt(d) * V[:, k].real, (n, 1)))
            J = torch.autograd.functional.jacobian(lambda X: dynamics.layer_step(w, X), x).reshape(n * d, n * d)
            want = float(np.abs(np.linalg.eigvals(J.numpy())).max())
            got = as_float(call(fn, lams.copy(), k), "the radius")
            if abs(got - want) < 1e-6 * max(1.0, want):
                return
            others = np.delete(lams, k)
            if abs(got - 1.0) < 1e-9:
                why = "λ_k itself is not a direction the layer can turn to: leave it out (|λ_k|/|λ_k| = 1)"
            elif abs(got - float(np.max(others.real)) / float(lams[k].real)) < 1e-9:
                why = "take moduli: a negative eigenvalue counts by |λ|"
            elif abs(got - abs(lams[1] / lams[0])) < 1e-9:
                why = f"that is the gap ratio |λ₂/λ₁|; at consensus on v{subscript(k + 1)} divide by |λ{subscript(k + 1)}|"
            else:
                why = "the largest |λ_j|, j ≠ k, over |λ_k|"
            raise Wrong(f"got {got:.6g}, the Jacobian's spectral radius is {want:.6g}: {why}")
        return run

    return run_cases("check_linearization_radius", fn, [
        Case(f"consensus on v{subscript(k + 1)}", case(k)) for k in range(3)
    ], verbose, time_limit)
