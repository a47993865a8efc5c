"""Altair figure builders for chapters 1 and 2 (the power method and shared-weight theory).

Every builder takes long-format data (one row per point) and a ``model`` label that
:func:`lib.page.plotting.titled` puts in the subtitle (for toys: ``"toy matrix, d=48, seed 0"``).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import titled

__all__ = ["convergence_chart", "line_chart", "plane_orbit_chart", "toy_label"]


def toy_label(d: int, seed: int | str = 0, extra: str = "") -> str:
    """The subtitle label of a toy figure, e.g. ``"toy matrix, d=48, seed 0"``; ``seed`` may name
    several (``"0-2"`` gives ``"seeds 0-2"``)."""
    seeds = f"seeds {seed}" if isinstance(seed, str) else f"seed {seed}"
    return f"toy matrix, d={d}, {seeds}" + (f", {extra}" if extra else "")


def convergence_chart(
    df: pd.DataFrame, *, model: str, title: str = "Power method: distance to v₁ against the prediction",
    color: str = "gap_ratio", width: int = 460, height: int = 260,
) -> alt.TopLevelMixin:
    """Log-scale error ``sin∠(x_t, v_1)`` (solid) and the predicted ``C·|λ₂/λ₁|^t`` (dashed).

    Args:
        df: columns ``t``, ``measured``, ``predicted`` and the ``color`` column (e.g. from
            :func:`lib.power.convergence_table`, concatenated over several matrices).
    """
    long = df.melt(id_vars=["t", color], value_vars=["measured", "predicted"], var_name="curve", value_name="error")
    long = long[long["error"] > 1e-15]
    long[color] = long[color].map(lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    return titled(
        alt.Chart(long)
        .mark_line(point=False)
        .encode(
            x=alt.X("t:Q", title="step t"),
            y=alt.Y("error:Q", scale=alt.Scale(type="log"), title="sin ∠(x_t, v₁)"),
            color=alt.Color(f"{color}:N", title="|λ₂/λ₁|", legend=alt.Legend(orient="bottom")),
            strokeDash=alt.StrokeDash("curve:N", title=None, sort=["measured", "predicted"], legend=alt.Legend(orient="bottom")),
            tooltip=["t:Q", f"{color}:N", "curve:N", alt.Tooltip("error:Q", format=".2e")],
        )
        .properties(width=width, height=height),
        title,
        model,
    )


def line_chart(
    df: pd.DataFrame, *, x: str, y: str, color: str | None = None, model: str, title: str,
    x_title: str | None = None, y_title: str | None = None, log_y: bool = False, column: str | None = None,
    detail: str | None = None, dash: str | None = None, width: int = 220, height: int = 180, columns: int = 2,
    y_domain: tuple[float, float] | None = None,
) -> alt.TopLevelMixin:
    """Lines of ``y`` against ``x``, optionally coloured, dashed, split per ``detail`` and faceted by ``column``
    (wrapped after ``columns`` panels). Legends go below the plot, so figures fit a book column."""
    scale = alt.Scale(type="log") if log_y else (alt.Scale(domain=list(y_domain)) if y_domain else alt.Undefined)
    enc = dict(
        x=alt.X(f"{x}:Q", title=x_title or x),
        y=alt.Y(f"{y}:Q", title=y_title or y, scale=scale),
        tooltip=[c for c in (x, y, color, detail, dash) if c],
    )
    if color:
        enc["color"] = alt.Color(f"{color}:N", title=color, legend=alt.Legend(orient="bottom"))
    if detail:
        enc["detail"] = alt.Detail(f"{detail}:N")
    if dash:
        enc["strokeDash"] = alt.StrokeDash(f"{dash}:N", title=dash, legend=alt.Legend(orient="bottom"))
    chart = alt.Chart(df).mark_line().encode(**enc).properties(width=width, height=height)
    if column:
        chart = chart.facet(facet=alt.Facet(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))), columns=columns)
    return titled(chart, title, model)


def plane_orbit_chart(coords: np.ndarray, *, model: str, title: str, token_count: int = 3) -> alt.TopLevelMixin:
    """Orbits of tokens in an orthonormal basis ``B = [b₁, b₂]`` of an invariant plane.

    Args:
        coords: ``(T+1, n, 2)`` plane coordinates ``Bᵀx/‖x‖`` (from :func:`lib.power.plane_coordinates`).
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
    path = base.mark_line(opacity=0.35).encode(color=alt.Color("token:N", title=None, legend=alt.Legend(orient="bottom")), order="t:Q")
    dots = base.mark_circle(size=28).encode(
        color=alt.Color("token:N", title=None), opacity=alt.Opacity("t:Q", title="step t", legend=alt.Legend(orient="bottom")),
        tooltip=["token:N", "t:Q", alt.Tooltip("b1:Q", format=".3f"), alt.Tooltip("b2:Q", format=".3f")],
    )
    return titled(alt.layer(path, dots).properties(width=280, height=280), title, model)
