"""Altair figures of chapter 6 (two views of one layer). Every builder names its model(s) in the subtitle.

Inputs are the long tables of :mod:`lib.bridge_views` with a ``model`` column (the family key, one panel
each) and a ``series`` column (``"trained"``, ``"random 0"``, ...). Widths stay under 640 px; legends sit
below the plot.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from lib.page.plotting import titled

__all__ = ["angle_chart", "context_chart", "gamma_chart", "perturbation_chart", "rates_chart", "share_chart",
           "steering_chart"]

_LEGEND = alt.Legend(orient="bottom", columns=4)
_SERIES = alt.Color("series:N", title=None, legend=_LEGEND,
                    scale=alt.Scale(domain=["trained", "random 0", "random 1", "random 2"],
                                    range=["#d62728", "#7f7f7f", "#a6a6a6", "#c7c7c7"]))


def share_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """``share`` (‖J̄_F‖/‖Ū‖) per layer with its bootstrap interval, one panel per model."""
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset="series:N", color=_SERIES)
    pts = base.mark_point(filled=True).encode(
        y=alt.Y("share:Q", title="‖J̄_F‖ / ‖Ū‖ (attention path / block update)"),
        tooltip=["series:N", "layer:O", alt.Tooltip("share:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f"), alt.Tooltip("sigma_share:Q", format=".3f")])
    bars = base.mark_rule().encode(y="lo:Q", y2="hi:Q")
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="black").encode(y=alt.datum(1.0))
    chart = alt.layer(bars, pts, one, data=df).properties(width=250, height=200).facet(
        column=alt.Column("model:N", title=None)).resolve_scale(y="independent")
    return titled(chart, title, model)


def angle_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Smallest principal angle between ``v₁(F_t)`` and each Jacobian-view subspace, per layer.

    Black ticks: the 5% quantile of the chance distribution (random subspaces of the same dimensions);
    a point below its tick is closer than 95% of random subspaces.
    """
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"))
    pts = base.mark_point(filled=True, size=30).encode(
        xOffset="series:N", color=_SERIES,
        y=alt.Y("theta:Q", title="θ₁ (degrees)", scale=alt.Scale(domain=[0, 90])),
        tooltip=["series:N", "layer:O", "target:N", "k:Q", alt.Tooltip("theta:Q", format=".1f"),
                 alt.Tooltip("chance_lo:Q", format=".1f"), alt.Tooltip("p:Q", format=".3g")])
    ticks = base.mark_tick(color="black", thickness=2, size=14).encode(y="chance_lo:Q")
    chart = alt.layer(ticks, pts, data=df).properties(width=110, height=150).facet(
        column=alt.Column("target:N", title=None), row=alt.Row("model:N", title=None))
    return titled(chart, title, model)


def rates_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Per-layer scatter of ``F_t``'s gap ratio against three properties of ``J̄_t`` (trained and random)."""
    panels = []
    for col, name, log in (("radius_J", "spectral radius ρ(J̄)", True), ("delta_H", "δ_H = dep(J̄)/‖Ū‖", False),
                           ("erank", "erank(J̄)", True)):
        panels.append(alt.Chart(df).mark_point(filled=True).encode(
            x=alt.X("gap_ratio:Q", title="gap ratio of F_t", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y(f"{col}:Q", title=name, scale=alt.Scale(type="log") if log else alt.Scale(zero=False)),
            color=alt.Color("kind:N", title=None, legend=_LEGEND), shape=alt.Shape("model:N", title=None, legend=_LEGEND),
            tooltip=["model:N", "series:N", "layer:Q", alt.Tooltip("gap_ratio:Q", format=".3f"),
                     alt.Tooltip(f"{col}:Q", format=".3f")]).properties(width=145, height=170))
    return titled(alt.hconcat(*panels), title, model)


def gamma_chart(df: pd.DataFrame, metric: str, *, title: str, model: str) -> alt.TopLevelMixin:
    """γ_t/chance (``metric="gamma"``) or ρ_t (``"rho"``) per layer for both views.

    Trained: filled points with 95% bootstrap intervals; random-init twins: hollow points. Black ticks:
    the 95% quantile of the null (random subspaces of the same dimension), in the same units.
    """
    if metric == "gamma":
        df = df.assign(y=df.gamma / df.chance, y_lo=df.gamma_lo / df.chance, y_hi=df.gamma_hi / df.chance,
                       null=df.gamma_null_hi / df.chance)
        ytitle = "γ_t / chance level of its k"
    else:
        df = df.assign(y=df.rho, y_lo=df.rho_lo, y_hi=df.rho_hi, null=df.rho_null_hi)
        ytitle = "ρ_t"
    colour = alt.Color("view:N", title=None, legend=_LEGEND)
    tr = df[~df.random]
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset="view:N", color=colour)
    pts = base.mark_point(filled=True, size=45).encode(
        y=alt.Y("y:Q", title=ytitle, scale=alt.Scale(zero=False)),
        tooltip=["view:N", "layer:O", alt.Tooltip("y:Q", format=".3f"), alt.Tooltip("null:Q", format=".3f")])
    bars = base.mark_rule().encode(y="y_lo:Q", y2="y_hi:Q")
    null = alt.Chart().mark_tick(color="black", size=10).encode(x="layer:O", xOffset="view:N", y="null:Q")
    twins = alt.Chart(df[df.random]).mark_point(filled=False, size=25, opacity=0.7).encode(
        x="layer:O", xOffset="view:N", y="y:Q", color=colour, tooltip=["series:N", "view:N", "layer:O",
                                                                      alt.Tooltip("y:Q", format=".3f")])
    layers = [alt.layer(bars, pts, null, data=tr), twins]
    charts = [alt.layer(*[lay.transform_filter(alt.datum.model == m) for lay in layers]).properties(
        width=250, height=190, title=m) for m in pd.unique(df.model)]
    return titled(alt.hconcat(*charts).resolve_scale(y="independent"), title, model)


def context_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Median relative difference ‖J_ctx − J_single‖/‖update‖ per layer (bars: min–max over prompts)."""
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset="series:N", color=_SERIES)
    pts = base.mark_point(filled=True).encode(
        y=alt.Y("rel_diff:Q", title="‖J_ctx − J_single‖_F / ‖J_ctx − R‖_F", scale=alt.Scale(type="log")),
        tooltip=["series:N", "layer:O", alt.Tooltip("rel_diff:Q", format=".3f")])
    bars = base.mark_rule().encode(y="rel_min:Q", y2="rel_max:Q")
    chart = alt.layer(bars, pts, data=df).properties(width=250, height=200).facet(column=alt.Column("model:N", title=None))
    return titled(chart, title, model)


def perturbation_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Relative error of each Jacobian's prediction against the perturbation size (log–log), one panel per model."""
    base = alt.Chart().encode(
        x=alt.X("eps:Q", title="ε (perturbation / ‖x‖)", scale=alt.Scale(type="log")),
        color=alt.Color("jacobian:N", title=None, legend=_LEGEND))
    line = base.mark_line(point=True).encode(
        y=alt.Y("error:Q", title="‖Δ − Jδ‖ / ‖Δ − Rδ‖", scale=alt.Scale(type="log")),
        tooltip=["jacobian:N", alt.Tooltip("eps:Q", format=".0e"), alt.Tooltip("error:Q", format=".2e")])
    band = base.mark_area(opacity=0.2).encode(y="error_lo:Q", y2="error_hi:Q")
    chart = alt.layer(band, line, data=df).properties(width=250, height=200).facet(column=alt.Column("model:N", title=None))
    return titled(chart, title, model)


def steering_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Both views of the O-edit against its strength, one panel per model (rows) and series (columns).

    ``df`` long: ``model``, ``series`` ("trained" / "random init"), ``weights`` (one line each), ``alpha``,
    ``quantity``, ``value`` and, where a prompt-bootstrap interval exists, ``lo``/``hi`` (drawn as a band).
    """
    base = alt.Chart().encode(
        x=alt.X("alpha:Q", title="α|c| / |λ₁(F_L)| (symlog)", scale=alt.Scale(type="symlog")),
        color=alt.Color("quantity:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
        detail="weights:N")
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="|cos| with u", scale=alt.Scale(domain=[0, 1])),
        tooltip=["weights:N", "quantity:N", "alpha:Q", alt.Tooltip("value:Q", format=".3f")])
    band = base.transform_filter("isValid(datum.lo)").mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q")
    chart = alt.layer(band, line, data=df).properties(width=230, height=170).facet(
        row=alt.Row("model:N", title=None), column=alt.Column("series:N", title=None, sort="descending"))  # trained first
    return titled(chart, title, model)
