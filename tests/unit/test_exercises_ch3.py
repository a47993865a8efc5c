"""Chapter 3's checkers 3.2–3.4: the chapter's own solutions pass, each plausible wrong answer is rejected by name.

The right answers are read from the chapter (``tests/unit/test_exercises.py``'s :func:`solution`); exercise
3.1 (``check_gamma_rho``) is tested there.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_exercises import rejects, solution

from lib import exercises as ex
from lib.methods import alignment as als

CHAPTER = "03_real_models.md"


@pytest.mark.parametrize(("name", "checker"), [("my_token_shift", ex.check_token_shift),
                                               ("my_span_ratio", ex.check_span_ratio),
                                               ("my_null_layers", ex.check_null_layers)])
def test_the_chapters_solution_passes(name, checker, capsys):
    assert checker(solution(CHAPTER, name)[name]) is True
    assert "All good." in capsys.readouterr().out


def _gamma(ts, eb, col="gamma"):
    return als.gamma_rho(ts, eb, n_boot=0)[col].to_numpy()


def test_token_shift_names_each_wrong_selection(capsys):
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts.select("special"), eb) - _gamma(ts.select("content"), eb),
            message="not the special ones alone")
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts.select("content"), eb) - _gamma(ts, eb),
            message="the sign")
    rejects(capsys, ex.check_token_shift,
            lambda ts, eb: _gamma(ts, eb, "gamma_ratio") - _gamma(ts.select("content"), eb, "gamma_ratio"),
            message="not γₜ / chance")
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts, eb, "rho") - _gamma(ts.select("content"), eb, "rho"),
            message="not the fraction of increases")
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts, eb)[:-1], message="expected shape (3,)")


def test_span_ratio_names_each_wrong_chance_level(capsys):
    raw = lambda ts, eb: _gamma(ts, eb.v12)  # noqa: E731
    rejects(capsys, ex.check_span_ratio, lambda ts, eb: raw(ts, eb) / als.baseline_subspace(ts.d, 1),
            message="not a line's")
    rejects(capsys, ex.check_span_ratio, lambda ts, eb: raw(ts, eb) / als.baseline_subspace(ts.d, 4),
            message="zero-padded to 4 columns")
    rejects(capsys, ex.check_span_ratio, raw, message="divide γₜ by its chance level")
    rejects(capsys, ex.check_span_ratio, lambda ts, eb: _gamma(ts, eb, "gamma_ratio"), message="not v₁ alone")


def _layers(column, shift=0, cast=int):
    def fn(ts, bases, m, seed):
        null = als.random_null(ts, bases, m=m, seed=seed)
        return tuple(cast(t) + shift for t in null.layer[null[column] < 0.05])
    return fn


def test_null_layers_names_each_wrong_test(capsys):
    out = rejects(capsys, ex.check_null_layers, _layers("p_rho"), message="not the raw p-values")
    assert "✓ no layer moves the tokens" in out  # the case where every variant agrees still passes
    rejects(capsys, ex.check_null_layers, _layers("q_gamma"), message="not of γₜ (q_gamma)")
    rejects(capsys, ex.check_null_layers, _layers("q_rho", shift=-1), message="numbered from 1")
    rejects(capsys, ex.check_null_layers, _layers("q_rho", cast=float), message="convert each with int")
    rejects(capsys, ex.check_null_layers, lambda ts, b, m, s: "1, 3", message="a tuple of ints")


def test_null_layers_toy_separates_the_corrected_and_uncorrected_tests():
    """The first case's data really tell the mistakes apart (guards the construction against drift)."""
    from lib.exercises.real_models import _null_toy

    ts, B = _null_toy()
    null = als.random_null(ts, B, m=200, seed=0)
    rho = tuple(null.layer[null.q_rho < 0.05])
    assert rho == (1,)
    assert tuple(null.layer[null.p_rho < 0.05]) != rho and tuple(null.layer[null.q_gamma < 0.05]) != rho
    assert np.isclose(ex.real_models._toy_bases().k12, [2, 3, 4]).all()


def test_token_shift_and_span_ratio_name_more_mistakes(capsys):
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts, eb.v12) - _gamma(ts.select("content"), eb.v12),
            message="not against span{v₁, v₂}")
    rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts, eb) / _gamma(ts.select("content"), eb),
            message="not a ratio")
    out = rejects(capsys, ex.check_token_shift, lambda ts, eb: _gamma(ts, eb) - _gamma(ts.select("content"), eb) + [0, 0, 1],
                  message="layer 3 differs")  # no named mistake: the layers that differ are named
    assert "layers" not in out
    chance = lambda ts, eb: np.array([als.baseline_subspace(ts.d, int(k)) for k in eb.k12])  # noqa: E731
    rejects(capsys, ex.check_span_ratio, lambda ts, eb: _gamma(ts, eb.v12) * chance(ts, eb), message="do not multiply")
    rejects(capsys, ex.check_span_ratio, lambda ts, eb: _gamma(ts, eb.v12) / _gamma(ts, eb), message="not to γₜ of v₁ alone")


def test_null_layers_names_a_hard_coded_m_and_seed_not_the_p_values(capsys):
    """Issue 26: m = 1000, seed = 0 hard-coded (or left to the defaults) with q_rho was told to use q_rho."""
    from lib.methods.alignment import random_null

    def hard_coded(ts, bases, m, seed):
        null = random_null(ts, bases, m=1000, seed=0)
        return tuple(int(t) for t in null.layer[null.q_rho < 0.05])

    def defaults(ts, bases, m, seed):
        null = als.random_null(ts, bases)
        return tuple(int(t) for t in null.layer[null.q_rho < 0.05])

    for wrong in (hard_coded, defaults):
        out = rejects(capsys, ex.check_null_layers, wrong, message="you called random_null with m = 1000, seed = 0")
        assert "q_rho), not the raw p-values" not in out
