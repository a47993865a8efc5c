"""The steering lab's figures and tables (chapter 5): sweeps, the fluency price, the V-edit control, the
kernel-free explorer and the live panel.

* Figures: :func:`alpha_chart` (how large α must be), :func:`target_chart` (does the target become the
  next token), :func:`tradeoff_chart` (success against fluency), :func:`fluency_chart` (cost against
  α), :func:`v_control_chart` (O-edit against V-edit); :func:`summary_chart` is the general form of
  the first two. One colour per series in every figure of the chapter (:data:`SERIES_COLORS`): the
  eigen-edit's real model green, the simplified model sky blue, activation addition purple, the spectral
  alignment black, and the random-direction baseline ``b_d`` grey and dashed, with its legend entry.
* Tables, with readable labels and one number format per quantity (:data:`QUANTITIES`):
  :func:`sweep_table`, :func:`edit_table`, :func:`tradeoff_table`, :func:`layer_table`,
  :func:`v_control_table`, :func:`continuations_table`. Their labels and text cells are HTML-escaped (a header such as
  ``|<v₁', u>|`` once vanished: the browser read it as a tag).
* :func:`static_lab` draws the kernel-free explorer (Altair sliders over the precomputed grid);
  :func:`widget_lab` is the ipywidgets panel (JupyterLab), which re-runs :meth:`lib.chapters.steering_lab.Lab.run` live.
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import altair as alt
import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from lib.chapters.steering_lab import ALPHAS, RETENTION_LOW, Lab, retention_points
from lib.linalg import spectra
from lib.methods import steering
from lib.page.plotting import NULL_COLOR, OTHER_COLORS, TITLE_PX, titled
from lib.page.tables import interval_text

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["BASELINE_LABEL", "QUANTITIES", "SERIES_COLORS", "TEXT_CHARS", "TEXT_PX", "alpha_chart", "continuations_table",
           "edit_table", "fluency_chart", "layer_table", "retention_finding", "static_lab", "summary_chart",
           "sweep_table", "target_chart", "tradeoff_chart", "tradeoff_table", "v_control_chart", "v_control_table",
           "widget_lab"]

# -- one colour per series, in every figure of the chapter ---------------------------------------------------------
BASELINE_LABEL = "b_d: alignment of a random direction"
"""The legend entry of the dashed baseline line (:func:`lib.linalg.spectra.baseline_alignment`)."""
SPECTRAL = "|⟨v₁(F′ of block L), u⟩|"
REAL, SIMPLIFIED, ACTADD = "tokens, real model", "tokens, simplified model", "tokens, activation addition"
EIGEN, AA = "eigen-edit", "activation addition"
SERIES_COLORS: dict[str, str] = {
    SPECTRAL: "#000000", REAL: OTHER_COLORS[0], SIMPLIFIED: OTHER_COLORS[1], ACTADD: OTHER_COLORS[2],
    EIGEN: OTHER_COLORS[0], AA: OTHER_COLORS[2], "O-edit": OTHER_COLORS[0], "V-edit": OTHER_COLORS[1],
    BASELINE_LABEL: NULL_COLOR,
}
"""Series label → colour (Okabe–Ito): the eigen-edit and its real model green, the simplified model sky
blue, activation addition reddish purple, the spectral alignment black, ``b_d`` grey; in the V-edit's figure
the O-edit green and the V-edit sky blue (no simplified model there)."""
_LAB_SERIES = {"real": REAL, "simplified": SIMPLIFIED, "activation addition (real)": ACTADD}
"""The series of :meth:`Lab.run`'s ``curves`` as the lab's legend names them."""


def _colors(labels: Sequence[str], *, title: str | None = None, legend: Any = alt.Undefined,
            field: str = "measure") -> alt.Color:
    """A nominal colour encoding of ``field`` over ``labels`` in :data:`SERIES_COLORS` (others: the rest
    of Okabe–Ito's colours in order)."""
    spare = iter(OTHER_COLORS[3:] + OTHER_COLORS[:3])
    domain = list(dict.fromkeys(labels))
    colours = [SERIES_COLORS.get(x) or next(spare) for x in domain]
    return alt.Color(f"{field}:N", title=title, scale=alt.Scale(domain=domain, range=colours), legend=legend)


def _alpha_axis(title: str = "edit strength α|c|/|λ₁| of block L's F (0 plotted at 0.5)") -> alt.X:
    return alt.X("alpha_plot:Q", scale=alt.Scale(type="log"), title=title)


def _baseline_rule(baseline: float) -> alt.Chart:
    """The dashed ``b_d`` line as a layer without data of its own (it may sit inside a facet), coloured by
    the datum :data:`BASELINE_LABEL`, so that the legend names it."""
    return alt.Chart().mark_rule(strokeDash=[4, 3]).encode(y=alt.datum(baseline), color=alt.datum(BASELINE_LABEL))


# -- figures ------------------------------------------------------------------------------------------------
def summary_chart(summary: pd.DataFrame, columns: Sequence[str], *, model: str, title: str,
                  y_title: str = "", log_y: bool = False, width: int = 260, height: int = 180,
                  baseline: float | None = None, description: str | None = None) -> alt.TopLevelMixin:
    """Measures against α (log axis; α = 0 drawn at 0.5), one colour per measure, one panel per direction.

    ``columns`` name the measures (as the legend shows them, coloured by :data:`SERIES_COLORS`);
    ``baseline`` adds the dashed ``b_d`` line with its legend entry.
    """
    long = summary.melt(id_vars=["direction", "alpha"], value_vars=list(columns), var_name="measure", value_name="value")
    long["alpha_plot"] = long["alpha"].where(long["alpha"] > 0, 0.5)
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log_y else alt.Undefined)
    labels = list(columns) + ([BASELINE_LABEL] if baseline is not None else [])
    lines = alt.Chart().mark_line(point=True).encode(
        x=_alpha_axis(), y=y, color=_colors(labels, legend=alt.Legend(orient="bottom", columns=2)),
        tooltip=["direction:N", "alpha:Q", "measure:N", alt.Tooltip("value:Q", format=".3f")],
    )
    layers = [lines] + ([_baseline_rule(baseline)] if baseline is not None else [])
    chart = alt.layer(*layers, data=long).properties(width=width, height=height).facet(
        column=alt.Column("direction:N", title=None, sort=list(dict.fromkeys(summary.direction))))
    return titled(chart, title, model, description)


def alpha_chart(summary: pd.DataFrame, *, model: SpectralModel) -> alt.TopLevelMixin:
    """Figure of §5.2: the spectral alignment and the mean final tokens' alignment with ``u`` (simplified
    model, real model, activation addition at matched norm) against α, one panel per direction of a
    :func:`lib.chapters.steering_lab.sweep` summary, with the baseline ``b_d`` of the model's width."""
    names = {"spectral_alignment": SPECTRAL, "final_simplified": SIMPLIFIED, "final_real": REAL,
             "final_actadd": ACTADD}
    return summary_chart(
        summary.rename(columns=names), list(names.values()), model=model.label, width=180,
        baseline=spectra.baseline_alignment(model.d_model),
        title="How large must α be? Spectral alignment and mean token alignment with u",
        y_title="alignment with u",
        description="The spectral alignment reaches 1 at a small α, the tokens of the simplified model "
                    "follow only at a much larger α, and the real model's tokens saturate below 1.")


def target_chart(summary: pd.DataFrame, *, model: str) -> alt.TopLevelMixin:
    """Figure of §5.3: the top-1 rate and the mean probability of the target word against α, eigen-edit
    (green) against activation addition at matched norm (purple), one panel per word direction."""
    words = summary[summary.direction.str.startswith("word")]
    parts = [("top1", EIGEN, "top-1 rate"), ("top1_actadd", AA, "top-1 rate"),
             ("prob", EIGEN, "p(target)"), ("prob_actadd", AA, "p(target)")]
    long = pd.concat([words[["direction", "alpha"]].assign(value=words[col], method=method, quantity=q)
                      for col, method, q in parts], ignore_index=True)
    long["alpha_plot"] = long["alpha"].where(long["alpha"] > 0, 0.5)
    base = alt.Chart().encode(
        x=_alpha_axis(), y=alt.Y("value:Q", title="fraction of prompts / probability", scale=alt.Scale(domain=[0, 1])),
        color=_colors([EIGEN, AA], field="method", legend=alt.Legend(orient="bottom", title=None)),
        tooltip=["direction:N", "alpha:Q", "method:N", "quantity:N", alt.Tooltip("value:Q", format=".3f")])
    # lines and points apart: the dash legend then shows dashes (a line mark with points shows none)
    lines = base.mark_line().encode(strokeDash=alt.StrokeDash(
        "quantity:N", title=None, legend=alt.Legend(orient="bottom", symbolStrokeWidth=2),
        scale=alt.Scale(domain=["top-1 rate", "p(target)"], range=[[1, 0], [5, 3]])))
    points = base.mark_point(filled=True, opacity=1).encode(detail="quantity:N")
    chart = alt.layer(lines, points, data=long).properties(width=260, height=180).facet(
        column=alt.Column("direction:N", title=None))
    return titled(chart, "Does the target become the next token?", model,
                  "Activation addition makes the target word the top next token at a smaller strength than "
                  "the eigen-edit, for the rare word and for the frequent one.")


def tradeoff_chart(df: pd.DataFrame, *, model: str, title: str, description: str | None = None) -> alt.TopLevelMixin:
    """Top-1 rate against perplexity (log), one line per method along its strength grid, with 95%
    bootstrap intervals in both directions."""
    base = alt.Chart(df).encode(color=_colors(list(dict.fromkeys(df.method)), field="method",
                                              legend=alt.Legend(orient="bottom")))
    lo, hi = float(df.ppl_lo.min()), float(df.ppl_hi.max())
    x = alt.X("ppl:Q", scale=alt.Scale(type="log", domain=[lo / 1.2, hi * 1.2], nice=False),
              title="held-out perplexity (log scale)")
    line = base.mark_line(point=True).encode(
        x=x, y=alt.Y("top1:Q", title="top-1 rate of the target", scale=alt.Scale(domain=[0, 1])),
        order="strength:Q",
        tooltip=["method:N", alt.Tooltip("alpha:Q", title="edit strength"), alt.Tooltip("strength:Q", format=".1f"),
                 alt.Tooltip("top1:Q", format=".2f"), alt.Tooltip("ppl:Q", format=".1f")])
    ybar = base.mark_rule().encode(x="ppl:Q", y="top1_lo:Q", y2="top1_hi:Q")
    xbar = base.mark_rule().encode(x="ppl_lo:Q", x2="ppl_hi:Q", y="top1:Q")
    return titled(alt.layer(line, ybar, xbar).properties(width=420, height=240), title, model, description)


def fluency_chart(df: pd.DataFrame, *, model: str, title: str, y_title: str, log_y: bool = False,
                  description: str | None = None) -> alt.TopLevelMixin:
    """The cost of steering (:func:`lib.chapters.steering_lab.fluency`) against α, eigen-edit against activation
    addition at matched norm."""
    df = df.assign(alpha_plot=df["alpha"].where(df["alpha"] > 0, 0.5))
    chart = alt.Chart(df).mark_line(point=True).encode(
        x=_alpha_axis(), y=alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log_y else alt.Undefined),
        color=_colors(list(dict.fromkeys(df.method)), field="method", legend=alt.Legend(orient="bottom")),
        tooltip=["alpha:Q", "method:N", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=420, height=200)
    return titled(chart, title, model, description)


def v_control_chart(vctrl: pd.DataFrame) -> alt.TopLevelMixin:
    """Figure of §5.6: for each model, the O-edit against the V-edit (:func:`lib.chapters.steering_lab.v_control`):
    the spectral alignment of ``F_L'``, the change's alignment with ``u`` at the output projection, and
    the real model's final tokens (with their 95% interval over prompts)."""
    parts = [("spectral_alignment", "|⟨v₁(F′ of block L), u⟩|"), ("change_along_u", "each token's change: |cos| with u"),
             ("final_real", "final tokens, real model")]
    rows = []
    for _, r in vctrl.iterrows():
        for col, label in parts:
            lo, hi = (r.final_real_lo, r.final_real_hi) if col == "final_real" else (r[col], r[col])
            rows.append({"model": r.model, "edit": f"{r.matrix}-edit", "quantity": label, "value": r[col],
                         "lo": lo, "hi": hi})
    long = pd.DataFrame(rows)
    order = [label for _, label in parts]
    base = alt.Chart().encode(
        y=alt.Y("quantity:N", title=None, sort=order),
        yOffset=alt.YOffset("edit:N", sort=["O-edit", "V-edit"]),
        color=_colors(["O-edit", "V-edit"], field="edit", legend=alt.Legend(orient="bottom", title="edited matrix")))
    bars = base.mark_bar().encode(
        x=alt.X("value:Q", title="alignment with u", scale=alt.Scale(domain=[0, 1])),
        tooltip=["model:N", "edit:N", "quantity:N", alt.Tooltip("value:Q", format=".3f")])
    ci = base.mark_rule(color="black").encode(x="lo:Q", x2="hi:Q")
    chart = alt.layer(bars, ci, data=long).properties(width=220, height=150).facet(
        column=alt.Column("model:N", title=None, sort=list(dict.fromkeys(vctrl.model))))
    models = ", ".join(dict.fromkeys(vctrl.model))
    return titled(chart, "Same F′ of block L, different layer: the O-edit against the V-edit at edit strength 100", models,
                  "On MiniLM both edits make u the principal eigenvector of F′ of block L, but only the O-edit moves "
                  "the tokens toward u; on the grouped-query decoder the V-edit plants a direction away from u.")


# -- tables ---------------------------------------------------------------------------------------------------
QUANTITIES: dict[str, tuple[str, str]] = {
    "model": ("model", "{}"),
    "direction": ("direction u", "{}"),
    "alpha": ("edit strength α|c|/|λ₁|", "{:g}"),
    "c": ("c = zᵀu", "{:.3f}"),
    "spectral_alignment": ("|⟨v₁(F′ of block L), u⟩|", "{:.3f}"),
    "gap_ratio": ("gap ratio after the edit", "{:.3f}"),
    "final_simplified": ("tokens, simplified model", "{:.3f}"),
    "final_real": ("tokens, real model", "{:.3f}"),
    "final_real_ci": ("tokens, real model: 95% CI", "{}"),
    "final_actadd": ("tokens, activation addition", "{:.3f}"),
    "sign_agreement": ("share of tokens pushed toward +u", "{:.2f}"),
    "rank": ("median rank of the target", "{:g}"),
    "top1": ("top-1 rate", "{:.2f}"),
    "top1_ci": ("top-1 rate: 95% CI", "{}"),
    "rank_actadd": ("median rank, activation addition", "{:g}"),
    "top1_actadd": ("top-1 rate, activation addition", "{:.2f}"),
    "method": ("w (or b) by", "{}"),
    "radius": ("spectral radius |λ₁| of block L's F", "{:.4f}"),
    "alpha_abs": ("α (absolute)", "{:.2f}"),
    "alignment_before": ("|⟨v₁, u⟩| before the edit", "{:.3f}"),
    "alignment_after": ("|⟨v₁′, u⟩| after the edit", "{:.3f}"),
    "gap_before": ("gap ratio before", "{:.3f}"),
    "gap_after": ("gap ratio after", "{:.3f}"),
    "rank1_error": ("max|F′ − F − α u zᵀ| / max|F′| (last layer)", "{:.1e}"),
    "restored": ("weights restored bit for bit", "{}"),
    "layer": ("edited layer", "{:g}"),
    "layer_alignment": ("|⟨v₁′, u⟩| of the edited layer", "{:.3f}"),
    "cos_y_u": ("|cos(y, u)|", "{:.2f}"),
    "change_along_u": ("each token's change: |cos| with u", "{:.2f}"),
    "text": ("greedy continuation", "{}"),
    "intervention": ("method", "{}"),
    "strength": ("strength s (mean norm of the change)", "{:.1f}"),
    "ppl": ("held-out perplexity", "{:.1f}"),
    "ppl_ci": ("perplexity: 95% CI", "{}"),
}
"""Code name → (the label a table shows, the one number format of that quantity)."""


def _formatter(fmt: str) -> Callable[[Any], str]:
    """One cell's text: ``fmt`` for a number, ``–`` for a missing one, yes/no for a bool; HTML-escaped."""
    def show(value: Any) -> str:
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
            return "–"
        return html.escape(fmt.format(value), quote=False)
    return show


def _escape(label: Any) -> str:
    return html.escape(str(label), quote=False)


def _by_column(df: pd.DataFrame, columns: Sequence[str]) -> Styler:
    """``df[columns]`` with readable headers (:data:`QUANTITIES`), one format per column, no index."""
    table = df[list(columns)].rename(columns={c: QUANTITIES[c][0] for c in columns})
    sty = table.style.hide(axis="index")
    for c in columns:
        sty = sty.format(_formatter(QUANTITIES[c][1]), subset=[QUANTITIES[c][0]])
    return sty.format_index(_escape, axis="columns")


def _by_row(df: pd.DataFrame, rows: Sequence[str], header: Sequence[str] | str) -> Styler:
    """One column per row of ``df`` (its runs, headed by ``header``), one row per quantity of ``rows``, each
    with its readable label and its one format; row labels escaped (the table shows its index)."""
    table = df.set_index(header if isinstance(header, str) else list(header))[list(rows)].T.astype(object)
    table.index = [QUANTITIES[r][0] for r in rows]
    sty = table.style
    for r in rows:
        sty = sty.format(_formatter(QUANTITIES[r][1]), subset=pd.IndexSlice[[QUANTITIES[r][0]], :])
    return sty.format_index(_escape, axis="index").format_index(_escape, axis="columns")


def sweep_table(summary: pd.DataFrame, columns: Sequence[str]) -> Styler:
    """A :func:`lib.chapters.steering_lab.sweep` summary for the page: ``columns`` (code names of :data:`QUANTITIES`;
    ``final_real_ci`` and ``top1_ci`` are the 95% intervals over prompts, as text) with readable headers."""
    df = summary.copy()
    if "final_real_ci" in columns:
        df["final_real_ci"] = interval_text(df.final_real_lo, df.final_real_hi)
    if "top1_ci" in columns:
        df["top1_ci"] = interval_text(df.top1_lo, df.top1_hi, ".2f")
    return _by_column(df, columns)


def edit_table(checks: Sequence[dict[str, Any]]) -> Styler:
    """§5.1: one column per :func:`lib.chapters.steering_lab.check_edit` result (a model), one row per quantity."""
    rows = ["direction", "method", "c", "radius", "alpha_abs", "alignment_before", "alignment_after",
            "gap_before", "gap_after", "rank1_error", "restored"]
    return _by_row(pd.DataFrame(list(checks)), rows, "model")


def layer_table(ctrl: pd.DataFrame) -> Styler:
    """§5.5: :func:`lib.chapters.steering_lab.layer_control`, one row per model and edited layer."""
    df = ctrl.rename(columns={"spectral_alignment": "layer_alignment"})
    return _by_column(df, ["model", "layer", "layer_alignment", "final_real", "rank"])


def v_control_table(vctrl: pd.DataFrame) -> Styler:
    """§5.6: :func:`lib.chapters.steering_lab.v_control`, one column per model and edited matrix."""
    df = vctrl.assign(final_real_ci=interval_text(vctrl.final_real_lo, vctrl.final_real_hi),
                      **{"edited matrix": [f"{m}-edit" for m in vctrl.matrix]})
    rows = ["method", "c", "cos_y_u", "spectral_alignment", "change_along_u", "final_simplified", "final_real",
            "final_real_ci", "rank"]
    return _by_row(df, rows, ["model", "edited matrix"])


def tradeoff_table(trade: pd.DataFrame) -> Styler:
    """§5.4: :func:`lib.chapters.steering_lab.tradeoff`, one row per run (α is the eigen-edit's; activation
    addition has only its strength)."""
    df = trade.assign(intervention=trade.method, top1_ci=interval_text(trade.top1_lo, trade.top1_hi, ".2f"),
                      ppl_ci=interval_text(trade.ppl_lo, trade.ppl_hi, ".1f"))
    return _by_column(df, ["intervention", "alpha", "strength", "top1", "top1_ci", "ppl", "ppl_ci"])


def continuations_table(texts: pd.DataFrame, direction: str) -> Styler:
    """The greedy continuations of a :func:`lib.chapters.steering_lab.sweep` for one direction, one row per α."""
    return _by_column(texts[texts.direction == direction], ["alpha", "text"])


# -- the lab: static explorer and live panel --------------------------------------------------------------------
TEXT_CHARS = 46
"""Characters per line of the lab's output text (12 px font in a :data:`TEXT_PX` panel, which fits a phone's column:
Vega's text marks do not wrap when the site narrows a chart)."""
TEXT_PX = 320
"""Width of the lab's output-text panel, in px."""


def _panels(curves: pd.DataFrame, eigs: pd.DataFrame, texts: pd.DataFrame, *, where: str | None, params: tuple,
            n_layers: int, baseline: float) -> alt.TopLevelMixin:
    """Alignment-vs-depth lines (with the dashed baseline ``b_d`` and its legend entry), the eigenvalues of
    F_L' (symlog axes, divided by |λ₁(F_L)|), and the output text."""

    def base(df: pd.DataFrame) -> alt.Chart:
        c = alt.Chart(df)
        return c.transform_filter(where) if where else c

    curves = curves.assign(series=curves["series"].replace(_LAB_SERIES))
    labels = [*_LAB_SERIES.values(), BASELINE_LABEL]
    lines = base(curves).mark_line(point=True).encode(
        x=alt.X("depth:Q", title="depth (0 = embeddings, L = after the last block)", scale=alt.Scale(domain=[0, n_layers])),
        y=alt.Y("alignment:Q", title="mean |cos(xᵢ, u)|", scale=alt.Scale(domain=[0, 1])),
        color=_colors(labels, field="series", legend=alt.Legend(orient="bottom", columns=1)),
        tooltip=["series:N", "depth:Q", alt.Tooltip("alignment:Q", format=".3f")],
    )
    rule = alt.Chart(pd.DataFrame({"b": [baseline]})).mark_rule(strokeDash=[4, 3]).encode(
        y="b:Q", color=alt.datum(BASELINE_LABEL))
    left = alt.layer(lines, rule).properties(width=300, height=220)
    if params:
        left = left.add_params(*params)
    sym = alt.Scale(type="symlog")
    # Grey and black, outside the lines' palette: a red λ₁' once read as the "simplified" series.
    right = base(eigs).mark_circle(opacity=0.7).encode(
        x=alt.X("re:Q", title="Re λ(F′ of block L) / |λ₁| of block L's F (symlog)", scale=sym),
        y=alt.Y("im:Q", title="Im λ / |λ₁| of block L's F", scale=sym),
        color=alt.condition("datum.k == 0", alt.value("black"), alt.value("#9e9e9e")),
        size=alt.condition("datum.k == 0", alt.value(70), alt.value(18)),
        tooltip=[alt.Tooltip("re:Q", format=".3f"), alt.Tooltip("im:Q", format=".3f")],
    ).properties(width=220, height=220, title=alt.TitleParams("eigenvalues of F′ of block L (black: λ₁′)", fontSize=TITLE_PX, fontWeight="normal"))
    # The output line is wrapped (TEXT_CHARS per line) rather than cut at the panel's edge.
    texts = texts.assign(text=["\n".join(textwrap.wrap(str(t), TEXT_CHARS)) for t in texts["text"]])
    n_lines = max([t.count("\n") + 1 for t in texts["text"]] or [1])
    text = base(texts).mark_text(align="left", baseline="top", fontSize=12, lineBreak="\n", lineHeight=16).encode(
        text="text:N", x=alt.value(0), y=alt.value(0)).properties(width=TEXT_PX, height=16 * n_lines)
    # the legend under the lines' panel, not under the whole figure (below the output text)
    return alt.vconcat(alt.hconcat(left, right).resolve_legend(color="independent"), text)


def static_lab(grid: dict[str, pd.DataFrame], *, model: SpectralModel, alphas: Sequence[float] = ALPHAS) -> alt.TopLevelMixin:
    """Kernel-free explorer: α and direction sliders (Vega parameters) over a :func:`sweep` grid."""
    labels = list(dict.fromkeys(grid["summary"]["direction"]))
    ai = alt.param(name="ai", value=min(4, len(alphas) - 1),
                   bind=alt.binding_range(min=0, max=len(alphas) - 1, step=1,
                                          name=f"edit strength index (0..{len(alphas) - 1} = {', '.join(f'{a:g}' for a in alphas)}) "))
    dirp = alt.param(name="dir", value=labels[0], bind=alt.binding_radio(options=labels, name="direction "))
    where = "datum.ai == ai && datum.direction == dir"
    cols = ["direction", "ai", "spectral_alignment", "gap_ratio"]
    texts = grid["text"].merge(grid["summary"][cols], on=["direction", "ai"])
    texts["text"] = [f"edit strength {a:g} · |⟨v₁′, u⟩| = {s:.3f} · gap {g:.3f} · {t}" for a, s, g, t in
                     zip(texts["alpha"], texts["spectral_alignment"], texts["gap_ratio"], texts["text"])]

    def small(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
        return df.assign(**{c: df[c].map(lambda v: float(f"{v:.4g}")) for c in cols})  # a lighter page

    chart = _panels(small(grid["curves"], ["alignment"]), small(grid["eigvals"], ["re", "im"]), texts, where=where, params=(ai, dirp),
                    n_layers=model.n_layers, baseline=spectra.baseline_alignment(model.d_model))
    return titled(chart, "Steering lab (precomputed): alignment with u, spectrum of F′ of block L, output", model.label,
                  f"Explorer of the precomputed steering runs of {model.label}: pick α and a direction to see the "
                  "tokens' alignment with u at every depth, the eigenvalues of the edited layer and its output.")


def widget_lab(labs: dict[str, Lab], directions: dict[str, dict[str, steering.Direction]]):  # pragma: no cover - needs a kernel
    """ipywidgets panel (JupyterLab): model, direction (a word, or a named direction), α (log slider), layer,
    and the edited matrix (``O``, the paper's edit, or the ``V`` control).

    Args:
        labs: ``{name: Lab}`` (models loaded once; nothing is re-loaded on change).
        directions: ``{name: {label: Direction}}`` named directions per model (concepts, random control);
            a word typed in the text box is looked up with :func:`lib.methods.steering.word_direction`.
    """
    import ipywidgets as W
    from IPython.display import display

    model_w = W.Dropdown(options=list(labs), description="model")
    dir_w = W.Dropdown(description="direction")
    word_w = W.Text(value="", placeholder="or type a word + Enter", description="word", continuous_update=False)
    alpha_w = W.FloatLogSlider(value=10, base=10, min=-1, max=3, step=0.1, description="edit strength",
                               style={"description_width": "initial"})
    layer_w = W.IntSlider(value=1, min=1, max=1, description="layer")
    matrix_w = W.ToggleButtons(options=list(steering.MATRICES), value="O", description="edit",
                               tooltips=["O_L ← O_L + α u wᵀ (the paper's edit)", "V_L ← V_L + α b uᵀ (a control)"])
    out = W.Output()
    syncing = [False]

    def sync_model(_=None):
        lab = labs[model_w.value]
        syncing[0] = True  # no redraw while the other widgets are being reset
        try:
            dir_w.options = list(directions[model_w.value])
            dir_w.value = dir_w.options[0]
            layer_w.max = lab.model.n_layers
            layer_w.value = lab.model.n_layers
        finally:
            syncing[0] = False

    def redraw(_=None):
        if syncing[0] or dir_w.value is None:
            return
        lab = labs[model_w.value]
        with out:
            out.clear_output(wait=True)
            try:
                u = steering.word_direction(lab.model, word_w.value.strip()) if word_w.value.strip() \
                    else directions[model_w.value][dir_w.value]
                r = lab.run(u, alpha_w.value, layer_w.value - 1, matrix=matrix_w.value)
            except steering.InputError as exc:
                print(exc)
                return
            eig = pd.DataFrame({"re": r["eigvals"].real, "im": r["eigvals"].imag, "k": np.arange(r["eigvals"].size)})
            eig[["re", "im"]] /= r["edit"].radius if r["edit"] else np.abs(r["eigvals"]).max()
            summary = (f"{u.label}, {matrix_w.value}-edit: edit strength {alpha_w.value:.3g}, c = {r['c']:.3f}, |⟨v₁′, u⟩| = "
                       f"{r['spectral_alignment']:.3f}, gap {r['gap_ratio']:.3f}, sign agreement {r['sign_agreement']:.2f}")
            if "rank" in r:
                summary += f", target rank {r['rank']:g} (activation addition {r['rank_actadd']:g})"
            texts = pd.DataFrame({"text": [r["text"]]})
            print(summary)
            display(titled(_panels(r["curves"], eig, texts, where=None, params=(), n_layers=lab.model.n_layers,
                                   baseline=spectra.baseline_alignment(lab.model.d_model)),
                           f"Live steering lab, layer {layer_w.value}", lab.label))

    model_w.observe(lambda _: (sync_model(), redraw()), names="value")
    for w in (dir_w, word_w, alpha_w, layer_w, matrix_w):
        w.observe(redraw, names="value")
    sync_model()
    redraw()
    box = W.VBox([W.HBox([model_w, dir_w, word_w]), W.HBox([alpha_w, layer_w, matrix_w]), out])
    display(box)
    return box


def retention_finding(flu: pd.DataFrame) -> str:
    """The retention figure's finding, read off the curves of an encoder's
    :func:`~lib.chapters.steering_lab.fluency` table by :func:`~lib.chapters.steering_lab.retention_points`
    (plain text for a caption)."""
    ret = retention_points(flu)
    return (f"the eigen-edit keeps more up to edit strength {ret['eigen_ahead_until']:g}, and from "
            f"{ret['both_lost_from']:g} on both keep less than {RETENTION_LOW:g} of them")
