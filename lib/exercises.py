"""Auto-checkers for the exercises of chapters 1 and 2.

Each ``check_*`` function takes the student's own function, runs it on a few cases whose answers
are computed here *independently* (by the simulator, LAPACK or autograd, not by the formula the
student is asked to implement, wherever possible), prints one line per case (✓ or ✗ with a hint)
and returns ``True`` if every case passed. A student function that raises ``NotImplementedError``
(the template's placeholder) is reported as "not implemented yet", never as a crash.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lib import dynamics, spectra, toys

__all__ = [
    "check_bipartite_condition",
    "check_head_sum",
    "check_linearization_radius",
    "check_power_method",
    "check_steps_needed",
]

Case = tuple[str, Callable[[], tuple[bool, str]]]


def _run_checks(title: str, cases: list[Case], verbose: bool = True) -> bool:
    """Run every case, print ✓/✗ lines and a summary; a raising case counts as failed."""
    lines, passed = [], 0
    for name, case in cases:
        try:
            ok, detail = case()
        except NotImplementedError:
            ok, detail = False, "not implemented yet (your function raised NotImplementedError)"
        except Exception as exc:  # noqa: BLE001 - any student error becomes feedback
            ok, detail = False, f"raised {type(exc).__name__}: {exc}"
        passed += ok
        lines.append(f"  {'✓' if ok else '✗'} {name}" + ("" if ok else f": {detail}"))
    if verbose:
        print(f"{title}: {passed}/{len(cases)} checks passed")
        print("\n".join(lines))
        if passed == len(cases):
            print("  All good.")
    return passed == len(cases)


def _reference_power(F: np.ndarray, x0: np.ndarray, steps: int) -> np.ndarray:
    x = x0 / np.linalg.norm(x0)
    for _ in range(steps):
        x = F @ x
        x = x / np.linalg.norm(x)
    return x


def check_power_method(fn: Callable[[np.ndarray, np.ndarray, int], Any], verbose: bool = True) -> bool:
    """Check ``fn(F, x0, steps) -> x_T``: the power method's iterate after ``steps`` steps, unit norm.

    ``F`` is ``(d, d)`` float64 (column convention, one step is ``x ← F x / ‖F x‖``), ``x0`` is ``(d,)``.
    The sign matters: for a negative ``λ₁`` the iterate alternates, and ``x_T`` must have the right sign.
    """
    rng = np.random.default_rng(2024)
    F_pos = toys.toy_matrix("real", 20, gap=0.6, seed=11)
    F_neg = toys.toy_matrix("negative", 20, gap=0.6, seed=12)
    x0 = rng.standard_normal(20)

    def out(F, x, T):
        got = np.asarray(fn(F, x.copy(), T), dtype=np.float64)
        if got.shape != (F.shape[0],):
            raise ValueError(f"expected a vector of shape ({F.shape[0]},), got shape {got.shape}")
        return got

    def unit():
        n = np.linalg.norm(out(F_pos, x0, 5))
        return abs(n - 1) < 1e-8, f"‖x_T‖ = {n:.6g}; divide by the norm at every step"

    def zero_steps():
        got = out(F_pos, x0, 0)
        return np.allclose(got, x0 / np.linalg.norm(x0), atol=1e-10), "with steps = 0, return x0 / ‖x0‖"

    def matches(F, T):
        def case():
            got, want = out(F, x0, T), _reference_power(F, x0, T)
            err = np.abs(got - want).max()
            hint = "sign differs: use F @ x (column convention), not x @ F, and do not flip signs" if np.allclose(got, -want, atol=1e-8) else "apply F exactly `steps` times"
            return err < 1e-8, f"max |x_T − reference| = {err:.2e}; {hint}"
        return case

    def converges():
        v1 = spectra.principal(F_pos).vector
        a = float(spectra.alignment(out(F_pos, x0, 60), v1))
        return a > 1 - 1e-10, f"alignment with v₁ after 60 steps is {a:.8f}, expected > 1 − 1e-10"

    def pure():
        x = x0.copy()
        fn(F_pos, x, 3)
        return np.array_equal(x, x0), "your function modified x0 in place; work on a copy"

    return _run_checks("check_power_method", [
        ("returns a unit vector", unit),
        ("steps = 0 gives the normalized start", zero_steps),
        ("matches the reference after 7 steps (λ₁ > 0)", matches(F_pos, 7)),
        ("matches the reference after 7 steps (λ₁ < 0, the sign alternates)", matches(F_neg, 7)),
        ("converges to v₁", converges),
        ("leaves x0 unchanged", pure),
    ], verbose)


def check_head_sum(fn: Callable[[np.ndarray, np.ndarray, int], Any], verbose: bool = True) -> bool:
    """Check ``fn(O, V, n_heads) -> Σ_h O_h V_h`` computed head by head.

    ``V`` is ``(H·d_h, d)`` (head h owns rows ``[h·d_h, (h+1)·d_h)``), ``O`` is ``(d, H·d_h)`` (head h owns
    the same columns). The answer must equal ``O @ V``, including when ``H·d_h ≠ d``.
    """
    rng = np.random.default_rng(7)

    def case(d, H, dh):
        def run():
            O, V = rng.standard_normal((d, H * dh)), rng.standard_normal((H * dh, d))
            got = np.asarray(fn(O, V, H), dtype=np.float64)
            want = O @ V
            if got.shape != want.shape:
                return False, f"expected shape {want.shape}, got {got.shape}"
            err = np.abs(got - want).max() / np.abs(want).max()
            return err < 1e-12, f"relative error {err:.2e}: O_h is a block of columns of O, V_h a block of rows of V"
        return run

    return _run_checks("check_head_sum", [
        ("d = 8, 2 heads of width 4", case(8, 2, 4)),
        ("d = 12, 4 heads of width 3", case(12, 4, 3)),
        ("d = 6, 4 heads of width 2 (H·d_h ≠ d)", case(6, 4, 2)),
        ("d = 5, 1 head of width 5", case(5, 1, 5)),
    ], verbose)


def check_steps_needed(fn: Callable[[float, float], Any], verbose: bool = True) -> bool:
    """Check ``fn(ratio, tol) -> int``: the fewest steps T with ``ratio^T ≤ tol``, measured by brute force."""

    def brute(ratio, tol):
        T, e = 0, 1.0
        while e > tol * (1 + 1e-12):
            e *= ratio
            T += 1
        return T

    def case(ratio, tol):
        def run():
            got, want = int(fn(ratio, tol)), brute(ratio, tol)
            return got == want, f"got {got}, expected {want}; solve ratio^T ≤ tol for T and round up"
        return run

    return _run_checks("check_steps_needed", [
        (f"ratio = {r}, tol = {tol}", case(r, tol)) for r, tol in [(0.5, 1e-3), (0.9, 1e-6), (0.99, 1e-3), (0.1, 0.5)]
    ], verbose)


def check_bipartite_condition(fn: Callable[[float, int, int], Any], verbose: bool = True) -> bool:
    """Check ``fn(c, n_plus, n_minus) -> bool``: is the bipartite state ``x_j = r s_j v₁`` a fixed point?

    The truth is measured by running one step of the single-head simulator from the bipartite state
    with a head whose bipartite score equals ``c`` (chapter 2, section 2.5).
    """
    F = toys.toy_matrix("real", 12, gap=0.5, seed=3)
    v1 = spectra.principal(F).vector
    c_unit = float(toys.bipartite_scores(toys.weights_from_matrix(F, 1, qk="aligned", seed=3), v1)[0])

    def simulated(c, n_plus, n_minus):
        w = toys.weights_from_matrix(F, 1, qk="aligned", seed=3, qk_gain=math.sqrt(c / c_unit))
        X0 = toys.bipartite_state(v1, [1] * n_plus + [-1] * n_minus)
        return bool(np.allclose(dynamics.layer_step(w, X0).numpy(), X0, atol=1e-9))

    def case(c, n_plus, n_minus):
        def run():
            got, want = bool(fn(c, n_plus, n_minus)), simulated(c, n_plus, n_minus)
            return got == want, f"you said {got}, the simulator says {want}; compare e^(2c) with the group-size ratio"
        return run

    grid = [(0.3, 5, 5), (0.3, 7, 3), (0.5, 7, 3), (0.2, 2, 8), (1.0, 2, 8), (0.6, 1, 9), (1.2, 1, 9)]
    return _run_checks("check_bipartite_condition", [(f"c = {c}, n₊ = {p}, n₋ = {m}", case(c, p, m)) for c, p, m in grid], verbose)


def check_linearization_radius(fn: Callable[[np.ndarray, int], Any], verbose: bool = True) -> bool:
    """Check ``fn(eigvals, k) -> float``: the spectral radius of the one-layer Jacobian at consensus on v_k.

    ``eigvals`` are the sorted eigenvalues of ``F`` (all real here); the truth is the spectral radius of
    the autograd Jacobian of a multi-head softmax layer at ``x_i = r v_k`` (n = 3 tokens).
    """
    d, n = 8, 3
    eigs = [1.0, -0.7, 0.5, 0.3, -0.2, 0.1, 0.05, 0.0]
    F = toys.matrix_with_spectrum(eigs, seed=5, cond=2.0)
    lams, V = spectra.eig(F)
    w = toys.weights_from_matrix(F, 2, seed=5, qk_gain=1.5)

    def case(k):
        def run():
            x = torch.tensor(np.tile(math.sqrt(d) * V[:, k].real, (n, 1)))
            J = torch.autograd.functional.jacobian(lambda X: dynamics.layer_step(w, X), x).reshape(n * d, n * d)
            want = float(np.abs(np.linalg.eigvals(J.numpy())).max())
            got = float(fn(lams.copy(), k))
            return abs(got - want) < 1e-6 * max(1.0, want), f"got {got:.6g}, the Jacobian's spectral radius is {want:.6g}"
        return run

    return _run_checks("check_linearization_radius", [(f"consensus on v_{k + 1}", case(k)) for k in range(3)], verbose)
