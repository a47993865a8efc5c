"""Altair figure builders for chapters 1 and 2 (the power method and shared-weight theory).

Every builder takes long-format data (one row per point) and a ``model`` label that
:func:`lib.page.plotting.titled` puts in the subtitle (for toys: ``"toy matrix, d=48, seed 0"``). Toy
series are neither trained weights nor random-init twins, so their colours come from
:data:`lib.page.plotting.OTHER_COLORS`; references (a predicted line, a threshold, a chance level, a
null band) are black or :data:`lib.page.plotting.NULL_COLOR` and have a legend entry of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import NULL_COLOR, OTHER_COLORS, TRAINED_COLOR, titled
from lib.page.tables import interval_text

__all__ = ["bipartite_threshold_chart", "convergence_chart", "gamma_null_chart", "gamma_table", "line_chart",
           "other_colors", "plane_orbit_chart", "rate_chart", "survival_chart", "toy_label"]

_BOTTOM = alt.Legend(orient="bottom")


def toy_label(d: int, seed: int | str = 0, extra: str = "") -> str:
    """The subtitle label of a toy figure, e.g. ``"toy matrix, d=48, seed 0"``; ``seed`` may name
    several (``"0-2"`` gives ``"seeds 0-2"``)."""
    seeds = f"seeds {seed}" if isinstance(seed, str) else f"seed {seed}"
    return f"toy matrix, d={d}, {seeds}" + (f", {extra}" if extra else "")


def other_colors(field: str, values: Sequence[object], *, title: str | None = None,
                 legend: alt.Legend | None = _BOTTOM) -> alt.Color:
    """A nominal colour encoding of ``field`` over ``values`` (legend order) in the book's colours for
    series that are not models (:data:`~lib.page.plotting.OTHER_COLORS`, repeated beyond five)."""
    domain = [str(v) for v in dict.fromkeys(values)]
    colours = [OTHER_COLORS[i % len(OTHER_COLORS)] for i in range(len(domain))]
    return alt.Color(f"{field}:N", title=title, scale=alt.Scale(domain=domain, range=colours), legend=legend)


def convergence_chart(
    df: pd.DataFrame, *, model: str, title: str = "The error shrinks like |λ₂/λ₁|ᵗ, as predicted",
    color: str = "gap_ratio", width: int = 460, height: int = 260, description: str | None = None,
) -> alt.TopLevelMixin:
    """Log-scale error ``sin∠(x_t, v_1)`` (solid) and the predicted ``C·|λ₂/λ₁|^t`` (dashed).

    Points at or below 1e-15 (the float64 rounding level) are left out, not drawn at a floor.

    Args:
        df: columns ``t``, ``measured``, ``predicted`` and the ``color`` column (e.g. from
            :func:`lib.linalg.power.convergence_runs`).
    """
    long = df.melt(id_vars=["t", color], value_vars=["measured", "predicted"], var_name="curve", value_name="error")
    long = long[long["error"] > 1e-15].copy()
    long[color] = long[color].map(lambda v: f"{v:.3g}" if isinstance(v, float) else str(v))
    chart = alt.Chart(long).mark_line(point=False).encode(
        x=alt.X("t:Q", title="step t"),
        y=alt.Y("error:Q", scale=alt.Scale(type="log"), title="sin ∠(xₜ, v₁)", axis=alt.Axis(format=".0e")),
        color=other_colors(color, long[color], title="|λ₂/λ₁|"),
        strokeDash=alt.StrokeDash("curve:N", title=None, sort=["measured", "predicted"], legend=_BOTTOM),
        tooltip=["t:Q", f"{color}:N", "curve:N", alt.Tooltip("error:Q", format=".2e")],
    ).properties(width=width, height=height)
    return titled(chart, title, model, description)


def line_chart(
    df: pd.DataFrame, *, x: str, y: str, color: str | None = None, model: str, title: str,
    x_title: str | None = None, y_title: str | None = None, log_y: bool = False, column: str | None = None,
    detail: str | None = None, dash: str | None = None, width: int = 220, height: int = 180, columns: int = 2,
    y_domain: tuple[float, float] | None = None, description: str | None = None,
) -> alt.TopLevelMixin:
    """Lines of ``y`` against ``x``, optionally coloured (:func:`other_colors`), dashed, split per ``detail``
    and faceted by ``column`` (wrapped after ``columns`` panels). Legends go below the plot, so figures fit
    a book column."""
    scale = alt.Scale(type="log") if log_y else (alt.Scale(domain=list(y_domain)) if y_domain else alt.Undefined)
    enc = dict(
        x=alt.X(f"{x}:Q", title=x_title or x),
        y=alt.Y(f"{y}:Q", title=y_title if y_title is not None else y, scale=scale,
                axis=alt.Axis(format=".0e") if log_y else alt.Undefined),
        tooltip=[c for c in (x, y, color, detail, dash) if c],
    )
    if color:
        enc["color"] = other_colors(color, df[color], title=color)
    if detail:
        enc["detail"] = alt.Detail(f"{detail}:N")
    if dash:
        enc["strokeDash"] = alt.StrokeDash(f"{dash}:N", title=dash, legend=_BOTTOM)
    chart = alt.Chart(df).mark_line().encode(**enc).properties(width=width, height=height)
    if column:
        chart = chart.facet(facet=alt.Facet(f"{column}:N", title=None, sort=list(dict.fromkeys(df[column]))),
                            columns=columns)
    return titled(chart, title, model, description)


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
        color=colour, opacity=alt.Opacity("t:Q", title="step t", legend=_BOTTOM),
        tooltip=["token:N", "t:Q", alt.Tooltip("b1:Q", format=".3f"), alt.Tooltip("b2:Q", format=".3f")],
    )
    return titled(alt.layer(path, dots).properties(width=280, height=280), title, model)


def _series(labels: Sequence[str], colours: Sequence[str], title: str | None = None) -> alt.Color:
    return alt.Color("series:N", title=title, scale=alt.Scale(domain=list(labels), range=list(colours)),
                     legend=alt.Legend(orient="bottom", direction="vertical"))


def rate_chart(rate: pd.DataFrame, *, model: str, title: str = "The convergence rate equals the gap ratio",
               width: int = 320, height: int = 260) -> alt.TopLevelMixin:
    """Fitted per-layer factors (points) against the gap ratio, over the prediction "factor = gap ratio"
    (black dashed diagonal, with its legend entry).

    Args:
        rate: :func:`lib.theory.dynamics.consensus_rates` rows.
    """
    gap, fit = "gap ratio |λ₂/λ₁|", "fitted per-layer factor"
    measured, predicted = "fitted factor (one run)", "prediction: factor = |λ₂/λ₁|"
    colour = _series([measured, predicted], [OTHER_COLORS[0], "black"])
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
    colour = _series([measured, predicted], [OTHER_COLORS[0], "black"])
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


def gamma_null_chart(gr: pd.DataFrame, *, model: str, title: str | None = None, width: int = 380,
                     height: int = 220) -> alt.TopLevelMixin:
    """γ_t over its chance level per layer (trained colour, with the 95% bootstrap interval over prompts),
    over the layer's own null (grey band: the central 95% of random subspaces of the same dimension), with
    the chance level 1 (black dashed). Every series has a legend entry.

    Args:
        gr: :func:`lib.methods.alignment.gamma_rho` rows merged with the ``gamma_ratio_null_lo`` /
            ``gamma_ratio_null_hi`` columns of :func:`lib.methods.alignment.random_null`.
        model: the model's label (a trained model: its points are drawn in the trained colour).
    """
    observed, null, chance = f"γₜ / chance, {model}", "null: random subspaces, central 95%", "chance level"
    colour = _series([observed, null, chance], [TRAINED_COLOR, NULL_COLOR, "black"])
    y_title = "γₜ / chance level"
    df = gr.assign(series=observed, layer_t=gr.layer.astype(int))
    x = alt.X("layer_t:O", title="layer t")
    band = alt.Chart(df.assign(series=null)).mark_bar(opacity=0.45, size=26).encode(
        x=x, y=alt.Y("gamma_ratio_null_lo:Q", title=y_title), y2="gamma_ratio_null_hi:Q", color=colour)
    bars = alt.Chart(df).mark_errorbar(ticks={"size": 9}).encode(
        x=x, y=alt.Y("gamma_ratio_lo:Q", title=y_title), y2="gamma_ratio_hi:Q", color=colour)
    pts = alt.Chart(df).mark_point(filled=True, size=60).encode(
        x=x, y=alt.Y("gamma_ratio:Q", title=y_title), color=colour,
        tooltip=["layer_t:O", alt.Tooltip("gamma_ratio:Q", format=".2f", title="γₜ / chance"),
                 alt.Tooltip("q_gamma:Q", format=".3f", title="q (BH)")])
    rule = alt.Chart(pd.DataFrame({"y": [1.0], "series": [chance]})).mark_rule(strokeDash=[5, 4]).encode(
        y="y:Q", color=colour)
    title = title or "γₜ against its chance level and its own null, layer by layer"
    return titled(alt.layer(band, rule, bars, pts).properties(width=width, height=height), title, model)


def gamma_table(gr: pd.DataFrame) -> pd.DataFrame:
    """The numbers of :func:`gamma_null_chart` with readable headers and one precision per quantity."""
    return pd.DataFrame({
        "layer t": gr.layer.astype(int), "dimension k": gr.k.astype(int),
        "γₜ": [f"{v:.4f}" for v in gr.gamma], "chance level": [f"{v:.4f}" for v in gr.chance],
        "γₜ / chance": [f"{v:.2f}" for v in gr.gamma_ratio],
        "95% CI": interval_text(gr.gamma_ratio_lo, gr.gamma_ratio_hi, ".2f"),
        "null 95% range": interval_text(gr.gamma_ratio_null_lo, gr.gamma_ratio_null_hi, ".2f"),
        "q (BH)": ["<0.001" if q < 0.001 else f"{q:.3f}" for q in gr.q_gamma],
    })
