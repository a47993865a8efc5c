"""Chapter 7's exercise checker: the chapter's own solution passes, and each plausible wrong answer is rejected with
feedback that names it."""

from __future__ import annotations

import numpy as np
import pytest
from test_exercises import rejects, solution

from lib import exercises as ex
from lib.chapters import jacobian_funnel_training as ft
from lib.exercises.runner import LibraryOff

CHAPTER = "07_jacobian_funnel_training.md"


def test_the_chapters_solution_passes(capsys):
    assert ex.check_emergence_step(solution(CHAPTER, "my_emergence_step")["my_emergence_step"]) is True
    assert "All good." in capsys.readouterr().out


def _variant(every=True, strict=True, side_blind=False, first=False, position=False):
    """A student's function with one mistake switched on."""
    def fn(steps, lo, hi, twin_lo, twin_hi):
        agg = np.all if every else np.any
        below = (lambda a, b: a < b) if strict else (lambda a, b: a <= b)
        sides = ["lower" if agg(below(b, twin_lo)) else "higher" if agg(below(twin_hi, a)) else "overlaps"
                 for a, b in zip(lo, hi)]
        if sides[-1] == "overlaps":
            return float("nan")
        same = [s != "overlaps" if side_blind else s == sides[-1] for s in sides]
        i = same.index(True) if first else len(same) - next((k for k, v in enumerate(same[::-1]) if not v), len(same))
        return i if position else int(steps[i])
    return fn


def test_the_variant_without_a_mistake_passes(capsys):
    assert ex.check_emergence_step(_variant()) is True


@pytest.mark.parametrize(("mistake", "message"), [
    ({"first": True}, "not the first step outside at all"),
    ({"every": False}, "not just one of them"),
    ({"strict": False}, "touching a twin's interval (hi = twin_lo) is overlapping"),
    ({"side_blind": True}, "only steps on the last step's side count"),
    ({"position": True}, "return the step itself, steps[i], not its position i"),
])
def test_each_wrong_answer_is_named(capsys, mistake, message):
    rejects(capsys, ex.check_emergence_step, _variant(**mistake), message=message)


def test_a_step_where_nothing_emerged_and_a_missing_return_are_named(capsys):
    always_first = lambda steps, lo, hi, twin_lo, twin_hi: int(steps[0])  # noqa: E731
    rejects(capsys, ex.check_emergence_step, always_first, message="nothing emerged (return float('nan'))")
    rejects(capsys, ex.check_emergence_step, lambda *a: None, message="returned None")


def test_the_library_answer_is_off_while_the_students_function_runs(capsys):
    def uses_the_library(steps, lo, hi, twin_lo, twin_hi):
        ft.emergence_step(None, "erank_b1")
        return float("nan")

    out = rejects(capsys, ex.check_emergence_step, uses_the_library, message="emergence_step")
    assert LibraryOff.__name__ in out or "is off" in out


def test_the_checker_agrees_with_the_library_on_its_own_frames():
    """The reference of the checker and :func:`lib.chapters.jacobian_funnel_training.emergence_step` give the same
    step on a frame built from intervals (the chapter's statistic against its twins)."""
    import pandas as pd

    from lib.chapters.jacobian_funnel import compare_with_twins
    from lib.stats import Interval

    steps = [0, 25, 50, 100, 300]
    centres = [44, 30, 43, 25, 20]
    twins = [Interval(44, 40, 48), Interval(46, 42, 50), Interval(42, 38, 47)]
    rows = [{"statistic": "s", "kind": "run", "step": s,
             "side": compare_with_twins(Interval(c, c - 1, c + 1), twins)} for s, c in zip(steps, centres)]
    lib_step = ft.emergence_step(pd.DataFrame(rows), "s")
    fn = _variant()
    mine = fn(np.array(steps), np.array(centres) - 1.0, np.array(centres) + 1.0,
              np.array([t.lo for t in twins]), np.array([t.hi for t in twins]))
    assert lib_step == mine == 100
