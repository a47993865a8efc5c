"""Widget values at the ends of their ranges work; values beyond them give one clear error."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lib
from lib.page import explorer


@pytest.mark.parametrize(
    "gap, theta, heads, beta",
    [(0.0, 0, 1, 0.0), (0.99, 180, 32, 4.0), (0.5, 90, 8, 0.0)],
)
def test_explorer_at_the_ends(gap, theta, heads, beta):
    df = explorer.explore_run(gap, theta, heads, beta, steps=3)
    assert len(df) == 4 and np.isfinite(df[["err", "pred", "cos"]].to_numpy()).all()


@pytest.mark.parametrize(
    "args, words",
    [
        ((1.0, 45, 4, 1.0), "gap"),
        ((-0.1, 45, 4, 1.0), "gap"),
        ((0.5, -1, 4, 1.0), "θ"),
        ((0.5, 181, 4, 1.0), "θ"),
        ((0.5, 45, 0, 1.0), "heads"),
        ((0.5, 45, 3, 1.0), "heads"),
        ((0.5, 45, 4, -1.0), "β"),
        ((0.5, 45, 4, math.nan), "β"),
    ],
)
def test_explorer_beyond_the_ends(args, words):
    with pytest.raises(lib.InputError, match=words):
        explorer.explore_run(*args, steps=3)


def test_steering_alpha_and_direction_checks(minilm):
    from lib.methods import steering

    u = np.zeros(minilm.d_model)
    u[0] = 1.0
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            with steering.steer(minilm, u, bad):
                pass
    with pytest.raises(ValueError):
        with steering.steer(minilm, np.zeros(minilm.d_model), 10.0):
            pass
    with pytest.raises(ValueError):
        with steering.steer(minilm, np.ones(3), 10.0):
            pass


def test_widget_explorer_builds_and_redraws_on_a_slider(monkeypatch):
    """The JupyterLab explorer panel (the book build does not execute its cell): it builds without a
    kernel, and moving a slider re-runs the simulator with the new value."""
    seen = []
    real_run = explorer.explore_run
    monkeypatch.setattr(explorer, "explore_run", lambda **kw: seen.append(kw) or real_run(**kw, steps=3))
    box = explorer.widget_explorer()
    gap = box.children[0].children[0]
    assert gap.description == "gap" and seen[-1]["gap"] == gap.value
    gap.value = 0.9
    assert len(seen) == 2 and seen[-1]["gap"] == 0.9
