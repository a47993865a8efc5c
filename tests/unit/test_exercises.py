"""The exercise checkers (lib.exercises): one convention, right answers pass, plausible wrong answers fail.

Each wrong answer below is a plausible student mistake; the checker must return False *and* name the
mistake. The right answers are the chapters' own solutions, read from the book's Markdown (so a solution
that drifts from its checker fails here).
"""

from __future__ import annotations

import ast
import functools
import math
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from lib import exercises as ex
from lib.exercises import runner

BOOK = Path(__file__).resolve().parents[2] / "book"


@functools.cache
def solution(chapter: str, name: str) -> dict:
    """The names a chapter's solution defines (functions, imports, ``my_*`` values), executed.

    The solution is the first of the chapter's solution blocks (``tools.student.read_chapter``: the
    executed solution cells of a ``{solution-start}`` region, or a ``{solution}``'s code) that defines
    ``name``; other statements in it (the checker's ``assert``, prints) are left out.
    """
    from tools.student import read_chapter

    for sol in read_chapter(BOOK / chapter).solutions.values():
        for code in sol.code:
            if f"def {name}(" not in code:
                continue
            keep = [node for node in ast.parse(code).body
                    if isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom))
                    or (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.startswith("my_")
                                                             for t in node.targets))]
            namespace: dict = {"np": np, "math": math}
            exec(compile(ast.Module(body=keep, type_ignores=[]), str(BOOK / chapter), "exec"), namespace)
            return namespace
    raise AssertionError(f"{chapter} has no solution block defining {name}")


@pytest.fixture(autouse=True, scope="module")
def _solutions_read():
    """Read the solutions that the wrong answers below build on here, in the test process: a checker runs
    each case in a child process, where a first read (seconds) would count against the case's time limit."""
    solution("01_power_method.md", "my_power_method")
    solution("01_power_method.md", "my_rates")


def rejects(capsys, checker, fn, *more, message: str) -> str:
    """Assert that ``checker(fn, *more)`` returns False and prints ``message``; return the output."""
    capsys.readouterr()
    assert checker(fn, *more) is False
    out = capsys.readouterr().out
    assert message in out, out
    return out


# -- the chapters' own solutions pass ----------------------------------------------------------------------------------
SOLUTIONS = [
    ("01_power_method.md", "my_power_method", ex.check_power_method),
    ("01_power_method.md", "my_head_sum", ex.check_head_sum),
    ("02_shared_weights.md", "my_steps_needed", ex.check_steps_needed),
    ("02_shared_weights.md", "my_causal_bipartite", ex.check_causal_bipartite),
    ("02_shared_weights.md", "my_residual_radius", ex.check_residual_radius),
    ("03_real_models.md", "my_gamma_rho", ex.check_gamma_rho),
    ("04_jacobian_funnel.md", "my_erank", ex.check_effective_rank),
    ("04_jacobian_funnel.md", "my_schur_normal", ex.check_schur_normal),
    ("05_steering_lab.md", "my_w", ex.check_steering_w),
    ("06_two_views.md", "my_attention_path", ex.check_attention_path),
    ("06_two_views.md", "my_principal_angles", ex.check_principal_angles),
    ("06_two_views.md", "my_relative_update", ex.check_relative_update),
]


@pytest.mark.parametrize(("chapter", "name", "checker"), SOLUTIONS, ids=[s[1] for s in SOLUTIONS])
def test_the_chapters_solution_passes(chapter, name, checker, capsys):
    assert checker(solution(chapter, name)[name]) is True
    assert "All good." in capsys.readouterr().out


def test_exercise_1_3_solution_passes(capsys):
    ns = solution("01_power_method.md", "my_rates")
    assert ex.check_residual_rates(ns["my_rates"], ns["my_spectrum"]) is True


# -- chapter 1 ----------------------------------------------------------------------------------------------------------
def good_power(F, x0, steps):
    """The book's own solution of exercise 1.1 (read from the chapter), base of the wrong variants below."""
    return solution("01_power_method.md", "my_power_method")["my_power_method"](F, x0, steps)


def test_power_method_rejects_a_forced_sign(capsys):
    def largest_entry_positive(F, x0, steps):  # flips every step: right at one parity of a negative λ₁ only
        x = x0 / np.linalg.norm(x0)
        for _ in range(steps):
            x = F @ x
            x = x / np.linalg.norm(x)
            x = x if x[np.argmax(np.abs(x))] > 0 else -x
        return x

    def same_side_as_x0(F, x0, steps):
        x = good_power(F, x0, steps)
        return x if x @ x0 > 0 else -x

    for wrong in (largest_entry_positive, same_side_as_x0):
        out = rejects(capsys, ex.check_power_method, wrong, message="do not force a sign")
        odd, even = (line for line in out.splitlines() if "λ₁ < 0" in line)  # one of the two parities fails
        assert ("✗" in odd) != ("✗" in even)


def test_power_method_rejects_normalising_only_at_the_end(capsys):
    def at_the_end(F, x0, steps):
        x = x0.copy()
        for _ in range(steps):
            x = F @ x
        return x / np.linalg.norm(x)

    for wrong in (at_the_end, lambda F, x, T: np.linalg.matrix_power(F, T) @ x / np.linalg.norm(np.linalg.matrix_power(F, T) @ x)):
        out = rejects(capsys, ex.check_power_method, wrong, message="divide by the norm at every step, not only at the end")
        assert "✗ 1e3·F, 200 steps: no overflow" in out and "overflows" in out
        assert "✗ 1e-3·F, 200 steps: no underflow" in out
        assert "✓ matches the reference after 7 steps (λ₁ > 0)" in out  # only the scaled cases catch it


def test_power_method_names_row_convention_off_by_one_and_mutation(capsys):
    rejects(capsys, ex.check_power_method, lambda F, x, T: good_power(F.T, x, T), message="row convention")
    rejects(capsys, ex.check_power_method, lambda F, x, T: good_power(F, x, T + 1), message="iterate after 8 steps, not 7")

    def mutating(F, x, T):
        x /= np.linalg.norm(x)
        return good_power(F, x, T)

    rejects(capsys, ex.check_power_method, mutating, message="modified x0 in place")


def test_head_sum_rejects_O_at_V(capsys):
    for wrong in (lambda O, V, H: O @ V, lambda O, V, H: np.dot(O, V), lambda O, V, H: O.dot(V),
                  lambda O, V, H: np.matmul(O, V)):
        out = rejects(capsys, ex.check_head_sum, wrong, message="(O @ V)")
        assert "✓ d = 5, 1 head of width 5" in out  # one head: O @ V is the head sum

    def wrong_width(O, V, H):  # d_h from d instead of from V: right only when H·d_h = d
        dh = O.shape[0] // H
        return sum(O[:, h * dh:(h + 1) * dh] @ V[h * dh:(h + 1) * dh] for h in range(H))

    out = rejects(capsys, ex.check_head_sum, wrong_width, message="dₕ = V.shape[0] // n_heads")
    assert "✗ d = 6, 4 heads of width 2 (H·dₕ ≠ d)" in out


def right_rates(eigvals):
    """The book's own solution of exercise 1.3 (read from the chapter)."""
    return solution("01_power_method.md", "my_rates")["my_rates"](eigvals)


def test_residual_rates_rejects_lambda_2_in_both(capsys):
    def lambda_2_in_both(eigvals):
        return abs(eigvals[1] / eigvals[0]), abs(1 + eigvals[1]) / abs(1 + eigvals[0])

    out = rejects(capsys, ex.check_residual_rates, lambda_2_in_both, [1.0, 0.5, 0.2],
                  message="with I + F the runner-up need not be λ₂: here |1 + λ₃| = 1.5 beats |1 + λ₂| = 0.1")
    assert "✓ λ = (1, 0.5, 0.2)" in out and "✓ your spectrum" in out


def test_residual_rates_rejects_wrong_spectra(capsys):
    rejects(capsys, ex.check_residual_rates, right_rates, [2.0, -1.5, 0.3], message="here the residual run is not slower")
    rejects(capsys, ex.check_residual_rates, right_rates, [-1.0, 0.8, 0.3],
            message="with I + F the run converges to v₂, not v₁")
    rejects(capsys, ex.check_residual_rates, right_rates, [1.0, -1.0, 0.3], message="needs a strictly dominant λ₁")
    rejects(capsys, ex.check_residual_rates, right_rates, [], message="2 to 64 finite real numbers, got 0")


# -- chapter 2 ----------------------------------------------------------------------------------------------------------
def test_steps_needed_rejects_the_while_off_by_one(capsys):
    def while_ge(ratio, tol):
        T, e = 0, 1.0
        while e >= tol:
            e *= ratio
            T += 1
        return T

    out = rejects(capsys, ex.check_steps_needed, while_ge, message="`while e >= tol` stops one step late")
    assert "✗ ratio = 0.5, tol = 0.5^10 (an exact power)" in out
    assert "✓ ratio = 0.5, tol = 0.001" in out  # only the exact powers catch it


def test_steps_needed_rejects_ceil_without_slack_and_floats(capsys):
    out = rejects(capsys, ex.check_steps_needed, lambda r, tol: math.ceil(math.log(tol) / math.log(r)),
                  message="rounds 10.000000000000002 up to 11")
    assert "✗ ratio = 0.1, tol = 1e-10 (an exact power)" in out
    rejects(capsys, ex.check_steps_needed, lambda r, tol: math.floor(math.log(tol) / math.log(r)), message="round up")
    rejects(capsys, ex.check_steps_needed, lambda r, tol: np.ceil(np.log(tol) / np.log(r)), message="expected an int")


def test_bipartite_rejects_the_one_sided_ratio_and_e_to_the_c(capsys):
    rejects(capsys, ex.check_bipartite_condition, lambda c, p, m: math.exp(2 * c) > p / m,
            message="the larger group ratio counts")
    rejects(capsys, ex.check_bipartite_condition, lambda c, p, m: math.exp(c) > max(p / m, m / p),
            message="the threshold is e^(2c)")
    rejects(capsys, ex.check_bipartite_condition, lambda c, p, m: int(c > 0), message="should be True or False")


def test_linearization_radius_rejects_gap_ratio_and_signed_and_self(capsys):
    rejects(capsys, ex.check_linearization_radius, lambda lams, k: abs(lams[1] / lams[0]), message="gap ratio |λ₂/λ₁|")
    rejects(capsys, ex.check_linearization_radius, lambda lams, k: np.delete(lams, k).max() / lams[k],
            message="take moduli")
    rejects(capsys, ex.check_linearization_radius, lambda lams, k: np.abs(lams).max() / abs(lams[k]),
            message="leave it out")


# -- chapter 3 ----------------------------------------------------------------------------------------------------------
def test_gamma_rho_names_each_wrong_definition(capsys):
    def cosines(X, v, signed=False, normed=True):
        c = (X @ v) / (np.linalg.norm(X, axis=1) if normed else 1.0)
        return c if signed else np.abs(c)

    def signed(Xi, Xo, v):
        return cosines(Xo, v, signed=True).mean(), (cosines(Xo, v, signed=True) > cosines(Xi, v, signed=True)).mean()

    def dot(Xi, Xo, v):
        return cosines(Xo, v, normed=False).mean(), (cosines(Xo, v, normed=False) > cosines(Xi, v, normed=False)).mean()

    def non_strict(Xi, Xo, v):
        return cosines(Xo, v).mean(), (cosines(Xo, v) >= cosines(Xi, v)).mean()

    rejects(capsys, ex.check_gamma_rho, signed, message="take the absolute cosine")
    rejects(capsys, ex.check_gamma_rho, dot, message="divide by the token norms")
    out = rejects(capsys, ex.check_gamma_rho, non_strict, message="strictly increases (>, not ≥)")
    assert "✗ no change gives ρ = 0" in out
    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: cosines(Xo, v).mean(), message="should be a pair (a, b)")


# -- chapter 4 ----------------------------------------------------------------------------------------------------------
def _blocks(T):
    """Start and size of each diagonal block of a real Schur form (2 for a complex pair)."""
    out, i = [], 0
    while i < len(T):
        n = 2 if i + 1 < len(T) and T[i + 1, i] != 0 else 1
        out.append((i, n))
        i += n
    return out


def _normal_T(T, sign=1.0):
    """T_N: 1×1 blocks kept, each 2×2 block [[a, b], [c, a]] made [[a, s], [−s, a]], s = sign·sign(b)·sqrt(−bc)."""
    TN = np.zeros_like(T)
    for i, n in _blocks(T):
        if n == 1:
            TN[i, i] = T[i, i]
        else:
            a, b, c = (T[i, i] + T[i + 1, i + 1]) / 2, T[i, i + 1], T[i + 1, i]
            s = sign * np.sign(b) * np.sqrt(-b * c)
            TN[i:i + 2, i:i + 2] = [[a, s], [-s, a]]
    return TN


def schur_normal_naive(M):
    """The raw 2×2 Schur blocks kept: same eigenvalues, but not normal unless |b| = |c|."""
    T, Q = scipy.linalg.schur(M, output="real")
    kept = np.zeros_like(T)
    for i, n in _blocks(T):
        kept[i:i + n, i:i + n] = T[i:i + n, i:i + n]
    return Q @ kept @ Q.T


def test_naive_schur_control_keeps_the_spectrum_but_is_not_normal():
    from lib.linalg import nonnormal as nn

    rng = np.random.default_rng(0)
    M = np.eye(30) + rng.standard_normal((30, 30)) / np.sqrt(30)
    naive = schur_normal_naive(M)
    la, lb = np.sort_complex(np.linalg.eigvals(M)), np.sort_complex(np.linalg.eigvals(naive))
    assert np.max(np.abs(la - lb)) < 1e-10 * np.max(np.abs(la))
    assert nn.normality_residual(naive) > 1e-4


def test_schur_normal_rejects_each_wrong_control(capsys):
    def in_schur_basis(M):  # forgets to rotate back by Q
        return _normal_T(scipy.linalg.schur(M, output="real")[0])

    def from_eigenvalues(M):  # normal, same eigenvalues, but blocks in the standard basis
        lams = np.linalg.eigvals(M)
        return scipy.linalg.block_diag(*[np.array([[z.real, z.imag], [-z.imag, z.real]]) if z.imag > 0
                                         else np.array([[z.real]]) for z in lams if z.imag >= 0])

    def reversed_rotation(M):
        T, Q = scipy.linalg.schur(M, output="real")
        return Q @ _normal_T(T, sign=-1.0) @ Q.T

    rejects(capsys, ex.check_schur_normal, schur_normal_naive, message="did you keep the raw 2×2 Schur blocks?")
    rejects(capsys, ex.check_schur_normal, in_schur_basis, message="rotate back, N = Q T_N Qᵀ")
    rejects(capsys, ex.check_schur_normal, from_eigenvalues, message="built straight from the eigenvalues")
    rejects(capsys, ex.check_schur_normal, reversed_rotation, message="turns the wrong way")
    rejects(capsys, ex.check_schur_normal, lambda M: np.diag(np.linalg.eigvals(M)), message="is complex")


def test_effective_rank_names_each_wrong_form(capsys):
    def sv(M):
        return np.linalg.svd(M, compute_uv=False)

    def sigma_not_squared(M):
        p = sv(M)[sv(M) > 0] / sv(M).sum()
        return float(np.exp(-np.sum(p * np.log(p))))

    def zeros_kept(M):
        p = sv(M) ** 2 / np.sum(sv(M) ** 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.exp(-np.sum(p * np.log(p))))

    rejects(capsys, ex.check_effective_rank, lambda M: np.sum(sv(M) ** 2) ** 2 / np.sum(sv(M) ** 4),
            message="participation ratio")
    rejects(capsys, ex.check_effective_rank, sigma_not_squared, message="use squared singular values")
    out = rejects(capsys, ex.check_effective_rank, zeros_kept, message="drop the pᵢ = 0 terms")
    assert "✗ with a zero singular value" in out


# -- chapter 5 ----------------------------------------------------------------------------------------------------------
def _null_shifted_w(V, u):
    """The minimum-norm w plus a vector of the null space of Vᵀ: it still solves Vᵀw = u (or gives the same
    projection), so every invariant of F_L' holds, but it is not the minimum-norm solution."""
    w = np.linalg.lstsq(V.T, u, rcond=None)[0]
    r = np.random.default_rng(0).standard_normal(V.shape[0])
    return w + r - V @ np.linalg.pinv(V) @ r


def test_steering_w_rejects_a_solution_that_is_not_minimum_norm(capsys):
    out = rejects(capsys, ex.check_steering_w, _null_shifted_w, message="not the minimum-norm solution")
    assert "null space of Vᵀ" in out
    assert "✓ square, invertible V" in out  # a square invertible V has no null space: nothing to shift


def test_steering_w_names_the_untransposed_solve_and_the_exact_solve(capsys):
    rejects(capsys, ex.check_steering_w, lambda V, u: np.linalg.solve(V, u) if len(V) == V.shape[1] else V @ u,
            message="you solved V w = u")
    rejects(capsys, ex.check_steering_w, lambda V, u: np.linalg.lstsq(V.T, u, rcond=None)[0][:-1], message="expected shape")
    assert ex.check_steering_w(lambda V, u: np.linalg.pinv(V).T @ u, verbose=False)


def test_steering_w_gemma_case_is_rank_deficient():
    """The Gemma-2-like case has H·d_h > d but rank n_kv·d_h < d: no w gives Vᵀw = u exactly there."""
    seen = []

    def spy(V, u):
        seen.append((V, u))
        return np.linalg.lstsq(V.T, u, rcond=None)[0]

    assert ex.check_steering_w(spy, verbose=False, time_limit=None)  # in this process: the spy sees the cases
    V, u = seen[-1]
    assert V.shape[0] > V.shape[1] > np.linalg.matrix_rank(V)
    assert np.linalg.norm(V.T @ np.linalg.lstsq(V.T, u, rcond=None)[0] - u) > 0.1


# -- chapter 6 ----------------------------------------------------------------------------------------------------------
def test_principal_angles_rejects_no_orthonormalisation_and_arccos_only(capsys):
    def no_qr(A, B):
        return np.sort(np.arccos(np.clip(np.linalg.svd(A.T @ B, compute_uv=False), -1, 1)))

    def arccos_only(A, B):
        return no_qr(np.linalg.qr(A)[0], np.linalg.qr(B)[0])

    rejects(capsys, ex.check_principal_angles, no_qr, message="orthonormalize the bases first")
    out = rejects(capsys, ex.check_principal_angles, arccos_only, message="take small angles from the sines")
    assert "✗ a nearly parallel line" in out and "✓ non-orthonormal inputs" in out
    good = solution("06_two_views.md", "my_principal_angles")["my_principal_angles"]  # SciPy's is off in the check
    rejects(capsys, ex.check_principal_angles, lambda A, B: np.degrees(good(A, B)), message="return radians, not degrees")


def test_attention_path_rejects_the_wrong_order(capsys):
    def wrong_order(J_mlp, J_n1, F, post):
        d = len(F)
        if post:
            return J_mlp @ (np.eye(d) + F) @ J_n1, J_mlp @ F @ J_n1
        return J_mlp @ (np.eye(d) + J_n1 @ F), J_mlp @ J_n1 @ F

    def path_is_whole(J_mlp, J_n1, F, post):  # J right, J_F = J
        d = len(F)
        J = J_mlp @ J_n1 @ (np.eye(d) + F) if post else J_mlp @ (np.eye(d) + F @ J_n1)
        return J, J

    out = rejects(capsys, ex.check_attention_path, wrong_order, message="the factors are in the wrong order")
    assert "F on the left" in out and "the norm's Jacobian on the left" in out
    rejects(capsys, ex.check_attention_path, path_is_whole, message="J − J_F should be the path that avoids F")


def test_relative_update_rejects_the_wrong_norm(capsys):
    rejects(capsys, ex.check_relative_update, lambda Js, Jc, lay: np.linalg.norm(Jc - Js) / np.linalg.norm(Jc),
            message="divide by ‖J_ctx − I‖")
    rejects(capsys, ex.check_relative_update,
            lambda Js, Jc, lay: np.linalg.norm(Jc - Js) / np.linalg.norm(Jc - np.eye(len(Jc))),
            message="no identity path around its norm")


# -- the runner's convention ---------------------------------------------------------------------------------------------
def _looping(ratio, tol):
    T = 0
    while True:  # the student's infinite loop
        T += 1
    return T


def test_an_infinite_loop_is_stopped_and_its_line_shown(capsys):
    before = signal.getsignal(signal.SIGALRM)
    out = rejects(capsys, lambda fn: ex.check_steps_needed(fn, time_limit=0.2), _looping,
                  message="did not return within 0.2 s while at line")
    assert "in _looping" in out and ("T += 1" in out or "while True:" in out) and "an infinite loop?" in out
    assert out.count("did not return within") == 1 and "… 6 more checks not run (this case ran out of time)" in out
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL)[0] == 0


def _swallows_everything(ratio, tol):
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722 - the student's bare except, which catches any exception raised into the loop
            continue


def _swallows_base_exceptions(ratio, tol):
    n = 0
    while True:
        try:
            n += 1
        except BaseException:  # noqa: BLE001 - the student's catch-all
            pass


def _stubborn(ratio, tol):
    while True:
        try:
            while True:
                pass
        except Exception:  # noqa: BLE001 - the student's catch-all
            continue


@pytest.mark.parametrize("student", [_stubborn, _swallows_everything, _swallows_base_exceptions],
                         ids=["except Exception", "bare except", "except BaseException"])
def test_a_student_except_cannot_swallow_the_time_limit(capsys, student):
    """The case runs in a child process that is killed: no handler in the student's code holds it off, and
    the checker returns in about the time limit with the case's own ✗ (the rest of the notebook goes on)."""
    t0 = time.monotonic()
    out = rejects(capsys, lambda fn: ex.check_steps_needed(fn, time_limit=0.5), student,
                  message="did not return within 0.5 s while at line")
    assert time.monotonic() - t0 < 0.5 + 10  # the limit, a second's grace, and the fork (generous: a busy machine)
    assert f"in {student.__name__}" in out and "0/7 checks passed." in out


def test_a_later_case_that_hangs_keeps_the_earlier_results(capsys):
    """All cases run in turn in one child process; each has its own limit, counted from the one before."""
    good = solution("02_shared_weights.md", "my_steps_needed")["my_steps_needed"]

    def hangs_on_the_third(ratio, tol):
        while ratio == 0.99:
            try:
                pass
            except BaseException:  # noqa: BLE001
                pass
        return good(ratio, tol)

    out = rejects(capsys, lambda fn: ex.check_steps_needed(fn, time_limit=0.5), hangs_on_the_third,
                  message="✗ ratio = 0.99, tol = 0.001: did not return within 0.5 s")
    assert "✓ ratio = 0.5, tol = 0.001" in out and "✓ ratio = 0.9, tol = 1e-06" in out
    assert "… 4 more checks not run (this case ran out of time)" in out and "2/7 checks passed." in out


def test_a_crash_of_the_students_code_is_reported(capsys):
    import os

    rejects(capsys, ex.check_steps_needed, lambda ratio, tol: os._exit(3),
            message="the process running your function ended (exit status 3)")


def test_what_the_students_code_prints_is_shown_with_its_case(capsys):
    good = solution("02_shared_weights.md", "my_steps_needed")["my_steps_needed"]

    def chatty(ratio, tol):
        print(f"trying {ratio}")
        return good(ratio, tol)

    assert ex.check_steps_needed(chatty) is True
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["trying 0.5", "  ✓ ratio = 0.5, tol = 0.001"]


def test_torch_runs_in_the_child_after_the_parent_used_its_threads(capsys):
    """The parent's OpenMP pool does not survive a fork (a torch product in the child hung): the child
    uses one torch thread."""
    import torch

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        a = torch.randn(400, 400, dtype=torch.float64)
        for _ in range(3):
            a = a @ a / 400
        assert ex.check_attention_path(solution("06_two_views.md", "my_attention_path")["my_attention_path"],
                                       time_limit=20) is True
    finally:
        torch.set_num_threads(threads)


def test_the_time_limit_outside_the_main_thread(capsys):
    result = {}
    worker = threading.Thread(target=lambda: result.update(ok=ex.check_steps_needed(_looping, time_limit=0.2)))
    worker.start()
    worker.join(30)
    assert result == {"ok": False}
    out = capsys.readouterr().out
    assert "did not return within 0.2 s while at line" in out and "in _looping" in out
    assert not any(t.name.startswith("checker:") and t.is_alive() for t in threading.enumerate())  # loop was stopped


def test_without_fork_a_watched_thread_keeps_the_limit(capsys, monkeypatch):
    """Where fork is missing or unsafe (Windows, macOS) a case runs in a thread: a loop is stopped, and one
    that cannot be stopped is left behind, so the checker returns either way."""
    monkeypatch.setattr(runner, "FORK", False)
    out = rejects(capsys, lambda fn: ex.check_steps_needed(fn, time_limit=0.2), _stubborn,
                  message="did not return within 0.2 s while at line")
    assert "in _stubborn" in out
    assert not any(t.name.startswith("checker:") and t.is_alive() for t in threading.enumerate())

    def unstoppable(ratio, tol):  # swallows what the watcher raises into it, and ends by itself after 3 s
        end = time.monotonic() + 3
        while time.monotonic() < end:
            try:
                while time.monotonic() < end:
                    pass
            except:  # noqa: E722
                pass
        return 0

    t0 = time.monotonic()
    rejects(capsys, lambda fn: ex.check_steps_needed(fn, time_limit=0.2), unstoppable,
            message="did not return within 0.2 s")
    assert time.monotonic() - t0 < 3
    for t in threading.enumerate():
        if t.name.startswith("checker:"):
            t.join(10)


def test_the_students_error_shows_their_line_not_the_checkers(capsys):
    def broken(F, x0, steps):
        x = x0 / np.linalg.norm(x0)
        return np.linalg.solve(F[:3, :3], x)  # shapes do not fit: raised inside NumPy

    out = rejects(capsys, ex.check_power_method, broken, message="broken raised an error:")
    student = [line for line in out.splitlines() if line.lstrip().startswith("│")]
    assert student[0].split("│ ")[1].startswith("ValueError")
    assert any("in broken" in line and "np.linalg.solve(F[:3, :3], x)" in line for line in student)
    assert not any("numpy" in line or "lib/exercises" in line for line in student)  # the student's frames only
    assert out.count("the same error as above") == 8  # shown once, then referred to


def test_none_not_implemented_and_not_a_function(capsys):
    def forgot_return(F, x0, steps):
        F @ x0

    rejects(capsys, ex.check_power_method, forgot_return, message="forgot_return returned None — missing `return`?")

    def todo(F, x0, steps):
        raise NotImplementedError

    out = rejects(capsys, ex.check_power_method, todo, message="not implemented yet")
    assert "… 8 more checks not run (until todo is written)" in out and out.count("✗") == 1
    rejects(capsys, ex.check_power_method, good_power(np.eye(3), np.ones(3), 1), message="expected your function itself")


def test_wrong_shape_and_dtype_say_what_was_expected():
    with pytest.raises(runner.Wrong, match=r"has shape \(1, 20\); expected shape \(20,\)"):
        runner.as_array(np.zeros((1, 20)), (20,), "x_T")
    with pytest.raises(runner.Wrong, match="complex"):
        runner.as_array(np.zeros(3, dtype=complex), (3,), "x_T")
    with pytest.raises(runner.Wrong, match="expected real numbers"):
        runner.as_array(["a", "b"], (2,), "x_T")
    with pytest.raises(runner.Wrong, match="one real number, got ndarray of shape"):
        runner.as_float(np.ones(2), "gamma")
    assert runner.as_float(np.float32(0.5), "gamma") == 0.5


def test_a_bug_in_a_checker_is_reported_not_raised(capsys):
    def buggy() -> None:
        raise KeyError("oops")

    assert runner.run_cases("check_x", good_power, [runner.Case("a case", buggy)]) is False
    assert "the checker itself failed (KeyError" in capsys.readouterr().out


def _statements(code: str) -> list[str]:
    """The top-level function bodies of ``code``, each as normalised source (comments and layout gone)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [ast.unparse(ast.Module(body=node.body, type_ignores=[])) for node in tree.body
            if isinstance(node, ast.FunctionDef)]


@pytest.mark.parametrize("chapter", sorted(Path(__file__).resolve().parents[2].glob("book/[0-9][0-9]_*.md")),
                         ids=lambda p: p.stem)
def test_no_solution_is_printed_in_the_chapter_body(chapter):
    """A solution's function must not appear, line for line, in the chapter's code above its exercises
    (exercise 1.1's loop was printed in section 1.1)."""
    from tools.student import _python_blocks, read_chapter

    ch = read_chapter(chapter)
    body = []
    for piece in ch.pieces:
        if piece.solution is not None:
            continue
        cell = piece.cell
        if cell.cell_type == "markdown" and re.search(r"^#+ .*Exercises", cell.source, flags=re.M):
            break
        body += [cell.source] if cell.cell_type == "code" else _python_blocks(cell.source)
    shown = {b for code in body for b in _statements(code)}
    for sol in ch.solutions.values():
        for code in sol.code:
            for fn in _statements(code):
                assert fn not in shown, f"{chapter.name}: solution {sol.number} is printed in the body:\n{fn}"


# -- the library's own version of what an exercise asks for is off while the student's code runs ------------------------
def _off_cases():
    """(checker, extra arguments, a one-line call of the library's own version, the name it must give)."""
    import lib.linalg.nonnormal as nn
    from lib.linalg import spectra
    from lib.linalg.power import (  # bound in the "student's" namespace, as a student would
        power_method,
        steps_needed,
    )
    from lib.methods import alignment as als
    from lib.methods import bridge, steering

    def gamma_rho_row(Xi, Xo, v):
        row = als.gamma_rho(als.TokenStates.from_trajectories([np.stack([Xi, Xo])]), v[:, None], n_boot=0).iloc[0]
        return row.gamma, row.rho

    return [
        (ex.check_spectral_summary, (), lambda F: (spectra.spectral_radius(F), spectra.gap_ratio(spectra.eigvals(F)),
                                                   False), "lib.linalg.spectra.spectral_radius"),
        (ex.check_power_method, (), lambda F, x0, T: power_method(F, x0, T)[-1], "lib.linalg.power.power_method"),
        (ex.check_residual_rates, ([1.0, 0.5, 0.2],),
         lambda e: (spectra.gap_ratio(e), spectra.gap_ratio(np.array(sorted(1 + e, key=abs, reverse=True)))),
         "lib.linalg.spectra.gap_ratio"),
        (ex.check_steps_needed, (), steps_needed, "lib.linalg.power.steps_needed"),
        (ex.check_gamma_rho, (), gamma_rho_row, "lib.methods.alignment.gamma_rho"),
        (ex.check_effective_rank, (), nn.effective_rank, "lib.linalg.nonnormal.effective_rank"),
        (ex.check_effective_rank, (), lambda M: float(nn.cumulative_product(M[None]).erank[-1]),
         "lib.linalg.nonnormal.cumulative_product"),
        (ex.check_schur_normal, (), lambda M: nn.schur_normal(M), "lib.linalg.nonnormal.schur_normal"),
        (ex.check_complex_fractions, (),
         lambda Jp: (float(np.mean([nn.complex_fraction(J) for J in Jp])), nn.complex_fraction(Jp.mean(0))),
         "lib.linalg.nonnormal.complex_fraction"),
        (ex.check_truncated_funnel, (), lambda Js, k: float(nn.cumulative_product(Js, k).erank[-1]),
         "lib.linalg.nonnormal.cumulative_product"),
        (ex.check_steering_w, (), lambda V, u: steering.choose_w(V, u)[0], "lib.methods.steering.choose_w"),
        (ex.check_principal_angles, (), bridge.principal_angles, "lib.methods.bridge.principal_angles"),
        (ex.check_principal_angles, (), lambda A, B: np.sort(scipy.linalg.subspace_angles(A, B)),
         "scipy.linalg.subspace_angles"),
    ]


@pytest.mark.parametrize("index", range(13))
def test_a_one_line_call_of_the_librarys_own_version_is_refused_by_name(capsys, index):
    checker, more, one_liner, name = _off_cases()[index]
    out = rejects(capsys, checker, one_liner, *more,
                  message=f"{name} is off while this exercise is checked: write your own")
    assert out.count("✗") == 1 and "more check" in out  # said once; the other cases are not run
    fn = runner._resolve(name)
    assert fn.__code__ is not runner._off_template.__code__ and "MESSAGE" not in fn.__code__.co_consts
    assert not runner._SWAPPED


def test_the_library_is_restored_in_this_process_after_an_error_and_a_time_out(capsys):
    """Without a child process (time_limit=None, and the watched thread), call() swaps the code and swaps it back,
    also when the student's code raises; after a time-out the checker restores it itself."""
    from lib.linalg import power
    from lib.linalg.power import power_method

    original = power.power_method.__code__
    F, x0 = np.diag([2.0, 1.0]), np.ones(2)

    def raises(F, x0, steps):
        raise ValueError("student bug")

    assert ex.check_power_method(raises, time_limit=None) is False
    assert power.power_method.__code__ is original and power_method(F, x0, 3).shape == (4, 2)
    rejects(capsys, lambda fn: ex.check_power_method(fn, time_limit=None), lambda F, x0, T: power_method(F, x0, T)[-1],
            message="lib.linalg.power.power_method is off")
    assert power.power_method.__code__ is original

    seen = {}

    def hangs_after_calling(F, x0, steps):
        try:
            power_method(F, x0, steps)
        except runner.LibraryOff as off:
            seen["off"] = str(off)
        while True:
            pass

    import pytest as _pytest
    monkey = _pytest.MonkeyPatch()
    monkey.setattr(runner, "FORK", False)
    try:
        rejects(capsys, lambda fn: ex.check_power_method(fn, time_limit=0.3), hangs_after_calling,
                message="did not return within 0.3 s")
    finally:
        monkey.undo()
    assert seen["off"].startswith("lib.linalg.power.power_method is off")
    assert power.power_method.__code__ is original and not runner._SWAPPED


# -- wrong answers that earlier checkers accepted (issue 26), each with the case that now rejects it -------------------
def test_energy_ratio_rejects_the_first_eigenvalue_lapack_returns(capsys):
    out = rejects(capsys, ex.check_energy_ratio,
                  lambda F: np.linalg.norm(F, axis=(1, 2)) / np.abs(np.linalg.eigvals(F)[:, 0]),
                  message="np.linalg.eigvals returns the eigenvalues in no particular order")
    assert "✗ four non-normal layers" in out


def test_energy_ratio_toy_has_a_layer_lapack_lists_unsorted():
    """Guards the case's construction: LAPACK's first eigenvalue of the fourth layer is not its λ₁."""
    from lib.theory import toys

    M = toys.matrix_with_spectrum([1.5, -1.2, 0.9] + list(np.linspace(0.6, 0.1, 8))[:-1], seed=3, cond=8.0)
    lams = np.linalg.eigvals(M)
    assert abs(lams[0]) < np.abs(lams).max()


@pytest.mark.parametrize("product", [lambda O, V: np.einsum("ij,jk->ik", O, V), lambda O, V: np.einsum("ij,jk", O, V),
                                     lambda O, V: np.tensordot(O, V, 1), lambda O, V: np.tensordot(O, V, axes=([1], [0]))],
                         ids=["einsum", "einsum implicit", "tensordot", "tensordot axes"])
def test_head_sum_rejects_one_einsum_or_tensordot_over_all_heads(capsys, product):
    rejects(capsys, ex.check_head_sum, lambda O, V, H: product(O, V), message="an einsum or tensordot over them")


def test_head_sum_names_a_missing_head_not_the_head_width(capsys):
    def drop_last(O, V, H):
        dh = V.shape[0] // H
        return sum(O[:, h * dh:(h + 1) * dh] @ V[h * dh:(h + 1) * dh] for h in range(H - 1))

    def drop_first(O, V, H):
        dh = V.shape[0] // H
        return sum(O[:, h * dh:(h + 1) * dh] @ V[h * dh:(h + 1) * dh] for h in range(1, H))

    def head_zero_each_time(O, V, H):
        dh = V.shape[0] // H
        return sum(O[:, :dh] @ V[:dh] for h in range(H))

    out = rejects(capsys, ex.check_head_sum, drop_last, message="the last head is missing")
    assert "d // n_heads" not in out
    rejects(capsys, ex.check_head_sum, drop_first, message="the first head (h = 0) is missing")
    rejects(capsys, ex.check_head_sum, head_zero_each_time, message="every term is head 0's")


def test_residual_rates_rejects_the_forgotten_modulus_and_lambda_1_as_the_winner(capsys):
    def no_modulus(eigvals):  # issue 26: passed all four earlier cases (none had 1 + λ < 0 large)
        plain = np.sort(np.abs(eigvals))[::-1]
        shifted = np.sort(1 + eigvals)[::-1]
        return plain[1] / plain[0], shifted[1] / shifted[0]

    def lambda_1_wins(eigvals):
        plain = np.sort(np.abs(eigvals))[::-1]
        shifted = np.abs(1 + eigvals)
        return plain[1] / plain[0], shifted[1:].max() / shifted[0]

    out = rejects(capsys, ex.check_residual_rates, no_modulus, [1.0, 0.5, 0.2],
                  message="take the modulus |1 + λ| before sorting: here 1 + λ₁ = -2")
    assert "✗ λ = (−3, 2, 0.5)" in out
    rejects(capsys, ex.check_residual_rates, lambda_1_wins, [1.0, 0.5, 0.2],
            message="the largest |1 + λ| need not be λ₁'s")


def test_steps_needed_rejects_a_negative_count(capsys):
    out = rejects(capsys, ex.check_steps_needed, lambda r, tol: math.ceil(math.log(tol) / math.log(r) - 1e-9),
                  message="T counts layers, T ≥ 0")
    assert "✗ ratio = 0.5, tol = 2 (reached before any layer: T = 0)" in out


def test_gamma_rho_names_more_wrong_definitions(capsys):
    def cos(X, v, whole=False):
        return np.abs(X @ v) / (np.linalg.norm(X) if whole else np.linalg.norm(X, axis=1))

    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: (cos(Xi, v).mean(), (cos(Xo, v) > cos(Xi, v)).mean()),
            message="not of its inputs X_in")
    rejects(capsys, ex.check_gamma_rho,
            lambda Xi, Xo, v: (cos(Xo, v, True).mean(), (cos(Xo, v, True) > cos(Xi, v, True)).mean()),
            message="not by the norm of the whole matrix")
    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: (cos(Xo, v).mean(), (cos(Xo, v) < cos(Xi, v)).mean()),
            message="not those where it decreases")
    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: ((cos(Xo, v) > cos(Xi, v)).mean(), cos(Xo, v).mean()),
            message="in the order (gamma, rho)")
    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: (cos(Xo, v).mean(), 0.5),
            message="γ is right, ρ is not")
    rejects(capsys, ex.check_gamma_rho, lambda Xi, Xo, v: (0.5, (cos(Xo, v) > cos(Xi, v)).mean()),
            message="ρ is right, γ is not")


def test_effective_rank_names_more_wrong_forms(capsys):
    def entropy_rank(M, weights, log=np.log):
        p = weights(M)
        p = p[p > 0] / p.sum()
        return float(np.exp(-np.sum(p * log(p))))

    def sv2(M):
        return np.linalg.svd(M, compute_uv=False) ** 2

    rejects(capsys, ex.check_effective_rank, lambda M: 1 / entropy_rank(M, sv2), message="mind the minus sign")
    rejects(capsys, ex.check_effective_rank, lambda M: entropy_rank(M, lambda A: np.abs(np.linalg.eigvals(A)) ** 2),
            message="not the moduli of the eigenvalues")
    rejects(capsys, ex.check_effective_rank, lambda M: entropy_rank(M, sv2, np.log2), message="not exp of log2")


def test_schur_normal_names_the_wrong_rotation_back(capsys):
    def transposed_back(M):
        T, Q = scipy.linalg.schur(M, output="real")
        return Q.T @ _normal_T(T) @ Q

    rejects(capsys, ex.check_schur_normal, transposed_back, message="not Qᵀ T_N Q")


def test_principal_angles_names_cosines_returned_for_angles(capsys):
    def cosines(A, B):
        s = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
        return np.sort(np.clip(s, 0, 1))

    rejects(capsys, ex.check_principal_angles, cosines, message="those are the cosines")


def test_relative_update_names_more_mistakes(capsys):
    def ratio(Js, Jc, lay, norm=np.linalg.norm, power=1, single=False):
        R = np.eye(len(Jc)) if lay == "pre-norm" else np.zeros_like(Jc)
        return float((norm(Jc - Js) / norm((Js if single else Jc) - R)) ** power)

    rejects(capsys, ex.check_relative_update, lambda Js, Jc, lay: ratio(Js, Jc, lay, power=2), message="the square")
    rejects(capsys, ex.check_relative_update, lambda Js, Jc, lay: ratio(Js, Jc, lay, norm=lambda A: np.linalg.norm(A, 2)),
            message="not the spectral norm")
    rejects(capsys, ex.check_relative_update, lambda Js, Jc, lay: ratio(Js, Jc, lay, single=True),
            message="not the single-token one")


def test_spectral_summary_rejects_deduplicated_moduli_and_any_complex_eigenvalue(capsys):
    def unique_moduli(F):  # skips the partner by deduplicating moduli: also skips a real λ = −2 beside λ₁ = 2
        lams = np.linalg.eigvals(F)
        m = np.unique(np.round(np.abs(lams), 10))
        return m[-1], m[-2] / m[-1], bool(abs(lams[np.argmax(np.abs(lams))].imag) > 1e-9)

    def any_complex(F):
        lams = np.linalg.eigvals(F)
        lams = lams[np.argsort(-np.abs(lams), kind="stable")]
        following = lams[2] if abs(lams[0].imag) > 1e-12 else lams[1]
        return abs(lams[0]), abs(following) / abs(lams[0]), bool(np.any(np.abs(lams.imag) > 1e-12))

    rejects(capsys, ex.check_spectral_summary, unique_moduli, message="is real, not λ₁'s conjugate partner")
    rejects(capsys, ex.check_spectral_summary, any_complex, message="test λ₁ alone")


def test_the_site_shows_one_line_under_an_unfilled_template(monkeypatch, capsys):
    """In the book build an unwritten exercise prints one line, not a list of failed checks; a written but
    wrong one still gets every check."""
    monkeypatch.setenv("SPECTRAL_BOOK_BUILD", "1")

    def todo(F, x0, steps):
        raise NotImplementedError

    assert ex.check_power_method(todo) is False
    out = capsys.readouterr().out
    assert out.splitlines() == ["check_power_method(todo): 9 checks",
                                "  they run once todo is written (the solution below passes them all)"]

    def wrong(F, x0, steps):
        return x0

    assert ex.check_power_method(wrong) is False
    out = capsys.readouterr().out
    assert "✗" in out and "checks passed." in out
