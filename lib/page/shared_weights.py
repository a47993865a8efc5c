"""Altair figures of chapter 2 (shared weights: consensus, cycles, bipartite states), in the book's one style.

Every builder takes long-format data (one row per point) and a ``model`` label (a toy's, from
:func:`lib.page.plotting.toy_label`) that the chart names in its subtitle. The line charts chapters 1 and 2 share
are :func:`lib.page.plotting.line_chart`.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import (
    BOTTOM_LEGEND,
    OTHER_COLORS,
    other_colors,
    series_color,
    titled,
)


def plane_orbit_chart(coords: np.ndarray, *, model: str, title: str, token_count: int = 3) -> alt.TopLevelMixin:
    """Orbits of tokens in an orthonormal basis ``B = [b₁, b₂]`` of an invariant plane.

    Args:
        coords: ``(T+1, n, 2)`` plane coordinates ``Bᵀx/‖x‖`` (from :func:`lib.linalg.power.plane_coordinates`).
        token_count: how many tokens to draw.
    """
    T1, n, _ = coords.shape
    k = min(token_count, n)
    rows = [
        {"t": t, "token": f"token {i}", "b1": coords[t, i, 0], "b2": coords[t, i, 1]}
        for t in range(T1) for i in range(k)
    ]
    df = pd.DataFrame(rows)
    base = alt.Chart(df).encode(
        x=alt.X("b1:Q", title="coordinate on b₁", scale=alt.Scale(domain=[-1.05, 1.05])),
        y=alt.Y("b2:Q", title="coordinate on b₂", scale=alt.Scale(domain=[-1.05, 1.05])),
    )
    colour = other_colors("token", df["token"])
    path = base.mark_line(opacity=0.35).encode(color=colour, order="t:Q")
    dots = base.mark_circle(size=28).encode(
        color=colour, opacity=alt.Opacity("t:Q", title="step t", legend=BOTTOM_LEGEND),
        tooltip=["token:N", "t:Q", alt.Tooltip("b1:Q", format=".3f"), alt.Tooltip("b2:Q", format=".3f")],
    )
    return titled(alt.layer(path, dots).properties(width=280, height=280), title, model)


def rate_chart(rate: pd.DataFrame, *, model: str, title: str = "The convergence rate equals the gap ratio",
               width: int = 320, height: int = 260) -> alt.TopLevelMixin:
    """Fitted per-layer factors (points) against the gap ratio, over the prediction "factor = gap ratio"
    (black dashed diagonal, with its legend entry).

    Args:
        rate: :func:`lib.theory.dynamics.consensus_rates` rows.
    """
    gap, fit = "gap ratio |λ₂/λ₁|", "fitted per-layer factor"
    measured, predicted = "fitted factor (one run)", "prediction: factor = |λ₂/λ₁|"
    colour = series_color([measured, predicted], [OTHER_COLORS[0], "black"])
    axis = alt.Scale(domain=[0.2, 1.0])
    line = alt.Chart(pd.DataFrame({"x": [0.2, 1.0], "series": predicted})).mark_line(strokeDash=[4, 4]).encode(
        x=alt.X("x:Q", title=gap, scale=axis), y=alt.Y("x:Q", title=fit, scale=axis), color=colour)
    pts = alt.Chart(rate.assign(series=measured)).mark_circle(size=60).encode(
        x=alt.X(f"{gap}:Q", scale=axis), y=alt.Y(f"{fit}:Q", scale=axis), color=colour,
        tooltip=[gap, "seed", alt.Tooltip(f"{fit}:Q", format=".4f")])
    return titled((line + pts).properties(width=width, height=height), title, model)


def bipartite_threshold_chart(
    bip: pd.DataFrame, c_star: float, *, model: str, title: str = "The bipartite state is a fixed point iff e²ᶜ > n₊/n₋",
    width: int = 420, height: int = 200,
) -> alt.TopLevelMixin:
    """The largest token change of one layer (log scale) against the bipartite score ``c``, with the
    predicted threshold ``c*`` (black dashed rule, with its legend entry).

    Args:
        bip: :func:`lib.theory.dynamics.bipartite_threshold_scan` rows (every change positive).
        c_star: the predicted threshold ``½ log(n₊/n₋)``.
    """
    y = "largest token change ‖Δxᵢ‖"
    if not (bip[y] > 0).all():
        raise ValueError("a change of exactly 0 cannot be drawn on the log scale; no value is clipped")
    measured, predicted = "one layer from the bipartite state", f"threshold c* = ½ log(n₊/n₋) = {c_star:.3f}"
    colour = series_color([measured, predicted], [OTHER_COLORS[0], "black"])
    lo, hi = float(bip[y].min()), float(bip[y].max())
    # the domain holds every point, the flipped group's 2r at least half a decade below the top edge
    scale = alt.Scale(type="log", domain=[10 ** np.floor(np.log10(lo)), 10 ** (np.floor(np.log10(hi)) + 1.5)])
    pts = alt.Chart(bip.assign(series=measured)).mark_line(point=True).encode(
        x=alt.X("c:Q", title="bipartite score c"), y=alt.Y(f"{y}:Q", scale=scale, axis=alt.Axis(format=".0e")),
        color=colour, tooltip=[alt.Tooltip("c:Q", format=".3f"), alt.Tooltip(f"{y}:Q", format=".2e")])
    rule = alt.Chart(pd.DataFrame({"c": [c_star], "series": [predicted]})).mark_rule(strokeDash=[4, 4]).encode(
        x="c:Q", color=colour)
    return titled((pts + rule).properties(width=width, height=height), title, model)


def survival_chart(surv: pd.DataFrame, *, model: str,
                   title: str = "Bipartite states survive only if every head attends within its group",
                   width: int = 320, height: int = 180) -> alt.TopLevelMixin:
    """Bars: the share of perturbed runs still bipartite, per number of heads, for aligned and random
    ``Q, K`` (:func:`lib.theory.dynamics.bipartite_survival` rows)."""
    share = "share of runs still bipartite"
    chart = alt.Chart(surv).mark_bar().encode(
        x=alt.X("heads:O"), y=alt.Y(f"{share}:Q", scale=alt.Scale(domain=[0, 1])),
        color=other_colors("Q, K", surv["Q, K"], title="Q, K"), xOffset="Q, K:N",
        tooltip=["Q, K:N", "heads:O", alt.Tooltip(f"{share}:Q", format=".2f"), "heads with cₕ < 0:Q"],
    ).properties(width=width, height=height)
    return titled(chart, title, model)
