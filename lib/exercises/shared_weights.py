"""Checkers of chapter 2's exercises: steps to a tolerance, bipartite states, the linearized radius.

References: a brute-force count of steps, one step of the single-head simulator from a bipartite
state (without and with a causal mask), and the spectral radius of the autograd Jacobian of a multi-head
softmax layer (without and with a residual connection).

The chapter's exercises 2.2 and 2.3 ask for what its propositions do *not* state: the bipartite condition
under a causal mask (:func:`check_causal_bipartite`) and the linearized radius of the layer with a residual
(:func:`check_residual_radius`). :func:`check_bipartite_condition` and :func:`check_linearization_radius`
check the propositions' own statements (no mask, no residual).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from lib.exercises.runner import (
    DEFAULT_TIME_LIMIT,
    Case,
    Wrong,
    as_bool,
    as_float,
    as_int,
    call,
    run_cases,
    subscript,
)
from lib.linalg import spectra
from lib.theory import dynamics, toys

# the toy of the bipartite checkers: a real dominant λ₁ > 0, one head with K = Q (every score c ≥ 0)
_BIP_D, _BIP_SEED = 12, 3

__all__ = ["check_bipartite_condition", "check_causal_bipartite", "check_linearization_radius",
           "check_residual_radius", "check_steps_needed"]


def _brute_steps(ratio: float, tol: float) -> int:
    """Fewest ``T ≥ 0`` with ``ratio^T ≤ tol``, counting a power equal to ``tol`` up to rounding as reached."""
    T, e = 0, 1.0
    while e > tol * (1 + 1e-12):
        e *= ratio
        T += 1
    return T


_OFF_STEPS_NEEDED = ("lib.linalg.power.steps_needed",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_steps_needed(fn: Callable[[float, float], Any], verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(ratio, tol) -> int``: the fewest steps ``T`` with ``ratio^T ≤ tol`` (``0 < ratio < 1``).

    The reference counts by brute force. Two cases have ``tol`` an exact power of ``ratio``
    (``0.5^10`` in binary, ``0.1^10`` in decimal): there ``T`` is that power, which a ``while e >= tol``
    loop overshoots by one, and so does ``ceil(log(tol)/log(ratio))`` when the quotient rounds to
    ``10.000000000000002``. One has ``tol > 1``: ``T = 0``, where that quotient is negative.
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
            if got < 0:
                raise Wrong(f"got {got}: T counts layers, T ≥ 0; here ratio⁰ = 1 ≤ tol already, so T = 0 "
                            "(log(tol)/log(ratio) is negative when tol > 1: take max(0, …))")
            if got == want - 1:
                raise Wrong(f"got {got}, expected {want}: ratio^{got} = {ratio**got:.3g} is still > tol; round up")
            raise Wrong(f"got {got}, expected {want}: the fewest T with ratio^T ≤ tol")
        return run

    grid = [(0.5, 1e-3), (0.9, 1e-6), (0.99, 1e-3), (0.1, 0.5), (0.5, 0.5**10), (0.1, 1e-10), (0.5, 2.0)]
    names = {(0.5, 0.5**10): "ratio = 0.5, tol = 0.5^10 (an exact power)",
             (0.1, 1e-10): "ratio = 0.1, tol = 1e-10 (an exact power)",
             (0.5, 2.0): "ratio = 0.5, tol = 2 (reached before any layer: T = 0)"}
    return run_cases("check_steps_needed", fn, [
        Case(names.get((r, t), f"ratio = {r}, tol = {t:g}"), case(r, t)) for r, t in grid
    ], verbose, time_limit, off=_OFF_STEPS_NEEDED)


def check_bipartite_condition(fn: Callable[[float, int, int], Any], verbose: bool = True,
                              time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(c, n_plus, n_minus) -> bool``: is the bipartite state ``x_j = r s_j v₁`` a fixed point?

    The truth is measured by running one step of the single-head simulator from the bipartite state
    with a head whose bipartite score equals ``c`` (chapter 2, section 2.5). The grid has cases with
    ``n₋ > n₊`` (the condition is symmetric in the groups) and with ``e^c < n₊/n₋ < e^{2c}``.
    """
    def simulated(c: float, n_plus: int, n_minus: int) -> bool:
        return _bipartite_is_fixed(c, [1] * n_plus + [-1] * n_minus, causal=False)

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
            want = dynamics.consensus_jacobian_radius(w, V[:, k].real, n)
            got = as_float(call(fn, lams.copy(), k), "the radius")
            if abs(got - want) < 1e-6 * max(1.0, want):
                return
            others = np.delete(lams, k)
            if abs(got - 1.0) < 1e-9:
                why = "λₖ itself is not a direction the layer can turn to: leave it out (|λₖ|/|λₖ| = 1)"
            elif abs(got - float(np.max(others.real)) / float(lams[k].real)) < 1e-9:
                why = "take moduli: a negative eigenvalue counts by |λ|"
            elif abs(got - abs(lams[1] / lams[0])) < 1e-9:
                why = f"that is the gap ratio |λ₂/λ₁|; at consensus on v{subscript(k + 1)} divide by |λ{subscript(k + 1)}|"
            else:
                why = "the largest |λⱼ|, j ≠ k, over |λₖ|"
            raise Wrong(f"got {got:.6g}, the Jacobian's spectral radius is {want:.6g}: {why}")
        return run

    return run_cases("check_linearization_radius", fn, [
        Case(f"consensus on v{subscript(k + 1)}", case(k)) for k in range(3)
    ], verbose, time_limit)


def _bipartite_is_fixed(c: float, signs: list[int], *, causal: bool) -> bool:
    """Whether one step of the single-head simulator leaves the bipartite state ``x_j = r s_j v₁`` where it is,
    for the checkers' toy and a head whose bipartite score is ``c``."""
    F = toys.toy_matrix("real", _BIP_D, gap=0.5, seed=_BIP_SEED)
    v1 = spectra.principal(F).vector
    c_unit = float(toys.bipartite_scores(toys.weights_from_matrix(F, 1, qk="aligned", seed=_BIP_SEED), v1)[0])
    w = toys.weights_from_matrix(F, 1, qk="aligned", seed=_BIP_SEED, qk_gain=math.sqrt(c / c_unit), causal=causal)
    X0 = toys.bipartite_state(v1, signs)
    return bool(np.allclose(dynamics.layer_step(w, X0).numpy(), X0, atol=1e-9))


def _prefix_counts(signs: list[int]) -> list[tuple[int, int]]:
    """For each position i: (tokens j ≤ i of i's group, itself included; tokens j ≤ i of the other group)."""
    out = []
    for i, s in enumerate(signs):
        same = sum(1 for x in signs[: i + 1] if x == s)
        out.append((same, i + 1 - same))
    return out


def check_causal_bipartite(fn: Callable[[float, list[int]], Any], verbose: bool = True,
                           time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(c, signs) -> bool``: is the bipartite state ``x_j = r s_j v₁`` a fixed point of one layer with a
    single head of bipartite score ``c > 0`` and a causal mask (token i attends to tokens 1..i, itself included)?

    ``signs`` is a list of ``+1``/``-1`` in position order; ``λ₁ > 0``. The truth is one step of the simulator
    with the causal mask. The cases have orders for which the group totals of the unmasked proposition
    mislead in both directions, a critical prefix between ``e^c`` and ``e^{2c}``, and a token whose own
    weight decides. Rejected by name: the unmasked condition on the totals; ``e^c`` for ``e^{2c}``; leaving
    the token itself out of its group; a result that is not a ``bool``.
    """
    def expected(c: float, signs: list[int]) -> bool:
        return _bipartite_is_fixed(c, signs, causal=True)

    def rule(c: float, signs: list[int], *, gain: float, self_in: bool) -> bool:
        return all(gain * (same if self_in else same - 1) > opp for same, opp in _prefix_counts(signs))

    def unmasked(c: float, signs: list[int]) -> bool:
        n_plus, n_minus = signs.count(1), signs.count(-1)
        return math.exp(2 * c) > max(n_plus / n_minus, n_minus / n_plus)

    def case(c: float, signs: list[int]) -> Callable[[], None]:
        def run() -> None:
            got = as_bool(call(fn, c, list(signs)), "the answer")
            want = expected(c, signs)
            if got == want:
                return
            where = next(((i, same, opp) for i, (same, opp) in enumerate(_prefix_counts(signs))
                          if not math.exp(2 * c) * same > opp), None)
            if got == unmasked(c, signs):
                why = ("with a causal mask token i sees only tokens 1..i: the condition must hold for every "
                       "token's own prefix, not for the group totals")
            elif got == rule(c, signs, gain=math.exp(c), self_in=True):
                why = f"the threshold is e^(2c) = {math.exp(2 * c):.3g} times the same-group count, not e^c"
            elif got == rule(c, signs, gain=math.exp(2 * c), self_in=False):
                why = "token i attends to itself too: count it in its own group"
            elif where is not None:
                i, same, opp = where
                why = (f"token {i + 1} sees {same} of its own group (itself included) and {opp} of the other: "
                       f"e^(2c)·{same} = {math.exp(2 * c) * same:.3g} is not above {opp}, so it flips")
            else:
                why = "every token's prefix passes: the state is a fixed point"
            raise Wrong(f"you said {got}, the simulator says {want}: {why}")
        return run

    grid = [
        (0.5, [1, 1] + [-1] * 8, "2 + 8 tokens, the pair first: fixed although e^(2c) < n₋/n₊"),
        (0.3, [1, 1, 1, 1] + [-1] * 5 + [1], "5 + 5 tokens, a late minority flips although the totals tie"),
        (0.45, [1, 1, -1, -1, -1], "a prefix ratio between e^c and e^(2c)"),
        (0.2, [1, -1, 1, -1, 1, -1], "alternating signs, c = 0.2"),
        (0.4, [1, 1, 1, -1], "one late token against three, c = 0.4"),
        (0.6, [1, 1, 1, -1], "one late token against three, c = 0.6"),
        (0.3, [-1, 1, 1, 1], "the minority first"),
        (0.3, [1, -1, -1, -1, -1, 1], "a group's first token holds, its last flips"),
    ]
    return run_cases("check_causal_bipartite", fn, [
        Case(f"c = {c}: {name}", case(c, signs)) for c, signs, name in grid
    ], verbose, time_limit)


_OFF_RESIDUAL_RADIUS = ("lib.theory.dynamics.consensus_jacobian_radius",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_residual_radius(fn: Callable[[np.ndarray, int], Any], verbose: bool = True,
                          time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(eigvals, k) -> float``: the spectral radius of the one-layer Jacobian at consensus on
    ``v_{k+1}`` for the layer *with* a residual connection, ``x_i ← N_r(x_i + F Σ_j A_ij x_j)``.

    ``eigvals`` are the real eigenvalues of ``F`` sorted by modulus (descending; some negative, one below
    −1), ``k`` is 0-based; the truth is the spectral radius of the autograd Jacobian of a 2-head softmax layer
    with the residual at ``x_i = r v_{k+1}`` (n = 3 tokens), to a relative ``1e-6``. Rejected by name: the
    proposition's radius without the residual; leaving out the 1 that the differences between tokens keep;
    no moduli; ``λ_k`` itself not left out; the runner-up taken as ``λ₁`` or ``λ₂`` instead of the largest
    ``|1 + λ_j|``.
    """
    d, n = 8, 3
    spectra_ = {
        "a": [1.0, -0.7, 0.5, 0.3, -0.2, 0.1, 0.05, 0.0],
        "b": [1.0, -0.9, -0.7, -0.6, -0.5, -0.4, -0.3, -0.2],
        "c": [2.0, -1.5, 0.9, -0.6, 0.4, 0.3, -0.2, 0.1],
    }

    def case(name: str, k: int) -> Callable[[], None]:
        def run() -> None:
            F = toys.matrix_with_spectrum(spectra_[name], seed=5, cond=2.0)
            lams, V = spectra.eig(F)
            w = toys.weights_from_matrix(F, 2, seed=5, qk_gain=1.5)
            want = dynamics.consensus_jacobian_radius(w, V[:, k].real, n, residual=True)
            got = as_float(call(fn, lams.real.copy(), k), "the radius")
            if abs(got - want) < 1e-6 * max(1.0, want):
                return
            lam = lams.real
            others = np.delete(lam, k)
            shifted = np.abs(1 + others)
            guesses = [
                (np.abs(others).max() / abs(lam[k]), "that is the radius without the residual (the proposition's "
                 "max |λⱼ| / |λₖ|); with xᵢ + F Σⱼ Aᵢⱼ xⱼ the eigenvalues are shifted by 1"),
                (shifted.max() / abs(1 + lam[k]), "you left out the differences between tokens: the residual keeps "
                 "them (the identity acts on them, eigenvalue 1), so the radius is at least 1/|1 + λₖ|"),
                (max(1.0, (1 + others).max()) / (1 + lam[k]), "take moduli: |1 + λ| for every eigenvalue"),
                (max(1.0, np.abs(1 + lam).max()) / abs(1 + lam[k]),
                 "leave λₖ itself out: its own direction is the consensus, not a perturbation"),
                (max(1.0, abs(1 + lam[1 if k == 0 else 0])) / abs(1 + lam[k]),
                 "the largest |1 + λⱼ| need not belong to λ₁ or λ₂: take the maximum over all j ≠ k"),
            ]
            why = next((text for value, text in guesses if abs(got - value) < 1e-9 * max(1.0, abs(value))),
                       "max(1, max_{j≠k} |1 + λⱼ|) / |1 + λₖ| is what the Jacobian gives")
            raise Wrong(f"got {got:.6g}, the Jacobian's spectral radius is {want:.6g}: {why}")
        return run

    cases = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0), ("c", 1)]
    return run_cases("check_residual_radius", fn, [
        Case(f"spectrum {name}, consensus on v{subscript(k + 1)}", case(name, k)) for name, k in cases
    ], verbose, time_limit, off=_OFF_RESIDUAL_RADIUS)
