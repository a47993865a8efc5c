"""The steering lab's figures (chapter 5): sweeps, the fluency price, the kernel-free explorer and the live panel.

* :func:`summary_chart`, :func:`fluency_chart`, :func:`tradeoff_chart` draw the tables of
  :func:`lib.steering_lab.sweep`, :func:`lib.steering_lab.fluency` and :func:`lib.steering_lab.tradeoff`.
* :func:`static_lab` draws the kernel-free explorer (Altair sliders over the precomputed grid);
  :func:`widget_lab` is the ipywidgets panel (JupyterLab), which re-runs :meth:`lib.steering_lab.Lab.run` live.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

import altair as alt
import numpy as np
import pandas as pd

from lib import spectra, steering
from lib.page.plotting import titled
from lib.steering_lab import ALPHAS, Lab

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["TEXT_CHARS", "fluency_chart", "static_lab", "summary_chart", "tradeoff_chart", "widget_lab"]


def tradeoff_chart(df: pd.DataFrame, *, model: str, title: str) -> alt.TopLevelMixin:
    """Top-1 rate against perplexity (log), one line per method along its strength grid, with 95%
    bootstrap intervals in both directions."""
    base = alt.Chart(df).encode(color=alt.Color("method:N", title=None, legend=alt.Legend(orient="bottom")))
    lo, hi = float(df.ppl_lo.min()), float(df.ppl_hi.max())
    x = alt.X("ppl:Q", scale=alt.Scale(type="log", domain=[lo / 1.2, hi * 1.2], nice=False),
              title="held-out perplexity (log)")
    line = base.mark_line(point=True).encode(
        x=x, y=alt.Y("top1:Q", title="top-1 rate of the target", scale=alt.Scale(domain=[0, 1])),
        order="strength:Q",
        tooltip=["method:N", alt.Tooltip("alpha:Q", title="α|c|/|λ₁|"), alt.Tooltip("strength:Q", format=".1f"),
                 alt.Tooltip("top1:Q", format=".2f"), alt.Tooltip("ppl:Q", format=".1f")])
    ybar = base.mark_rule().encode(x="ppl:Q", y="top1_lo:Q", y2="top1_hi:Q")
    xbar = base.mark_rule().encode(x="ppl_lo:Q", x2="ppl_hi:Q", y="top1:Q")
    return titled(alt.layer(line, ybar, xbar).properties(width=420, height=240), title, model)




def _alpha_axis(title: str = "α|c| / |λ₁(F_L)| (0 plotted at 0.5)") -> alt.X:
    return alt.X("alpha_plot:Q", scale=alt.Scale(type="log"), title=title)


def summary_chart(summary: pd.DataFrame, columns: Sequence[str], *, model: str, title: str,
                  y_title: str = "", log_y: bool = False, width: int = 260, height: int = 180) -> alt.TopLevelMixin:
    """Measures against α (log axis; α = 0 drawn at 0.5), one colour per measure, one panel per direction."""
    long = summary.melt(id_vars=["direction", "alpha"], value_vars=list(columns), var_name="measure", value_name="value")
    long["alpha_plot"] = long["alpha"].where(long["alpha"] > 0, 0.5)
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log_y else alt.Undefined)
    chart = alt.Chart(long).mark_line(point=True).encode(
        x=_alpha_axis(), y=y, color=alt.Color("measure:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
        tooltip=["direction:N", "alpha:Q", "measure:N", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=width, height=height).facet(column=alt.Column("direction:N", title=None))
    return titled(chart, title, model)


def fluency_chart(df: pd.DataFrame, *, model: str, title: str, y_title: str, log_y: bool = False) -> alt.TopLevelMixin:
    """The cost of steering (:func:`fluency`) against α, eigen-edit against activation addition."""
    df = df.assign(alpha_plot=df["alpha"].where(df["alpha"] > 0, 0.5))
    chart = alt.Chart(df).mark_line(point=True).encode(
        x=_alpha_axis(), y=alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log_y else alt.Undefined),
        color=alt.Color("method:N", title=None, legend=alt.Legend(orient="bottom")),
        tooltip=["alpha:Q", "method:N", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=420, height=200)
    return titled(chart, title, model)


TEXT_CHARS = 84
"""Characters per line of the lab's output text (12 px font in a 560 px panel)."""


def _panels(curves: pd.DataFrame, eigs: pd.DataFrame, texts: pd.DataFrame, *, where: str | None, params: tuple,
            n_layers: int, baseline: float) -> alt.TopLevelMixin:
    """Alignment-vs-depth lines, the eigenvalues of F_L' (symlog axes, divided by |λ₁(F_L)|), and the output text."""

    def base(df: pd.DataFrame) -> alt.Chart:
        c = alt.Chart(df)
        return c.transform_filter(where) if where else c

    lines = base(curves).mark_line(point=True).encode(
        x=alt.X("depth:Q", title="depth (0 = embeddings, L = after the last block)", scale=alt.Scale(domain=[0, n_layers])),
        y=alt.Y("alignment:Q", title="mean |cos(x_i, u)|", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
        tooltip=["series:N", "depth:Q", alt.Tooltip("alignment:Q", format=".3f")],
    )
    rule = alt.Chart(pd.DataFrame({"b": [baseline]})).mark_rule(strokeDash=[4, 3], color="#888").encode(y="b:Q")
    left = alt.layer(lines, rule).properties(width=300, height=220)
    if params:
        left = left.add_params(*params)
    sym = alt.Scale(type="symlog")
    # Grey and black, outside the lines' palette: a red λ₁' once read as the "simplified" series.
    right = base(eigs).mark_circle(opacity=0.7).encode(
        x=alt.X("re:Q", title="Re λ(F_L') / |λ₁(F_L)| (symlog)", scale=sym),
        y=alt.Y("im:Q", title="Im λ / |λ₁(F_L)|", scale=sym),
        color=alt.condition("datum.k == 0", alt.value("black"), alt.value("#9e9e9e")),
        size=alt.condition("datum.k == 0", alt.value(70), alt.value(18)),
        tooltip=[alt.Tooltip("re:Q", format=".3f"), alt.Tooltip("im:Q", format=".3f")],
    ).properties(width=240, height=220, title=alt.TitleParams("eigenvalues of F_L' (black: λ₁')", fontSize=11, fontWeight="normal"))
    # The output line is wrapped (TEXT_CHARS per line) rather than cut at the panel's edge.
    texts = texts.assign(text=["\n".join(textwrap.wrap(str(t), TEXT_CHARS)) for t in texts["text"]])
    n_lines = max([t.count("\n") + 1 for t in texts["text"]] or [1])
    text = base(texts).mark_text(align="left", baseline="top", fontSize=12, lineBreak="\n", lineHeight=16).encode(
        text="text:N", x=alt.value(0), y=alt.value(0)).properties(width=560, height=16 * n_lines)
    return alt.vconcat(alt.hconcat(left, right), text)


def static_lab(grid: dict[str, pd.DataFrame], *, model: SpectralModel, alphas: Sequence[float] = ALPHAS) -> alt.TopLevelMixin:
    """Kernel-free explorer: α and direction sliders (Vega parameters) over a :func:`sweep` grid."""
    labels = list(dict.fromkeys(grid["summary"]["direction"]))
    ai = alt.param(name="ai", value=min(4, len(alphas) - 1),
                   bind=alt.binding_range(min=0, max=len(alphas) - 1, step=1,
                                          name=f"α|c|/|λ₁| index (0..{len(alphas) - 1} = {', '.join(f'{a:g}' for a in alphas)}) "))
    dirp = alt.param(name="dir", value=labels[0], bind=alt.binding_radio(options=labels, name="direction "))
    where = "datum.ai == ai && datum.direction == dir"
    cols = ["direction", "ai", "spectral_alignment", "gap_ratio"]
    texts = grid["text"].merge(grid["summary"][cols], on=["direction", "ai"])
    texts["text"] = [f"α|c|/|λ₁| = {a:g} · |<v₁', u>| = {s:.3f} · gap {g:.3f} · {t}" for a, s, g, t in
                     zip(texts["alpha"], texts["spectral_alignment"], texts["gap_ratio"], texts["text"])]
    def small(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
        return df.assign(**{c: df[c].map(lambda v: float(f"{v:.4g}")) for c in cols})  # a lighter page

    chart = _panels(small(grid["curves"], ["alignment"]), small(grid["eigvals"], ["re", "im"]), texts, where=where, params=(ai, dirp),
                    n_layers=model.n_layers, baseline=spectra.baseline_alignment(model.d_model))
    return titled(chart, "Steering lab (precomputed): alignment with u, spectrum of F_L', output", model.label)


def widget_lab(labs: dict[str, Lab], directions: dict[str, dict[str, steering.Direction]]):  # pragma: no cover - needs a kernel
    """ipywidgets panel (JupyterLab): model, direction (a word, or a named direction), α (log slider), layer,
    and the edited matrix (``O``, the paper's edit, or the ``V`` control).

    Args:
        labs: ``{name: Lab}`` (models loaded once; nothing is re-loaded on change).
        directions: ``{name: {label: Direction}}`` named directions per model (concepts, random control);
            a word typed in the text box is looked up with :func:`lib.steering.word_direction`.
    """
    import ipywidgets as W
    from IPython.display import display

    model_w = W.Dropdown(options=list(labs), description="model")
    dir_w = W.Dropdown(description="direction")
    word_w = W.Text(value="", placeholder="or type a word + Enter", description="word", continuous_update=False)
    alpha_w = W.FloatLogSlider(value=10, base=10, min=-1, max=3, step=0.1, description="α|c|/|λ₁|")
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
            summary = (f"{u.label}, {matrix_w.value}-edit: α|c|/|λ₁| = {alpha_w.value:.3g}, c = {r['c']:.3f}, |<v₁', u>| = "
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
