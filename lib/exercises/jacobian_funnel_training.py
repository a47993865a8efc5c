"""Checker of chapter 7's exercise: the first saved training step from which a statistic stays outside the
random-init twins' intervals.

Reference: :func:`lib.chapters.jacobian_funnel.compare_with_twins` (where one interval lies against the twins') and
:func:`lib.chapters.jacobian_funnel_training.emergence_step` (the first step of the final streak), both tested in
``tests/unit/test_decoder_steps.py``; here the answers are computed from the cases' own definition. The mistakes
named: the first step outside at all (not the start of the final streak), below *some* twin's interval instead of
every twin's, a touching interval counted as outside, a step outside on the other side counted, the position of
the step returned instead of the step, and a step returned where nothing emerged (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lib.exercises.runner import DEFAULT_TIME_LIMIT, Case, Wrong, as_float, call, run_cases

__all__ = ["check_emergence_step"]

_OFF_EMERGENCE = ("lib.chapters.jacobian_funnel.compare_with_twins",
                  "lib.chapters.jacobian_funnel_training.emergence_step")
"""The library's own versions of what the exercise asks for: off while the student's function runs."""


def _sides(lo: np.ndarray, hi: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray, *, every: bool = True,
           strict: bool = True) -> list[str]:
    """Each step's side against the twins: ``"lower"``, ``"higher"`` or ``"overlaps"`` (the reference when
    ``every`` and ``strict``; the named mistakes otherwise)."""
    agg = np.all if every else np.any
    below = (lambda a, b: a < b) if strict else (lambda a, b: a <= b)
    out = []
    for a, b in zip(lo, hi):
        if agg(below(b, t_lo)):
            out.append("lower")
        elif agg(below(t_hi, a)):
            out.append("higher")
        else:
            out.append("overlaps")
    return out


def _streak_start(steps: Sequence[int], sides: list[str], *, side_blind: bool = False,
                  first_outside: bool = False) -> int | None:
    """The first step of the final run of steps on the last step's side (``None`` if the last overlaps)."""
    final = sides[-1]
    if final == "overlaps":
        return None
    same = [s != "overlaps" if side_blind else s == final for s in sides]
    if first_outside:
        return int(steps[same.index(True)])
    i = len(same)
    while i > 0 and same[i - 1]:
        i -= 1
    return int(steps[i])


def check_emergence_step(fn: Callable[..., Any], verbose: bool = True,
                         time_limit: float | None = DEFAULT_TIME_LIMIT) -> bool:
    """Check ``fn(steps, lo, hi, twin_lo, twin_hi) -> float``.

    ``steps`` ``(S,)``: saved training steps, ascending; ``lo``, ``hi`` ``(S,)``: a statistic's 95% interval at each
    step; ``twin_lo``, ``twin_hi`` ``(K,)``: the same statistic's interval in each random-init twin. A step is
    *outside* when its interval lies entirely below every twin's interval (``hi < twin_lo`` for every twin) or
    entirely above every twin's; touching counts as overlapping. The answer is the first saved step from which
    every step up to the last is outside on the last step's side, or NaN when the last step is not outside (nothing
    emerged), as :func:`lib.chapters.jacobian_funnel_training.emergence_step`.
    """
    steps = np.array([0, 25, 50, 100, 300, 600, 1200])
    t_lo, t_hi = np.array([40.0, 42.0, 38.0]), np.array([48.0, 50.0, 47.0])

    def ints(centres: Sequence[float], half: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        c = np.asarray(centres, dtype=float)
        return c - half, c + half

    cases_data = {
        "falls below the twins from step 50 on": (steps, *ints([44, 41, 30, 20, 15, 12, 11]), t_lo, t_hi),
        "below the twins at step 25, back among them at 50, below again from 100 on":
            (steps, *ints([44, 30, 43, 25, 20, 18, 17]), t_lo, t_hi),
        "among the twins at the last step: nothing emerged": (steps, *ints([44, 30, 25, 20, 30, 38, 43]), t_lo, t_hi),
        "from step 300 on below one twin's interval (38.5–40.5 under 42–50), not every twin's: nothing emerged":
            (steps, *ints([44, 44, 44, 44, 39.5, 39.5, 39.5]), t_lo, t_hi),
        "below the twins at step 50, above them from step 100 on": (steps, *ints([44, 44, 30, 60, 70, 75, 75]), t_lo, t_hi),
        "one twin (38–47); touching its interval (hi = 38) at step 100, below it from 300 on":
            (steps, *ints([44, 44, 44, 37, 30, 30, 30]), t_lo[2:], t_hi[2:]),
        "outside at every step, step 0 included (other steps)":
            (np.array([0, 10, 20]), *ints([10.0, 9.0, 8.0]), t_lo, t_hi),
    }

    def named(args: tuple[np.ndarray, ...]) -> dict[str, Any]:
        st, lo, hi, tl, th = args
        return {
            "the first step of the last streak outside, not the first step outside at all":
                _streak_start(st, _sides(lo, hi, tl, th), first_outside=True),
            "outside means below (or above) every twin's interval, not just one of them":
                _streak_start(st, _sides(lo, hi, tl, th, every=False)),
            "touching a twin's interval (hi = twin_lo) is overlapping, not outside":
                _streak_start(st, _sides(lo, hi, tl, th, strict=False)),
            "only steps on the last step's side count (lower and higher are not the same)":
                _streak_start(st, _sides(lo, hi, tl, th), side_blind=True),
        }

    def case(args: tuple[np.ndarray, ...]) -> Callable[[], None]:
        def run() -> None:
            st, lo, hi, tl, th = args
            want = _streak_start(st, _sides(lo, hi, tl, th))
            got = as_float(call(fn, *(a.copy() for a in args)), "the step", finite=False)
            if want is None:
                if math.isnan(got):
                    return
                why = next((h for h, v in named(args).items() if v is not None and got == v), "")
                raise Wrong(f"got {got:g}, expected nan: the last step's interval overlaps a twin's, so nothing "
                            "emerged (return float('nan'))" + (f"; {why}" if why else ""))
            if got == want:
                return
            if not math.isnan(got) and got == float(list(st).index(want)):
                raise Wrong(f"got {got:g}, expected step {want}: return the step itself, steps[i], not its "
                            "position i")
            why = next((h for h, v in named(args).items() if v is not None and got == v), "")
            raise Wrong(f"got {got:g}, expected step {want}" + (f": {why}" if why else ""))
        return run

    return run_cases("check_emergence_step", fn, [Case(name, case(args)) for name, args in cases_data.items()],
                     verbose, time_limit, off=_OFF_EMERGENCE)
