"""Altair figures of chapter 6 (two views of one layer). Every builder names its model(s) in the subtitle.

Inputs are the long tables of :mod:`lib.chapters.two_views` with a ``model`` column (the family key, one panel
each) and a ``series`` column (``"trained"``, ``"random init, seed 0"``, ...). Trained weights and their
random-init twins have the book's colours (:func:`lib.page.plotting.model_color`); null bands, chance levels
and reference lines are grey or black and have their own legend entry. Widths stay under 640 px; legends sit
below the plot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import altair as alt
import pandas as pd

from lib.page.plotting import NULL_COLOR, OTHER_COLORS, model_kind, model_palette, titled

__all__ = ["REFERENCE_COLOR", "angle_chart", "context_chart", "gamma_chart", "perturbation_chart", "rates_chart",
           "series_order", "share_chart", "steering_chart"]

_LEGEND = alt.Legend(orient="bottom", columns=3, title=None, symbolOpacity=1)
REFERENCE_COLOR = "#000000"
"""Reference lines (half of the update, chance level 1): black, dashed."""

_TITLES = {
    "share": "The attention path's share of the block update, on a single token and in context",
    "angle": "Smallest principal angle between v₁(Fₜ) and the Jacobian's subspaces",
    "rates": "Gap ratio of Fₜ against three properties of J̄ₜ, one point per layer",
    "context": "Single-token against in-context Jacobian, per layer",
    "perturbation": "Prediction error of each Jacobian against the perturbation size",
    "steering": "The O-edit of the last block, seen by both views",
}
"""Each chart's default title."""
_DESCRIPTIONS = {
    "share": "Per layer, the attention path's projection share ⟨J̄_A, Ū⟩/‖Ū‖² of the block update with its "
             "bootstrap interval, on a single token and in context, for trained models and their twins.",
    "angle": "Per layer and Jacobian subspace, the smallest principal angle θ₁ between v₁(Fₜ) and the "
             "subspace, against the 5% quantile of chance, for trained models and their twins.",
    "rates": "Scatter of Fₜ's gap ratio against ρ(J̄), δ_H and erank(J̄), one point per layer of each "
             "trained model and twin.",
    "context": "Per layer, the relative difference between the single-token and the in-context Jacobian, "
               "for trained models and their twins.",
    "perturbation": "Log–log error of the single-token and the in-context Jacobian's linear prediction of a "
                    "block's real change, against the perturbation size.",
    "steering": "Four alignments with the steering direction u against the edit's strength, per model and "
                "weights: the F view's promise, two Jacobian-view directions and the tokens.",
}
"""Each chart's default description (its ARIA label), used when the page gives none."""


def _titled(chart: alt.TopLevelMixin, name: str, model: str, title: str | None,
            description: str | None) -> alt.TopLevelMixin:
    return titled(chart, title or _TITLES[name], model, description or _DESCRIPTIONS[name])


def series_order(values: Iterable[object]) -> list[str]:
    """The series of a chart in legend order: trained first, then the random-init twins, then the rest
    (each group in sorted order)."""
    vals = sorted({str(v) for v in values})
    rank = {"trained": 0, "random": 1, None: 2}
    return sorted(vals, key=lambda v: rank[model_kind(v)])


def _colour(field: str, values: Iterable[object], refs: Mapping[str, str] | None = None) -> alt.Color:
    """:func:`lib.page.plotting.model_color` of ``field`` over ``values``, with the reference entries ``refs``
    (label → colour; drawn with ``color=alt.datum(label)``) appended to the same legend."""
    domain, colours = model_palette(series_order(values))
    refs = dict(refs or {})
    return alt.Color(f"{field}:N", title=None, legend=_LEGEND,
                     scale=alt.Scale(domain=domain + list(refs), range=colours + list(refs.values())))


def share_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                description: str | None = None) -> alt.TopLevelMixin:
    """The attention path's projection share ``attn`` = ⟨J̄_A, Ū⟩/‖Ū‖² per layer with its bootstrap interval
    (``attn_lo``/``attn_hi``): one column per model, one row per ``protocol`` (single token, in context;
    :func:`lib.chapters.two_views.share_both`); a dashed line at ½, where the attention path carries half the
    update."""
    half = "½: half of the update"
    order = series_order(df.series)
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset=alt.XOffset("series:N", sort=order),
                              color=_colour("series", df.series, {half: REFERENCE_COLOR}))
    pts = base.mark_point(filled=True).encode(
        y=alt.Y("attn:Q", title="⟨J̄_A, Ū⟩ / ‖Ū‖²"),
        tooltip=["series:N", "protocol:N", "layer:O", alt.Tooltip("attn:Q", format=".3f"),
                 alt.Tooltip("attn_lo:Q", format=".3f"), alt.Tooltip("attn_hi:Q", format=".3f"),
                 alt.Tooltip("size_attn:Q", format=".3f"), alt.Tooltip("size_avoid:Q", format=".3f")])
    bars = base.mark_rule().encode(y="attn_lo:Q", y2="attn_hi:Q")
    ref = alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y=alt.datum(0.5), color=alt.datum(half))
    chart = alt.layer(bars, pts, ref, data=df).properties(width=250, height=160).facet(
        column=alt.Column("model:N", title=None, sort=list(pd.unique(df.model))),
        row=alt.Row("protocol:N", title=None, sort=list(pd.unique(df.protocol)),
                    header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start",
                                      labelFontWeight="bold")))
    return _titled(chart, "share", model, title, description)


def angle_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                description: str | None = None) -> alt.TopLevelMixin:
    """Smallest principal angle between ``v₁(F_t)`` and each Jacobian-view subspace, per layer.

    Grey ticks: the 5% quantile of the chance distribution (random subspaces of the same dimensions), one per
    series; a point below its tick is closer than 95% of random subspaces.
    """
    chance = "chance: 5% quantile of random subspaces"
    order = series_order(df.series)
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset=alt.XOffset("series:N", sort=order))
    pts = base.mark_point(filled=True, size=30).encode(
        color=_colour("series", df.series, {chance: NULL_COLOR}),
        y=alt.Y("theta:Q", title="θ₁ (degrees)", scale=alt.Scale(domain=[0, 90])),
        tooltip=["series:N", "layer:O", "target:N", "k:Q", alt.Tooltip("theta:Q", format=".1f"),
                 alt.Tooltip("chance_lo:Q", format=".1f"), alt.Tooltip("p:Q", format=".3g")])
    ticks = base.mark_tick(thickness=2, size=8).encode(y="chance_lo:Q", color=alt.datum(chance))
    chart = alt.layer(ticks, pts, data=df).properties(width=110, height=150).facet(
        column=alt.Column("target:N", title=None, sort=list(pd.unique(df.target))),
        row=alt.Row("model:N", title=None, sort=list(pd.unique(df.model))))
    return _titled(chart, "angle", model, title, description)


def rates_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                description: str | None = None) -> alt.TopLevelMixin:
    """Per-layer scatter of ``F_t``'s gap ratio against three properties of ``J̄_t`` (trained and random init).

    ``ρ(J̄)`` and ``erank(J̄)`` on log axes (a few decoder layers lie far above the bulk); colour: trained or
    random init (pooled seeds); shape: model.
    """
    df = df.assign(kind=[("random init" if r else "trained") for r in df.random])
    colour = _colour("kind", df.kind)
    panels = []
    for col, name, log in (("radius_J", "spectral radius ρ(J̄) (log)", True),
                           ("delta_H", "δ_H = dep(Ū) / ‖Ū‖", False), ("erank", "erank(J̄) (log)", True)):
        panels.append(alt.Chart(df).mark_point(filled=True).encode(
            x=alt.X("gap_ratio:Q", title="gap ratio of Fₜ", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y(f"{col}:Q", title=name, scale=alt.Scale(type="log") if log else alt.Scale(zero=False)),
            color=colour, shape=alt.Shape("model:N", title=None, legend=_LEGEND),
            tooltip=["model:N", "series:N", "layer:Q", alt.Tooltip("gap_ratio:Q", format=".3f"),
                     alt.Tooltip(f"{col}:Q", format=".3f")]).properties(width=145, height=170))
    return _titled(alt.hconcat(*panels), "rates", model, title, description)


def gamma_chart(df: pd.DataFrame, metric: str, *, model: str, title: str | None = None,
                description: str | None = None) -> alt.TopLevelMixin:
    """γ_t/chance (``metric="gamma"``) or ρ_t (``"rho"``) per layer for both views, one row per model.

    Points with 95% prompt-bootstrap intervals, coloured by series; grey ticks: the 95% quantile of each
    series' null (random subspaces of the same dimension), in the same units; for γ a dashed line at 1, the
    chance level. Within a model both views share the y axis.
    """
    null = "null: 95% quantile of random subspaces"
    refs = {null: NULL_COLOR}
    if metric == "gamma":
        df = df.assign(y=df.gamma / df.chance, y_lo=df.gamma_lo / df.chance, y_hi=df.gamma_hi / df.chance,
                       null=df.gamma_null_hi / df.chance)
        ytitle, level = "γₜ / chance level of its k", "chance level"
        refs[level] = REFERENCE_COLOR
        title = title or "γₜ over its chance level, against v₁(Fₜ) and against v₁(J̄ₜ)"
    elif metric == "rho":
        df = df.assign(y=df.rho, y_lo=df.rho_lo, y_hi=df.rho_hi, null=df.rho_null_hi)
        ytitle, level = "ρₜ", None
        title = title or "ρₜ against v₁(Fₜ) and against v₁(J̄ₜ)"
    else:
        raise ValueError(f"metric must be 'gamma' or 'rho', got {metric!r}")
    order = series_order(df.series)
    colour = _colour("series", df.series, refs)
    rows = []
    for m in pd.unique(df.model):
        base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset=alt.XOffset("series:N", sort=order))
        pts = base.mark_point(filled=True, size=30).encode(
            y=alt.Y("y:Q", title=ytitle, scale=alt.Scale(zero=False)), color=colour,
            tooltip=["series:N", "view:N", "layer:O", alt.Tooltip("y:Q", format=".3f"),
                     alt.Tooltip("y_lo:Q", format=".3f"), alt.Tooltip("y_hi:Q", format=".3f"),
                     alt.Tooltip("null:Q", format=".3f")])
        bars = base.mark_rule().encode(y="y_lo:Q", y2="y_hi:Q", color=colour)
        ticks = base.mark_tick(thickness=2, size=8).encode(y="null:Q", color=alt.datum(null))
        layers = [ticks, bars, pts]
        if level:
            layers.append(alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y=alt.datum(1.0), color=alt.datum(level)))
        rows.append(alt.layer(*layers, data=df[df.model == m]).properties(width=250, height=150).facet(
            column=alt.Column("view:N", title=None, header=alt.Header(labelFontWeight="bold")),
            title=alt.TitleParams(str(m), anchor="start", fontSize=12)))
    description = description or (f"Per layer, {ytitle} of the tokens against v₁(Fₜ) and against v₁(J̄ₜ), "
                                   "with intervals and the null's 95% quantile, for trained models and twins.")
    return titled(alt.vconcat(*rows), title, model, description)


def context_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                  description: str | None = None) -> alt.TopLevelMixin:
    """Median relative difference ‖J_ctx − J_single‖/‖update‖ per layer (bars: min–max over prompts), log
    axis."""
    order = series_order(df.series)
    base = alt.Chart().encode(x=alt.X("layer:O", title="layer"), xOffset=alt.XOffset("series:N", sort=order),
                              color=_colour("series", df.series))
    pts = base.mark_point(filled=True).encode(
        y=alt.Y("rel_diff:Q", title="‖J_ctx − J_single‖ / ‖J_ctx − R‖ (log)", scale=alt.Scale(type="log")),
        tooltip=["series:N", "layer:O", alt.Tooltip("rel_diff:Q", format=".3f"),
                 alt.Tooltip("rel_min:Q", format=".3f"), alt.Tooltip("rel_max:Q", format=".3f")])
    bars = base.mark_rule().encode(y="rel_min:Q", y2="rel_max:Q")
    chart = alt.layer(bars, pts, data=df).properties(width=250, height=200).facet(
        column=alt.Column("model:N", title=None))
    return _titled(chart, "context", model, title, description)


def perturbation_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                       description: str | None = None) -> alt.TopLevelMixin:
    """Relative error of each Jacobian's prediction against the perturbation size (log–log), one panel per
    model; band: min–max over the directions. The two Jacobians get two of the book's other colours."""
    kinds = ["in-context", "single-token"]
    colour = alt.Color("jacobian:N", title=None, legend=_LEGEND,
                       scale=alt.Scale(domain=kinds, range=[OTHER_COLORS[0], OTHER_COLORS[2]]))
    base = alt.Chart().encode(x=alt.X("eps:Q", title="ε (perturbation / ‖x‖, log)", scale=alt.Scale(type="log")),
                              color=colour)
    line = base.mark_line(point=True).encode(
        y=alt.Y("error:Q", title="‖Δ − Jδ‖ / ‖Δ − Rδ‖ (log)", scale=alt.Scale(type="log")),
        tooltip=["jacobian:N", alt.Tooltip("eps:Q", format=".0e"), alt.Tooltip("error:Q", format=".2e")])
    band = base.mark_area(opacity=0.2).encode(y="error_lo:Q", y2="error_hi:Q")
    chart = alt.layer(band, line, data=df).properties(width=250, height=200).facet(
        column=alt.Column("model:N", title=None))
    return _titled(chart, "perturbation", model, title, description)


def steering_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                   description: str | None = None) -> alt.TopLevelMixin:
    """Both views of the O-edit against its strength: one row per quantity, one column per model, one line
    per model variant (``weights``: trained or a twin's seed) in the book's colours.

    ``df`` long (:func:`lib.chapters.two_views.steering_long`): ``model``, ``weights``, ``alpha``, ``quantity``,
    ``value`` and, where a prompt-bootstrap interval exists, ``lo``/``hi`` (drawn as a band).
    """
    base = alt.Chart().encode(
        x=alt.X("alpha:Q", title="α|c| / |λ₁(F_L)| (symlog)", scale=alt.Scale(type="symlog"),
                axis=alt.Axis(values=sorted(float(a) for a in pd.unique(df.alpha)))),
        color=_colour("weights", df.weights), detail="weights:N")
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="|cos| with u", scale=alt.Scale(domain=[0, 1])),
        tooltip=["weights:N", "quantity:N", "alpha:Q", alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")])
    band = base.transform_filter("isValid(datum.lo)").mark_area(opacity=0.15).encode(y="lo:Q", y2="hi:Q")
    quantities = list(pd.unique(df.quantity))
    chart = alt.layer(band, line, data=df).properties(width=250, height=110).facet(
        row=alt.Row("quantity:N", title=None, sort=quantities,
                    header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start", labelFontWeight="bold")),
        column=alt.Column("model:N", title=None, sort=list(pd.unique(df.model))))
    return _titled(chart, "steering", model, title, description)
