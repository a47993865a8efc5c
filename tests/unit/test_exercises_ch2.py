"""Chapter 2's reworded exercises 2.2 (bipartite states under a causal mask) and 2.3 (the linearized radius
with a residual): the chapter's solutions pass, each plausible wrong answer is rejected with its message, and
no exercise's answer is stated in the chapter above it.

The propositions' own statements (no mask, no residual), which the chapter states and proves, are wrong
answers here; their checkers (:func:`lib.exercises.check_bipartite_condition`,
:func:`lib.exercises.check_linearization_radius`) still accept them.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from test_exercises import BOOK, rejects, solution

from lib import exercises as ex

CHAPTER = "02_shared_weights.md"


@pytest.fixture(autouse=True, scope="module")
def _solutions_read():
    """Read here, not in a checker's child process (where it would count against the case's time limit)."""
    solution(CHAPTER, "my_causal_bipartite")
    solution(CHAPTER, "my_residual_radius")


def causal(c, signs):
    """The chapter's own solution of exercise 2.2."""
    return solution(CHAPTER, "my_causal_bipartite")["my_causal_bipartite"](c, signs)


def residual(eigvals, k):
    """The chapter's own solution of exercise 2.3."""
    return solution(CHAPTER, "my_residual_radius")["my_residual_radius"](eigvals, k)


def _prefix_rule(c, signs, gain, self_in=True):
    out = True
    for i, s in enumerate(signs):
        same = sum(1 for x in signs[: i + 1] if x == s) - (0 if self_in else 1)
        out = out and gain(c) * same > i + 1 - same - (0 if self_in else 1)
    return out


# -- exercise 2.2 ---------------------------------------------------------------------------------------------------
def test_causal_bipartite_solution_passes(capsys):
    assert ex.check_causal_bipartite(causal) is True
    assert "8/8 checks passed" in capsys.readouterr().out


def test_causal_bipartite_rejects_the_unmasked_proposition(capsys):
    def unmasked(c, signs):  # prop-bipartite on the group totals: what the chapter states for no mask
        n_plus, n_minus = signs.count(1), signs.count(-1)
        return math.exp(2 * c) > max(n_plus / n_minus, n_minus / n_plus)

    out = rejects(capsys, ex.check_causal_bipartite, unmasked, message="not for the group totals")
    assert "✗ c = 0.5: 2 + 8 tokens, the pair first" in out  # the totals say no, the prefixes yes
    assert "✗ c = 0.3: 5 + 5 tokens, a late minority flips" in out  # the totals say yes, a prefix no


def test_causal_bipartite_rejects_e_to_the_c_and_a_token_that_ignores_itself(capsys):
    out = rejects(capsys, ex.check_causal_bipartite, lambda c, s: _prefix_rule(c, s, math.exp),
                  message="the threshold is e^(2c)")
    assert "✗ c = 0.45: a prefix ratio between e^c and e^(2c)" in out
    rejects(capsys, ex.check_causal_bipartite,
            lambda c, s: _prefix_rule(c, s, lambda c: math.exp(2 * c), self_in=False),
            message="token i attends to itself too")


def test_causal_bipartite_names_the_flipping_token_and_wants_a_bool(capsys):
    rejects(capsys, ex.check_causal_bipartite, lambda c, s: True, message="token 4 sees 1 of its own group (itself included) and 3 of the other")
    rejects(capsys, ex.check_causal_bipartite, lambda c, s: int(causal(c, s)), message="should be True or False")


# -- exercise 2.3 ---------------------------------------------------------------------------------------------------
def test_residual_radius_solution_passes(capsys):
    assert ex.check_residual_radius(residual) is True
    assert "7/7 checks passed" in capsys.readouterr().out


def test_residual_radius_rejects_the_proposition_without_residual(capsys):
    rejects(capsys, ex.check_residual_radius,
            lambda lams, k: np.abs(np.delete(lams, k)).max() / abs(lams[k]),
            message="that is the radius without the residual")


def test_residual_radius_rejects_forgetting_the_differences_between_tokens(capsys):
    out = rejects(capsys, ex.check_residual_radius,
                  lambda lams, k: np.abs(1 + np.delete(lams, k)).max() / abs(1 + lams[k]),
                  message="you left out the differences between tokens")
    assert "✗ spectrum b, consensus on v₁" in out and "✓ spectrum a, consensus on v₁" in out


def test_residual_radius_rejects_no_moduli_self_and_the_wrong_runner_up(capsys):
    rejects(capsys, ex.check_residual_radius,
            lambda lams, k: max(1.0, (1 + np.delete(lams, k)).max()) / (1 + lams[k]), message="take moduli")
    rejects(capsys, ex.check_residual_radius,
            lambda lams, k: max(1.0, np.abs(1 + lams).max()) / abs(1 + lams[k]), message="leave λₖ itself out")
    rejects(capsys, ex.check_residual_radius,
            lambda lams, k: max(1.0, abs(1 + lams[1 if k == 0 else 0])) / abs(1 + lams[k]),
            message="need not belong to λ₁ or λ₂")
    rejects(capsys, ex.check_residual_radius, lambda lams, k: abs(lams[1] / lams[0]),
            message="the Jacobian's spectral radius is")


# -- the propositions' own checkers still accept the propositions ----------------------------------------------------
def test_proposition_checkers_accept_the_propositions():
    bip = lambda c, p, m: math.exp(2 * c) > max(p / m, m / p)  # noqa: E731 - prop-bipartite
    rad = lambda lams, k: np.abs(np.delete(lams, k)).max() / abs(lams[k])  # noqa: E731 - prop-stability
    assert ex.check_bipartite_condition(bip, verbose=False) is True
    assert ex.check_linearization_radius(rad, verbose=False) is True


def test_no_exercise_answer_is_stated_above_it():
    """The answers of 2.2 and 2.3 (a prefix condition; a radius with |1 + λ| and the 1 of the token
    differences) do not appear in the chapter before the exercises, where the propositions state the
    unmasked, residual-free versions."""
    text = (BOOK / CHAPTER).read_text(encoding="utf-8")
    body = text[: text.index("## Exercises")]
    assert "causal" not in body.lower()
    assert not re.search(r"\|1 \+ \\lambda", body)
    assert "max(1" not in body


def test_causal_bipartite_rejects_checking_only_each_groups_first_token(capsys):
    def first_tokens(c, signs):  # the first token of a group has the fewest of its own: but not the fewest relative
        for s0 in set(signs):
            i = signs.index(s0)
            if not math.exp(2 * c) > i:
                return False
        return True

    out = rejects(capsys, ex.check_causal_bipartite, first_tokens,
                  message="token 6 sees 2 of its own group (itself included) and 4 of the other")
    assert "✗ c = 0.3: a group's first token holds, its last flips" in out
