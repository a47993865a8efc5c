"""Chapter 4's exercise checkers: the chapter's own solutions pass, and each plausible wrong answer is rejected with
feedback that names it (exercises 4.3 and 4.4; 4.1 and 4.2 are in tests/unit/test_exercises.py)."""

from __future__ import annotations

import numpy as np
import pytest
from test_exercises import rejects, solution

from lib import exercises as ex
from lib.linalg import nonnormal as nn

CHAPTER = "04_jacobian_funnel.md"


@pytest.mark.parametrize(("name", "checker"), [("my_complex_fractions", ex.check_complex_fractions),
                                               ("my_truncated_erank", ex.check_truncated_funnel),
                                               ("my_erank", ex.check_effective_rank),
                                               ("my_schur_normal", ex.check_schur_normal)])
def test_the_chapters_solutions_pass(name, checker, capsys):
    assert checker(solution(CHAPTER, name)[name]) is True
    assert "All good." in capsys.readouterr().out


def _fc(M, relative=True, pairs_once=False):
    lam = np.linalg.eigvals(M)
    tol = 1e-8 * np.abs(lam).max() if relative else 1e-8
    return float(np.mean(lam.imag > tol) if pairs_once else np.mean(np.abs(lam.imag) > tol))


def test_complex_fractions_rejects_each_wrong_answer(capsys):
    good = solution(CHAPTER, "my_complex_fractions")["my_complex_fractions"]

    def absolute(Jp):
        return float(np.mean([_fc(J, relative=False) for J in Jp])), _fc(Jp.mean(0), relative=False)

    def pairs_once(Jp):
        return float(np.mean([_fc(J, pairs_once=True) for J in Jp])), _fc(Jp.mean(0), pairs_once=True)

    def modifies(Jp):
        out = good(Jp)
        Jp -= np.eye(Jp.shape[-1])
        return out

    rejects(capsys, ex.check_complex_fractions, absolute, message="the threshold is relative")
    rejects(capsys, ex.check_complex_fractions, pairs_once, message="count both eigenvalues of a conjugate pair")
    rejects(capsys, ex.check_complex_fractions, lambda Jp: good(Jp)[::-1], message="the two entries are swapped")
    rejects(capsys, ex.check_complex_fractions, modifies, message="modified the stack Jp in place")
    rejects(capsys, ex.check_complex_fractions, lambda Jp: _fc(Jp.mean(0)), message="should be a pair")


def test_truncated_funnel_rejects_each_wrong_answer(capsys):
    def truncate(M, k):
        U, s, Vh = np.linalg.svd(M)
        return (U[:, :k] * s[:k]) @ Vh[:k]

    def only_at_the_end(Js, k):
        P = np.eye(Js.shape[1])
        for J in Js:
            P = J @ P
            P /= np.linalg.norm(P)
        return nn.effective_rank(truncate(P, k))

    def wrong_order(Js, k):
        P = np.eye(Js.shape[1])
        for J in Js:
            P = truncate(P @ J, k)
            P /= np.linalg.norm(P)
        return nn.effective_rank(P)

    out = rejects(capsys, ex.check_truncated_funnel, only_at_the_end, message="not only the final product")
    assert "✗ singular values (1, 1, 0.01), then diag(1, 1, 1000), k = 2: got 1.05712, expected 2" in out
    def untruncated(Js, k, every=False):  # the student's own loop (the library's cumulative_product is off)
        P, eranks = np.eye(Js.shape[1]), []
        for J in Js:
            P = J @ P
            P /= np.linalg.norm(P)
            eranks.append(nn.effective_rank(P))
        return np.array(eranks) if every else eranks[-1]

    rejects(capsys, ex.check_truncated_funnel, untruncated, message="this is the untruncated product")
    rejects(capsys, ex.check_truncated_funnel, wrong_order, message="multiply on the left, P ← J P")
    rejects(capsys, ex.check_truncated_funnel, lambda Js, k: untruncated(Js, k, every=True),
            message="should be one real number")


def test_complex_fractions_names_an_entry_computed_the_others_way_and_a_count(capsys):
    good = solution(CHAPTER, "my_complex_fractions")["my_complex_fractions"]
    rejects(capsys, ex.check_complex_fractions, lambda Jp: (good(Jp)[1], good(Jp)[1]), message="not f_C of the mean")
    rejects(capsys, ex.check_complex_fractions, lambda Jp: (good(Jp)[0], good(Jp)[0]),
            message="not the mean of the f_C")
    rejects(capsys, ex.check_complex_fractions, lambda Jp: tuple(x * Jp.shape[-1] for x in good(Jp)),
            message="not a count")


def test_truncated_funnel_names_an_off_by_one_k_and_truncated_factors(capsys):
    def funnel(Js, k, keep, each_J=False):
        P = np.eye(Js.shape[1])
        for J in Js:
            U, s, Vh = np.linalg.svd(J if each_J else J @ P)
            cut = (U[:, :keep] * s[:keep]) @ Vh[:keep]
            P = cut @ P if each_J else cut
            P /= np.linalg.norm(P)
        return nn.effective_rank(P)

    rejects(capsys, ex.check_truncated_funnel, lambda Js, k: funnel(Js, k, k + 1), message="not k + 1")
    rejects(capsys, ex.check_truncated_funnel, lambda Js, k: funnel(Js, k, max(k - 1, 1)), message="not k − 1")
    rejects(capsys, ex.check_truncated_funnel, lambda Js, k: funnel(Js, k, k, each_J=True), message="not each Jₜ")
