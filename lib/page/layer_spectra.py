"""The chart of the per-layer spectra of ``F_t`` (chapters 0 and 3): spectral radius and gap ratio per layer."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from lib.methods.layer_spectra import LayerSpectra
from lib.page.plotting import model_color, titled

__all__ = ["radius_gap_chart"]


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
