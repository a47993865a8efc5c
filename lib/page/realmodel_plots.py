"""Altair builders for chapter 3 (real-model experiments).

Every builder takes the long-format tables of :mod:`lib.alignment_stats` / :mod:`lib.real_models` and a
``model`` label that :func:`lib.page.plotting.titled` puts in the subtitle.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import titled

__all__ = ["convergence_chart", "cross_layer_chart", "depth_profile_chart", "gamma_rho_chart", "spectrum_summary_chart"]

_LEGEND = alt.Legend(orient="bottom", columns=2)


def _ci_panel(
    df: pd.DataFrame, metric: str, *, title: str, null_col: str, reference: float | None, ref_label: str,
    width: int, height: int,
) -> alt.LayerChart:
    """One metric against layer: per-variant line with bootstrap error bars over the variant's own null band.

    The band of each variant spans ``{null_col}_lo`` to ``{null_col}_hi`` (the central 95% of that layer's
    null distribution), in the variant's colour; an optional dashed rule marks ``reference``.
    """
    color = alt.Color("variant:N", title=None, legend=_LEGEND)
    base = alt.Chart(df).encode(x=alt.X("layer:O", title="layer t (1-based)"), color=color)
    line = base.mark_line(point=True).encode(
        y=alt.Y(f"{metric}:Q", title=title, scale=alt.Scale(zero=False)),
        tooltip=["variant:N", "layer:O", alt.Tooltip(f"{metric}:Q", format=".4f"),
                 alt.Tooltip(f"{metric}_lo:Q", format=".4f"), alt.Tooltip(f"{metric}_hi:Q", format=".4f"),
                 alt.Tooltip(f"{null_col}_lo:Q", format=".4f", title="null 2.5%"),
                 alt.Tooltip(f"{null_col}_hi:Q", format=".4f", title="null 97.5%")],
    )
    # The same y title on every layer that has one: Vega-Lite joins different titles ("gamma_lo, γ_t = …").
    bars = base.mark_errorbar(ticks={"size": 9}).encode(y=alt.Y(f"{metric}_lo:Q", title=title), y2=f"{metric}_hi:Q")
    band = base.mark_area(opacity=0.15).encode(y=alt.Y(f"{null_col}_lo:Q", title=title), y2=f"{null_col}_hi:Q")
    layers = [band, bars, line]
    if reference is not None:
        rule = alt.Chart(pd.DataFrame({"y": [reference], "what": [ref_label]})).mark_rule(
            strokeDash=[5, 4], color="black").encode(y="y:Q", tooltip=["what:N", alt.Tooltip("y:Q", format=".4f")])
        layers.insert(1, rule)
    return alt.layer(*layers).properties(width=width, height=height)


def gamma_rho_chart(
    results: pd.DataFrame, *, model: str,
    title: str = "γ_t / chance and ρ_t per layer (reconstructed definitions)", width: int = 270, height: int = 210,
) -> alt.TopLevelMixin:
    """Two panels, one line per ``variant``: γ_t / c_{d,k_t} and ρ_t, each with its 95% bootstrap interval
    over prompts, over the band of the layer's own null (random subspaces of the same dimension ``k_t``).

    Args:
        results: :attr:`lib.real_models.LayerVarying.results` (rows of
            :func:`lib.alignment_stats.gamma_rho` with ``variant`` and the null-test columns).
    """
    g = _ci_panel(results, "gamma_ratio", title="γ_t / chance c(d, k_t)", null_col="gamma_ratio_null",
                  reference=1.0, ref_label="chance level (isotropic tokens)", width=width, height=height)
    r = _ci_panel(results, "rho", title="ρ_t = P[a increases across layer t]", null_col="rho_null",
                  reference=None, ref_label="", width=width, height=height)
    return titled(alt.hconcat(g, r), title, model)


def depth_profile_chart(
    df: pd.DataFrame, *, model: str, title: str, width: int = 300, height: int = 210,
) -> alt.TopLevelMixin:
    """Alignment with one fixed basis against depth, over chance: one line per ``variant`` with its bootstrap
    interval and its null band (rows of :func:`lib.alignment_stats.fixed_direction_profile` plus ``variant``)."""
    color = alt.Color("variant:N", title=None, legend=_LEGEND)
    base = alt.Chart(df).encode(x=alt.X("step:O", title="depth t (0 = embeddings)"), color=color)
    y_title = "mean a(x(t), B) / chance"
    band = base.mark_area(opacity=0.15).encode(y=alt.Y("null_ratio_lo:Q", title=y_title), y2="null_ratio_hi:Q")
    bars = base.mark_errorbar(ticks={"size": 9}).encode(y=alt.Y("ratio_lo:Q", title=y_title), y2="ratio_hi:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("ratio:Q", title=y_title, scale=alt.Scale(zero=False)),
        tooltip=["variant:N", "step:O", alt.Tooltip("ratio:Q", format=".3f"), alt.Tooltip("ratio_lo:Q", format=".3f"),
                 alt.Tooltip("ratio_hi:Q", format=".3f")],
    )
    return titled(alt.layer(band, bars, line).properties(width=width, height=height), title, model)


def convergence_chart(
    df: pd.DataFrame, *, model: str,
    title: str = "Iterating one shared layer: distance to the principal direction", width: int = 255, height: int = 210,
) -> alt.TopLevelMixin:
    """Left: mean alignment with each target against the step, with a bootstrap band, and each target's
    chance level ``c_{d,k}`` (dashed, in the target's colour). Right: mean ``sin ∠`` (log scale, solid)
    against the power-method rate ``C·r^t`` (dashed).

    Args:
        df: rows of :func:`lib.alignment_stats.shared_convergence` (optionally with a ``variant``
            column; then the panels are repeated per variant, one row each).
    """
    df = df.copy()
    df["rate_label"] = df["target"] + " (r = " + df["rate"].map(lambda r: f"{r:.3f}") + ")"
    base = alt.Chart(df).encode(x=alt.X("step:Q", title="step t"), color=alt.Color("target:N", title=None, legend=_LEGEND))
    band = base.mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q")
    align = base.mark_line().encode(
        y=alt.Y("alignment:Q", title="mean alignment a", scale=alt.Scale(domain=[0, 1])),
        tooltip=["target:N", "step:Q", alt.Tooltip("alignment:Q", format=".4f")],
    )
    chance = df.groupby("target", as_index=False, sort=False).chance.first()
    rule = alt.Chart(chance).mark_rule(strokeDash=[5, 4]).encode(
        y="chance:Q", color=alt.Color("target:N", title=None, legend=_LEGEND),
        tooltip=["target:N", alt.Tooltip("chance:Q", format=".4f", title="chance level c(d, k)")])
    left = alt.layer(band, align, rule).properties(width=width, height=height)
    long = df.melt(id_vars=["step", "target", "rate_label"], value_vars=["distance", "predicted"], var_name="curve", value_name="sin")
    long = long[(long["sin"] > 1e-12) & (long["sin"] <= 1.5)]
    right = alt.Chart(long).mark_line().encode(
        x=alt.X("step:Q", title="step t"),
        y=alt.Y("sin:Q", title="mean sin ∠(x_t, target)", scale=alt.Scale(type="log")),
        color=alt.Color("target:N", title=None),
        strokeDash=alt.StrokeDash("curve:N", title=None, sort=["distance", "predicted"], legend=_LEGEND),
        detail="rate_label:N",
        tooltip=["rate_label:N", "curve:N", "step:Q", alt.Tooltip("sin:Q", format=".2e")],
    ).properties(width=width, height=height)
    return titled(alt.hconcat(left, right), title, model)


def cross_layer_chart(
    matrix: np.ndarray, *, model: str, metric: str, title: str, fmt: str = ".3f", width: int = 220, height: int = 200,
) -> alt.TopLevelMixin:
    """Heatmap of ``matrix[t, s]``: tokens crossing layer ``t`` (rows) measured against ``v₁`` of layer ``s``.

    Two of these side by side need ``.resolve_scale(color="independent")``: γ and ρ live on different
    ranges, and one shared colour scale leaves the γ map without contrast.
    """
    T, S = matrix.shape
    df = pd.DataFrame({
        "layer t (tokens)": np.repeat(np.arange(1, T + 1), S),
        "direction v₁ of layer s": np.tile(np.arange(1, S + 1), T),
        metric: matrix.reshape(-1),
    })
    base = alt.Chart(df).encode(x="direction v₁ of layer s:O", y="layer t (tokens):O")
    heat = base.mark_rect().encode(color=alt.Color(f"{metric}:Q", scale=alt.Scale(scheme="viridis")),
                                   tooltip=["layer t (tokens):O", "direction v₁ of layer s:O", alt.Tooltip(f"{metric}:Q", format=fmt)])
    # dark text on the bright (high) end of viridis, white on the dark end
    bright = float(np.nanmin(matrix) + 0.6 * np.ptp(matrix[np.isfinite(matrix)])) if np.isfinite(matrix).any() else 0.0
    text = base.mark_text(fontSize=9).encode(
        text=alt.Text(f"{metric}:Q", format=fmt),
        color=alt.condition(f"datum['{metric}'] > {bright}", alt.value("black"), alt.value("white")),
    )
    return titled(alt.layer(heat, text).properties(width=width, height=height), title, model)


def spectrum_summary_chart(
    table: pd.DataFrame, *, model: str, title: str = "Principal eigenvalue of F per model",
    width: int = 150, height: int = 200,
) -> alt.TopLevelMixin:
    """Gap ratio ``|λ_next|/|λ₁|`` (left) and ``|λ₁|`` (right) per row of a spectrum table, shape = λ₁ complex?

    ``table`` needs ``model``, ``layer``, ``gap_ratio``, ``spectral_radius`` and ``lambda1_complex``; rows are
    labelled ``model · layer``.
    """
    df = table.copy()
    df["row"] = df["model"].str.replace(" (random init, seed ", " (seed ", regex=False) + " · " + df["layer"].astype(str)
    base = alt.Chart(df).encode(
        y=alt.Y("row:N", title=None, sort=list(df["row"])),
        shape=alt.Shape("lambda1_complex:N", title="λ₁ complex?", legend=_LEGEND),
        tooltip=["row:N", "lambda1:N", alt.Tooltip("gap_ratio:Q", format=".4f"), alt.Tooltip("spectral_radius:Q", format=".4f")],
    )
    gap = base.mark_point(filled=True, size=70).encode(x=alt.X("gap_ratio:Q", title="|λ_next| / |λ₁|", scale=alt.Scale(zero=False)))
    rad = base.mark_point(filled=True, size=70).encode(x=alt.X("spectral_radius:Q", title="|λ₁|", scale=alt.Scale(type="log")),
                                                       y=alt.Y("row:N", title=None, sort=list(df["row"]), axis=alt.Axis(labels=False, ticks=False)))
    return titled(alt.hconcat(gap.properties(width=width, height=height), rad.properties(width=width, height=height)), title, model)
