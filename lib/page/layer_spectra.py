"""The per-layer spectra of ``F_t`` on the page (chapters 0 and 3): the chart of spectral radius and gap ratio per
layer (:func:`radius_gap_chart`) and the table of :attr:`lib.methods.layer_spectra.LayerSpectra.table` with
readable headers and one precision per quantity (:func:`readable_table`)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
from pandas.io.formats.style import Styler

from lib.methods.layer_spectra import LayerSpectra
from lib.page.plotting import model_color, titled
from lib.page.tables import page_table

__all__ = ["TABLE_FORMAT", "TABLE_LABELS", "radius_gap_chart", "readable_table"]


def radius_gap_chart(spectra_list: Sequence[LayerSpectra], *, title: str | None = None) -> alt.TopLevelMixin:
    """Two panels against layer: the spectral radius ``|λ_1|`` and the gap ratio ``|λ_next|/|λ_1|``.

    One line per model; the subtitle names every model shown.
    """
    data = pd.concat([s.table for s in spectra_list], ignore_index=True)
    long = data.melt(
        id_vars=["model", "layer", "lambda1_complex"],
        value_vars=["spectral_radius", "gap_ratio"],
        var_name="quantity",
        value_name="value",
    )
    long["quantity"] = long["quantity"].map({"spectral_radius": "|λ₁| (spectral radius)", "gap_ratio": "|λ_next| / |λ₁|"})
    base = alt.Chart(long).encode(
        x=alt.X("layer:O", title="layer t (1-based)"),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=model_color("model", long["model"], legend=alt.Legend(orient="bottom", columns=1)),
    )
    lines = base.mark_line(point=False) + base.mark_point(filled=True, size=60).encode(
        shape=alt.Shape("lambda1_complex:N", title="λ₁ complex?", legend=alt.Legend(orient="bottom")),
        tooltip=["model:N", "layer:O", alt.Tooltip("value:Q", format=".4f"), "lambda1_complex:N"],
    )
    chart = lines.properties(width=250, height=200).facet(
        column=alt.Column("quantity:N", title=None)
    ).resolve_scale(y="independent")
    models = ", ".join(s.model for s in spectra_list)
    return titled(chart, title or "Spectral radius and gap ratio of Fₜ per layer", models)


TABLE_FORMAT = {"spectral_radius": "{:.4f}", "gap_ratio": "{:.4f}", "abs_gap": "{:.4f}", "residual": "{:.1e}",
                "condition": "{:.2f}", "frobenius": "{:.2f}"}
"""How the book shows :attr:`lib.methods.layer_spectra.LayerSpectra.table` (a pandas ``Styler.format`` dict): four
decimals for the spectrum, residuals in scientific notation, two decimals for κ(λ₁) and ``‖F‖_F``."""
TABLE_LABELS = {"layer": "layer t", "spectral_radius": "|λ₁|", "lambda1": "λ₁", "lambda1_complex": "λ₁ complex",
                "gap_ratio": "gap ratio |λ_next|/|λ₁|", "abs_gap": "|λ₁| − |λ_next|",
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
