"""Chapter 7's training test on the page: the chart of the chapter's statistics over training.

The frame is :func:`lib.chapters.jacobian_funnel_training.emergence_frame`. The training run is the trained
colour (:data:`lib.page.plotting.TRAINED_COLOR`, through :func:`lib.page.plotting.model_color`), the random-init
twins one band from the least to the greatest seed (:data:`lib.page.plotting.RANDOM_COLOR`, dashed at their median,
one legend entry), the range of the twins' 95% intervals a grey band (:data:`lib.page.plotting.NULL_COLOR`) behind it, and the committed model (of which the saved run is a sibling)
a diamond at the last step.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from lib.page.plotting import NULL_COLOR, TWIN_BAND_OPACITY, model_color, titled, twin_band_label

__all__ = ["COMMITTED_SERIES", "TRAINING_SERIES", "emergence_chart", "emergence_table", "step_sequence",
           "trend_stability"]

TRAINING_SERIES = "trained, at each saved step"
"""The legend's name of the training run (the frame's ``"training run"``)."""
COMMITTED_SERIES = "trained, committed model (diamond)"
"""The legend's name of the committed model (the frame's ``"committed model"``), drawn as a diamond."""

_ERANKS = ("erank_b1", "funnel", "funnel_no_b1")
_SLOPES = ("f_C", "delta_H", "r_rot")


def _panels(df: pd.DataFrame, keys: tuple[str, ...], *, log: bool, series: list[str]) -> alt.FacetChart:
    """One row of panels (one per statistic in ``keys``), each with its own y axis."""
    data = df[df.statistic.isin(keys)].assign(zero=0.0)
    data["series"] = data.series.replace({"training run": TRAINING_SERIES, "committed model": COMMITTED_SERIES})
    titles = [t for k, t in zip(df.statistic, df.title) if k in keys]
    colour = model_color("series", series, legend=alt.Legend(orient="bottom", columns=2, title=None))
    y_scale = alt.Scale(type="log", nice=False, zero=False) if log else alt.Scale(zero=False, nice=True)
    y_title = "effective rank (log scale)" if log else "slope per unit relative depth"
    y = alt.Y("value:Q", title=y_title, scale=y_scale)
    x = alt.X("step:O", title="training step (updates)", sort="ascending", axis=alt.Axis(labelAngle=0))
    is_run, is_twin, is_comm = "datum.kind == 'run'", "datum.kind == 'twin'", "datum.kind == 'committed'"
    band = alt.Chart().transform_filter(is_twin).transform_aggregate(
        lo="min(lo)", hi="max(hi)").mark_rect(color=NULL_COLOR, opacity=0.25).encode(
        y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q")
    label = twin_band_label(int(df.series[df.kind == "twin"].nunique())) if (df.kind == "twin").any() else ""
    twin = alt.Chart().transform_filter(is_twin).transform_aggregate(
        least="min(value)", greatest="max(value)", median="median(value)").transform_calculate(series=repr(label))
    twin_tips = ["series:N", alt.Tooltip("median:Q", format=".3g", title="median over the seeds"),
                 alt.Tooltip("least:Q", format=".3g", title="least seed"),
                 alt.Tooltip("greatest:Q", format=".3g", title="greatest seed")]
    twins = [twin.mark_rect(opacity=TWIN_BAND_OPACITY).encode(y=alt.Y("least:Q", scale=y_scale), y2="greatest:Q",
                                                              color=colour, tooltip=twin_tips),
             twin.mark_rule(strokeDash=[4, 3], strokeWidth=1.5).encode(y=alt.Y("median:Q", scale=y_scale),
                                                                      color=colour, tooltip=twin_tips)]
    run = alt.Chart().transform_filter(is_run)
    tips = [alt.Tooltip("step:O", title="step"), alt.Tooltip("value:Q", format=".3g"),
            alt.Tooltip("lo:Q", format=".3g", title="95% interval, low"),
            alt.Tooltip("hi:Q", format=".3g", title="95% interval, high")]
    line = run.mark_line(point=True).encode(x=x, y=y, color=colour, tooltip=tips)
    bars = run.mark_rule().encode(x=x, y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q", color=colour)
    comm = alt.Chart().transform_filter(is_comm)
    comm_pts = comm.mark_point(shape="diamond", size=90, filled=True, opacity=0.6, xOffset=12).encode(
        x=x, y=y, color=colour, tooltip=["series:N", *tips[1:]])
    comm_bars = comm.mark_rule(strokeWidth=3, opacity=0.6, xOffset=12).encode(
        x=x, y=alt.Y("lo:Q", scale=y_scale), y2="hi:Q", color=colour)
    layers = [band, *twins, bars, line, comm_bars, comm_pts]
    if not log:
        layers.insert(0, alt.Chart().mark_rule(color="black", strokeDash=[2, 2]).encode(
            y=alt.Y("mean(zero):Q", scale=y_scale)))
    return alt.layer(*layers, data=data).properties(width=190, height=170).facet(
        column=alt.Column("title:N", title=None, sort=list(dict.fromkeys(titles)),
                          header=alt.Header(labelFontWeight="bold"))).resolve_scale(y="independent")


def emergence_chart(df: pd.DataFrame, *, title: str, model: str, description: str | None = None) -> alt.TopLevelMixin:
    """The chapter's statistics at each saved training step (point, 95% prompt-bootstrap bar), against each
    random-init twins (one band, least to greatest seed, dashed at the median) and the range of the twins' intervals (grey band), and the committed model
    (diamond, at the last step) where the frame has it: effective ranks on a log scale in the first row, the
    depth slopes with a dotted zero line in the second.

    ``df``: :func:`lib.chapters.jacobian_funnel_training.emergence_frame`.
    """
    n_twins = int(df.series[df.kind == "twin"].nunique())
    series = [TRAINING_SERIES, *([COMMITTED_SERIES] if (df.kind == "committed").any() else []),
              *([twin_band_label(n_twins)] if n_twins else [])]
    chart = alt.vconcat(_panels(df, _ERANKS, log=True, series=series),
                        _panels(df, _SLOPES, log=False, series=series))
    return titled(chart, title, model, description=description)


def emergence_table(df: pd.DataFrame) -> pd.DataFrame:
    """The chart's numbers: one row per saved step (``value [lo, hi]``), then the twins' values, where the last step
    lies against them and the committed model; one column per statistic (steps as rows keep the table within the
    text column: eleven columns of intervals were wider than it)."""
    run = df[df.kind == "run"]
    order = list(dict.fromkeys(run.title))
    fmt = {k: (".3f" if k in _SLOPES else ".1f") for k in run.statistic}
    cells = run.assign(text=[f"{v:{fmt[k]}} [{a:{fmt[k]}}, {b:{fmt[k]}}]"
                             for k, v, a, b in zip(run.statistic, run.value, run.lo, run.hi)],
                       col=[f"step {int(s)}" for s in run.step])
    table = cells.pivot(index="title", columns="col", values="text")
    table = table[[f"step {int(s)}" for s in sorted(run.step.unique())]].reindex(order)
    tw = df[df.kind == "twin"]
    table["random-init twins"] = [", ".join(f"{v:{fmt[k]}}" for k, v in zip(g.statistic, g.value))
                                  for g in (tw[tw.title == t] for t in order)]
    last = run[run.step == run.step.max()].set_index("title").side
    table["last step vs twins"] = [last[t] for t in order]
    comm = df[df.kind == "committed"].set_index("title")
    if len(comm):
        table["committed model"] = [f"{comm.value[t]:{fmt[k]}} [{comm.lo[t]:{fmt[k]}}, {comm.hi[t]:{fmt[k]}}]"
                                    for t, k in zip(order, comm.statistic.reindex(order))]
    return table.T.rename_axis("at").reset_index().rename_axis(columns=None)


def step_sequence(df: pd.DataFrame, statistic: str, fmt: str = ".1f") -> str:
    """The training run's point values of ``statistic`` in step order, for the prose:
    ``"49.6 (step 0), 13.1 (25), 3.8 (50)"``."""
    run = df[(df.statistic == statistic) & (df.kind == "run")].sort_values("step")
    parts = [f"{v:{fmt}} ({int(s)})" for s, v in zip(run.step, run.value)]
    return ", ".join([parts[0].replace("(", "(step ", 1), *parts[1:]])


def trend_stability(run_verdict: str, committed_verdict: str) -> dict[str, str]:
    """Chapter 7's sentences on the depth trends, decided by whether FG2's rule gives the saved run's final
    weights and the committed model (two runs of one script) the same verdict.

    Keys: ``head`` (the paragraph's bold lead), ``what`` (what the two verdicts say) and ``fg7`` (what the
    training run adds to FG7 about the trends). Plain text, for :func:`lib.page.prose.glue`.
    """
    if run_verdict != committed_verdict:
        return {"head": "The depth trends are not a stable property of training.",
                "what": ("the verdict on the depth trends depends on which of two runs of the same script one "
                         "measures, a spread the prompt bootstrap cannot see (it holds the weights fixed)"),
                "fg7": ("it adds a caution the twins cannot give: whether the depth trends fall, and with them "
                        "FG2, varies between training runs")}
    return {"head": "The depth trends agree between two runs of training.",
            "what": ("two runs of the same script get the same verdict on the depth trends, so the prompt "
                     "bootstrap's intervals, which hold the weights fixed, miss no spread between runs here"),
            "fg7": "on the depth trends, two runs of the same script agree"}
