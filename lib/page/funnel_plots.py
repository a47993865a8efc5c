"""Altair figures of chapter 4 (the Jacobian funnel). Every builder names its model(s) in the subtitle."""

from __future__ import annotations

import random

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import titled

__all__ = [
    "community_graph_chart",
    "coupling_chart",
    "depth_chart",
    "funnel_chart",
    "training_curve_chart",
]


def training_curve_chart(log: dict, model: str) -> alt.TopLevelMixin:
    """Training loss (of the batch at each logged step) against step, with the held-out losses of the trained
    model and of its random twin and the uniform-prediction loss as dashed rules."""
    curve = "training loss (one batch)"
    df = pd.DataFrame({"step": log["steps"], "loss": log["loss"], "what": curve})
    refs = pd.DataFrame(
        {
            "what": ["held-out, trained", "held-out, random init", "uniform over the vocabulary"],
            "loss": [log["heldout_loss"], log["heldout_loss_random_init"], log["uniform_loss"]],
        }
    )
    # One colour scale with the curve in it: an uncoloured curve took the default blue, which the
    # legend gave to "held-out, random init".
    colour = alt.Color("what:N", title=None, legend=alt.Legend(symbolType="stroke"),
                       scale=alt.Scale(domain=[curve, *refs["what"]], range=["#4c78a8", "#f58518", "#e45756", "#7f7f7f"]))
    line = alt.Chart(df).mark_line().encode(
        x=alt.X("step:Q", title="training step"), y=alt.Y("loss:Q", title="cross-entropy (nats / token)"),
        color=colour, tooltip=["step:Q", alt.Tooltip("loss:Q", format=".3f")],
    )
    rules = alt.Chart(refs).mark_rule(strokeDash=[4, 3]).encode(
        y="loss:Q", color=colour, tooltip=["what:N", alt.Tooltip("loss:Q", format=".3f")]
    )
    return titled((line + rules).properties(width=420, height=220), "Training curve of the book decoder", model)


def depth_chart(
    df: pd.DataFrame,
    value: str,
    *,
    title: str,
    model: str,
    y_title: str,
    baseline: str | None = None,
    domain: Sequence[float] | None = None,
    interval: tuple[str, str] | None = None,
    detail: str | None = None,
) -> alt.TopLevelMixin:
    """A metric against relative depth, one line per ``series``, one panel per ``model``.

    ``df`` has columns ``model``, ``depth`` (``(l+1)/L``), ``layer``, ``series`` and ``value``; the
    optional column ``baseline`` (constant within a model, e.g. the Ginibre complex fraction for that
    model's ``d``) is drawn as a dashed black line. ``interval``: the ``(lo, hi)`` columns of a
    bootstrap interval, drawn as error bars (rows where they are NaN get none). ``detail``: a column
    that splits one series into several lines of the same colour (e.g. the random-init seed).
    """
    scale = alt.Scale(domain=list(domain)) if domain is not None else alt.Scale(zero=False)
    enc = dict(
        x=alt.X("depth:Q", title="relative depth (l+1)/L", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
    )
    if detail is not None:
        enc["detail"] = alt.Detail(f"{detail}:N")
    tips = ["series:N", "layer:Q", alt.Tooltip(f"{value}:Q", format=".3f")]
    if interval is not None:
        tips += [alt.Tooltip(f"{interval[0]}:Q", format=".3f"), alt.Tooltip(f"{interval[1]}:Q", format=".3f")]
    line = alt.Chart().mark_line(point=True).encode(
        y=alt.Y(f"{value}:Q", title=y_title, scale=scale), tooltip=tips, **enc
    )
    layers = [line]
    if interval is not None:
        layers.append(alt.Chart().mark_rule().encode(
            y=alt.Y(f"{interval[0]}:Q", scale=scale), y2=f"{interval[1]}:Q", **enc))
    if baseline is not None:
        layers.append(
            alt.Chart().mark_rule(strokeDash=[5, 4], color="black").encode(
                y=f"mean({baseline}):Q", tooltip=[alt.Tooltip(f"mean({baseline}):Q", format=".4f", title=baseline)]
            )
        )
    chart = alt.layer(*layers, data=df).properties(width=260, height=200).facet(
        column=alt.Column("model:N", title=None)
    ).resolve_scale(y="independent")
    return titled(chart, title, model)


def funnel_chart(df: pd.DataFrame, *, title: str, model: str, log_y: bool = True) -> alt.TopLevelMixin:
    """Effective rank of the cumulative product against depth; ``df``: ``blocks``, ``erank``, ``variant``, ``model``
    (optionally ``seed``: one line per seed within a variant)."""
    y = alt.Y("erank:Q", title="erank(P_l)", scale=alt.Scale(type="log") if log_y else alt.Scale())
    chart = (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("blocks:Q", title="last block multiplied (0: identity)", axis=alt.Axis(tickMinStep=1)),
            y=y,
            # one legend for both channels (a legend=None on either would hide it for both)
            color=alt.Color("variant:N", title=None, legend=alt.Legend(orient="bottom", columns=2, symbolType="stroke", symbolStrokeWidth=2)),
            strokeDash=alt.StrokeDash("variant:N", title=None),
            tooltip=["model:N", "variant:N", "blocks:Q", alt.Tooltip("erank:Q", format=".1f")],
            **({"detail": alt.Detail("seed:N")} if "seed" in df.columns else {}),
        )
        .properties(width=260, height=220)
        .facet(column=alt.Column("model:N", title=None))
        .resolve_scale(x="independent")
    )
    return titled(chart, title, model)


def community_graph_chart(
    W: np.ndarray, membership: np.ndarray, participation: np.ndarray, log_gain: np.ndarray, *, title: str,
    model: str, seed: int = 0, max_edges: int = 1500,
) -> alt.TopLevelMixin:
    """Nodes = residual coordinates (force layout, seeded), colour = community, size = participation.

    Edges: the strongest ``max_edges`` of the signed top-k graph (grey positive, red negative).
    """
    import igraph as ig

    iu = np.triu_indices(len(W), 1)
    w = W[iu]
    sel = np.flatnonzero(w != 0)
    sel = sel[np.argsort(-np.abs(w[sel]))][:max_edges]
    g = ig.Graph(n=len(W), edges=list(zip(iu[0][sel].tolist(), iu[1][sel].tolist())))
    rng = np.random.default_rng(seed)
    # igraph draws the layout's random moves from its own generator (Python's `random` by default):
    # give it a seeded one for this call, so two builds draw the same picture.
    ig.set_random_number_generator(random.Random(seed))
    try:
        xy = np.asarray(
            g.layout_fruchterman_reingold(weights=np.abs(w[sel]).tolist(), seed=rng.random((len(W), 2)).tolist())
        )
    finally:
        ig.set_random_number_generator(random)
    nodes = pd.DataFrame({
        "unit": np.arange(len(W)), "x": xy[:, 0], "y": xy[:, 1], "community": [f"C{c}" for c in membership],
        "participation": participation, "log_gain": log_gain,
    })
    edges = pd.DataFrame({
        "x": xy[iu[0][sel], 0], "y": xy[iu[0][sel], 1], "x2": xy[iu[1][sel], 0], "y2": xy[iu[1][sel], 1],
        "sign": np.where(w[sel] > 0, "positive", "negative"),
    })
    ax = alt.Axis(labels=False, ticks=False, grid=False, title=None)
    e = alt.Chart(edges).mark_rule(opacity=0.12).encode(
        x=alt.X("x:Q", axis=ax), y=alt.Y("y:Q", axis=ax), x2="x2:Q", y2="y2:Q",
        color=alt.Color("sign:N", scale=alt.Scale(domain=["positive", "negative"], range=["#888", "#d62728"]),
                        title="edge"),
    )
    n = alt.Chart(nodes).mark_circle(stroke="black", strokeWidth=0.3).encode(
        x=alt.X("x:Q", axis=ax), y=alt.Y("y:Q", axis=ax),
        fill=alt.Fill("community:N", title="community", sort=sorted(set(nodes.community), key=lambda s: int(s[1:]))),
        size=alt.Size("participation:Q", scale=alt.Scale(range=[10, 160]), title="participation P_i"),
        tooltip=["unit:Q", "community:N", alt.Tooltip("participation:Q", format=".2f"),
                 alt.Tooltip("log_gain:Q", format=".2f")],
    )
    return titled((e + n).properties(width=460, height=400).resolve_scale(color="independent"), title, model)


def coupling_chart(df: pd.DataFrame, *, title: str, model: str) -> alt.TopLevelMixin:
    """Spearman r_S(participation, log gain) against relative depth; filled points: BH-adjusted p < 0.05.

    ``df``: ``depth``, ``layer``, ``r_s``, ``q`` (BH-adjusted p, null a), ``p_relabel``, ``series``, ``model``;
    optionally ``weights`` (one line per random-init seed within a series).
    """
    df = df.assign(significant=np.where(df.q < 0.05, "q < 0.05", "n.s."))
    # No layer brings its own data: the facet splits the layer's shared data by model. (A zero line
    # drawn from its own small table once kept every layer on its own data, so both panels showed
    # both models.)
    base = alt.Chart().encode(
        x=alt.X("depth:Q", title="relative depth (l+1)/L", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("r_s:Q", title="r_S (participation vs log gain)"),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom")),
        **({"detail": alt.Detail("weights:N")} if "weights" in df.columns else {}),
    )
    pts = base.mark_point(size=70, filled=True).encode(
        shape=alt.Shape("significant:N", scale=alt.Scale(domain=["q < 0.05", "n.s."], range=["circle", "cross"]),
                        title="BH, null (a)", legend=alt.Legend(orient="bottom")),
        tooltip=["series:N", "layer:Q", alt.Tooltip("r_s:Q", format=".3f"), alt.Tooltip("q:Q", format=".3g"),
                 alt.Tooltip("p_relabel:Q", format=".3g")],
    )
    zero = alt.Chart().mark_rule(color="black").encode(y=alt.datum(0))
    chart = alt.layer(base.mark_line(opacity=0.5), pts, zero, data=df).properties(width=260, height=220).facet(
        column=alt.Column("model:N", title=None)
    )
    return titled(chart, title, model)
