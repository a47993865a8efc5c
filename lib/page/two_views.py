"""Chapter 6's page (two views of one layer): its Altair charts, the numbers its prose states, its tables.

The inputs are the long tables of :mod:`lib.chapters.two_views` (the chapter's runs over models and twins, its
frames and verdict rules), with a ``model`` column (the family key, one panel each) and a ``series`` column
(``"trained"``, ``"random init, seed 0"``, ...).

* Charts (``*_chart``): every builder names its model(s) in the subtitle. Trained weights and their random-init
  twins have the book's colours (:func:`lib.page.plotting.model_color`); null bands, chance levels and reference
  lines are grey or black and have their own legend entry. Widths stay under 640 px; legends sit below the plot.
* Findings (``*_findings``): each turns one section's tables into a :class:`Findings`, the chapter's one
  convention for glue: the numbers its prose reads by name and its claim's row of the Results page, glued in
  one call, ``glue_claim("TV1", **share_findings(...).glue())``. The verdicts come from the chapter's rules
  (:func:`lib.chapters.two_views.share_verdict`, :func:`~lib.chapters.two_views.combined_verdict`, ...).
* :func:`readable`: the tables the reader sees, with words for column names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from lib.chapters.two_views import (
    ANGLE_TARGETS,
    GAMMA_VIEWS,
    RATE_PREDICTED,
    RATE_STRONG,
    angle_summary,
    angle_verdict,
    combined_verdict,
    context_verdict,
    design_label,
    gamma_summary,
    gamma_verdict,
    rate_verdict,
    share_verdict,
    steering_saturating,
    twin_label,
)
from lib.chapters.two_views_angles import ANGLE_CLOSE
from lib.methods import alignment as als
from lib.methods import bridge as br
from lib.page import prose
from lib.page.plotting import (
    NULL_COLOR,
    OTHER_COLORS,
    model_kind,
    model_palette,
    titled,
    twin_band,
    twin_band_layers,
)
from lib.page.tables import interval_text, value_range

__all__ = ["REFERENCE_COLOR", "Findings", "angle_chart", "angle_findings", "context_chart",
           "context_findings", "gamma_chart", "gamma_findings", "perturbation_chart", "rate_findings",
           "rates_chart", "readable", "series_order", "share_chart", "share_findings", "steering_chart",
           "steering_findings", "steering_long"]

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
    "rates": "Scatter of Fₜ's gap ratio against ρ(J̄), the Henrici departure of Ū and erank(J̄), one point per "
             "layer of each trained model and twin.",
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
    data = twin_band(df, keys=["model", "protocol", "layer"], values=["attn"])
    order = series_order(data.series)
    x, off = alt.X("layer:O", title="layer"), alt.XOffset("series:N", sort=order)
    colour = _colour("series", data.series, {half: REFERENCE_COLOR})
    own = alt.Chart().transform_filter("!datum.band").encode(x=x, xOffset=off, color=colour)
    pts = own.mark_point(filled=True, size=40).encode(
        y=alt.Y("attn:Q", title="attention path's share of Ū"),
        tooltip=["series:N", "protocol:N", "layer:O", alt.Tooltip("attn:Q", format=".3f"),
                 alt.Tooltip("attn_lo:Q", format=".3f"), alt.Tooltip("attn_hi:Q", format=".3f"),
                 alt.Tooltip("size_attn:Q", format=".3f"), alt.Tooltip("size_avoid:Q", format=".3f")])
    bars = own.mark_rule(strokeWidth=1.5).encode(y="attn_lo:Q", y2="attn_hi:Q")
    band = twin_band_layers(x, "attn", colour, x_offset=off)
    ref = alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y=alt.datum(0.5), color=alt.datum(half))
    chart = alt.layer(*band, bars, pts, ref, data=data).properties(width=250, height=160).facet(
        column=alt.Column("model:N", title=None, sort=list(pd.unique(df.model))),
        row=alt.Row("protocol:N", title=None, sort=list(pd.unique(df.protocol)),
                    header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start",
                                      labelFontWeight="bold")))
    return _titled(chart, "share", model, title, description)


def _level_per_layer(field: str, label: str, y_title: str, *, below: bool = False) -> alt.Chart:
    """A reference level per layer, the width of the layer's whole slot (so it reads with every point of that
    layer): from the least to the greatest ``field`` over the layer's series, outlined in :data:`NULL_COLOR`
    (a thick rule where the series agree). ``below``: shade from 0 up to the level instead (a zone). Coloured
    ``alt.datum(label)``, so the chart's colour legend names it; ``y_title``: the chart's y title (a layer's
    own would be joined to it)."""
    agg = alt.Chart().transform_aggregate(least=f"min({field})", greatest=f"max({field})", groupby=["layer"])
    agg = agg.transform_calculate(zero="0")
    x = alt.X("layer:O", title="layer")
    tips = ["layer:O", alt.Tooltip("least:Q", format=".2f", title=f"{label} (least)"),
            alt.Tooltip("greatest:Q", format=".2f", title=f"{label} (greatest)")]
    if below:
        return agg.mark_bar(opacity=0.35, stroke=NULL_COLOR, strokeWidth=2).encode(
            x=x, y=alt.Y("zero:Q", title=y_title), y2="greatest:Q", color=alt.datum(label), tooltip=tips)
    return agg.mark_bar(opacity=0.5, stroke="#616161", strokeWidth=2.5).encode(
        x=x, y=alt.Y("least:Q", title=y_title), y2="greatest:Q", color=alt.datum(label), tooltip=tips)


def angle_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                description: str | None = None) -> alt.TopLevelMixin:
    """Smallest principal angle between ``v₁(F_t)`` and each Jacobian-view subspace, per layer: the trained model's
    points, its random-init twins as one band (:func:`lib.page.plotting.twin_band`).

    Grey zone: below the 5% quantile of the chance distribution (random subspaces of the same dimensions), per
    layer and as wide as the layer's slot (its top edge spans the quantiles of the layer's series); a point inside
    it is closer than 95% of random subspaces.
    """
    chance = "closer than 95% of random subspaces"
    data = twin_band(df, keys=["model", "target", "layer"], values=["theta"])
    order = series_order(data.series)
    x, off = alt.X("layer:O", title="layer"), alt.XOffset("series:N", sort=order)
    colour = _colour("series", data.series, {chance: NULL_COLOR})
    y = alt.Y("theta:Q", title="θ₁ (degrees)", scale=alt.Scale(domain=[0, 90]))
    pts = alt.Chart().transform_filter("!datum.band").mark_point(filled=True, size=40).encode(
        x=x, xOffset=off, color=colour, y=y,
        tooltip=["series:N", "layer:O", "target:N", "k:Q", alt.Tooltip("theta:Q", format=".1f"),
                 alt.Tooltip("chance_lo:Q", format=".1f"), alt.Tooltip("p:Q", format=".3g")])
    band = twin_band_layers(x, "theta", colour, x_offset=off, y_scale=alt.Scale(domain=[0, 90]), fmt=".1f")
    zone = _level_per_layer("chance_lo", chance, "θ₁ (degrees)", below=True)
    chart = alt.layer(zone, *band, pts, data=data).properties(width=110, height=150).facet(
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
                           ("delta_H", "Henrici departure dep(Ū) / ‖Ū‖", False), ("erank", "erank(J̄) (log)", True)):
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
    data = twin_band(df, keys=["model", "view", "layer"], values=["y"])
    order = series_order(data.series)
    colour = _colour("series", data.series, refs)
    x, off = alt.X("layer:O", title="layer"), alt.XOffset("series:N", sort=order)
    rows = []
    for m in pd.unique(df.model):
        own = alt.Chart().transform_filter("!datum.band").encode(x=x, xOffset=off)
        pts = own.mark_point(filled=True, size=40).encode(
            y=alt.Y("y:Q", title=ytitle, scale=alt.Scale(zero=False)), color=colour,
            tooltip=["series:N", "view:N", "layer:O", alt.Tooltip("y:Q", format=".3f"),
                     alt.Tooltip("y_lo:Q", format=".3f"), alt.Tooltip("y_hi:Q", format=".3f"),
                     alt.Tooltip("null:Q", format=".3f")])
        bars = own.mark_rule(strokeWidth=1.5).encode(y="y_lo:Q", y2="y_hi:Q", color=colour)
        band = twin_band_layers(x, "y", colour, x_offset=off)
        layers = [_level_per_layer("null", null, ytitle), *band, bars, pts]
        if level:
            layers.append(alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y=alt.datum(1.0), color=alt.datum(level)))
        rows.append(alt.layer(*layers, data=data[data.model == m]).properties(width=250, height=150).facet(
            column=alt.Column("view:N", title=None, header=alt.Header(labelFontWeight="bold")),
            title=alt.TitleParams(str(m), anchor="start", fontSize=12)))
    description = description or (f"Per layer, {ytitle} of the tokens against v₁(Fₜ) and against v₁(J̄ₜ), "
                                   "with intervals and the null's 95% quantile, for trained models and twins.")
    return titled(alt.vconcat(*rows), title, model, description)


def context_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                  description: str | None = None) -> alt.TopLevelMixin:
    """Median relative difference ‖J_ctx − J_single‖/‖update‖ per layer (bars: min–max over prompts), log
    axis."""
    data = twin_band(df, keys=["model", "layer"], values=["rel_diff"])
    order = series_order(data.series)
    x, off = alt.X("layer:O", title="layer"), alt.XOffset("series:N", sort=order)
    colour = _colour("series", data.series)
    y_scale = alt.Scale(type="log")
    own = alt.Chart().transform_filter("!datum.band").encode(x=x, xOffset=off, color=colour)
    pts = own.mark_point(filled=True, size=40).encode(
        y=alt.Y("rel_diff:Q", title="‖J(in context) − J(single)‖ / ‖J(in context) − R‖ (log)", scale=y_scale),
        tooltip=["series:N", "layer:O", alt.Tooltip("rel_diff:Q", format=".3f"),
                 alt.Tooltip("rel_min:Q", format=".3f"), alt.Tooltip("rel_max:Q", format=".3f")])
    bars = own.mark_rule(strokeWidth=1.5).encode(y=alt.Y("rel_min:Q", scale=y_scale), y2="rel_max:Q")
    band = twin_band_layers(x, "rel_diff", colour, x_offset=off, y_scale=y_scale)
    chart = alt.layer(*band, bars, pts, data=data).properties(width=250, height=200).facet(
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


_TYPESET = {"F_L′": "F′ of block L", "Ū_L": "Ū of block L", "F_L": "F of block L"}
"""Code-like subscripts of the chapter's labels and the words the chart shows for them (Unicode has no subscript L)."""


def _typeset(label: str) -> str:
    """``label`` with the plain-text subscripts of :data:`_TYPESET` in words, as the prose reads them."""
    for raw, text in _TYPESET.items():
        label = label.replace(raw, text)
    return label


def _panel(model: str, quantity: str) -> str:
    """A steering panel's header, ``"<model>: <view> · <what>"`` for a quantity ``"<view>: <what>"`` (the chart
    splits it into two lines at ``" · "``)."""
    view, sep, what = quantity.partition(": ")
    return f"{model}: {view} · {what}" if sep else f"{model} · {quantity}"


def steering_chart(df: pd.DataFrame, *, model: str, title: str | None = None,
                   description: str | None = None) -> alt.TopLevelMixin:
    """Both views of the O-edit against its strength: one row per quantity, one column per model, one line
    per model variant (``weights``: trained or a twin's seed) in the book's colours.

    ``df`` long (:func:`steering_long`): ``model``, ``weights``, ``alpha``, ``quantity``,
    ``value`` and, where a prompt-bootstrap interval exists, ``lo``/``hi`` (drawn as a band).
    """
    df = df.assign(quantity=[_typeset(q) for q in df.quantity])
    data = twin_band(df, keys=["model", "quantity", "alpha"], values=["value"], field="weights")
    models, quantities = list(pd.unique(df.model)), list(pd.unique(df.quantity))
    # one panel per (quantity, model), wrapped two to a row: the grid of the desktop (a row per quantity, a column
    # per model), and one column on a phone (book/_static/charts.js gives a wrapped facet fewer columns); the
    # header reads "model: view" over the quantity (two lines, so it is no wider than a phone's plot)
    data["panel"] = [_panel(m, q) for m, q in zip(data.model, data.quantity)]
    panels = [_panel(m, q) for q in quantities for m in models]
    colour = _colour("weights", data.weights)
    x = alt.X("alpha:Q", title="edit strength α|c| / |λ₁| (symlog)", scale=alt.Scale(type="symlog"),
              axis=alt.Axis(values=sorted(float(a) for a in pd.unique(df.alpha))))
    y_scale = alt.Scale(domain=[0, 1])
    own = alt.Chart().transform_filter("!datum.band").encode(x=x, color=colour, detail="weights:N")
    line = own.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="|cos| with u", scale=y_scale),
        tooltip=["weights:N", "quantity:N", "alpha:Q", alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")])
    ci = own.transform_filter("isValid(datum.lo)").mark_area(opacity=0.15).encode(y="lo:Q", y2="hi:Q")
    band = twin_band_layers(x, "value", colour, field="weights", y_scale=y_scale)
    chart = alt.layer(*band, ci, line, data=data).properties(width=250, height=110).facet(
        facet=alt.Facet("panel:N", title=None, sort=panels,
                        header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start",
                                          labelFontWeight="bold", labelExpr="split(datum.value, ' · ')")),
        columns=len(models))
    return _titled(chart, "steering", model, title, description)


def steering_long(steer: pd.DataFrame, quantities: dict[str, str]) -> pd.DataFrame:
    """:func:`lib.chapters.two_views.steering_views_at` tables (tagged with ``model``, ``series``, ``weights``,
    as :func:`lib.chapters.two_views.steering_twins` gives them) in the long form of :func:`steering_chart`:
    one row per quantity, labelled by ``quantities`` (column → label, e.g.
    :data:`lib.chapters.two_views.STEERING_QUANTITIES`), with ``lo``/``hi`` where the quantity has an interval
    (NaN otherwise)."""
    parts = []
    for col, label in quantities.items():
        part = steer[["model", "series", "weights", "alpha"]].assign(quantity=label, value=steer[col])
        has = f"{col}_lo" in steer
        parts.append(part.assign(lo=steer[f"{col}_lo"] if has else np.nan, hi=steer[f"{col}_hi"] if has else np.nan))
    return pd.concat(parts, ignore_index=True)


# -- what the prose says: the numbers of each section and its row of the Results page ----------------------------
@dataclass(frozen=True)
class Findings:
    """The numbers one section of chapter 6 writes into its prose, and its claim's row of the Results page.

    The chapter's one convention for glue: a section's ``*_findings`` function returns one ``Findings``, and
    the page glues it in one hidden call, ``glue_claim("TV1", **findings.glue())``; the prose then reads every
    number by its name. A number is formatted here, once, never in the chapter's cells.

    Attributes:
        numbers: glue name → value (formatted text or int), read by the prose's ``{eval}`name```.
        claim: ``models``, ``measured`` and ``verdict`` for :func:`lib.page.claims.glue_claim` (the chapter
            calls it with the claim's id, which the Results page's test looks for in the chapter).
    """

    numbers: dict[str, Any]
    claim: dict[str, str] = field(default_factory=dict)

    def glue(self) -> dict[str, str]:
        """Glue every number (:func:`lib.page.prose.glue`) and return :attr:`claim`, for
        ``glue_claim("TV1", **findings.glue())``."""
        for name, value in self.numbers.items():
            prose.glue(name, value, display=False)
        return self.claim


def _median_ci(r: pd.Series) -> str:
    return f"{r.med:.2f} [{r.med_lo:.2f}, {r.med_hi:.2f}]"


def share_findings(share: pd.DataFrame, share_ctx: pd.DataFrame, models: str) -> Findings:
    """Section 6.1 (claim TV1): the attention path's projection share of the update, per model key, on a
    single token (``share``, ``TwinViews.table("share")``) and in context (``share_ctx``, the third table of
    :func:`lib.chapters.two_views.context_twins`).

    Glued per key, single token: ``sh_tr_<key>`` (range over layers of the trained share), ``sh_ci_<key>``
    (its intervals' extent), ``sh_med_tr_<key>`` (median over layers with its interval), ``sh_rd_<key>`` /
    ``sh_med_rd_<key>`` (the twins' per-layer range and their medians' range), ``sz_tr_<key>`` /
    ``sz_av_<key>`` (sizes ‖J̄_F‖/‖Ū‖ and ‖Ū − J̄_F‖/‖Ū‖, ranges over layers); in context the same with
    ``cx`` for ``sh`` (``cxs_tr_<key>``, ``cxs_ci_<key>``, ``cxs_med_tr_<key>``, ``cxs_rd_<key>``,
    ``cxs_med_rd_<key>``, ``cxz_tr_<key>``, ``cxz_av_<key>``) and the value path's and softmax paths'
    shares ``cxs_val_<key>``, ``cxs_soft_<key>``, ``cxs_val_rd_<key>``; the verdicts ``sh_v_<key>`` and
    ``cxs_v_<key>`` (:func:`lib.chapters.two_views.share_verdict`). The claim's verdict is
    :func:`lib.chapters.two_views.combined_verdict` of the four.
    """
    numbers: dict[str, Any] = {}
    parts, verdicts = [], []
    for key in pd.unique(share.model):
        for tag, tab, name in (("sh", share, "single token"), ("cxs", share_ctx, "in context")):
            z = "sz" if tag == "sh" else "cxz"
            tr = tab[(tab.model == key) & ~tab.random]
            rd = tab[(tab.model == key) & tab.random]
            first, twins = tr.iloc[0], rd.groupby("series").first()
            numbers[f"{tag}_tr_{key}"] = value_range(tr.attn)
            numbers[f"{tag}_ci_{key}"] = f"{tr.attn_lo.min():.2f}–{tr.attn_hi.max():.2f}"
            numbers[f"{tag}_med_tr_{key}"] = _median_ci(first)
            numbers[f"{tag}_rd_{key}"] = value_range(rd.attn)
            numbers[f"{tag}_med_rd_{key}"] = value_range(twins.med)
            numbers[f"{z}_tr_{key}"] = value_range(tr.size_attn)
            numbers[f"{z}_av_{key}"] = value_range(tr.size_avoid)
            if tag == "cxs":
                numbers[f"cxs_val_{key}"] = value_range(tr.value)
                numbers[f"cxs_soft_{key}"] = value_range(tr.softmax)
                numbers[f"cxs_val_rd_{key}"] = value_range(rd.value)
            v = share_verdict(first, twins)
            numbers[f"{tag}_v_{key}"] = v
            verdicts.append(v)
            parts.append(f"{key} {name}: ⟨J̄_A, Ū⟩/‖Ū‖² median {_median_ci(first)} trained, twins' medians "
                         f"{value_range(twins.med)} → {v}")
    return Findings(numbers, {"models": models, "measured": "; ".join(parts) + " (A = Fₜ single token, the "
                              "attention core's Jacobian in context)", "verdict": combined_verdict(verdicts)})


def _layer_list(layers: Sequence[int]) -> str:
    """``[2]`` → ``"layer 2"``, ``[2, 3]`` → ``"layers 2 and 3"``, ``[1, 2, 5]`` → ``"layers 1, 2 and 5"``."""
    ls = [str(int(t)) for t in layers]
    return f"layer {ls[0]}" if len(ls) == 1 else f"layers {', '.join(ls[:-1])} and {ls[-1]}"


def _degrees(values: Iterable[float]) -> str:
    """``"3° and 18°"``: angles in degrees, joined as the prose reads them."""
    vs = [f"{v:.0f}°" for v in values]
    return vs[0] if len(vs) == 1 else f"{', '.join(vs[:-1])} and {vs[-1]}"


def angle_findings(angles: pd.DataFrame, layers: pd.DataFrame, ctx: pd.DataFrame, models: str, k: int) -> Findings:
    """Section 6.2 (claim TV2): how often ``v₁(F_t)`` is closer than chance to the Jacobian's subspaces.

    ``angles``: ``TwinViews.table("angles")`` (one test per layer and subspace); ``layers``:
    :func:`lib.chapters.two_views_angles.angle_layers` (one test per layer over the four subspaces, the count
    the claim uses: the four subspaces of a layer are not four pieces of evidence); ``ctx``: the first table of
    :func:`lib.chapters.two_views.context_twins` (the same angles from the in-context mean Jacobians).

    Glued: ``al_<key>_<i>_tr`` / ``_rd`` ("a of n" layers for subspace ``i`` of
    :data:`lib.chapters.two_views.ANGLE_TARGETS`, each its own test); ``al_<key>_tr`` / ``_rd`` and
    ``al_tot_tr`` / ``al_tot_rd`` (layers closer than chance to at least one subspace, per model and in all);
    ``ml_theta_min`` and ``ml_chance`` (MiniLM's best angle and its chance quantiles); ``al_close_deg``
    (:data:`lib.chapters.two_views_angles.ANGLE_CLOSE`), ``al_close`` (the trained layers whose angle to
    ``J̄_t``'s eigenvectors is under it, named with their angles), ``al_close_n`` and ``al_close_rd`` (how
    many trained and twin layers are under it), ``al_close_ctx`` (the same trained layers' angles in context),
    ``al_close_kept`` (how many of them stay under it in context) and ``al_close_fate`` (that in words: "does
    not survive in context", ...). The claim's verdict is :func:`lib.chapters.two_views.angle_verdict` of the
    shares of layers, trained and twins.
    """
    summary = angle_summary(angles)
    twin = twin_label(angles)

    def aligned(key: str, target: str, random: bool) -> tuple[int, int]:
        s = summary[(summary.model == key) & (summary.target == target)
                    & (summary.series == (twin if random else "trained"))].iloc[0]
        return int(s.layers_aligned), int(s.n)

    keys = list(pd.unique(angles.model))
    numbers: dict[str, Any] = {}
    for key in keys:
        for i, target in enumerate(ANGLE_TARGETS):
            numbers[f"al_{key}_{i}_tr"] = "{} of {}".format(*aligned(key, target, False))
            numbers[f"al_{key}_{i}_rd"] = "{} of {}".format(*aligned(key, target, True))
    hit = layers.q_joint < 0.05
    counts = {}
    for random, tag in ((False, "tr"), (True, "rd")):
        for key in keys:
            sel = (layers.model == key) & (layers.random == random)
            counts[key, tag] = (int(hit[sel].sum()), int(sel.sum()))
            numbers[f"al_{key}_{tag}"] = "{} of {}".format(*counts[key, tag])
        sel = layers.random == random
        counts["all", tag] = (int(hit[sel].sum()), int(sel.sum()))
        numbers[f"al_tot_{tag}"] = "{} of {}".format(*counts["all", tag])
    ang_tr = angles[~angles.random]
    ml = angles[angles.model == "MiniLM"]
    numbers["ml_theta_min"] = f"{ang_tr[ang_tr.model == 'MiniLM'].theta.min():.0f}°"
    numbers["ml_chance"] = f"{ml.chance_lo.min():.0f}–{ml.chance_lo.max():.0f}°"
    eig = angles[angles.target == ANGLE_TARGETS[0]]
    close = eig[eig.theta < ANGLE_CLOSE]
    close_tr = close[~close.random].sort_values(["model", "layer"])
    numbers["al_close_deg"] = f"{ANGLE_CLOSE:.0f}°"
    parts, ctx_parts, kept = [], [], 0
    for key, g in close_tr.groupby("model", sort=False):
        name = "the decoder" if key == "decoder" else key
        parts.append(f"{name}'s {_layer_list(g.layer)}, at {_degrees(g.theta)}")
        c = ctx[(ctx.model == key) & ~ctx.random].set_index("layer").theta_ctx.loc[g.layer.to_numpy()]
        ctx_parts.append(_degrees(c))
        kept += int((c < ANGLE_CLOSE).sum())
    numbers["al_close"] = "; ".join(parts) if parts else "no layer"
    numbers["al_close_ctx"] = "; ".join(ctx_parts) if ctx_parts else "none to check"
    numbers["al_close_kept"] = f"{kept} of {len(close_tr)}"
    numbers["al_close_n"] = f"{len(close_tr)} of {int((~eig.random).sum())}"
    numbers["al_close_fate"] = ("has nothing to lose in context" if close_tr.empty else
                                "does not survive in context" if kept == 0 else
                                "survives in context" if kept == len(close_tr) else "partly survives in context")
    n_rd = int(eig.random.sum())
    numbers["al_close_rd"] = f"{int(close.random.sum())} of {n_rd}"
    frac_tr = counts["all", "tr"][0] / counts["all", "tr"][1]
    frac_rd = counts["all", "rd"][0] / counts["all", "rd"][1]
    eig_tr = {key: aligned(key, ANGLE_TARGETS[0], False) for key in keys}
    measured = ("v₁(Fₜ) closer than chance to at least one of J̄ₜ's four subspaces (one test per layer: the "
                "smallest p against the joint null of the four, FDR 5% across layers): "
                + ", ".join(f"{key} {numbers[f'al_{key}_tr']}" for key in keys)
                + f" layers trained, {numbers['al_tot_rd']} at random init; top-{k} eigenvectors alone: "
                + ", ".join(f"{key} {eig_tr[key][0]} of {eig_tr[key][1]}" for key in keys))
    return Findings(numbers, {"models": models + f"; K = {k}", "measured": measured,
                              "verdict": angle_verdict(frac_tr, frac_rd)})


_IN_WORDS = {"δ_H": "Henrici departure"}
"""Plain-text symbols of the chapter's tables that the Results page writes in words (Unicode has no subscript H)."""


def rate_findings(rates: pd.DataFrame, rt: pd.DataFrame, power: pd.DataFrame, models: str) -> Findings:
    """Section 6.3 (claim TV3): ``rt`` from :func:`lib.chapters.two_views.rate_tests`, ``power`` from
    :func:`lib.chapters.two_views.rate_power`.

    Glued: ``dec_rho1`` (ρ(J̄) of the trained decoder's block 1), ``rt_sig_tr`` / ``rt_sig_rd`` (tests
    significant at FDR 5%), ``rt_n`` (trained tests), ``rt_r_tr`` / ``rt_r_rd`` (ranges of r), ``rt_null``
    (the nulls' central 95%), ``rt_best`` (the trained test with the smallest p: its property, model, r,
    interval, p and q), ``rt_dir`` (trained coefficients with the predicted sign,
    :data:`lib.chapters.two_views.RATE_PREDICTED`), ``rt_p_perfect`` / ``rt_p_next`` (the two smallest
    p-values six layers can give), ``rt_bh_lone`` (the p a lone rejection needs), ``rt_pw_tr_<e>`` /
    ``rt_pw_rd_<e>`` / ``rt_pw1_tr_<e>`` / ``rt_pw1_rd_<e>`` (power, all planted or one, trained design and
    twins' design, at ``e`` = 10 × the effect, whose value is ``rt_e_<e>``), ``rt_reps`` (replicates per
    effect), ``rt_strong`` (:data:`lib.chapters.two_views.RATE_STRONG`), ``rt_layers`` (layers per variant),
    ``rt_orderings`` (their orderings, the exact null's size), ``rt_twins`` (the twins' variants) and
    ``rt_n_all`` (the tests under one correction).

    The verdict is :func:`lib.chapters.two_views.rate_verdict` of the trained tests significant at FDR 5% and
    the trained design's power: "reproduced" if every one is, "partly reproduced" if some are; with none,
    "not reproduced" only if the power at a strong planted effect is at least 0.8, else "inconclusive
    (underpowered)".
    """
    tr, rd = rt[rt.series == "trained"], rt[rt.series == "random init"]
    sig_tr, sig_rd = int((tr.q < 0.05).sum()), int((rd.q < 0.05).sum())
    dec1 = rates[(rates.model == "decoder") & ~rates.random & (rates.layer == 1)].radius_J.iloc[0]
    best = tr.loc[tr.p.idxmin()]
    sign = np.sign(tr.r) == tr["J̄ property"].map(RATE_PREDICTED)
    n_layers = int(rates.layer.max())
    values, prob = br.spearman_null(n_layers, 1)
    p_sorted = np.unique(br.two_sided_p(values, (values, prob)))
    numbers: dict[str, Any] = {
        "dec_rho1": f"{dec1:.0f}", "rt_sig_tr": sig_tr, "rt_sig_rd": sig_rd, "rt_n": len(tr),
        "rt_r_tr": f"{tr.r.min():+.2f} to {tr.r.max():+.2f}", "rt_r_rd": f"{rd.r.min():+.2f} to {rd.r.max():+.2f}",
        "rt_null": f"{rt.null_lo.min():+.2f} to {rt.null_hi.max():+.2f}",
        "rt_best": (f"{best.model}'s {best['J̄ property']}, r = {best.r:+.2f} (95% interval {best.lo:+.2f} to "
                    f"{best.hi:+.2f}, p = {best.p:.3f}, q = {best.q:.2f})"),
        "rt_dir": f"{int(sign.sum())} of {len(tr)}", "rt_p_perfect": f"{p_sorted[0]:.4f}",
        "rt_layers": n_layers, "rt_orderings": math.factorial(n_layers), "rt_twins": int(rd.variants.max()),
        "rt_n_all": len(rt),
        "rt_p_next": f"{p_sorted[1]:.3f}", "rt_bh_lone": f"{0.05 / len(rt):.4f}", "rt_strong": f"{RATE_STRONG:.1f}"}
    tr_design, rd_design = design_label(n_layers, 1), design_label(n_layers, int(rd.variants.max()))
    numbers["rt_reps"] = int(power.reps.iloc[0])
    for e, g in power.groupby("effect"):
        tag = f"{round(10 * e)}"
        numbers[f"rt_e_{tag}"] = f"{e:.1f}"
        numbers[f"rt_pw_tr_{tag}"] = f"{g[g.design == tr_design].power_all.iloc[0]:.2f}"
        numbers[f"rt_pw1_tr_{tag}"] = f"{g[g.design == tr_design].power_one.iloc[0]:.2f}"
        numbers[f"rt_pw_rd_{tag}"] = f"{g[g.design == rd_design].power_all.iloc[0]:.2f}"
        numbers[f"rt_pw1_rd_{tag}"] = f"{g[g.design == rd_design].power_one.iloc[0]:.2f}"
    strong = power[power.design == tr_design]
    pw_strong = float(strong.set_index("effect").power_all.get(RATE_STRONG, np.nan))
    verdict = rate_verdict(sig_tr, len(tr), power, tr_design)
    measured = (f"within-variant Spearman of gap ratio with ρ(J̄), Henrici departure, erank(J̄): {tr.r.min():+.2f} "
                f"to {tr.r.max():+.2f} trained ({int(sign.sum())} of {len(tr)} with the predicted sign; "
                f"strongest {_IN_WORDS.get(best['J̄ property'], best['J̄ property'])} in {best.model}, "
                f"r = {best.r:+.2f}, p = {best.p:.3f}), "
                f"{sig_tr} of {len(tr)} significant at FDR 5% (permutation null 95%: {rt.null_lo.min():+.2f} to "
                f"{rt.null_hi.max():+.2f}); power at a planted ρ = {RATE_STRONG:.1f} with {n_layers} layers: "
                f"{pw_strong:.2f}; random init {sig_rd} of {len(rd)} (r {rd.r.min():+.2f} to {rd.r.max():+.2f})")
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


def gamma_findings(gam: pd.DataFrame, d: Mapping[str, int], models: str,
                   prompts: Mapping[str, int] | None = None) -> Findings:
    """Section 6.4 (claim TV4): γ_t and ρ_t against ``v₁(F_t)`` and against ``v₁(J̄_t)``.

    ``prompts`` (per key, the number of prompts) is named beside each range in the claim's measured text, so
    that it cannot be mistaken for the same quantity measured on another sample (chapter 3's LA7, say).

    Glued: ``ch_ml_<k>`` / ``ch_dec_<k>`` (chance levels for k = 1, 2 at the width ``d[key]``), per key and
    view (F, J): ``g4_<key>_<F|J>_ratio`` (γ/chance range), ``_g`` and ``_r`` ("a of n" layers above the null,
    trained), ``_g_rd`` and ``_r_rd`` (twins); ``g4_<key>_Jwins`` (layers where J̄'s direction gives the larger
    ratio); ``g4_sigF`` / ``g4_sigJ`` (trained layers with γ_t or ρ_t above the null) and their ``_rd``;
    ``g4_by_model`` (per key, the J̄ view "ahead", "level" or "behind", with both counts), ``g4_edge`` (the lead
    against the rule's threshold, and whether one layer decides it) and ``tv4_verdict``. The
    claim (:func:`lib.chapters.two_views.gamma_verdict`) needs the J̄ view ahead by at least two layers, and
    ahead of the twins.
    """
    g4 = gamma_summary(gam)
    twin = twin_label(gam)
    numbers: dict[str, Any] = {}
    for key in d:
        for k in (1, 2):
            numbers[f"ch_{'ml' if key == 'MiniLM' else 'dec'}_{k}"] = f"{als.baseline_subspace(d[key], k):.4f}"

    def row(key: str, series: str, view: str) -> pd.Series:
        return g4[(g4.model == key) & (g4.series == series) & (g4.view == view)].iloc[0]

    for key in d:
        for view, tag in zip(GAMMA_VIEWS, ("F", "J")):
            r, rr = row(key, "trained", view), row(key, twin, view)
            numbers[f"g4_{key}_{tag}_ratio"] = f"{r.gamma_over_chance_min:.2f}–{r.gamma_over_chance_max:.2f}"
            numbers[f"g4_{key}_{tag}_g"] = f"{int(r.gamma_above_null)} of {int(r.layers)}"
            numbers[f"g4_{key}_{tag}_r"] = f"{int(r.rho_above_null)} of {int(r.layers)}"
            numbers[f"g4_{key}_{tag}_g_rd"] = f"{int(rr.gamma_above_null)} of {int(rr.layers)}"
            numbers[f"g4_{key}_{tag}_r_rd"] = f"{int(rr.rho_above_null)} of {int(rr.layers)}"
        tr = gam[(gam.model == key) & ~gam.random]
        ratio = {v: (tr[tr.view == v].gamma / tr[tr.view == v].chance).to_numpy() for v in GAMMA_VIEWS}
        wins = int((ratio[GAMMA_VIEWS[1]] > ratio[GAMMA_VIEWS[0]]).sum())
        numbers[f"g4_{key}_Jwins"] = f"{wins} of {len(ratio[GAMMA_VIEWS[0]])}"
    either = "q_gamma < 0.05 or q_rho < 0.05"
    sig = {v: int(gam[(~gam.random) & (gam.view == v)].eval(either).sum()) for v in GAMMA_VIEWS}
    sig_rd = {v: int(gam[gam.random & (gam.view == v)].eval(either).sum()) for v in GAMMA_VIEWS}
    n_tr = int(((~gam.random) & (gam.view == GAMMA_VIEWS[0])).sum())
    n_rd = int((gam.random & (gam.view == GAMMA_VIEWS[0])).sum())
    F, J = GAMMA_VIEWS
    numbers.update(g4_sigF=f"{sig[F]} of {n_tr}", g4_sigJ=f"{sig[J]} of {n_tr}",
                   g4_sigF_rd=f"{sig_rd[F]} of {n_rd}", g4_sigJ_rd=f"{sig_rd[J]} of {n_rd}")
    sample = {key: f" ({prompts[key]} prompts)" if prompts else "" for key in d}
    measured = ("; ".join(f"{key}{sample[key]}: γₜ/chance {row(key, 'trained', F).gamma_over_chance_min:.2f}–"
                          f"{row(key, 'trained', F).gamma_over_chance_max:.2f} (F view) vs "
                          f"{row(key, 'trained', J).gamma_over_chance_min:.2f}–"
                          f"{row(key, 'trained', J).gamma_over_chance_max:.2f} (J̄ view)" for key in d)
                + f"; layers with γₜ or ρₜ above the random-subspace null (FDR 5%): F view {sig[F]} of "
                  f"{n_tr}, J̄ view {sig[J]} of {n_tr} trained; twins {sig_rd[F]} and {sig_rd[J]} of {n_rd}")
    verdict = gamma_verdict(sig[F], sig[J], sig_rd[J], n_tr, n_rd)
    numbers["tv4_verdict"] = verdict
    by_model = []
    for key in d:
        tr = gam[(gam.model == key) & ~gam.random]
        f_, j_ = (int(tr[tr.view == v].eval(either).sum()) for v in (F, J))
        where = "the decoder" if key == "decoder" else key
        by_model.append(f"{'ahead' if j_ > f_ else 'behind' if j_ < f_ else 'level'} in {where} ({j_} against {f_} layers)")
    numbers["g4_by_model"] = ", ".join(by_model)
    lead = sig[J] - sig[F]
    numbers["g4_edge"] = ("a lead of exactly the rule's two layers: one layer fewer would reverse the verdict"
                          if lead == 2 else "a lead of one layer, one short of the rule's two" if lead == 1 else
                          f"a lead of {lead} layers against the rule's threshold of two")
    return Findings(numbers, {"models": models, "measured": measured, "verdict": verdict})


def _slope(df: pd.DataFrame) -> float:
    """Log–log slope of the error over 1e-3 ≤ ε ≤ 1e-1 (1: a right Jacobian's error falls like ε)."""
    s = df[(df.eps >= 1e-3) & (df.eps <= 1e-1)]
    return float(np.polyfit(np.log(s.eps), np.log(s.error), 1)[0])


def context_findings(ctx: pd.DataFrame, funnel: pd.DataFrame, pert: pd.DataFrame, models: str) -> Findings:
    """Section 6.5 (claim TV5): the single-token against the in-context Jacobian.

    Glued per key: ``pt_slope_<key>`` (the in-context error's slope), ``pt_single_<key>`` / ``pt_ctx_<key>``
    (errors at ε = 1e-3), ``cx_tr_<key>`` / ``cx_rd_<key>`` (ranges of the relative difference),
    ``cx_th_<key>`` (the eigenvector angles both ways), ``cx_er_<key>`` (the funnel's erank both ways);
    ``cx_fc_diff`` (largest change of a complex fraction), ``cx_median``, and ``ex_rel_first`` (the trained
    decoder's first-prompt differences per layer, the answer of exercise 6.3). The claim holds when the
    median difference is under 0.2 (:func:`lib.chapters.two_views.context_verdict`).
    """
    numbers: dict[str, Any] = {}
    for key in pd.unique(ctx.model):
        p = pert[pert.model == key]
        pc, ps = p[p.jacobian == "in-context"], p[p.jacobian == "single-token"]
        numbers[f"pt_slope_{key}"] = f"{_slope(pc):.2f}"
        numbers[f"pt_single_{key}"] = f"{ps[ps.eps == 1e-3].error.iloc[0]:.2f}"
        numbers[f"pt_ctx_{key}"] = f"{pc[pc.eps == 1e-3].error.iloc[0]:.1e}"
        c = ctx[ctx.model == key]
        tr_c = c[~c.random]
        numbers[f"cx_tr_{key}"] = value_range(tr_c.rel_diff)
        numbers[f"cx_rd_{key}"] = value_range(c[c.random].rel_diff)
        numbers[f"cx_th_{key}"] = (f"{tr_c.theta_single.min():.0f}–{tr_c.theta_single.max():.0f}° single-token vs "
                                   f"{tr_c.theta_ctx.min():.0f}–{tr_c.theta_ctx.max():.0f}° in-context")
        f_ = funnel[(funnel.model == key) & (funnel.series == "trained")].iloc[0]
        numbers[f"cx_er_{key}"] = f"{f_['funnel erank, single-token']:.1f} vs {f_['funnel erank, in-context']:.1f}"
    numbers["cx_fc_diff"] = f"{(ctx.fC_single - ctx.fC_ctx).abs().max():.2f}"
    numbers["cx_median"] = f"{ctx.rel_diff.median():.2f}"
    first = ctx[(ctx.model == "decoder") & ~ctx.random].sort_values("layer").rel_first
    numbers["ex_rel_first"] = ", ".join(f"{r:.3f}" for r in first)
    keys = list(pd.unique(ctx.model))

    def single_at(key: str) -> float:
        p = pert[(pert.model == key) & (pert.jacobian == "single-token") & (pert.eps == 1e-3)]
        return float(p.error.iloc[0])

    measured = ("; ".join(f"{key}: ‖J(in context) − J(single)‖ / ‖J(in context) − R‖ "
                          f"{value_range(ctx[(ctx.model == key) & ~ctx.random].rel_diff)} trained, "
                          f"{value_range(ctx[(ctx.model == key) & ctx.random].rel_diff)} random init" for key in keys)
                + "; finite-perturbation error slope of the in-context Jacobian "
                + ", ".join(f"{_slope(pert[(pert.model == key) & (pert.jacobian == 'in-context')]):.2f}"
                            for key in keys)
                + ", single-token error at ε = 1e-3: "
                + ", ".join(f"{single_at(key):.2f}" for key in keys))
    return Findings(numbers, {"models": models, "measured": measured, "verdict": context_verdict(ctx.rel_diff)})


def steering_findings(steer: pd.DataFrame, alphas: Sequence[float]) -> Findings:
    """Section 6.6: the O-edit seen by both views on the book's α grid.

    Glued per key and column of :data:`lib.chapters.two_views.STEERING_QUANTITIES` (and ``share``):
    ``st_<key>_<col>`` at the largest α, ``_5``, ``_20``, ``_0`` at α = 5, 20, 0, ``_rd`` (the twins' range at
    the largest α); with intervals: ``st_<key>_tokens_ci``, ``_tokens_5_ci``, ``_J_write_0_ci``,
    ``_J_write_ci``; and ``st_saturating`` / ``st_twins_saturating`` (models whose token interval stays under
    0.95 at the largest α, :func:`lib.chapters.two_views.steering_saturating`). No verdict: claims TV6 and TV7
    compare the models at matched saturation (:func:`lib.page.two_views_saturation.saturation_findings`).
    """
    tr = steer[~steer.random]
    a_max = max(alphas)

    def at(key: str, alpha: float, col: str) -> float:
        return float(tr[(tr.model == key) & (tr.alpha == alpha)][col].iloc[0])

    def ci(key: str, alpha: float, col: str) -> str:
        r = tr[(tr.model == key) & (tr.alpha == alpha)].iloc[0]
        return f"{r[col]:.3f} [{r[col + '_lo']:.3f}, {r[col + '_hi']:.3f}]"

    def twin_range(key: str, alpha: float, col: str) -> str:
        return value_range(steer[steer.random & (steer.model == key) & (steer.alpha == alpha)][col])

    keys = list(pd.unique(steer.model))
    numbers: dict[str, Any] = {}
    for key in keys:
        for col in ("spectral", "J_sv", "J_write", "tokens", "share"):
            numbers[f"st_{key}_{col}"] = f"{at(key, a_max, col):.3f}"
            numbers[f"st_{key}_{col}_5"] = f"{at(key, 5, col):.3f}"
            numbers[f"st_{key}_{col}_20"] = f"{at(key, 20, col):.3f}"
            numbers[f"st_{key}_{col}_0"] = f"{at(key, 0, col):.3f}"
            numbers[f"st_{key}_{col}_rd"] = twin_range(key, a_max, col)
        numbers[f"st_{key}_tokens_ci"] = ci(key, a_max, "tokens")
        numbers[f"st_{key}_tokens_5_ci"] = ci(key, 5, "tokens")
        numbers[f"st_{key}_J_write_0_ci"] = ci(key, 0, "J_write")
        numbers[f"st_{key}_J_write_ci"] = ci(key, a_max, "J_write")
    saturating, twins_saturating = steering_saturating(steer, a_max)
    numbers["st_saturating"] = ", ".join(saturating) if saturating else "none"
    numbers["st_twins_saturating"] = ", ".join(twins_saturating) if twins_saturating else "none"
    return Findings(numbers)


# -- tables for the reader: words, not column names ---------------------------------------------------------------
_LABELS: dict[str, dict[str, str]] = {
    "share": {"model": "model", "series": "weights", "protocol": "protocol", "layer": "layer",
              "attn": "attention path: ⟨J̄_A, Ū⟩ / ‖Ū‖²", "ci": "95% CI", "value": "of it, own value path",
              "softmax": "of it, softmax paths", "avoid": "the rest: ⟨Ū − J̄_A, Ū⟩ / ‖Ū‖²",
              "size_attn": "‖J̄_A‖ / ‖Ū‖",
              "size_avoid": "‖Ū − J̄_A‖ / ‖Ū‖", "sigma_size": "σ₁(J̄_F) / σ₁(Ū)"},
    "angles": {"model": "model", "target": "Jacobian subspace", "series": "weights",
               "layers_aligned": "layers closer than chance (FDR 5%)", "n": "layers (all seeds)",
               "theta_min": "smallest θ₁ (°)", "theta_median": "median θ₁ (°)",
               "chance_5pct": "5% quantile of chance (°)"},
    "rates": {"model": "model", "series": "weights", "J̄ property": "J̄ property", "variants": "variants",
              "r": "Spearman r (within variants)", "ci": "95% CI", "null": "permutation null, central 95%",
              "p": "p", "q": "q (BH)"},
    "power": {"effect": "planted ρ", "design": "test", "power_all": "power, ρ planted in every test",
              "power_one": "power, ρ planted in this test alone"},
    "gamma": {"model": "model", "series": "weights", "view": "basis",
              "gamma_over_chance": "γₜ / chance (range)", "gamma_above_null": "layers with γₜ above null",
              "rho": "ρₜ (range)", "rho_above_null": "layers with ρₜ above null", "layers": "layers (all seeds)"},
    "context": {"model": "model", "series": "weights", "layer": "layer",
                "rel_diff": "relative difference (median over prompts)", "radius_single": "ρ(J̄), single token",
                "radius_ctx": "ρ(J̄), in context", "fC_single": "complex fraction, single token",
                "fC_ctx": "complex fraction, in context", "theta_single": "θ₁ to v₁(Fₜ), single token (°)",
                "theta_ctx": "θ₁ to v₁(Fₜ), in context (°)"},
    "funnel": {"model": "model", "series": "weights", "prompts": "prompts",
               "funnel erank, single-token": "funnel erank, single token",
               "funnel erank, in-context": "funnel erank, in context"},
    "steering": {"model": "model", "weights": "weights", "alpha": "α|c| / |λ₁|",
                 "spectral": "|⟨v₁(F_L′), u⟩|", "J_sv": "|⟨s₁(Ū_L), u⟩|", "J_write": "a(W̄u, u)",
                 "share": "‖J̄_F‖ / ‖Ū‖", "tokens": "tokens: mean a(x, u)"},
}


def _signed_interval(lo: Any, hi: Any, fmt: str = ".3f") -> list[str]:
    """``"lo to hi"`` per pair (an en dash between signed numbers, "-1.000–-0.363", reads as a minus)."""
    return [t if t == "–" else t.replace("–", " to ") for t in interval_text(lo, hi, fmt)]


def readable(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    """A chapter-6 table with the reader's column labels, in the order of the page.

    ``kind`` is one of ``"share"``, ``"angles"``, ``"rates"``, ``"power"``, ``"gamma"``, ``"context"``, ``"funnel"``,
    ``"steering"``; intervals become one ``"lo–hi"`` text column (:func:`lib.page.tables.interval_text`), ranges
    (``*_min`` / ``*_max``) one ``"min–max"`` column. The data are not changed, only selected and renamed.
    """
    if kind not in _LABELS:
        raise ValueError(f"kind must be one of {sorted(_LABELS)}, got {kind!r}")
    df = df.copy()
    if kind == "share":  # signed: a share below 0 is a path that cancels part of the others
        df["ci"] = _signed_interval(df.attn_lo, df.attn_hi)
    elif kind == "rates":  # signed: "-0.771 to 0.829", not "-0.771–0.829"
        df["ci"], df["null"] = _signed_interval(df.lo, df.hi), _signed_interval(df.null_lo, df.null_hi)
    elif kind == "gamma":
        df["gamma_over_chance"] = interval_text(df.gamma_over_chance_min, df.gamma_over_chance_max, ".2f")
        df["rho"] = interval_text(df.rho_min, df.rho_max)
    labels = _LABELS[kind]
    return df[list(labels)].rename(columns=labels)
