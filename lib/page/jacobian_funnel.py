"""Chapter 4's page (the Jacobian funnel): its Altair figures, its tables and the Results page's phrases.

Every chart builder names its model(s) in the subtitle. Trained weights and random-init twins have the book's
colours (:func:`lib.page.plotting.model_color`): the series labels are :meth:`lib.models.Twins.series` labels
(``"trained"``, ``"random init, seed 0"``, …). Baselines (the Ginibre level, "no trend", "no coupling") are
black dashed rules with a legend entry of their own (a ``strokeDash`` legend), and null or reference levels
that are not a model are grey (:data:`lib.page.plotting.NULL_COLOR`).

The tables (``*_table``) take the frames and runs of :mod:`lib.chapters.jacobian_funnel` and
:mod:`lib.methods.topology` and return what the page shows: readable headers and every number as text at one
precision per quantity. :func:`claim_measurements` and :func:`verdict_frame` are section 4.8's phrases and
table (the verdicts themselves are :func:`lib.chapters.jacobian_funnel.claim_verdicts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd

from lib.chapters.jacobian_funnel import compare_with_twins
from lib.page.plotting import (
    NULL_COLOR,
    TWIN_BAND_OPACITY,
    eigenvalue_chart,
    model_color,
    model_kind,
    model_palette,
    titled,
    twin_band,
    twin_band_label,
    twin_band_layers,
)
from lib.page.tables import text_columns, value_range

if TYPE_CHECKING:
    from lib.chapters.jacobian_funnel import FunnelEvidence
    from lib.methods.funnel import BootstrapRun
    from lib.stats import Interval

__all__ = [
    "COMMUNITY_COLORS",
    "block_erank_chart",
    "block_erank_table",
    "claim_measurements",
    "community_graph_chart",
    "community_layout",
    "community_scatter_chart",
    "community_table",
    "coupling_chart",
    "coupling_table",
    "depth_chart",
    "final_funnel_table",
    "funnel_chart",
    "funnel_readings_table",
    "jacobian_clouds",
    "leading_eigenvalue_phrase",
    "operator_table",
    "power_table",
    "slope_chart",
    "slope_outside_note",
    "sub_block_table",
    "training_curve_chart",
    "trend_table",
    "verdict_frame",
]

COMMUNITY_COLORS = ("#009E73", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#999999")
"""Communities of residual coordinates: Okabe–Ito colours other than the trained blue and the twins' oranges."""

_DASH = [5, 4]


def _reference(title: str | None = None) -> alt.StrokeDash:
    """A strokeDash legend for the ``reference`` field: each baseline is a dashed black rule with its name."""
    return alt.StrokeDash("reference:N", title=title, scale=alt.Scale(range=[_DASH, [2, 2], [8, 3]]),
                          legend=alt.Legend(orient="bottom", symbolType="stroke", symbolStrokeColor="black"))


def training_curve_chart(log: dict, model: str) -> alt.TopLevelMixin:
    """Training loss (of the batch at each logged step) against step, with the held-out losses of the trained
    model (blue) and of its random twin (orange) and the uniform-prediction loss (grey) as dashed rules."""
    curve = "training loss, one batch (trained)"
    df = pd.DataFrame({"step": log["steps"], "loss": log["loss"], "what": curve})
    refs = pd.DataFrame({
        "what": ["held-out loss (trained)", "held-out loss (random init)", "uniform over the vocabulary"],
        "loss": [log["heldout_loss"], log["heldout_loss_random_init"], log["uniform_loss"]],
    })
    domain, colours = model_palette([curve, *refs["what"]])
    colours[-1] = NULL_COLOR  # a baseline, not a model
    colour = alt.Color("what:N", title=None, scale=alt.Scale(domain=domain, range=colours),
                       legend=alt.Legend(symbolType="stroke", orient="bottom", columns=2))
    dash = alt.StrokeDash("what:N", title=None, scale=alt.Scale(domain=domain, range=[[1, 0], _DASH, _DASH, [2, 2]]))
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("step:Q", title="training step"), y=alt.Y("loss:Q", title="cross-entropy (nats / token)"),
        color=colour, strokeDash=dash, tooltip=["step:Q", alt.Tooltip("loss:Q", format=".3f")],
    )
    rules = alt.Chart(refs).mark_rule(strokeWidth=2).encode(
        y="loss:Q", color=colour, strokeDash=dash, tooltip=["what:N", alt.Tooltip("loss:Q", format=".3f")]
    )
    return titled((line + rules).properties(width=420, height=220), "Training curve of the book decoder", model,
                  description=f"The book decoder's training loss falls from the uniform level to "
                              f"{log['heldout_loss']:.2f} nats per token held out; its random twin stays at "
                              f"{log['heldout_loss_random_init']:.2f}.")


def depth_chart(
    df: pd.DataFrame,
    value: str,
    *,
    title: str,
    model: str,
    y_title: str,
    baseline: str | None = None,
    domain: Sequence[float] | None = None,
    description: str | None = None,
) -> alt.TopLevelMixin:
    """A metric against relative depth, one line per ``series`` (trained and each twin), one panel per ``model``.

    ``df`` is :func:`lib.chapters.jacobian_funnel.depth_frame`: columns ``model``, ``series``, ``layer``, ``depth``, ``value``
    and its interval ``value_lo``/``value_hi`` (drawn as error bars where present), optionally ``baseline``.
    ``baseline``: the legend name of the dashed black line drawn at the panel's ``baseline`` column. The y axis
    is shared by the panels (``domain``, else one domain that holds every point and bar).
    """
    lo, hi = f"{value}_lo", f"{value}_hi"
    vals = df[[value, lo, hi]].to_numpy(dtype=float)
    if baseline is not None:
        vals = np.column_stack([vals, df["baseline"].to_numpy(dtype=float)])
    if domain is None:
        top, bot = np.nanmax(vals), np.nanmin(vals)
        pad = 0.05 * (top - bot or 1.0)
        domain = (bot - pad, top + pad)
    scale = alt.Scale(domain=list(domain), nice=False)
    data = twin_band(df, keys=["model", "layer", "depth"], values=[value]).assign(reference=baseline or "")
    colour = model_color("series", list(data["series"]), legend=alt.Legend(orient="bottom", columns=2, title=None))
    x = alt.X("depth:Q", title="relative depth (t+1)/L", scale=alt.Scale(domain=[0, 1.05], nice=False))
    tips = ["series:N", "layer:Q", alt.Tooltip(f"{value}:Q", format=".3f", title=y_title),
            alt.Tooltip(f"{lo}:Q", format=".3f", title="95% interval, low"),
            alt.Tooltip(f"{hi}:Q", format=".3f", title="95% interval, high")]
    own = alt.Chart().transform_filter("!datum.band")
    line = own.mark_line(point=True).encode(
        x=x, y=alt.Y(f"{value}:Q", title=y_title, scale=scale), color=colour, tooltip=tips)
    bars = own.mark_rule().encode(x=x, y=alt.Y(f"{lo}:Q", scale=scale), y2=f"{hi}:Q", color=colour)
    layers = [*twin_band_layers(x, value, colour, y_scale=scale), line, bars]
    if baseline is not None:
        layers.append(alt.Chart().mark_rule(color="black").encode(
            y=alt.Y("mean(baseline):Q", scale=scale), strokeDash=_reference(),
            tooltip=[alt.Tooltip("mean(baseline):Q", format=".3f", title=baseline)]))
    chart = alt.layer(*layers, data=data).properties(width=260, height=200).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(df["model"])),
                          header=alt.Header(labelFontWeight="bold")))
    return titled(chart, title, model, description=description)


def slope_chart(df: pd.DataFrame, *, title: str, model: str, description: str | None = None) -> alt.TopLevelMixin:
    """The trend test of section 4.3: each series' least-squares slope against depth with its 95% bootstrap
    interval, one panel per metric, and the dashed line of no trend.

    The trained model is one row (point and interval bar, :data:`~lib.page.plotting.TRAINED_COLOR`); the random-init
    twins share one row (:func:`~lib.page.plotting.twin_band_label`), each seed's interval a translucent bar (their
    union reads as one band) and its slope a hollow point.

    ``df``: :func:`lib.chapters.jacobian_funnel.trend_frame` (``metric``, ``series``, ``slope``, ``lo``, ``hi``, ``direction``).
    """
    is_twin = np.array([model_kind(s) == "random" for s in df["series"]], dtype=bool)
    row = np.asarray(df["series"], dtype=object).copy()
    if is_twin.any():
        row[is_twin] = twin_band_label(df["series"][is_twin].nunique())
    data = df.assign(reference="no trend (slope 0)", row=row, twin=is_twin)
    rows = list(dict.fromkeys(row))
    colour = model_color("row", rows, legend=None)
    lim = float(np.nanmax(np.abs(df[["slope", "lo", "hi"]].to_numpy(dtype=float)))) * 1.1
    x_scale = alt.Scale(domain=[-lim, lim], nice=False)
    x = alt.X("slope:Q", title="slope per unit depth", scale=x_scale, axis=alt.Axis(tickCount=4))
    y = alt.Y("row:N", title=None, sort=rows)
    tips = ["series:N", alt.Tooltip("slope:Q", format="+.3f"), alt.Tooltip("lo:Q", format="+.3f"),
            alt.Tooltip("hi:Q", format="+.3f"), "direction:N"]
    own, twin = alt.Chart().transform_filter("!datum.twin"), alt.Chart().transform_filter("datum.twin")
    bars = own.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", scale=x_scale), x2="hi:Q", y=y, color=colour)
    pts = own.mark_point(filled=True, size=60).encode(x=x, y=y, color=colour, tooltip=tips)
    twin_bars = twin.mark_rule(strokeWidth=9, opacity=TWIN_BAND_OPACITY).encode(
        x=alt.X("lo:Q", scale=x_scale), x2="hi:Q", y=y, color=colour, tooltip=tips)
    twin_pts = twin.mark_point(filled=False, size=40, strokeWidth=1.5).encode(x=x, y=y, color=colour, tooltip=tips)
    zero = alt.Chart().mark_rule(color="black").encode(x=alt.datum(0), strokeDash=_reference())
    # a point outside its own percentile interval (possible: slope_outside_note) is ringed in black
    ring = alt.Chart().transform_filter("datum.slope < datum.lo || datum.slope > datum.hi").mark_point(
        shape="circle", size=160, strokeWidth=1.5, color="black", filled=False).encode(x=x, y=y, tooltip=tips)
    chart = alt.layer(zero, twin_bars, bars, twin_pts, pts, ring, data=data).properties(width=150, height=80).facet(
        facet=alt.Facet("metric:N", title=None, sort=list(dict.fromkeys(df["metric"]))), columns=3)
    return titled(chart, title, model, description=description)


def slope_outside_note(df: pd.DataFrame) -> str:
    """One sentence for the caption of :func:`slope_chart` on the points that lie outside their own interval.

    The point is the slope over all prompts, the interval the percentile interval of the prompt-resampled slopes
    (:func:`lib.stats.trend_test`); for a statistic that is not smooth in the prompts (the complex fraction counts
    eigenvalues) the resamples' distribution can sit off the point, and its 95% interval can miss it. The chart
    rings such points; this names them, or says that there are none.

    ``df``: :func:`lib.chapters.jacobian_funnel.trend_frame`.
    """
    out = df[(df.slope < df.lo) | (df.slope > df.hi)]
    if out.empty:
        return "Every point lies inside its own interval."
    names = "; ".join(f"{r.series}, {r.metric}" for r in out.itertuples())
    return f"Ringed: a point outside its own interval ({names})."


def funnel_chart(df: pd.DataFrame, *, title: str, model: str, description: str | None = None) -> alt.TopLevelMixin:
    """Effective rank of the cumulative product against the last block multiplied, log scale, one panel per
    model. The trained model's products are lines in :data:`~lib.page.plotting.TRAINED_COLOR` (dash: which product,
    :data:`lib.chapters.jacobian_funnel.PRODUCTS`), its twins one band per product (least to greatest seed, median
    line; :func:`~lib.page.plotting.twin_band`), and the trained model's two controls (the products named
    "Schur-normal" and "shuffled Schur") thin dotted reference lines, black and grey, each with a legend entry
    "control: …": they are what the trained curve is compared with, not series of their own.

    ``df``: :func:`lib.chapters.jacobian_funnel.funnel_curves` (``model``, ``series``, ``product``, ``blocks``, ``erank``).
    """
    is_ctrl = df["product"].str.contains("Schur")
    ctrl_names = {p: f"control: {p.split(', ', 1)[-1]}, {p.split(',')[0]}"  # no "trained": not a model's colour
                  for p in dict.fromkeys(df["product"][is_ctrl])}
    curves = twin_band(df[~is_ctrl], keys=["model", "product", "blocks"], values=["erank"])
    ctrl = df[is_ctrl].assign(series=df["product"][is_ctrl].map(ctrl_names), band=False)
    data = pd.concat([curves.assign(control=False), ctrl.assign(control=True)], ignore_index=True)
    products = list(dict.fromkeys(curves["product"]))
    domain, colours = model_palette(list(dict.fromkeys(curves["series"])))
    ref_colours = ["#000000", NULL_COLOR, "#555555"]
    domain += list(ctrl_names.values())
    colours += ref_colours[:len(ctrl_names)]
    colour = alt.Color("series:N", title=None, scale=alt.Scale(domain=domain, range=colours),
                       legend=alt.Legend(orient="bottom", columns=2, symbolType="stroke", symbolStrokeWidth=2))
    dash = alt.StrokeDash("product:N", title="product", sort=products,
                          scale=alt.Scale(domain=products, range=[[1, 0], [6, 3], [8, 2, 2, 2]]),
                          legend=alt.Legend(orient="bottom", columns=2, symbolType="stroke",
                                            symbolStrokeColor="black", symbolStrokeWidth=2))
    lo, hi = float(np.nanmin(df.erank)), float(np.nanmax(df.erank))
    y_scale = alt.Scale(type="log", domain=[lo / 1.3, hi * 1.3], nice=False)
    x = alt.X("blocks:Q", title="last block multiplied (0: identity)", axis=alt.Axis(tickMinStep=1))
    y = alt.Y("erank:Q", title="effective rank of the product (log scale)", scale=y_scale)
    tips = ["model:N", "series:N", "product:N", "blocks:Q", alt.Tooltip("erank:Q", format=".1f")]
    band = alt.Chart().transform_filter("datum.band")
    area = band.mark_area(opacity=TWIN_BAND_OPACITY).encode(
        x=x, y=alt.Y("erank_min:Q", scale=y_scale), y2="erank_max:Q", color=colour, detail="product:N",
        tooltip=[*tips[:4], alt.Tooltip("erank_min:Q", format=".1f", title="least seed"),
                 alt.Tooltip("erank_max:Q", format=".1f", title="greatest seed")])
    mid = band.mark_line(strokeWidth=1.5).encode(x=x, y=y, color=colour, strokeDash=dash)
    own = alt.Chart().transform_filter("!datum.band && !datum.control")
    # the points are a layer of their own: a line's point overlay would blank the dash legend's symbols
    lines = own.mark_line(strokeWidth=2.5).encode(x=x, y=y, color=colour, strokeDash=dash, tooltip=tips)
    pts = own.mark_point(filled=True, size=22).encode(x=x, y=y, color=colour, detail="product:N", tooltip=tips)
    refs = alt.Chart().transform_filter("datum.control").mark_line(strokeDash=[1.5, 2.5], strokeWidth=1.5).encode(
        x=x, y=y, color=colour, detail="product:N", tooltip=tips)
    chart = alt.layer(area, mid, lines, pts, refs, data=data).properties(width=260, height=230).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(df["model"])),
                          header=alt.Header(labelFontWeight="bold")))
    return titled(chart, title, model, description=description)


def block_erank_chart(df: pd.DataFrame, *, title: str, model: str, d: int,
                      description: str | None = None) -> alt.TopLevelMixin:
    """The effective rank of each block's own mean Jacobian, trained (with its bootstrap interval) and each
    twin, on a log scale that holds both a collapsed block and the full width ``d`` (dashed line).

    ``df``: :func:`lib.chapters.jacobian_funnel.block_erank_frame` (``series``, ``block``, ``erank``, ``lo``, ``hi``).
    """
    data = twin_band(df, keys=["block"], values=["erank"]).assign(reference=f"full width d = {d}", d=float(d))
    series = list(dict.fromkeys(data["series"]))
    lo = float(np.nanmin(df[["erank", "lo"]].to_numpy(dtype=float)))
    y_scale = alt.Scale(type="log", domain=[lo / 1.4, d * 1.4], nice=False)
    colour = model_color("series", series, legend=alt.Legend(orient="bottom", columns=4, title=None))
    off = alt.XOffset("series:N", sort=series, scale=alt.Scale(paddingInner=0.2))
    x = alt.X("block:O", title="block l")
    own = alt.Chart().transform_filter("!datum.band")
    pts = own.mark_point(filled=True, size=50).encode(
        x=x, xOffset=off, y=alt.Y("erank:Q", title="effective rank of J̄ₜ (log scale)", scale=y_scale),
        color=colour, tooltip=["series:N", "block:O", alt.Tooltip("erank:Q", format=".1f"),
                               alt.Tooltip("lo:Q", format=".1f"), alt.Tooltip("hi:Q", format=".1f")])
    bars = own.mark_rule(strokeWidth=2).encode(x=x, xOffset=off, y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q",
                                               color=colour)
    band = twin_band_layers(x, "erank", colour, y_scale=y_scale, x_offset=off, fmt=".1f")
    full = alt.Chart().mark_rule(color="black").encode(y=alt.Y("mean(d):Q", scale=y_scale), strokeDash=_reference())
    chart = alt.layer(full, *band, bars, pts, data=data).properties(width=420, height=220)
    return titled(chart, title, model, description=description)


def community_layout(membership: np.ndarray, participation: np.ndarray) -> np.ndarray:
    """Node positions ``(d, 2)`` that draw each community as a ring of its own, the rings on a circle.

    Community ``c`` (ids ``0..C−1``, largest first) is a ring centred at angle ``2πc/C`` on the unit circle, its
    radius growing with ``sqrt(size)`` and small enough that neighbouring rings never overlap. Within a ring the
    nodes are ordered by participation: the most participating (the bridges) face the middle of the figure,
    where the edges to other communities run, the least face outwards. Deterministic (no random layout).
    """
    m = np.asarray(membership, dtype=int)
    P = np.asarray(participation, dtype=float)
    if m.shape != P.shape or m.ndim != 1:
        raise ValueError(f"membership and participation must be equal-length vectors, got {m.shape} and {P.shape}")
    comms = np.unique(m)
    C = len(comms)
    sizes = {c: int(np.sum(m == c)) for c in comms}
    r_max = 1.0 if C == 1 else 0.8 * np.sin(np.pi / C)
    centre_r = 0.0 if C == 1 else 1.0
    xy = np.zeros((len(m), 2))
    for k, c in enumerate(comms):
        idx = np.flatnonzero(m == c)
        theta = 2 * np.pi * k / C
        cx, cy = centre_r * np.cos(theta), centre_r * np.sin(theta)
        r = r_max * np.sqrt(sizes[c] / max(sizes.values()))
        order = idx[np.lexsort((idx, -P[idx]))]  # most participating first; ties by unit id
        n = len(order)
        # offsets 0, +1, −1, +2, −2, … steps of 2π/n around the inward direction
        steps = np.array([(j + 1) // 2 * (1 if j % 2 else -1) for j in range(n)])
        phi = theta + np.pi + 2 * np.pi * steps / max(n, 1)
        xy[order, 0] = cx + r * np.cos(phi)
        xy[order, 1] = cy + r * np.sin(phi)
    return xy


def community_graph_chart(
    W: np.ndarray, membership: np.ndarray, participation: np.ndarray, log_gain: np.ndarray, *, title: str,
    model: str, max_edges: int = 1500, description: str | None = None,
) -> alt.TopLevelMixin:
    """Nodes = residual coordinates laid out by community (:func:`community_layout`: one ring per community),
    colour = community, size = participation over its own range (least to greatest: the bridges stand out);
    edges: the strongest ``max_edges`` of the signed top-k graph (dark grey positive, drawn on top, light purple
    negative)."""
    iu = np.triu_indices(len(W), 1)
    w = W[iu]
    sel = np.flatnonzero(w != 0)
    sel = sel[np.argsort(-np.abs(w[sel]), kind="stable")][:max_edges]
    xy = community_layout(membership, participation)
    labels = [f"C{c + 1}" for c in membership]
    nodes = pd.DataFrame({"unit": np.arange(len(W)), "x": xy[:, 0], "y": xy[:, 1], "community": labels,
                          "participation": participation, "log_gain": log_gain})
    edges = pd.DataFrame({
        "x": xy[iu[0][sel], 0], "y": xy[iu[0][sel], 1], "x2": xy[iu[1][sel], 0], "y2": xy[iu[1][sel], 1],
        "sign": np.where(w[sel] > 0, "positive", "negative"),
    })
    ax = alt.Axis(labels=False, ticks=False, grid=False, title=None, domain=False)
    span = float(np.abs(xy).max()) * 1.08
    sc = alt.Scale(domain=[-span, span], nice=False)
    # positive edges dark and drawn over the negative ones: at Vega's light grey and 10% opacity they vanished
    edges = edges.assign(order=np.where(edges["sign"] == "positive", 1, 0)).sort_values("order", kind="stable")
    e = alt.Chart(edges).mark_rule(opacity=0.35, strokeWidth=0.8).encode(
        x=alt.X("x:Q", axis=ax, scale=sc), y=alt.Y("y:Q", axis=ax, scale=sc), x2="x2:Q", y2="y2:Q",
        color=alt.Color("sign:N", scale=alt.Scale(domain=["positive", "negative"], range=["#333333", "#B39DDB"]),
                        title="correlation edge",
                        legend=alt.Legend(symbolType="stroke", symbolOpacity=1, symbolStrokeWidth=2)),
    )
    order = sorted(set(labels), key=lambda s: int(s[1:]))
    n = alt.Chart(nodes).mark_circle(stroke="black", strokeWidth=0.4, opacity=0.9).encode(
        x=alt.X("x:Q", axis=ax, scale=sc), y=alt.Y("y:Q", axis=ax, scale=sc),
        fill=alt.Fill("community:N", title="community", sort=order,
                      scale=alt.Scale(domain=order, range=[COMMUNITY_COLORS[i % len(COMMUNITY_COLORS)]
                                                           for i in range(len(order))])),
        # the size scale spans the participation's own range (from 0 the nodes looked all alike: P varies little)
        size=alt.Size("participation:Q", title="participation", legend=alt.Legend(titleLimit=0, tickCount=4),
                      scale=alt.Scale(domain=[float(np.min(participation)), float(np.max(participation))],
                                      range=[6, 320], zero=False, nice=False)),
        tooltip=["unit:Q", "community:N", alt.Tooltip("participation:Q", format=".2f"),
                 alt.Tooltip("log_gain:Q", format=".2f", title="log gain")],
    )
    chart = (e + n).properties(width=440, height=440).resolve_scale(color="independent")
    return titled(chart.configure_view(stroke=None), title, model, description=description)


def coupling_chart(df: pd.DataFrame, *, title: str, model: str, description: str | None = None) -> alt.TopLevelMixin:
    """Spearman r_S(participation, log gain) against relative depth; filled points: BH-adjusted q < 0.05.

    ``df``: ``depth``, ``layer``, ``r_s``, ``q`` (BH-adjusted p, gains permuted), ``p_relabel``, ``model``, and the
    series as ``weights`` (:meth:`lib.models.Twins.series` labels, one colour each) or ``series``.
    """
    field = "weights" if "weights" in df.columns else "series"
    df = df.assign(significant=np.where(df.q < 0.05, "q < 0.05", "n.s."), reference="no coupling (Spearman r = 0)")
    lim = max(0.3, float(np.abs(df.r_s).max()) * 1.15)
    data = twin_band(df, keys=["model", "layer", "depth"], values=["r_s"], field=field).assign(seed=False)
    is_twin = np.array([model_kind(v) == "random" for v in df[field]], dtype=bool)
    if is_twin.any():  # each seed's own point too, in the band's colour: its significance is its own
        seeds = df[is_twin].assign(band=False, seed=True, n_seeds=1)
        seeds[field] = twin_band_label(df[field][is_twin].nunique())
        data = pd.concat([data, seeds], ignore_index=True)
    colour = model_color(field, list(dict.fromkeys(data[field])),
                         legend=alt.Legend(orient="bottom", columns=2, title=None))
    x = alt.X("depth:Q", title="relative depth (t+1)/L", scale=alt.Scale(domain=[0, 1.05], nice=False))
    y_scale = alt.Scale(domain=[-lim, lim], nice=False)
    y = alt.Y("r_s:Q", title="coupling: Spearman r", scale=y_scale)
    shape = alt.Shape("significant:N", scale=alt.Scale(domain=["q < 0.05", "n.s."], range=["circle", "cross"]),
                      title="BH, gains permuted", legend=alt.Legend(orient="bottom"))
    tips = [f"{field}:N", "layer:Q", alt.Tooltip("r_s:Q", format=".3f"), alt.Tooltip("q:Q", format=".3g"),
            alt.Tooltip("p_relabel:Q", format=".3g")]
    # No layer brings its own data: the facet splits the layer's shared data by model. (A zero line
    # drawn from its own small table once kept every layer on its own data, so both panels showed
    # both models.)
    own = alt.Chart().transform_filter("!datum.band && !datum.seed")
    line = own.mark_line(opacity=0.8).encode(x=x, y=y, color=colour)
    pts = own.mark_point(size=70, filled=True).encode(x=x, y=y, color=colour, shape=shape, tooltip=tips)
    seed_pts = alt.Chart().transform_filter("datum.seed").mark_point(size=28, filled=True, opacity=0.8).encode(
        x=x, y=y, color=colour, shape=shape, tooltip=tips)
    zero = alt.Chart().mark_rule(color="black").encode(y=alt.datum(0), strokeDash=_reference())
    band = twin_band_layers(x, "r_s", colour, field=field, y_scale=y_scale)
    chart = alt.layer(zero, *band, seed_pts, line, pts, data=data).properties(width=320, height=220).facet(
        column=alt.Column("model:N", title=None)
    )
    return titled(chart, title, model, description=description)


def _pool_twins(df: pd.DataFrame, field: str) -> pd.DataFrame:
    """``df`` with every random-init twin's ``field`` replaced by :func:`~lib.page.plotting.twin_band_label` (one
    colour and one legend entry for the seeds of a scatter) and the original label kept as ``seed``."""
    is_twin = np.array([model_kind(v) == "random" for v in df[field]], dtype=bool)
    out = df.assign(seed=df[field].astype(str))
    if is_twin.any():
        out.loc[is_twin, field] = twin_band_label(df[field][is_twin].nunique())
    return out


def community_scatter_chart(comm: pd.DataFrame, *, title: str, model: str,
                            description: str | None = None) -> alt.TopLevelMixin:
    """Every community of every layer: its boundary score (mean participation) against its log gain, one
    colour per series (trained, each twin), pooled over layers.

    ``comm``: :func:`lib.methods.topology.pooled_community_coupling`'s communities (``weights``, ``layer``, ``community``,
    ``size``, ``boundary``, ``log_gain``).
    """
    data = _pool_twins(comm, "weights").assign(reference="median unit gain (log gain 0)")
    series = list(dict.fromkeys(data["weights"]))
    colour = model_color("weights", series, legend=alt.Legend(orient="bottom", columns=4, title=None))
    pts = alt.Chart().mark_point(filled=True, opacity=0.8).encode(
        x=alt.X("boundary:Q", title="boundary score (mean participation of the community)",
                scale=alt.Scale(zero=False, padding=8)),
        y=alt.Y("log_gain:Q", title="community log gain", scale=alt.Scale(zero=False, padding=8)),
        color=colour, size=alt.Size("size:Q", title="units", scale=alt.Scale(range=[20, 200])),
        tooltip=["seed:N", "layer:Q", "community:Q", "size:Q", alt.Tooltip("boundary:Q", format=".3f"),
                 alt.Tooltip("log_gain:Q", format="+.3f")])
    zero = alt.Chart().mark_rule(color="black").encode(y=alt.datum(0), strokeDash=_reference())
    return titled(alt.layer(zero, pts, data=data).properties(width=420, height=240), title, model,
                  description=description)



def jacobian_clouds(Jbar: np.ndarray, layers: Sequence[int], *, model: str,
                    title: str = "Eigenvalues of the mean block Jacobian J̄ₜ") -> alt.TopLevelMixin:
    """The eigenvalues of ``Jbar[l]`` for each ``l`` of ``layers`` (0-based; panels say "block l+1"), not rescaled:
    each panel has its own axes and the dashed circle of radius ``|λ₁|``
    (:func:`lib.page.plotting.eigenvalue_chart`)."""
    from lib.linalg.spectra import eigvals

    lam = np.stack([eigvals(Jbar[l]) for l in layers])
    return eigenvalue_chart(lam, model=model, layer_labels=[f"block {l + 1}" for l in layers], normalize=False,
                            title=title, width=150, height=150)


# --- What the chapter's sections compute, as tables (sections 4.3–4.6) -----------------------------------


def trend_table(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`lib.chapters.jacobian_funnel.trend_frame` with readable columns: the slope and its 95% interval as
    text (one precision)."""
    return pd.DataFrame({"metric": frame.metric, "weights": frame.series,
                         "slope per unit depth": [f"{v:+.3f}" for v in frame.slope],
                         "95% interval": [f"[{a:+.3f}, {b:+.3f}]" for a, b in zip(frame.lo, frame.hi)],
                         "direction": frame.direction})


def sub_block_table(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`lib.chapters.jacobian_funnel.sub_block_frame` as a page table: one row per layer and sub-block, the
    trained value and the range over the twins' seeds of ``δ_H`` and ``r_rot`` of the update (two decimals)."""
    tab = frame.groupby(["layer", "sub_block", "weights"], sort=False)[["delta_H", "r_rot"]].agg(value_range)
    tab = tab.unstack("weights")
    labels = {"delta_H": "δ_H", "r_rot": "rotation fraction"}
    order = list(dict.fromkeys(frame.weights))
    tab = tab[[(m, w) for m in ("delta_H", "r_rot") for w in order]]
    tab.columns = [f"{labels[m]}, {w}" for m, w in tab.columns]
    return tab.reset_index().rename(columns={"sub_block": "sub-block"})


def block_erank_table(runs: dict[str, BootstrapRun], trained: str = "trained") -> pd.DataFrame:
    """Per block: the erank of ``J̄_l`` alone and of the products from block 1 and from block 2, trained (with
    its 95% interval) and twins (range over the seeds), as text with one decimal."""
    tr = runs[trained]
    twins = [r for s, r in runs.items() if s != trained]

    def twin_range(name: str, i: int) -> str:
        return value_range([r.point[name][i] for r in twins], ".1f")

    L = len(tr.point["erank"])
    return pd.DataFrame([{
        "block l": l + 1,
        "erank J̄ₜ, trained": tr.interval("erank", l).fmt(".1f"), "erank J̄ₜ, twins": twin_range("erank", l),
        "product 1..l, trained": tr.interval("funnel", l + 1).fmt(".1f"),
        "product 1..l, twins": twin_range("funnel", l + 1),
        "product 2..t, trained": tr.interval("funnel_no_b1", l).fmt(".1f") if l else "–",
        "product 2..t, twins": twin_range("funnel_no_b1", l) if l else "–",
    } for l in range(L)])


def final_funnel_table(decoder: tuple[str, dict[str, BootstrapRun], dict[str, dict[str, Interval]]],
                       contrast: tuple[str, dict[str, BootstrapRun], dict[str, Interval]],
                       trained: str = "trained") -> pd.DataFrame:
    """The final effective ranks of section 4.6, with and without block 1 and under both controls.

    Args:
        decoder: ``(name, runs, controls)``: the pre-norm model's runs and its
            :func:`lib.chapters.jacobian_funnel.twin_control_funnels`.
        contrast: ``(name, runs, controls)``: the post-LN contrast's runs (only ``funnel_no_b1`` resampled) and
            the trained model's :func:`lib.methods.funnel.control_funnels` (point values).
    """
    def fin(ctrl: dict[str, Interval], s: str, c: str) -> str:
        return ctrl[c].fmt(".1f") if s == trained else f"{ctrl[c].point:.1f}"

    name, runs, ctrl = decoder
    rows = [{"model": name, "weights": s,
             "all 6 blocks (co-primary)": (r.interval("funnel").fmt(".1f") if r.has_interval("funnel")
                                           else f"{r.point['funnel'][-1]:.1f}"),
             "blocks 2–6 (co-primary)": fin(ctrl[s], s, "as measured"),
             "Schur-normal, 2–6": fin(ctrl[s], s, "Schur-normal"),
             "shuffled Schur, 2–6": fin(ctrl[s], s, "shuffled Schur")} for s, r in runs.items()]
    name, runs, mctrl = contrast
    rows += [{"model": name, "weights": s, "all 6 blocks (co-primary)": f"{r.point['funnel'][-1]:.1f}",
              "blocks 2–6 (co-primary)": (r.interval("funnel_no_b1").fmt(".1f") if s == trained
                                       else f"{r.point['funnel_no_b1'][-1]:.1f}"),
              "Schur-normal, 2–6": f"{mctrl['Schur-normal'].point:.1f}" if s == trained else "–",
              "shuffled Schur, 2–6": f"{mctrl['shuffled Schur'].point:.1f}" if s == trained else "–"}
             for s, r in runs.items()]
    return pd.DataFrame(rows)


def funnel_readings_table(ev: FunnelEvidence) -> pd.DataFrame:
    """FG3's and FG4's two co-primary readings (:data:`lib.chapters.jacobian_funnel.FUNNEL_READINGS`) side by side:
    one row per reading with its source tag, the trained final erank (95% interval), the twins' range, where the
    trained value sits, both controls and their ratio, and each reading's verdicts; a last row gives the union."""
    from lib.chapters.jacobian_funnel import FUNNEL_READINGS, funnel_readings, funnel_readings_verdicts

    rd = funnel_readings(ev)
    fr = funnel_readings_verdicts(*((r["trained"], r["twins"], r["ratio"]) for r in rd.values()))
    rows = []
    for name, r in rd.items():
        c = r["controls"]
        rows.append({"reading": f"{name}: {FUNNEL_READINGS[name]}",
                     "trained": r["trained"].fmt(".1f"),
                     "twins": value_range([t.point for t in r["twins"]], ".1f"),
                     "trained vs twins": compare_with_twins(r["trained"], r["twins"]),
                     "Schur-normal": c["Schur-normal"].fmt(".1f"), "shuffled Schur": c["shuffled Schur"].fmt(".1f"),
                     "Schur-normal / as measured": r["ratio"].fmt(".2f"),
                     "FG3": fr["FG3"][name], "FG4": fr["FG4"][name]})
    rows.append({"reading": "union of the two", **{k: "" for k in rows[0] if k not in ("reading", "FG3", "FG4")},
                 "FG3": fr["FG3"]["union"], "FG4": fr["FG4"]["union"]})
    return pd.DataFrame(rows)


def leading_eigenvalue_phrase(table: pd.DataFrame) -> str:
    """:func:`lib.chapters.jacobian_funnel.leading_eigenvalues` in words: where ``λ₁`` is real, where one of a
    conjugate pair, and the modulus of the next eigenvalue against ``|λ₁|`` in each block (two decimals, three
    where it rounds to 1.00 or above 0.95, so that a near tie is never printed as an outlier)."""
    def blocks(sel: pd.Series) -> str:
        b = [str(x) for x in table.block[sel]]
        return b[0] if len(b) == 1 else ", ".join(b[:-1]) + " and " + b[-1]

    parts = []
    if (~table.pair).any():
        parts.append(f"λ₁ is real in block{'s' if (~table.pair).sum() > 1 else ''} {blocks(~table.pair)}")
    if table.pair.any():
        parts.append(f"one of a complex conjugate pair in block{'s' if table.pair.sum() > 1 else ''} "
                     f"{blocks(table.pair)}")
    ratios = ", ".join(f"{r:.3f}" if r > 0.95 else f"{r:.2f}" for r in table.next_ratio)
    return (" and ".join(parts) + f"; the next eigenvalue's modulus is {ratios} of |λ₁| (blocks "
            f"{blocks(table.block > 0)})")


# --- Section 4.7's tables: the communities' coupling to gain (lib.methods.topology) ----------------------------


def coupling_table(frame: pd.DataFrame) -> pd.DataFrame:
    """:attr:`lib.methods.topology.TopologySweep.coupling` for the page: readable columns, one precision per
    quantity (as text)."""
    return text_columns(frame, {
        "weights": ("weights", ""), "layer": ("layer", ""), "tokens": ("n_tokens", ""),
        "communities": ("communities", ""), "NMI (mean over seeds)": ("nmi_seeds", ".2f"),
        "NMI (worst seed)": ("nmi_min", ".2f"), "Spearman r": ("r_s", "+.3f"),
        "p (gains permuted)": ("p_gain", ".3g"), "q (BH)": ("q", ".3g"), "p (labels shuffled)": ("p_relabel", ".3g"),
    })


def operator_table(sub_blocks: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Sub-block couplings per layer (rows) and series × sub-block (columns), as ``"+0.12"``, starred where the
    BH-adjusted ``q < alpha``."""
    cell = [f"{r:+.2f}" + (" *" if q < alpha else "") for r, q in zip(sub_blocks.r_s, sub_blocks.q)]
    tab = sub_blocks.assign(cell=cell).pivot_table(index="layer", columns=["weights", "sub_block"], values="cell",
                                                   aggfunc="first")
    order, subs = list(dict.fromkeys(sub_blocks.weights)), list(dict.fromkeys(sub_blocks.sub_block))
    tab = tab[[(w, sb) for w in order for sb in subs if (w, sb) in tab.columns]]
    tab.columns = [f"{w}, {sub}" for w, sub in tab.columns]
    return tab.reset_index()


def community_table(communities: pd.DataFrame) -> pd.DataFrame:
    """:func:`lib.methods.topology.pooled_community_coupling`'s communities for the page, readable columns (three
    decimals)."""
    return text_columns(communities.assign(number=communities.community + 1), {
        "weights": ("weights", ""), "layer": ("layer", ""), "community": ("number", ""), "units": ("size", ""),
        "boundary score": ("boundary", ".3f"), "log gain": ("log_gain", "+.3f"),
        "self-gain of the update": ("self_gain", "+.3f")})


def power_table(power: pd.DataFrame) -> pd.DataFrame:
    """:func:`lib.methods.topology.planted_power`'s table for the page: readable columns, powers in percent."""
    return text_columns(power, {
        "planted effect": ("effect", ".1f"), "mean planted coupling": ("r_s_mean", "+.2f"),
        "NMI with the planted partition": ("nmi_mean", ".2f"), "power at p < 0.05": ("power", ".0%"),
        "power at the BH threshold (1 layer in 6)": ("power_bh", ".0%")})


# --- Section 4.8: what was measured for each claim, and the table of verdicts -------------------------------


def control_effect(ratio: Interval) -> str:
    """What a control does to a funnel, from the interval of its final erank over the measured one's (paired, the
    same resamples): ``"widens it"`` (the interval above 1), ``"narrows it"`` (below 1), else ``"leaves it
    unchanged within its interval"``."""
    if ratio.lo > 1:
        return "widens it"
    if ratio.hi < 1:
        return "narrows it"
    return "leaves it unchanged within its interval"


def protocol_table(evidence: dict[str, FunnelEvidence]) -> pd.DataFrame:
    """FG1–FG4's statistics under each Jacobian protocol side by side (section 4.6, in context).

    Args:
        evidence: protocol (:data:`lib.chapters.jacobian_funnel.PROTOCOLS`) → its :class:`FunnelEvidence` (trends,
            runs with ``erank``, ``funnel`` and ``funnel_no_b1`` resampled, both controls' funnels).

    Returns:
        one row per statistic (``statistic``) and one text column per protocol: the trained model's value with its
        95% interval, the twins' range (points) and, where a rule decides, the reading's verdict.
    """
    from lib.chapters.jacobian_funnel import funnel_readings, funnel_readings_verdicts, jacobian_claim_verdicts

    rows: dict[str, dict[str, str]] = {}
    for proto, ev in evidence.items():
        tr, run = ev.trained, ev.runs[ev.trained]
        rd = funnel_readings(ev)
        fr = funnel_readings_verdicts(*((r["trained"], r["twins"], r["ratio"]) for r in rd.values()))
        cv = jacobian_claim_verdicts(ev)
        col = {}
        for m, name in (("f_C", "FG1: slope of the complex fraction"), ("delta_H", "FG2: slope of the Henrici departure"),
                        ("r_rot", "FG2: slope of the rotation fraction")):
            t = ev.trends[m, tr]
            col[name] = f"{t.slope.fmt('+.3f')} ({t.direction}); twins {ev.twin_dirs(m)}"
        b1 = run.interval("erank", 0).fmt(".1f") if run.has_interval("erank") else f"{run.point['erank'][0]:.1f}"
        col["block 1: erank of J̄₁"] = (f"{b1}; twins "
                                       f"{value_range([ev.runs[s].point['erank'][0] for s in ev.twins], '.1f')}")
        for reading, label in (("full product", "FG3: all six blocks [paper]"),
                               ("blocks 2–L", "FG3: blocks 2–6 [secondary]")):
            r = rd[reading]
            col[label] = (f"{r['trained'].fmt('.1f')}; twins {value_range([x.point for x in r['twins']], '.1f')} "
                          f"({compare_with_twins(r['trained'], r['twins'])}: {fr['FG3'][reading]})")
        for reading, label in (("full product", "FG4: all six blocks"), ("blocks 2–L", "FG4: blocks 2–6")):
            c = rd[reading]["controls"]
            col[label] = (f"Schur-normal / as measured {c['Schur-normal / as measured'].fmt('.2f')}, shuffled "
                          f"{c['shuffled Schur / as measured'].fmt('.2f')} ({fr['FG4'][reading]})")
        col["verdicts"] = ", ".join(f"{c} {v}" for c, v in cv.items())
        for k, v in col.items():
            rows.setdefault(k, {})[proto] = v
    return pd.DataFrame([{"statistic": k, **v} for k, v in rows.items()])


def jacobian_measurements(ev: FunnelEvidence) -> dict[str, str]:
    """What one protocol's evidence measured for FG1–FG4 (:data:`lib.chapters.jacobian_funnel.JACOBIAN_CLAIMS`), one
    phrase per claim with its intervals and each reading's verdict."""
    from lib.chapters.jacobian_funnel import funnel_readings, funnel_readings_verdicts

    tr, t = ev.trained, ev.trends
    run = ev.runs[tr]
    rd = funnel_readings(ev)
    full, prog = rd["full product"], rd["blocks 2–L"]
    fr = funnel_readings_verdicts(*((r["trained"], r["twins"], r["ratio"]) for r in rd.values()))
    b1_twins = value_range([ev.runs[s].point["erank"][0] for s in ev.twins], ".1f")

    def fit(metric: str) -> str:
        return f"{t[metric, tr].fmt()} ({t[metric, tr].direction}"

    return {
        "FG1": f"complex fraction {value_range(run.point['f_C'])} (Ginibre {ev.ginibre:.2f}); trained {fit('f_C')}); "
               f"twins {ev.twin_dirs('f_C')}",
        "FG2": f"Henrici departure of J̄ − I: {fit('delta_H')}; twins {ev.twin_dirs('delta_H')}); rotation fraction: "
               f"{fit('r_rot')}; "
               f"twins {ev.twin_dirs('r_rot')})",
        "FG3": f"full product [paper]: trained {full['trained'].fmt('.1f')} of {ev.d} vs twins "
               f"{value_range([x.point for x in full['twins']], '.1f')} ({compare_with_twins(full['trained'], full['twins'])}: "
               f"{fr['FG3']['full product']}; erank J̄₁ {run.point['erank'][0]:.1f}, twins {b1_twins}); blocks 2–6, "
               f"narrowing layer after layer [secondary]: trained {prog['trained'].fmt('.1f')} vs twins "
               f"{value_range([x.point for x in prog['twins']], '.1f')} ({compare_with_twins(prog['trained'], prog['twins'])}: "
               f"{fr['FG3']['blocks 2–L']})",
        "FG4": f"Schur-normal / as measured: full product {full['ratio'].fmt('.2f')} ({fr['FG4']['full product']}; "
               f"shuffled Schur {full['controls']['shuffled Schur'].fmt('.1f')}); blocks 2–6 {prog['ratio'].fmt('.2f')} "
               f"({fr['FG4']['blocks 2–L']}"
               + (": no narrowing there to remove)" if fr["FG3"]["blocks 2–L"] != "reproduced" else ")"),
    }


def claim_measurements(ev: FunnelEvidence, verdicts: dict[str, str],
                       in_context: FunnelEvidence | None = None) -> dict[str, str]:
    """What was measured for each claim, as one phrase with its intervals (the Results page's column).

    With ``in_context`` (the same statistics of the in-context Jacobians), FG1–FG4 give both co-primary readings,
    each with its own verdict (:func:`lib.chapters.jacobian_funnel.protocol_verdicts` combines them).
    """
    from lib.chapters.jacobian_funnel import JACOBIAN_CLAIMS, funnel_readings, jacobian_claim_verdicts

    out = jacobian_measurements(ev)
    if in_context is not None:
        ic, v_st, v_ic = jacobian_measurements(in_context), jacobian_claim_verdicts(ev), jacobian_claim_verdicts(in_context)
        out = {c: f"single-token ({v_st[c]}): {out[c]}. In context ({v_ic[c]}): {ic[c]}" for c in JACOBIAN_CLAIMS}
    run = ev.runs[ev.trained]
    full = funnel_readings(ev)["full product"]
    pw = ev.power.set_index("effect") if "effect" in ev.power.columns else ev.power
    power = f"power {pw.power_bh.iloc[1]:.0%} at Spearman r ≈ {pw.r_s_mean.iloc[1]:.2f}"
    b1_twins = value_range([ev.runs[s].point["erank"][0] for s in ev.twins], ".1f")
    sub_tr, sub_rd = ev.split(ev.sub_blocks)
    attn, mlp = (sub_tr[sub_tr.sub_block == s] for s in ("attention", "MLP"))
    block_tr, block_rd = ev.split(ev.coupling)

    def span(r) -> str:
        return f"{r.min():+.2f} to {r.max():+.2f}"

    return {
        **out,
        "FG5": f"Spearman r: attention {span(attn.r_s)}, MLP {span(mlp.r_s)}; {int((sub_tr.q < 0.05).sum())} of "
               f"{len(sub_tr)} sub-block couplings significant at FDR 5% (BH) (twins {int((sub_rd.q < 0.05).sum())} "
               f"of {len(sub_rd)}); {power}",
        "FG6": f"block Spearman r {span(block_tr.r_s)}, {int((block_tr.q < 0.05).sum())} of {len(block_tr)} layers "
               f"significant at FDR 5% (BH) (twins {int((block_rd.q < 0.05).sum())} of {len(block_rd)}); {power}",
        "FG7": "verdicts FG1–FG6: " + ", ".join(f"{c} {verdicts[c]}" for c in ("FG1", "FG2", "FG3", "FG4", "FG5", "FG6"))
               + f"; at random init (single-token): full product {value_range([x.point for x in full['twins']], '.1f')} "
               f"against trained {full['trained'].point:.1f} ({compare_with_twins(full['trained'], full['twins'])}), "
               f"erank J̄₁ {b1_twins} against trained {run.point['erank'][0]:.1f}",
    }


def verdict_frame(claims: Sequence, verdicts: dict[str, str], measured: dict[str, str]) -> pd.DataFrame:
    """The table of section 4.8: one row per claim of ``claims`` (:class:`lib.page.claims.Claim` s) that has a
    verdict: ``claim``, ``paper's claim``, ``measured (book-decoder)``, ``verdict``."""
    return pd.DataFrame([{"claim": c.id, "paper's claim": c.text, "measured (book-decoder)": measured[c.id],
                          "verdict": verdicts[c.id]} for c in claims if c.id in verdicts])

