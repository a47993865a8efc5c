"""Altair figures of chapter 1 (the power method and one transformer layer); chapter 2's are in
:mod:`lib.page.shared_weights`, the line charts both draw in :mod:`lib.page.plotting`.

Every builder takes long-format data (one row per point) and a ``model`` label that
:func:`lib.page.plotting.titled` puts in the subtitle (for toys: ``"toy matrix, d=48, seed 0"``). Toy
series are neither trained weights nor random-init twins, so their colours come from
:data:`lib.page.plotting.OTHER_COLORS`; references (a predicted line, a threshold, a chance level, a
null band) are black or :data:`lib.page.plotting.NULL_COLOR` and have a legend entry of their own.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from lib.page.plotting import (
    BOTTOM_LEGEND,
    NULL_COLOR,
    TRAINED_COLOR,
    other_colors,
    series_color,
    titled,
)
from lib.page.tables import interval_text

__all__ = ["convergence_chart", "gamma_null_chart", "gamma_table"]



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
        strokeDash=alt.StrokeDash("curve:N", title=None, sort=["measured", "predicted"], legend=BOTTOM_LEGEND),
        tooltip=["t:Q", f"{color}:N", "curve:N", alt.Tooltip("error:Q", format=".2e")],
    ).properties(width=width, height=height)
    return titled(chart, title, model, description)


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
    colour = series_color([observed, null, chance], [TRAINED_COLOR, NULL_COLOR, "black"])
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
