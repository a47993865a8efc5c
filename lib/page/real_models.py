"""Altair builders for chapter 3 (real-model experiments), in the book's one style.

Every builder takes the long-format tables of :mod:`lib.methods.alignment` / :mod:`lib.chapters.real_models` and a
``model`` label that :func:`lib.page.plotting.titled` puts in the subtitle. Trained weights and random-init
twins are told apart by colour only (:func:`lib.page.plotting.model_palette`: trained blue, twins
orange/vermillion/brown), every other distinction by position or dash; null bands are grey and chance
levels black dashed, each with its legend entry; trained and random init share their axes.

The per-layer statistics (:func:`gamma_rho_chart`, :func:`depth_profile_chart`) put each model's estimate
with its 95% bootstrap interval *on its own null band*, side by side within the layer, so that "beats its
null" is read off as "the dot lies above its grey bar".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from lib.page.plotting import NULL_COLOR, model_color, model_kind, model_palette, titled

__all__ = ["CHANCE_LABEL", "NULL_LABEL", "convergence_chart", "cross_layer_chart", "depth_profile_chart",
           "gamma_rho_chart", "paper_model_figure", "series_of", "spectrum_summary_chart"]

NULL_LABEL = "null: central 95% (random subspaces)"
"""Legend entry of the grey null bands."""
CHANCE_LABEL = "chance level (isotropic tokens)"
"""Legend entry of the black dashed line at γ / chance = 1."""
_LEGEND = alt.Legend(orient="bottom", columns=2, title=None, symbolOpacity=0.9)
_TARGETS = ("toward v₁ (or the plane of a complex λ₁)", "toward span{v₁, v₂}")
_DECADE_LABEL = "datum.value >= 1 ? '1' : format(datum.value, '.0e')"  # 1, 1e-1, 1e-2, ...


def series_of(who: str) -> str:
    """The legend label of the first part of a ``variant`` (:func:`lib.chapters.real_models.layer_varying`):
    ``"random init s0"`` → ``"random init, seed 0"``; anything else is kept (``"trained"``)."""
    return re.sub(r"^random init s(\d+)$", r"random init, seed \1", who.strip())


def _split(variant: pd.Series) -> tuple[pd.Series, pd.Series]:
    """``(series, source)`` of ``"<who> · <source>"`` variants (a variant without " · " has source "")."""
    parts = variant.astype(str).str.split(" · ", n=1, expand=True)
    source = parts[1].fillna("") if parts.shape[1] > 1 else pd.Series("", index=variant.index)
    return parts[0].map(series_of), source


def _colours(series: Sequence[str], extra: dict[str, str]) -> alt.Scale:
    """The models' colours (:func:`model_palette`, in order) followed by the reference entries ``extra``."""
    domain, colours = model_palette(series)
    return alt.Scale(domain=domain + list(extra), range=colours + list(extra.values()))


def _domain(values: Sequence[np.ndarray], pad: float = 0.05) -> list[float]:
    """A y domain that holds every finite value (nothing clipped), with a small margin."""
    v = np.concatenate([np.asarray(x, dtype=float).ravel() for x in values])
    v = v[np.isfinite(v)]
    lo, hi = float(v.min()), float(v.max())
    margin = pad * (hi - lo or abs(hi) or 1.0)
    return [lo - margin, hi + margin]


def _estimates_on_nulls(df: pd.DataFrame, *, x: str, metric: str, null: str) -> pd.DataFrame:
    """Long rows for :func:`_offset_panel`: per row of ``df`` its estimate (``kind = "estimate"``, ``key`` = its
    series) and its null band (``kind = "null"``, ``key`` = :data:`NULL_LABEL`), with ``y``, ``y_lo``, ``y_hi``."""
    est = pd.DataFrame({x: df[x], "series": df["series"], "source": df["source"], "kind": "estimate",
                        "key": df["series"], "y": df[metric], "y_lo": df[f"{metric}_lo"], "y_hi": df[f"{metric}_hi"]})
    band = est.assign(kind="null", key=NULL_LABEL, y=np.nan, y_lo=df[f"{null}_lo"].to_numpy(),
                      y_hi=df[f"{null}_hi"].to_numpy())
    return pd.concat([band, est], ignore_index=True)


def _offset_panel(
    long: pd.DataFrame, *, x: str, x_title: str, y_title: str, domain: list[float], scale: alt.Scale,
    order: list[str], chance: float | None, title: str, width: int, height: int,
) -> alt.LayerChart:
    """One statistic against ``x``: per series (side by side within each ``x``) a grey null bar, the 95%
    interval and the estimate in the series' colour, and optionally a black dashed chance level."""
    colour = alt.Color("key:N", scale=scale, legend=_LEGEND)
    base = alt.Chart(long).encode(x=alt.X(f"{x}:O", title=x_title), xOffset=alt.XOffset("series:N", sort=order))
    centred = alt.XOffset("series:N", sort=order, bandPosition=0.5)  # marks without a width: the bar's middle
    y = alt.Y("y_lo:Q", title=y_title, scale=alt.Scale(domain=domain, nice=False, zero=False))
    band = base.transform_filter("datum.kind == 'null'").mark_bar(opacity=0.6).encode(
        y=y, y2="y_hi:Q", color=colour,
        tooltip=["series:N", f"{x}:O", alt.Tooltip("y_lo:Q", format=".3f", title="null 2.5%"),
                 alt.Tooltip("y_hi:Q", format=".3f", title="null 97.5%")])
    est = base.transform_filter("datum.kind == 'estimate'").encode(xOffset=centred)
    bars = est.mark_rule(strokeWidth=2).encode(y=y, y2="y_hi:Q", color=colour)
    dots = est.mark_point(filled=True, size=45, opacity=1).encode(
        y=alt.Y("y:Q", title=y_title, scale=alt.Scale(domain=domain, nice=False, zero=False)), color=colour,
        tooltip=["series:N", "source:N", f"{x}:O", alt.Tooltip("y:Q", format=".3f", title="estimate"),
                 alt.Tooltip("y_lo:Q", format=".3f", title="95% CI from"),
                 alt.Tooltip("y_hi:Q", format=".3f", title="95% CI to")])
    layers = [band, bars, dots]
    if chance is not None:
        ref = pd.DataFrame({"y": [chance], "key": [CHANCE_LABEL]})
        layers.append(alt.Chart(ref).mark_rule(strokeDash=[5, 4]).encode(
            y=alt.Y("y:Q", title=y_title), color=colour, tooltip=["key:N", alt.Tooltip("y:Q", format=".2f")]))
    return alt.layer(*layers).properties(width=width, height=height, title=title)


def _sources(df: pd.DataFrame) -> list[str]:
    from lib.chapters.real_models import TRAJECTORIES

    present = list(dict.fromkeys(df["source"]))
    return [s for s in TRAJECTORIES if s in present] + [s for s in present if s not in TRAJECTORIES]


def gamma_rho_chart(
    results: pd.DataFrame, *, model: str,
    title: str = "γₜ / chance and ρₜ per layer (reconstructed definitions)", description: str | None = None,
    width: int = 250, height: int = 170,
) -> alt.TopLevelMixin:
    """γ_t / c(d, k_t) (left) and ρ_t (right) per layer, one row per trajectory source: each model's estimate
    and 95% bootstrap interval over prompts on the grey band of the layer's own null (random subspaces of the
    same dimension ``k_t``), trained and twins side by side; a dashed line marks chance (γ / chance = 1).

    Args:
        results: :attr:`lib.chapters.real_models.LayerVarying.results` of one model or several concatenated (rows of
            :func:`lib.methods.alignment.gamma_rho` with ``variant`` and the null-test columns).
    """
    df = results.copy()
    df["series"], df["source"] = _split(df["variant"])
    order = list(dict.fromkeys(df["series"]))
    scale = _colours(order, {NULL_LABEL: NULL_COLOR, CHANCE_LABEL: "black"})
    specs = (("gamma_ratio", "gamma_ratio_null", "γₜ / chance c(d, kₜ)", 1.0),
             ("rho", "rho_null", "ρₜ = P[a increases across layer t]", None))
    longs = {m: _estimates_on_nulls(df, x="layer", metric=m, null=n) for m, n, _, _ in specs}
    domains = {m: _domain([longs[m].y, longs[m].y_lo, longs[m].y_hi] + ([np.array([c])] if c else []))
               for m, _, _, c in specs}
    rows = []
    for source in _sources(df):
        rows.append(alt.hconcat(*[
            _offset_panel(longs[m][longs[m].source == source], x="layer", x_title="layer t (1-based)", y_title=yt,
                          domain=domains[m], scale=scale, order=order, chance=c, title=source or "",
                          width=width, height=height)
            for m, _, yt, c in specs]))
    chart = rows[0] if len(rows) == 1 else alt.vconcat(*rows)
    return titled(chart, title, model, description=description)


def depth_profile_chart(
    df: pd.DataFrame, *, model: str, title: str, description: str | None = None, width: int = 250, height: int = 190,
) -> alt.TopLevelMixin:
    """Alignment with one fixed basis against depth, over chance, one panel per trajectory source: each model's
    mean with its bootstrap interval on the grey band of random subspaces of the same dimension, and the chance
    level (rows of :func:`lib.methods.alignment.fixed_direction_profile` plus ``variant``)."""
    d = df.copy()
    d["series"], d["source"] = _split(d["variant"])
    order = list(dict.fromkeys(d["series"]))
    scale = _colours(order, {NULL_LABEL: NULL_COLOR, CHANCE_LABEL: "black"})
    long = _estimates_on_nulls(d, x="step", metric="ratio", null="null_ratio")
    domain = _domain([long.y, long.y_lo, long.y_hi, np.array([1.0])])
    panels = [_offset_panel(long[long.source == s], x="step", x_title="depth t (0 = embeddings)",
                            y_title="mean a(x(t), B) / chance", domain=domain, scale=scale, order=order, chance=1.0,
                            title=s or "", width=width, height=height) for s in _sources(d)]
    return titled(alt.hconcat(*panels), title, model, description=description)


def convergence_chart(
    df: pd.DataFrame, *, model: str,
    title: str = "Iterating one shared layer: distance to the principal direction", series: str | None = None,
    description: str | None = None, width: int = 250, height: int = 160,
) -> alt.TopLevelMixin:
    """Iterating one layer: top, the mean alignment with each target (its bootstrap band, and the target's
    chance level ``c(d, k)`` dashed); bottom, the mean ``sin ∠`` to the target (log scale) against the
    power-method prediction ``C·rᵗ`` (dotted). One column per target (the principal direction or plane, and
    ``span{v₁, v₂}``), one colour per series (trained blue, random init orange...), shared axes.

    Args:
        df: rows of :func:`lib.methods.alignment.shared_convergence`, optionally with a ``series`` column
            (:func:`lib.chapters.real_models.shared_runs_frame`: several runs, e.g. trained and a random-init twin).
        series: the legend label of a ``df`` without a ``series`` column (default: ``"trained"`` or
            ``"random init"`` as ``model`` says, else ``model``).
    """
    d = df.copy()
    if "series" not in d:
        kind = model_kind(model)
        d["series"] = series or {"trained": "trained", "random": "random init"}.get(kind or "", model)
    first = d.groupby("series", sort=False).target.transform("first")
    d["toward"] = np.where(d.target == first, _TARGETS[0], _TARGETS[1])
    order = list(dict.fromkeys(d["series"]))
    legend = alt.Legend(orient="bottom", columns=2, title=None, symbolType="stroke", symbolStrokeWidth=3,
                        symbolOpacity=1)
    colour = model_color("series", order, legend=legend)
    dash = alt.StrokeDash("curve:N", title=None, legend=_LEGEND, scale=alt.Scale(
        domain=["measured", "chance level c(d, k)", "power-method prediction C·rᵗ"], range=[[1, 0], [6, 4], [2, 2]]))
    tip = ["series:N", "target:N", "step:Q"]
    top = d.melt(id_vars=["series", "target", "toward", "step", "lo", "hi"], value_vars=["alignment", "chance"],
                 var_name="curve", value_name="a")
    top["curve"] = top["curve"].map({"alignment": "measured", "chance": "chance level c(d, k)"})
    low = d.melt(id_vars=["series", "target", "toward", "step", "rate"], value_vars=["distance", "predicted"],
                 var_name="curve", value_name="sin")
    low = low[(low["sin"] > 1e-12) & (low["sin"] <= 1.5)]
    low["curve"] = low["curve"].map({"distance": "measured", "predicted": "power-method prediction C·rᵗ"})
    sin_domain = [float(low["sin"].min()) / 1.5, 1.5]
    decades = [10.0**k for k in range(int(np.floor(np.log10(sin_domain[0]))) + 1, 1)]
    x = alt.X("step:Q", title="step t")
    uppers, lowers = [], []
    for toward in _TARGETS:
        up = top[top.toward == toward]
        band_data = up[up.curve == "measured"]
        band = alt.Chart(band_data).mark_area(opacity=0.2).encode(x=x, y="lo:Q", y2="hi:Q", color=colour)
        lines = alt.Chart(up).mark_line().encode(
            x=x, y=alt.Y("a:Q", title="mean alignment a", scale=alt.Scale(domain=[0, 1])), color=colour,
            strokeDash=dash, detail="curve:N", tooltip=[*tip, "curve:N", alt.Tooltip("a:Q", format=".4f")])
        uppers.append(alt.layer(lines, band).properties(width=width, height=height, title=toward))  # legend: lines
        lowers.append(alt.Chart(low[low.toward == toward]).mark_line().encode(
            x=x, y=alt.Y("sin:Q", title="mean sin ∠(xₜ, target)",
                         axis=alt.Axis(values=decades, labelExpr=_DECADE_LABEL),
                         scale=alt.Scale(type="log", domain=sin_domain)),
            color=colour, strokeDash=dash, detail="curve:N",
            tooltip=[*tip, "curve:N", alt.Tooltip("rate:Q", format=".3f", title="predicted rate r"),
                     alt.Tooltip("sin:Q", format=".2e")],
        ).properties(width=width, height=height))
    chart = alt.vconcat(alt.hconcat(*uppers), alt.hconcat(*lowers))
    return titled(chart, title, model, description=description)


def cross_layer_chart(
    matrix: np.ndarray, *, model: str, metric: str, title: str, fmt: str = ".3f", description: str | None = None,
    width: int = 220, height: int = 200,
) -> alt.TopLevelMixin:
    """Heatmap of ``matrix[t, s]``: tokens crossing layer ``t`` (rows) measured against ``v₁`` of layer ``s``.

    Two of these side by side need ``.resolve_scale(color="independent")`` (:func:`lib.page.plotting.side_by_side`
    does it): γ and ρ live on different ranges, and one shared colour scale leaves the γ map without contrast.
    """
    T, S = matrix.shape
    df = pd.DataFrame({
        "layer t (tokens)": np.repeat(np.arange(1, T + 1), S),
        "direction v₁ of layer s": np.tile(np.arange(1, S + 1), T),
        metric: matrix.reshape(-1),
    })
    base = alt.Chart(df).encode(x="direction v₁ of layer s:O", y="layer t (tokens):O")
    heat = base.mark_rect().encode(
        color=alt.Color(f"{metric}:Q", scale=alt.Scale(scheme="viridis")),
        tooltip=["layer t (tokens):O", "direction v₁ of layer s:O", alt.Tooltip(f"{metric}:Q", format=fmt)])
    # dark text on the bright (high) end of viridis, white on the dark end
    finite = matrix[np.isfinite(matrix)]
    bright = float(np.nanmin(matrix) + 0.6 * np.ptp(finite)) if finite.size else 0.0
    text = base.mark_text(fontSize=9).encode(
        text=alt.Text(f"{metric}:Q", format=fmt),
        color=alt.condition(f"datum['{metric}'] > {bright}", alt.value("black"), alt.value("white")),
    )
    return titled(alt.layer(heat, text).properties(width=width, height=height), title, model, description=description)


def spectrum_summary_chart(
    table: pd.DataFrame, *, model: str, title: str = "Principal eigenvalue of F per model",
    description: str | None = None, width: int = 190, height: int = 200,
) -> alt.TopLevelMixin:
    """Gap ratio ``|λ_next|/|λ₁|`` (left) and ``|λ₁|`` (right, log scale) per row of a spectrum table; colour:
    trained or random init (the book's colours), shape: is λ₁ complex?

    ``table`` needs ``model``, ``layer``, ``gap_ratio``, ``spectral_radius`` and ``lambda1_complex``; rows are
    labelled ``model · layer``.
    """
    df = table.copy()
    df["row"] = df["model"].str.replace(" (random init, seed ", " (seed ", regex=False) + " · " + df["layer"].astype(str)
    df["weights"] = df["model"].map(lambda m: {"trained": "trained", "random": "random init"}.get(model_kind(m) or "",
                                                                                                 "other"))
    df["λ₁"] = np.where(df["lambda1_complex"], "complex pair", "real")
    rows = list(df["row"])
    colour = model_color("weights", list(dict.fromkeys(df["weights"])), legend=_LEGEND)
    shape = alt.Shape("λ₁:N", title=None, legend=_LEGEND, scale=alt.Scale(domain=["real", "complex pair"],
                                                                          range=["circle", "diamond"]))
    tip = ["row:N", "lambda1:N", alt.Tooltip("gap_ratio:Q", format=".4f"),
           alt.Tooltip("spectral_radius:Q", format=".4f")]
    base = alt.Chart(df).encode(y=alt.Y("row:N", title=None, sort=rows), color=colour, shape=shape, tooltip=tip)
    gap = base.mark_point(filled=True, size=70).encode(
        x=alt.X("gap_ratio:Q", title="gap ratio |λ_next| / |λ₁|", scale=alt.Scale(zero=False, padding=8)))
    decades = np.arange(np.floor(np.log10(df.spectral_radius.min())), np.ceil(np.log10(df.spectral_radius.max())) + 1)
    ticks = [float(m * 10**k) for k in decades for m in (1, 2, 5)][:-2]
    rad = base.mark_point(filled=True, size=70).encode(
        x=alt.X("spectral_radius:Q", title="|λ₁| (log scale)", axis=alt.Axis(values=ticks, format="~g"),
                scale=alt.Scale(type="log", domain=[ticks[0], ticks[-1]])),
        y=alt.Y("row:N", title=None, sort=rows, axis=alt.Axis(labels=False, ticks=False)))
    chart = alt.hconcat(gap.properties(width=width, height=height), rad.properties(width=width, height=height))
    return titled(chart, title, model, description=description)



def paper_model_figure(run: object, name: str) -> tuple[alt.TopLevelMixin, str, str]:
    """``(chart, name, caption)`` for :func:`lib.page.figures.figure`: one of the paper's checkpoints
    (:class:`lib.chapters.real_models.PaperModelRun` with token experiments), its shared layer iterated (ALBERT) or
    γ_t / ρ_t against their nulls (layer-varying models). ``name`` is the figure's name."""
    hub, label, prompts = run.name, run.label, run.prompts  # type: ignore[attr-defined]
    if run.convergence is not None:  # type: ignore[attr-defined]
        steps = run.steps  # type: ignore[attr-defined]
        chart = convergence_chart(run.convergence, title=f"{hub}: alignment and distance to v₁ (or its plane)",
                                  model=f"{label}, shared layer iterated {steps}×, simplified (L2, no FFN)")
        return chart, name, (f"{hub}: its shared layer iterated {steps} times in the simplified model from the "
                             f"embeddings of {prompts} prompts; solid: measured, dotted: the power-method prediction.")
    results = run.layer_varying.results  # type: ignore[attr-defined]
    chart = gamma_rho_chart(results, model=f"{label}, {prompts} prompts", title=f"{hub}: γₜ / chance and ρₜ")
    return chart, name, (f"{hub}: γₜ over its chance level and ρₜ per layer, on {prompts} prompts, against each "
                         "layer's own null (grey); simplified model and real forward pass.")
