"""The per-layer spectra of ``F_t`` on the page (chapters 0 and 3): the chart of spectral radius and gap ratio per
layer (:func:`radius_gap_chart`), the table of :attr:`lib.methods.layer_spectra.LayerSpectra.table` with
readable headers and one precision per quantity (:func:`readable_table`), and chapter 0's Takeaway lines, decided
from the numbers of whichever model the chapter's parameters name (:func:`takeaway`)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from lib.methods.layer_spectra import LayerSpectra
from lib.page.plotting import model_color, model_kind, titled, twin_band, twin_band_label, twin_band_layers
from lib.page.tables import page_table

__all__ = ["GAP_WEAK", "TABLE_FORMAT", "TABLE_LABELS", "radius_gap_chart", "readable_table", "takeaway"]

GAP_WEAK = 0.9
"""[ours] A layer whose gap ratio ``|λ_next|/|λ_1|`` is above this singles out no direction worth the name (a power
method on it needs more than 20 steps to shrink the rest by 10×)."""


def radius_gap_chart(spectra_list: Sequence[LayerSpectra], *, title: str | None = None) -> alt.TopLevelMixin:
    """Two panels against layer: the spectral radius ``|λ_1|`` and the gap ratio ``|λ_next|/|λ_1|``.

    One line per model; random-init twins (models whose label says so, :func:`lib.page.plotting.model_kind`) are
    one band from the least to the greatest seed with a tick at their median (:func:`lib.page.plotting.twin_band`),
    each seed's own point on it shaped by whether its ``λ_1`` is complex. The subtitle names every model shown.
    """
    data = pd.concat([s.table for s in spectra_list], ignore_index=True)
    long = data.melt(
        id_vars=["model", "layer", "lambda1_complex"],
        value_vars=["spectral_radius", "gap_ratio"],
        var_name="quantity",
        value_name="value",
    )
    long["quantity"] = long["quantity"].map({"spectral_radius": "|λ₁| (spectral radius)", "gap_ratio": "|λₙₑₓₜ| / |λ₁|"})
    banded = twin_band(long, keys=["quantity", "layer"], values=["value"], field="model").assign(seed=False)
    is_twin = np.array([model_kind(m) == "random" for m in long["model"]], dtype=bool)
    if is_twin.any():  # each seed's own point too, in the band's colour: whether its λ₁ is complex is its own
        seeds = long[is_twin].assign(band=False, seed=True, n_seeds=1)
        seeds["model"] = twin_band_label(long["model"][is_twin].nunique())
        banded = pd.concat([banded, seeds], ignore_index=True)
    x = alt.X("layer:O", title="layer t (1-based)")
    y_scale = alt.Scale(zero=False)
    colour = model_color("model", list(dict.fromkeys(banded["model"])), legend=alt.Legend(orient="bottom", columns=1))
    y = alt.Y("value:Q", title=None, scale=y_scale)
    shape = alt.Shape("lambda1_complex:N", title="λ₁ complex?", legend=alt.Legend(orient="bottom"))
    tips = ["model:N", "layer:O", alt.Tooltip("value:Q", format=".4f"), "lambda1_complex:N"]
    own = alt.Chart().transform_filter("!datum.band && !datum.seed").encode(x=x, y=y, color=colour)
    seed_pts = alt.Chart().transform_filter("datum.seed").mark_point(filled=True, size=35, opacity=0.9).encode(
        x=x, y=y, color=colour, shape=shape, tooltip=tips)
    layers = [*twin_band_layers(x, "value", colour, field="model", y_scale=y_scale, fmt=".4f"), seed_pts,
              own.mark_line(point=False), own.mark_point(filled=True, size=60).encode(shape=shape, tooltip=tips)]
    chart = alt.layer(*layers, data=banded).properties(width=250, height=200).facet(
        column=alt.Column("quantity:N", title=None)
    ).resolve_scale(y="independent")
    models = ", ".join(s.model for s in spectra_list)
    return titled(chart, title or "Spectral radius and gap ratio of Fₜ per layer", models)


TABLE_FORMAT = {"spectral_radius": "{:.4f}", "gap_ratio": "{:.4f}", "abs_gap": "{:.4f}", "residual": "{:.1e}",
                "condition": "{:.2f}", "frobenius": "{:.2f}"}
"""How the book shows :attr:`lib.methods.layer_spectra.LayerSpectra.table` (a pandas ``Styler.format`` dict): four
decimals for the spectrum, residuals in scientific notation, two decimals for κ(λ₁) and ``‖F‖_F``."""
TABLE_LABELS = {"layer": "layer t", "spectral_radius": "|λ₁|", "lambda1": "λ₁", "lambda1_complex": "λ₁ complex",
                "gap_ratio": "gap ratio |λₙₑₓₜ|/|λ₁|", "abs_gap": "|λ₁| − |λₙₑₓₜ|",
                "residual": "residual of (λ₁, v₁)", "condition": "κ(λ₁)", "frobenius": "‖F‖_F"}
"""The column headers the page shows for :attr:`lib.methods.layer_spectra.LayerSpectra.table` (its column names
stay code names)."""


def readable_table(table: pd.DataFrame, *, with_model: bool = False) -> Styler:
    """:attr:`lib.methods.layer_spectra.LayerSpectra.table` for the page: :data:`TABLE_FORMAT` and
    :data:`TABLE_LABELS`, no index.

    The ``model`` column is dropped (a table of one model), unless ``with_model`` (several models stacked:
    then it stays, first, as it is).
    """
    shown = table if with_model else table.drop(columns=[c for c in ("model",) if c in table])
    formats = {TABLE_LABELS[c]: f for c, f in TABLE_FORMAT.items() if c in shown}
    return page_table(shown.rename(columns=TABLE_LABELS).style.format(formats).hide(axis="index"))


def takeaway(spec: LayerSpectra, twin_specs: Sequence[LayerSpectra], *, model: str) -> dict[str, str]:
    """Chapter 0's Takeaway lines ``held``, ``not_held`` and ``so``, each clause placed by the numbers, not typed.

    The clauses: does training open gaps beyond every random-init twin layer's (the trained minimum gap ratio below
    the twins' minimum), and does every trained layer single out a real direction (gap ratio at most
    :data:`GAP_WEAK` and ``λ_1`` real); ``so`` says in how many layers the power-method picture has something to
    work with. A line with no clause reads "nothing of the above". Plain text (the lab and the site glue it as is).

    Args:
        spec, twin_specs: the trained model's and its twins' :class:`LayerSpectra`.
        model: the trained model's name, as the prose gives it (e.g. ``"all-MiniLM-L6-v2"``).
    """
    t = spec.table
    n_layers, n_twins = len(t), len(twin_specs)
    lo, hi = float(t.gap_ratio.min()), float(t.gap_ratio.max())
    twin_min = min(float(s.table.gap_ratio.min()) for s in twin_specs)
    weak = t.gap_ratio.to_numpy() > GAP_WEAK
    complex_ = t.lambda1_complex.to_numpy().astype(bool)
    n_weak, n_complex = int(weak.sum()), int(complex_.sum())
    n_strong = int((~weak & ~complex_).sum())
    ratios = f"the gap ratios of {model} run from {lo:.2f} to {hi:.2f}"
    held, not_held = [], []
    if lo < twin_min:
        held.append(f"training opens spectral gaps: {ratios}, against at least {twin_min:.3f} in every layer of "
                    f"{n_twins} random-init twins")
    else:
        not_held.append(f"training opens no spectral gap beyond the architecture's: {ratios}, and those of "
                        f"{n_twins} random-init twins from {twin_min:.3f}")
    if n_weak == 0 and n_complex == 0:
        held.append(f"every trained layer singles out a real direction (every gap ratio is at most {GAP_WEAK:g} "
                    "and every λ₁ is real)")
    else:
        not_held.append(f"not every trained layer singles out a direction ({n_weak} of {n_layers} have a gap ratio "
                        f"above {GAP_WEAK:g}, and in {n_complex} of them λ₁ is complex, a rotation rather than a "
                        "direction)")
    where = ("nothing to work with in this model's layers" if n_strong == 0 else
             "something to work with in every layer" if n_strong == n_layers else
             f"something to work with in {n_strong} of the {n_layers} layers, not in all")
    return {"held": "; ".join(held) or "nothing of the above", "not_held": "; ".join(not_held) or "nothing of the above",
            "so": f"the power-method picture of the next chapters has {where}; every claim about it must be "
                  "checked against the random-init twins."}
