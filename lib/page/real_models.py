"""Chapter 3's page (``book/03_real_models.md``): its charts, the tables built for the reader, the words of its prose.

The frames come from :mod:`lib.chapters.real_models` and :mod:`lib.chapters.real_models_directions` (which compute,
and state the verdict rules); this module only draws, tabulates and words them.

**Charts.** Altair builders in the book's one style. Every builder takes the long-format tables of
:mod:`lib.methods.alignment` / :mod:`lib.chapters.real_models` and a ``model`` label that :func:`lib.page.plotting.titled` puts in the subtitle. Trained weights and random-init
twins are told apart by colour only (:func:`lib.page.plotting.model_palette`: trained blue, twins
orange/vermillion/brown), every other distinction by position or dash; null bands are grey and chance
levels black dashed, each with its legend entry; trained and random init share their axes.

The per-layer statistics (:func:`gamma_rho_chart`, :func:`depth_profile_chart`) put each model's estimate
with its 95% bootstrap interval *on its own null band*, side by side within the layer, so that "beats its
null" is read off as "the dot lies above its grey bar".

**Tables.** One display row per layer, run or model, with one precision per quantity everywhere
(:func:`table_formats`, :data:`GAMMA_RHO_FORMAT`): :func:`paper_models_table` (3.5), :func:`shared_runs_table`
and :func:`shared_run_row` (3.2), :func:`gamma_rho_table` (3.3), :func:`overview_table` (3.4) and
:func:`direction_table` (LA7, LA8). Model labels in table cells are shortened by :func:`short_label`.

**Prose.** The values the chapter glues into its text, by glue name: :func:`gamma_rho_glue`,
:func:`build_up_glue`, :func:`direction_glue`, with the phrases they use (:func:`layer_list`, :func:`beat_phrase`,
:func:`p_phrase`, :func:`build_up_text`, :func:`build_up_summary`). The Takeaway's lines are decided from the loaded models' numbers by :func:`takeaway`
(:func:`display_name` names the models in them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import altair as alt
import numpy as np
import pandas as pd

from lib.chapters.real_models import (
    ALPHA,
    FDR,
    TRAJECTORIES,
    build_up_status,
    compare_to_twins,
    fit_window,
    layer_range,
    layers_where,
    null_range,
    select_source,
)
from lib.chapters.real_models_directions import DIRECTION_STATISTICS, direction_verdict
from lib.linalg.power import fitted_ratio
from lib.models.paper import PAPER_MODELS
from lib.page.plotting import LABEL_PX, NULL_COLOR, model_color, model_kind, model_palette, titled

if TYPE_CHECKING:
    from lib.chapters.real_models import Analysis, LayerRange, SharedRun, TwinComparison
    from lib.chapters.real_models_directions import DirectionTests

__all__ = [
    "CHANCE_LABEL",
    "GAMMA_RHO_FORMAT",
    "NULL_LABEL",
    "BuildUp",
    "beat_phrase",
    "build_up_glue",
    "build_up_summary",
    "build_up_text",
    "convergence_chart",
    "cross_layer_chart",
    "depth_profile_chart",
    "direction_glue",
    "direction_table",
    "display_name",
    "gamma_rho_chart",
    "gamma_rho_glue",
    "gamma_rho_table",
    "layer_list",
    "overview_row",
    "overview_table",
    "p_phrase",
    "paper_model_figure",
    "paper_models_table",
    "series_of",
    "shared_run_row",
    "shared_run_rows",
    "shared_runs_table",
    "short_label",
    "spectrum_summary_chart",
    "table_formats",
    "takeaway",
]

# -- charts ----------------------------------------------------------------------------------------------------
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
    level (rows of :func:`lib.chapters.real_models.fixed_direction_profile` plus ``variant``)."""
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
        df: rows of :func:`lib.chapters.real_models.shared_convergence`, optionally with a ``series`` column
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
    text = base.mark_text(fontSize=LABEL_PX).encode(
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
        x=alt.X("gap_ratio:Q", title="gap ratio |λₙₑₓₜ| / |λ₁|", scale=alt.Scale(zero=False, padding=8)))
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


# -- tables for the reader: one row per layer, run or model; one precision per quantity ----------------------
def _p(p: float) -> str:
    """A p- or q-value for a table: three decimals, or "<0.001"."""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def short_label(label: str) -> str:
    """The part of a model label in parentheses, for table cells (figures keep the full label).

    ``"all-MiniLM-L6-v2 (random init, seed 1)"`` → ``"random init, seed 1"``; a label without
    parentheses comes back unchanged.
    """
    return label.split("(", 1)[-1].rstrip(")")


def paper_models_table() -> pd.DataFrame:
    """:data:`PAPER_MODELS` as a table for the page: ``hub id``, ``d``, ``layers``, ``shared weights``."""
    return pd.DataFrame([{"hub id": m.hub_id, "d": m.d, "layers": m.n_layers, "shared weights": m.shared}
                         for m in PAPER_MODELS])


def shared_run_rows(
    conv: pd.DataFrame, *, label: str, layer: int, fit: tuple[int, int] = (20, 50), floor: float = 1e-9
) -> list[dict[str, Any]]:
    """Summary of one shared-layer run: one row per target of :func:`lib.chapters.real_models.shared_convergence`.

    Args:
        conv: the run's ``shared_convergence`` rows (steps ``0..T``; the principal target first).
        label: the model's label (shortened by :func:`short_label`).
        layer: the iterated layer, 1-based.
        fit: first and last step of the fitted rate (:func:`lib.linalg.power.fitted_ratio` of the mean distance).
        floor: distances below it are left out of the fit (round-off level).

    Returns:
        Dicts with ``model``, ``layer iterated``, ``target``, ``predicted rate r`` (the gap or subspace
        ratio), ``fitted rate (steps a–b)`` (over :func:`lib.chapters.real_models.fit_window`'s steps: where the
        distance reaches ``floor`` before ``b``, a ``fitted over steps`` entry names the steps used) (and its ``fitted rate 95% CI`` over prompts when ``conv`` was
        computed with ``fit``), ``alignment at step 0`` and ``alignment at step T``.
    """
    rows = []
    for target, g in conv.groupby("target", sort=False):
        g = g.set_index("step")
        start, stop = fit_window(g.distance.to_numpy(), fit, floor)
        moved = (start, stop) != tuple(fit)
        rows.append({
            "model": short_label(label), "layer iterated": layer, "target": target,
            "predicted rate r": g.rate.iloc[0],
            f"fitted rate (steps {fit[0]}–{fit[1]})": fitted_ratio(
                g.distance.loc[:stop].to_numpy(), start=start, floor=floor),
            **({"fitted over steps": f"{start}–{stop} (the distance reached {floor:g} before step {fit[1]})"}
               if moved else {}),
            **({"fitted rate 95% CI": f"{g.fitted_lo.iloc[0]:.3f}–{g.fitted_hi.iloc[0]:.3f}"}
               if "fitted_lo" in g else {}),
            "alignment at step 0": g.alignment.iloc[0],
            f"alignment at step {int(g.index[-1])}": g.alignment.iloc[-1],
        })
    return rows


def shared_run_row(table: pd.DataFrame, label: str, layer: int) -> pd.Series:
    """The row of the principal target (``v₁``, or the plane of a complex pair) of one run in a table of
    :func:`shared_run_rows`, found by the model's full ``label`` and the 1-based ``layer`` iterated."""
    rows = table[(table.model == short_label(label)) & (table["layer iterated"] == layer)]
    if rows.empty:
        raise KeyError(f"no shared run of {label!r}, layer {layer}")
    return rows.iloc[0]


def shared_runs_table(runs: Sequence[SharedRun], fit: tuple[int, int] = (20, 50)) -> pd.DataFrame:
    """:func:`shared_run_rows` of every run, in order: one row per run and target (``fitted over steps`` is empty
    for the runs fitted over ``fit`` itself)."""
    table = pd.DataFrame([row for r in runs for row in shared_run_rows(r.convergence, label=r.label, layer=r.layer,
                                                                         fit=fit)])
    return table.fillna({"fitted over steps": ""}) if "fitted over steps" in table else table


GAMMA_RHO_FORMAT: dict[str, str] = {"γₜ": "{:.4f}", "chance c(d, k)": "{:.4f}", "γₜ / chance": "{:.2f}",
                                     "Δγₜ": "{:.4f}", "ρₜ": "{:.3f}"}
"""How the page shows the numeric columns of :func:`gamma_rho_table` (a ``Styler.format`` dict): one precision per
quantity, the same as its interval's text (γ_t / chance two decimals, ρ_t three)."""


def gamma_rho_table(results: pd.DataFrame, *, null: bool = True) -> pd.DataFrame:
    """γ_t and ρ_t against their chance level and their own null: one display row per ``(variant, layer)``.

    Args:
        results: rows of :func:`lib.methods.alignment.gamma_rho` with a ``variant`` column and the test columns
            of :func:`lib.methods.alignment.random_null` merged in (``gamma_null_lo`` … ``q_rho``), as
            :func:`lib.chapters.real_models.layer_varying` returns them.
        null: ``False`` for rows without a null test (plain :func:`lib.methods.alignment.gamma_rho` rows plus
            ``variant``): the null and ``q`` columns are left out and ``tokens`` is added.

    Returns:
        Columns ``variant``, ``layer``, ``k``, ``γₜ``, ``chance c(d, k)``, ``γₜ / chance`` and its
        ``95% CI`` (text), ``null 95% range of γₜ / chance`` (text), ``q(γₜ)``, ``Δγₜ`` (``tilt``; with its
        ``null 95% range of Δγₜ`` and ``q(Δγₜ)`` where ``results`` carry the tilt's test), ``ρₜ`` and its ``95% CI`` (text), ``null 95% range of ρₜ`` (text) and ``q(ρₜ)`` (BH-adjusted
        p-values across layers, text), in the row order of ``results``. Formats: :data:`GAMMA_RHO_FORMAT`.
    """
    t = results
    table = pd.DataFrame({
        "variant": t.variant, "layer": t.layer, "k": t.k,
        "γₜ": t.gamma, "chance c(d, k)": t.chance, "γₜ / chance": t.gamma_ratio,
        "γₜ / chance 95% CI": [f"[{a:.2f}, {b:.2f}]" for a, b in zip(t.gamma_ratio_lo, t.gamma_ratio_hi)],
    })
    if null:
        table["null 95% range of γₜ / chance"] = [
            f"[{a:.2f}, {b:.2f}]" for a, b in zip(t.gamma_ratio_null_lo, t.gamma_ratio_null_hi)]
        table["q(γₜ)"] = [_p(x) for x in t.q_gamma]
    table["Δγₜ"] = t.tilt.to_numpy()
    if null and "q_tilt" in t:
        table["null 95% range of Δγₜ"] = [f"[{a:+.4f}, {b:+.4f}]" for a, b in zip(t.tilt_null_lo, t.tilt_null_hi)]
        table["q(Δγₜ)"] = [_p(x) for x in t.q_tilt]
    table["ρₜ"] = t.rho.to_numpy()
    table["ρₜ 95% CI"] = [f"[{a:.3f}, {b:.3f}]" for a, b in zip(t.rho_lo, t.rho_hi)]
    if null:
        table["null 95% range of ρₜ"] = [f"[{a:.3f}, {b:.3f}]" for a, b in zip(t.rho_null_lo, t.rho_null_hi)]
        table["q(ρₜ)"] = [_p(x) for x in t.q_rho]
    else:
        table["tokens"] = t.tokens.to_numpy()
    return table


def overview_row(label: str, results: pd.DataFrame, source: str) -> dict[str, Any]:
    """One model and trajectory source, summarised over layers: a row of the trained-vs-random-init overview.

    Keys: ``model`` (``label``), ``trajectories`` (``source``), ``mean γₜ / chance``, ``mean Δγₜ``,
    ``mean ρₜ``, and ``layers where γₜ beats its null`` / ``layers where ρₜ beats its null`` (FDR 5%,
    as text: the layers, or "none"), and ``layers where Δγₜ beats its null`` where ``results`` test the tilt.
    """
    r = select_source(results, source)
    def beat(col: str) -> str:
        layers = layers_where(r, r[col] < FDR)
        return ", ".join(map(str, layers)) if layers else "none"
    row = {"model": label, "trajectories": source, "mean γₜ / chance": r.gamma_ratio.mean(),
           "mean Δγₜ": r.tilt.mean(), "mean ρₜ": r.rho.mean(),
           "layers where γₜ beats its null": beat("q_gamma")}
    if "q_tilt" in r:
        row["layers where Δγₜ beats its null"] = beat("q_tilt")
    return {**row, "layers where ρₜ beats its null": beat("q_rho")}


def overview_table(analyses: Sequence[Analysis]) -> pd.DataFrame:
    """Section 3.4's table: one :func:`overview_row` per model and trajectory source, in order."""
    return pd.DataFrame([overview_row(a.model.label, a.results, source)
                         for a in analyses for source in TRAJECTORIES])


def direction_table(tests: Sequence[DirectionTests]) -> pd.DataFrame:
    """One display row per model and statistic: layers beating the random-subspace null, the own-direction test
    (excess of the diagonal, rows won, permutation p) and the twin-direction p (text, "—" for a twin)."""
    rows = []
    for t in tests:
        for k, name in DIRECTION_STATISTICS.items():
            own, fore = t.own[k], t.foreign[k]
            rows.append({"model": t.label, "statistic": name,
                         "layers above the random-subspace null": ", ".join(map(str, t.beat[k])) or "none",
                         "own − other layers' v₁": own.excess, "rows won": own.wins,
                         "p, own vs other layers' v₁": _p(own.p),
                         "p, own vs twins' v₁": "—" if fore is None else _p(fore.p)})
    return pd.DataFrame(rows)


def table_formats(columns: Sequence[str]) -> dict[str, str]:
    """One ``Styler.format`` string per numeric column of chapter 3's tables: a quantity has one precision
    everywhere (rates 3 decimals, as their interval texts; alignments 4; γ_t / chance 2; Δγ_t 4; ρ_t 3)."""
    prefixes = {"predicted rate": "{:.3f}", "fitted rate (": "{:.3f}", "alignment at step": "{:.4f}"}
    exact = {"mean γₜ / chance": "{:.2f}", "mean Δγₜ": "{:.4f}", "mean ρₜ": "{:.3f}", **GAMMA_RHO_FORMAT}
    out = {}
    for col in columns:
        fmt = exact.get(col) or next((f for prefix, f in prefixes.items() if col.startswith(prefix)), None)
        if fmt is not None:
            out[col] = fmt
    return out


# -- the words of chapter 3's prose: the numbers and phrases its glue quotes ---------------------------------
def p_phrase(p: float) -> str:
    """A p-value for the prose: ``"p = 0.003"``, or ``"p < 0.001"``."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def layer_list(layers: Sequence[int]) -> str:
    """``"layers 1, 2 and 4"``, ``"layer 3"`` or ``"no layer"``."""
    words = [str(x) for x in layers]
    if not words:
        return "no layer"
    if len(words) == 1:
        return f"layer {words[0]}"
    return "layers " + ", ".join(words[:-1]) + " and " + words[-1]


def beat_phrase(r: LayerRange, c: TwinComparison, metric: str) -> str:
    """``"k of L layers (trained) vs a, b, c (twins)"``: layers beating their own null, for ``metric``
    (``"gamma"`` or ``"rho"``) of one source."""
    if metric not in ("gamma", "rho"):
        raise ValueError(f"metric must be 'gamma' or 'rho', got {metric!r}")
    tr, tw = getattr(r, f"{metric}_beat"), getattr(c, f"twin_{metric}_beat")
    return f"{len(tr)} of {r.layers} layers (trained) vs {', '.join(map(str, tw))} (twins)"


def gamma_rho_glue(trained: Analysis, twins: Sequence[Analysis], source: str) -> dict[str, Any]:
    """The values section 3.3's prose quotes for one trajectory source, by glue name (without the source prefix).

    ``ratio_range`` / ``rho_range`` (trained, over layers), ``g_beat`` / ``r_beat`` (how many layers beat
    their own null, ints) and ``*_layers`` (which, in words), ``null_g`` / ``null_rho`` (the nulls' central 95%
    ranges), the same for the twins pooled (``tw_*``), the means over layers (``tr_g``, ``tw_g``, ``tr_r``,
    ``tw_r``) and where the trained one lies in the twins' range (``g_where``, ``r_where``), the layers above
    every twin (``g_above``, ``r_above``) and two verdict sentences (``means_verdict``, ``null_verdict``).
    """
    res_tw = [a.results for a in twins]
    r = layer_range(trained.results, source)
    nr = null_range(select_source(trained.null, source))
    c = compare_to_twins(trained.results, res_tw, source)
    tw = layer_range(pd.concat(res_tw), source)
    more = {m: len(getattr(r, f"{m}_beat")) > max(getattr(c, f"twin_{m}_beat")) for m in ("gamma", "rho")}
    if all(more.values()):
        null_verdict = ("the trained layers beat their own null more often than those of any twin, for both γₜ "
                        "and ρₜ")
    elif any(more.values()):
        null_verdict = ("the trained layers beat their own null more often than any twin's for "
                        + ("γₜ" if more["gamma"] else "ρₜ") + " only")
    else:
        null_verdict = "the trained layers beat their own null no more often than some twin's"
    return {
        "ratio_range": f"{r.gamma_ratio_min:.2f}–{r.gamma_ratio_max:.2f}",
        "rho_range": f"{r.rho_min:.2f}–{r.rho_max:.2f}",
        "g_beat": len(r.gamma_beat), "g_beat_layers": layer_list(r.gamma_beat),
        "r_beat": len(r.rho_beat), "r_beat_layers": layer_list(r.rho_beat),
        "null_rho": f"{nr.rho_lo:.2f}–{nr.rho_hi:.2f}",
        "null_g": f"{nr.gamma_ratio_lo:.2f}–{nr.gamma_ratio_hi:.2f}",
        "tw_ratio_range": f"{tw.gamma_ratio_min:.2f}–{tw.gamma_ratio_max:.2f}",
        "tw_rho_range": f"{tw.rho_min:.2f}–{tw.rho_max:.2f}",
        "tw_g_beat": ", ".join(map(str, c.twin_gamma_beat)), "tw_r_beat": ", ".join(map(str, c.twin_rho_beat)),
        "tr_g": f"{c.trained_gamma:.2f}", "tw_g": ", ".join(f"{g:.2f}" for g in c.twin_gamma),
        "g_where": c.gamma_where,
        "tr_r": f"{c.trained_rho:.3f}", "tw_r": ", ".join(f"{x:.3f}" for x in c.twin_rho), "r_where": c.rho_where,
        "g_above": len(c.gamma_layers_above), "r_above": len(c.rho_layers_above),
        "means_verdict": ("training raises both means above every random initialization we tried" if c.learned else
                          "the means over layers do not separate the trained model from random weights of the "
                          "same architecture"),
        "null_verdict": null_verdict,
    }


def build_up_text(row: Any) -> str:
    """``"+0.0154 [+0.0113, +0.0199]"``: a profile's build-up with its bootstrap interval (a row of
    :func:`lib.chapters.real_models.fixed_direction_profile`)."""
    return f"{row.build_up:+.4f} [{row.build_up_lo:+.4f}, {row.build_up_hi:+.4f}]"


class BuildUp(NamedTuple):
    """:func:`build_up_glue`'s result: the prose's values (by glue name, without the source prefix), whether
    the trained alignment at depth ``L−1`` lies inside its null band, and whether its build-up beats the null
    (one-sided ``p <`` :data:`lib.chapters.real_models.ALPHA`)."""

    values: dict[str, str]
    last_inside: bool
    beats_null: bool


def build_up_glue(profiles: pd.DataFrame, source: str, n_layers: int) -> BuildUp:
    """The numbers of the build-up paragraph for one source, from :func:`lib.chapters.real_models.depth_profiles`
    (trained and twins); with the equivalence test's columns also ``excess`` (over the null's median, with its 90%
    interval), ``margin``, ``p_eq`` (TOST, :func:`p_phrase`) and ``status``
    (:func:`lib.chapters.real_models.build_up_status`)."""
    build = profiles.groupby("variant", sort=False).first()
    b = build.loc[f"trained · {source}"]
    tw = build[(build.who != "trained") & (build.source == source)]
    rows = profiles[(profiles.variant == f"trained · {source}") & (profiles.step == n_layers - 1)]
    last = rows.iloc[0]
    values = {
        "build": build_up_text(b),
        "tw_build": ", ".join(f"{x:+.4f}" for x in tw.build_up),
        "last_ratio": f"{last.ratio:.2f} [{last.ratio_lo:.2f}, {last.ratio_hi:.2f}]",
        "last_null": f"{last.null_ratio_lo:.2f}–{last.null_ratio_hi:.2f}",
        "build_null": f"{b.build_up_null_lo:+.4f} to {b.build_up_null_hi:+.4f}",
        "build_p": f"{b.p_build_up:.3f}",
    }
    if "p_equivalent" in b:  # the equivalence test of fixed_direction_profile
        values.update({
            "excess": f"{b.excess:+.4f} [{b.excess_lo:+.4f}, {b.excess_hi:+.4f}]", "margin": f"{b.margin:.4f}",
            "p_eq": p_phrase(b.p_equivalent), "status": build_up_status(b),
        })
    inside = bool(last.null_ratio_lo <= last.ratio <= last.null_ratio_hi)
    return BuildUp(values, inside, bool(b.p_build_up < ALPHA))


def build_up_summary(statuses: dict[str, str]) -> str:
    """The prose's sentence on LA9 from :func:`build_up_status` by name of the trained model and source (``"MiniLM's
    simplified model"`` → ``"none"``): e.g. ``"within its margin of the null in A and B; beyond its null in C"``."""
    if not statuses:
        raise ValueError("no build-up test")
    words = {"none": "within its margin of the null (no build-up) in", "builds up": "beyond its null in",
             "inconclusive": "neither beyond its null nor shown within its margin (inconclusive) in"}
    parts = []
    for status, phrase in words.items():
        names = [n for n, s in statuses.items() if s == status]
        if names:
            listed = " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]
            parts.append(f"{phrase} {listed}")
    return "; ".join(parts)


def direction_glue(tests: Sequence[DirectionTests], n_layers: int) -> dict[str, Any]:
    """The values the own-direction paragraph quotes for one model (trained first, then its twins), by glue name
    without the model prefix: per statistic ``k`` (``gamma``, ``tilt``, ``rho``) ``own_p_<k>`` and ``twin_p_<k>``
    (:func:`p_phrase`), ``wins_<k>`` (rows whose own direction is the row's best) and ``excess_<k>``; the layers
    that count for LA7 (γ and Δγ) and LA8 (ρ), ``la7_layers`` / ``la8_layers`` (words) and ``la7_n`` / ``la8_n``,
    the twins' counts ``la7_twins`` / ``la8_twins`` ("a, b, c") and the two verdicts ``la7_verdict`` /
    ``la8_verdict`` (:func:`direction_verdict`)."""
    trained, *twins = tests
    out: dict[str, Any] = {}
    for k in DIRECTION_STATISTICS:
        out[f"own_p_{k}"] = p_phrase(trained.own[k].p)
        out[f"twin_p_{k}"] = "—" if trained.foreign[k] is None else p_phrase(trained.foreign[k].p)
        out[f"wins_{k}"] = trained.own[k].wins
        out[f"excess_{k}"] = f"{trained.own[k].excess:+.2f}" if k != "rho" else f"{trained.own[k].excess:+.3f}"
    for claim_id, keys in (("la7", ("gamma", "tilt")), ("la8", ("rho",))):
        held = trained.held(keys)
        out[f"{claim_id}_layers"] = layer_list(held)
        out[f"{claim_id}_n"] = len(held)
        out[f"{claim_id}_twins"] = ", ".join(str(len(t.held(keys))) for t in twins)
        out[f"{claim_id}_verdict"] = direction_verdict(tests, keys, n_layers)
    return out


# -- the Takeaway, decided from the numbers (any model of the parameters cell) ---------------------------------
_DISPLAY_NAMES = {"minilm": "MiniLM", "book-decoder": "decoder"}
"""How the prose names the offline stand-ins; any other model goes by its label."""
LA7_HELD = ("reproduced", "partly reproduced")
"""The LA7 verdicts (:func:`lib.chapters.real_models.direction_verdict`) under which the tilt counts as held."""


def display_name(source: str, model: Any) -> str:
    """The prose's name of a model loaded from ``source`` (the parameters cell's string): ``"MiniLM"`` and
    ``"decoder"`` for the offline stand-ins, else the model's ``label``."""
    return _DISPLAY_NAMES.get(source, model.label)


def _possessive(name: str) -> str:
    return "the decoder's" if name == "decoder" else f"{name}'s"


class RateCheck(NamedTuple):
    """One iterated layer of section 3.2 as the Takeaway quotes it: its 1-based ``layer``, whether its λ₁ is
    ``complex``, the ``fitted`` and ``predicted`` rates (as printed), whether the fit ``agrees`` (LA5's margin
    rule) and its ``figure`` reference."""

    layer: int
    complex: bool
    fitted: str
    predicted: str
    agrees: bool
    figure: str


def takeaway(names: tuple[str, str], rates: tuple[RateCheck, RateCheck], la7: dict[str, dict[str, Any]],
             n_layers: int, la7_figures: str, real: dict[str, Any]) -> dict[str, str]:
    """The Takeaway's ``held``, ``not_held`` and ``so`` lines, each clause placed by the numbers, not typed.

    Args:
        names: the prose names of the first and the second model (:func:`display_name`).
        rates: section 3.2's two iterated layers of the first model (the first is layer 1, the second layer 2).
        la7: per name, the first then the second model's :func:`direction_glue` (simplified model).
        n_layers: the first model's depth.
        la7_figures: the figure references of the two models' γₜ/ρₜ charts, as the prose cites them.
        real: the first model's real forward pass: ``ratio_range`` (γₜ / chance), ``g_beat`` and ``t_beat``
            (layers whose γₜ and Δγₜ beat their null) and ``la7`` (LA7's rule there).

    Returns:
        ``{"held", "not_held", "so"}``, plain text (Unicode symbols); a side with no clause says "nothing of the
        above".
    """
    held: list[str] = []
    not_held: list[str] = []
    first, second = rates
    if first.agrees:
        held.append(f"iterated, trained layer {first.layer} converges at the predicted rate ({first.fitted} per "
                    f"step vs {first.predicted}, {first.figure})")
    else:
        not_held.append(f"iterated, trained layer {first.layer} does not converge at the predicted rate "
                        f"({first.fitted} per step vs {first.predicted}, {first.figure})")
    kind = "complex" if second.complex else "real"
    if second.agrees:
        held.append(f"iterated, trained layer {second.layer} ({kind} λ₁) converges at its predicted rate too "
                    f"({second.fitted} vs {second.predicted}, {second.figure})")
    counted = [n for n in names if la7[n]["la7_verdict"] in LA7_HELD]
    missed = [n for n in names if n not in counted]
    if counted:
        who = "both trained models" if len(counted) == 2 else counted[0]
        beat = " and ".join(
            f"{la7[n]['la7_n']} of {n_layers} {n} layers" if n == names[0] else
            f"{la7[n]['la7_n']} of {_possessive(n)}" for n in counted)
        twins = " and ".join(str(la7[n]["la7_twins"]) for n in counted)
        perm = " and ".join(str(la7[n]["own_p_gamma"]) for n in counted)
        held.append(f"in the FFN-free model of {who} the tokens leaving a layer lie closer to its own principal "
                    f"direction than chance and tilt toward it: γₜ and Δγₜ beat their null in {beat} (twins: "
                    f"{twins}), and a layer's own direction beats the other layers' (permutation {perm}) and the "
                    f"twins' ({la7_figures})")
    for n in missed:
        not_held.append(f"in the FFN-free model of {n} the tilt toward a layer's own direction does not count "
                        f"(LA7 {la7[n]['la7_verdict']}: {la7[n]['la7_n']} layers, twins {la7[n]['la7_twins']})")
    if real["g_beat"] == 0:
        not_held.insert(0, f"in {_possessive(names[0])} real forward pass γₜ sits at chance (γₜ / chance "
                           f"{real['ratio_range']}, {real['g_beat']} of {n_layers} layers above the null)")
    else:
        held.append(f"in {_possessive(names[0])} real forward pass γₜ beats its null in {real['g_beat']} of "
                    f"{n_layers} layers (γₜ / chance {real['ratio_range']})")
    if not second.agrees:
        stalls = "a complex-λ₁ layer stalls" if second.complex else \
            f"iterated, trained layer {second.layer} does not converge at its predicted rate"
        not_held.append(f"{stalls} (rate {second.fitted} vs {second.predicted}, {second.figure})")
    if len(counted) == 2:
        tilt = "against three nulls the tilt toward a layer's own direction is real in the FFN-free model of both models"
    elif counted:
        tilt = (f"against three nulls the tilt toward a layer's own direction is real in the FFN-free model of "
                f"{counted[0]} only")
    else:
        tilt = "against three nulls no tilt toward a layer's own direction is shown in the FFN-free model of either model"
    if counted and any(int(x) for n in counted for x in str(la7[n]["la7_twins"]).split(", ")):
        tilt += " and partly architectural"
    level = "stays at chance while" if real["g_beat"] == 0 else f"beats its null in {real['g_beat']} of {n_layers} layers and"
    so = (f"γₜ > 0 holds for any absolute cosine; {tilt}; in {_possessive(names[0])} real residual stream γₜ {level} "
          f"Δγₜ beats its random-subspace null in {real['t_beat']} of {n_layers} layers, and LA7's rule finds it "
          f"{real['la7']} there.")

    def sentences(clauses: list[str]) -> str:  # the first starts lower-case, after the line's bold label
        return ". ".join(c if i == 0 else c[0].upper() + c[1:] for i, c in enumerate(clauses)) + "." if clauses \
            else "nothing of the above."

    return {"held": sentences(held), "not_held": "; ".join(not_held) + "." if not_held else "nothing of the above.",
            "so": so}
