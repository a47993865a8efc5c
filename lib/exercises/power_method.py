"""Checkers of chapter 1's exercises: the power method, the multi-head sum, the residual's rates.

References are computed independently of the formula the student writes wherever possible: the
library's power method (:func:`lib.linalg.power.power_method`), ``O @ V`` for the head sum, LAPACK eigenvalues
of the built matrices ``F`` and ``I + F`` and a simulated residual run for the rates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lib.exercises.runner import (
    DEFAULT_TIME_LIMIT,
    Case,
    Wrong,
    as_array,
    as_float,
    as_pair,
    call,
    run_cases,
    subscript,
)
from lib.linalg import power, spectra
from lib.theory import toys

__all__ = ["check_head_sum", "check_power_method", "check_residual_rates"]


_OFF_POWER_METHOD = ("lib.linalg.power.power_method",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_power_method(fn: Callable[[np.ndarray, np.ndarray, int], Any], verbose: bool = True,
                       time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(F, x0, steps) -> x_T``: the power method's iterate after ``steps`` steps, unit norm.

    ``F`` is ``(d, d)`` float64 (column convention: one step is ``x ← F x / ‖F x‖``), ``x0`` is ``(d,)``
    and must not be modified. Rejected by name: the row convention ``x @ F``; a wrong number of steps;
    a forced sign (for ``λ₁ < 0`` the iterate alternates, checked at an odd and an even step);
    normalising only at the end (``1e3·F`` over 200 steps overflows, ``1e-3·F`` underflows).
    """
    rng = np.random.default_rng(2024)
    d = 20
    F_pos = toys.toy_matrix("real", d, gap=0.6, seed=11)
    F_neg = toys.toy_matrix("negative", d, gap=0.6, seed=12)
    x0 = rng.standard_normal(d)

    def out(F: np.ndarray, T: int, finite: bool = True) -> np.ndarray:
        return as_array(call(fn, F.copy(), x0.copy(), T), (d,), "x_T", finite=finite)

    def reference(F: np.ndarray, T: int) -> np.ndarray:
        return power.power_method(F, x0, T)[-1]

    def close(a: np.ndarray, b: np.ndarray) -> bool:
        return bool(np.abs(a - b).max() < 1e-8)

    def unit() -> None:
        n = float(np.linalg.norm(out(F_pos, 5)))
        if abs(n - 1) > 1e-8:
            raise Wrong(f"‖x_T‖ = {n:.6g}; return a unit vector (divide by the norm)")

    def zero_steps() -> None:
        if not close(out(F_pos, 0), x0 / np.linalg.norm(x0)):
            raise Wrong("with steps = 0, return x0 / ‖x0‖ (F is applied `steps` times, here none)")

    def matches(F: np.ndarray, T: int) -> Callable[[], None]:
        def run() -> None:
            got, want = out(F, T), reference(F, T)
            if close(got, want):
                return
            if close(got, -want):
                if F is F_neg:
                    raise Wrong(f"the sign is wrong at step {T}: for λ₁ < 0 the iterate F x/‖F x‖ flips sign at "
                                "every step; do not force a sign (e.g. making the first or the largest entry positive)")
                raise Wrong("the sign is flipped: do not change the sign of the iterate")
            if close(got, reference(F.T, T)) or close(got, -reference(F.T, T)):
                raise Wrong("you iterated x @ F (row convention); one step is F @ x (column vectors, y = F x)")
            for k in (T - 1, T + 1):
                if k >= 0 and (close(got, reference(F, k)) or close(got, -reference(F, k))):
                    raise Wrong(f"that is the iterate after {k} steps, not {T}: apply F exactly `steps` times")
            raise Wrong(f"max |x_T − reference| = {np.abs(got - want).max():.2e}")
        return run

    def scaled(scale: float, T: int) -> Callable[[], None]:
        def run() -> None:
            got = out(scale * F_pos, T, finite=False)
            if not np.all(np.isfinite(got)):
                flow = "overflows" if scale > 1 else "underflows to 0"
                raise Wrong(f"x_T has NaN or infinite entries: ({scale:g}·F)^{T} x0 {flow} before you normalise; "
                            "divide by the norm at every step, not only at the end")
            if not close(got, reference(scale * F_pos, T)):
                raise Wrong(f"max |x_T − reference| = {np.abs(got - reference(scale * F_pos, T)).max():.2e}")
        return run

    def converges() -> None:
        v1 = spectra.principal(F_pos).vector
        a = float(spectra.alignment(out(F_pos, 60), v1))
        if a < 1 - 1e-10:
            raise Wrong(f"|cos(x_60, v₁)| = {a:.10f}, expected > 1 − 1e-10")

    def pure() -> None:
        x = x0.copy()
        call(fn, F_pos.copy(), x, 3)
        if not np.array_equal(x, x0):
            raise Wrong("your function modified x0 in place (e.g. x0 /= ...); work on a copy: x = x0 / ‖x0‖")

    return run_cases("check_power_method", fn, [
        Case("returns a unit vector", unit),
        Case("steps = 0 gives the normalized start", zero_steps),
        Case("matches the reference after 7 steps (λ₁ > 0)", matches(F_pos, 7)),
        Case("λ₁ < 0, odd step (7): the sign alternates", matches(F_neg, 7)),
        Case("λ₁ < 0, even step (8): the sign alternates", matches(F_neg, 8)),
        Case("1e3·F, 200 steps: no overflow", scaled(1e3, 200)),
        Case("1e-3·F, 200 steps: no underflow", scaled(1e-3, 200)),
        Case("converges to v₁", converges),
        Case("leaves x0 unchanged", pure),
    ], verbose, time_limit, off=_OFF_POWER_METHOD)


class _HeadGuard(np.ndarray):
    """``O`` or ``V`` as handed to the student: records matrix products that contract over more than one
    head's width at once (``O @ V``, ``np.matmul``, ``np.dot``, ``.dot``). Slices stay guarded."""

    def __array_finalize__(self, obj: Any) -> None:
        self.head_width = getattr(obj, "head_width", None)
        self.log = getattr(obj, "log", None)

    def _note(self, a: Any) -> None:
        width = np.shape(a)[-1] if np.ndim(a) >= 1 else 0
        if self.head_width is not None and width > self.head_width:
            self.log.append(width)

    def _check(self, inputs: Sequence[Any]) -> None:
        for guard in (x for x in inputs if isinstance(x, _HeadGuard)):
            guard._note(inputs[0])
            return

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc is np.matmul:
            self._check(inputs)
        plain = [np.asarray(x) if isinstance(x, _HeadGuard) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if isinstance(x, _HeadGuard) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in (np.dot, np.matmul) and len(args) >= 2:
            self._check(args)
        elif func is np.einsum or func is np.tensordot:
            width = _contracted_width(func, args, kwargs)
            if self.head_width is not None and width > self.head_width:
                self.log.append(width)
        return super().__array_function__(func, types, args, kwargs)

    def dot(self, b: Any, out: Any = None) -> Any:  # type: ignore[override]
        self._note(self)
        return np.dot(np.asarray(self), np.asarray(b), out=out)


def _contracted_width(func: Any, args: Any, kwargs: Any) -> int:
    """The largest axis that ``np.einsum`` or ``np.tensordot`` sums over (0 if it cannot tell)."""
    if func is np.tensordot:
        a, axes = args[0], kwargs.get("axes", args[2] if len(args) > 2 else 2)
        dims = range(np.ndim(a) - axes, np.ndim(a)) if isinstance(axes, int) else np.atleast_1d(axes[0])
        return max((np.shape(a)[i] for i in dims), default=0)
    spec, operands = args[0], args[1:]
    if not isinstance(spec, str) or "." in spec:
        return 0
    inputs, _, output = spec.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if "->" not in spec:
        letters = "".join(terms)
        output = "".join(c for c in sorted(set(letters)) if letters.count(c) == 1)
    sizes = {c: n for term, op in zip(terms, operands) for c, n in zip(term, np.shape(op))}
    return max((n for c, n in sizes.items() if c not in output), default=0)


def _guarded(A: np.ndarray, head_width: int, log: list[int]) -> _HeadGuard:
    g = A.copy().view(_HeadGuard)
    g.head_width, g.log = head_width, log
    return g


def check_head_sum(fn: Callable[[np.ndarray, np.ndarray, int], Any], verbose: bool = True,
                   time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(O, V, n_heads) -> Σ_h O_h V_h`` computed head by head, without ``O @ V``.

    ``V`` is ``(H·d_h, d)`` (head h owns rows ``[h·d_h, (h+1)·d_h)``), ``O`` is ``(d, H·d_h)`` (head h owns
    the same columns). The answer must equal ``O @ V``, including when ``H·d_h ≠ d``, but computed as a
    sum of per-head products: the arrays passed in record any product over all ``H·d_h`` columns at once
    (``@``, ``np.dot``, ``np.matmul``, ``.dot``, ``np.einsum``, ``np.tensordot``). Named: ``d // n_heads`` as
    the head width, the first or the last head left out, head 0's slice used for every head.
    """
    rng = np.random.default_rng(7)

    def case(d: int, H: int, dh: int) -> Callable[[], None]:
        def run() -> None:
            O, V = rng.standard_normal((d, H * dh)), rng.standard_normal((H * dh, d))
            log: list[int] = []
            got = as_array(call(fn, _guarded(O, dh, log), _guarded(V, dh, log), H), (d, d), "the head sum")
            if log:
                raise Wrong(f"you multiplied over all H·dₕ = {log[0]} columns at once (O @ V), or an einsum or "
                            f"tensordot over them; the exercise asks for the sum over heads of Oₕ Vₕ, each a "
                            f"({d} × {dh})·({dh} × {d}) product")
            want = O @ V
            err = np.abs(got - want).max() / np.abs(want).max()
            if err <= 1e-12:
                return

            def heads(width: int, which: range) -> np.ndarray:
                return sum((O[:, h * width:(h + 1) * width] @ V[h * width:(h + 1) * width] for h in which),
                           np.zeros((d, d)))

            def near(M: np.ndarray) -> bool:
                return bool(np.abs(got - M).max() <= 1e-12 * np.abs(want).max())

            hint = "head h owns columns [h·dₕ, (h+1)·dₕ) of O and the same rows of V"
            if H > 1 and d // H != dh and near(heads(d // H, range(H))):
                hint = f"dₕ = V.shape[0] // n_heads = {dh} (not d // n_heads = {d // H}: here H·dₕ ≠ d)"
            elif H > 1 and near(heads(dh, range(H - 1))):
                hint = f"the last head is missing: sum over all {H} heads, range(n_heads)"
            elif H > 1 and near(heads(dh, range(1, H))):
                hint = f"the first head (h = 0) is missing: sum over all {H} heads, range(n_heads)"
            elif H > 1 and near(O[:, :dh] @ V[:dh] * H):
                hint = "every term is head 0's: slice with h, O[:, h·dₕ:(h+1)·dₕ] and V[h·dₕ:(h+1)·dₕ]"
            raise Wrong(f"relative error {err:.2e}: {hint}")
        return run

    return run_cases("check_head_sum", fn, [
        Case("d = 8, 2 heads of width 4", case(8, 2, 4)),
        Case("d = 12, 4 heads of width 3", case(12, 4, 3)),
        Case("d = 6, 4 heads of width 2 (H·dₕ ≠ d)", case(6, 4, 2)),
        Case("d = 5, 1 head of width 5", case(5, 1, 5)),
    ], verbose, time_limit)


def _moduli_desc(M: np.ndarray) -> np.ndarray:
    return np.sort(np.abs(np.linalg.eigvals(M)))[::-1]


_OFF_RESIDUAL_RATES = ("lib.linalg.spectra.gap_ratio",)
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def check_residual_rates(fn: Callable[[np.ndarray], Any], spectrum: Sequence[float], verbose: bool = True,
                         time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check exercise 1.3: ``fn(eigvals) -> (plain, residual)`` and the student's example ``spectrum``.

    ``eigvals`` is a real ``(d,)`` float64 array sorted by modulus, descending; ``plain`` is the power
    method's rate toward ``v₁`` (``x ← F x``), ``residual`` the rate of ``x ← (I + F) x``, each the ratio of
    the second-largest to the largest modulus of the iteration matrix's eigenvalues. References: LAPACK
    eigenvalues of the built ``F`` and ``I + F``. ``spectrum`` (real numbers) must make the residual run
    converge to ``v₁`` (checked by simulating it) and more slowly than the plain one. Named: ``λ₂`` taken as the
    runner-up of ``|1 + λ|``, ``λ₁`` as its winner, and ``1 + λ`` sorted without its modulus (the case
    ``λ = (−3, 2, 0.5)``, where ``1 + λ₁ = −2``).
    """
    def rates_of(eigs: Sequence[float]) -> tuple[np.ndarray, float, float]:
        F = toys.matrix_with_spectrum(list(eigs), seed=4, cond=2.0)
        m, mr = _moduli_desc(F), _moduli_desc(np.eye(len(F)) + F)
        return F, float(m[1] / m[0]), float(mr[1] / mr[0])

    def student_rates(lams: np.ndarray) -> tuple[float, float]:
        plain, res = as_pair(call(fn, lams.copy()), "the result")
        return as_float(plain, "the plain rate"), as_float(res, "the residual rate")

    def compare(eigs: list[float]) -> Callable[[], None]:
        def run() -> None:
            lams = np.array(sorted(eigs, key=abs, reverse=True), dtype=np.float64)
            (p, r), (_, P, R) = student_rates(lams), rates_of(eigs)
            if abs(p - P) > 1e-8:
                raise Wrong(f"plain rate {p:.6g}, expected |λ₂|/|λ₁| = {P:.6g}")
            if abs(r - R) > 1e-8:
                signed = np.sort(1 + lams)[::-1]
                shifted = np.abs(1 + lams)
                if abs(r - signed[1] / signed[0]) < 1e-8:
                    raise Wrong(f"residual rate {r:.6g}, expected {R:.6g}: take the modulus |1 + λ| before sorting: "
                                f"here 1 + λ₁ = {1 + lams[0]:g} has modulus {abs(1 + lams[0]):g}")
                if abs(r - shifted[1:].max() / shifted[0]) < 1e-8:
                    raise Wrong(f"residual rate {r:.6g}, expected {R:.6g}: with I + F the largest |1 + λ| need not be "
                                f"λ₁'s: here |1 + λ₁| = {shifted[0]:g} and the largest is {shifted.max():g}; "
                                "sort the |1 + λ| again")
                if abs(r - abs(1 + lams[1]) / abs(1 + lams[0])) < 1e-8:
                    j = int(np.argsort(-np.abs(1 + lams))[1])
                    raise Wrong(f"residual rate {r:.6g}, expected {R:.6g}: with I + F the runner-up need not be λ₂: "
                                f"here |1 + λ{subscript(j + 1)}| = {abs(1 + lams[j]):g} beats |1 + λ₂| = {abs(1 + lams[1]):g}; "
                                "sort the |1 + λ| again")
                raise Wrong(f"residual rate {r:.6g}, expected {R:.6g}: the rate of I + F is the second-largest "
                            "|1 + λ| over the largest")
        return run

    def yours() -> None:
        try:
            eigs = [float(x) for x in np.asarray(spectrum, dtype=np.float64).ravel()]
        except (TypeError, ValueError):
            raise Wrong(f"my_spectrum should be a list of real numbers, got {type(spectrum).__name__}") from None
        if not 2 <= len(eigs) <= 64 or not all(map(math.isfinite, eigs)):
            raise Wrong(f"my_spectrum should hold 2 to 64 finite real numbers, got {len(eigs)}")
        lams = np.array(sorted(eigs, key=abs, reverse=True))
        shifted = np.sort(np.abs(1 + lams))[::-1]
        if abs(lams[0]) - abs(lams[1]) < 1e-6:
            raise Wrong(f"|λ₁| = |λ₂| = {abs(lams[0]):g}: the plain power method needs a strictly dominant λ₁")
        if shifted[0] - shifted[1] < 1e-6 * shifted[0]:
            raise Wrong("two eigenvalues tie for the largest |1 + λ|: the residual run converges to no single vector")
        F, P, R = rates_of(eigs)
        v1 = spectra.principal(F).vector
        x0 = np.random.default_rng(1).standard_normal(len(F))
        steps = min(5000, math.ceil(math.log(1e-9) / math.log(R)) + 20)
        reached = float(spectra.alignment(power.power_method(np.eye(len(F)) + F, x0, steps)[-1], v1))
        if reached < 1 - 1e-6:
            k = int(np.argmax(np.abs(1 + lams))) + 1
            raise Wrong(f"with I + F the run converges to v{subscript(k)}, not v₁ (|cos(x, v₁)| = {reached:.3f} after {steps} "
                        f"steps): |1 + λ| is largest for λ{subscript(k)} = {lams[k - 1]:g}")
        if R <= P:
            raise Wrong(f"here the residual run is not slower: rate {R:.4g} with I + F against {P:.4g} without")
        p, r = student_rates(lams)
        if abs(p - P) > 1e-8 or abs(r - R) > 1e-8:
            raise Wrong(f"for your spectrum the rates are {P:.6g} (plain) and {R:.6g} (residual); "
                        f"your function gives {p:.6g} and {r:.6g}")

    return run_cases("check_residual_rates", fn, [
        Case("λ = (1, 0.5, 0.2)", compare([1.0, 0.5, 0.2])),
        Case("λ = (1, −0.9, 0.5): with I + F the runner-up is not λ₂", compare([1.0, -0.9, 0.5])),
        Case("λ = (2, −1.5, 0.3): the residual run is faster here", compare([2.0, -1.5, 0.3])),
        Case("λ = (−3, 2, 0.5): 1 + λ₁ < 0, and |1 + λ₂| is the largest", compare([-3.0, 2.0, 0.5])),
        Case("your spectrum: the residual run converges to v₁, more slowly, at your rates", yours),
    ], verbose, time_limit, off=_OFF_RESIDUAL_RATES)
