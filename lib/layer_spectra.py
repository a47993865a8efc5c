"""Per-layer spectra of ``F_t = O_t V_t``: the table and charts the book shows for a model.

All eigenvalues come from :mod:`lib.spectra` (float64 LAPACK, the book's ordering).
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
import torch

from lib import spectra
from lib.errors import InputError
from lib.plotting import titled

__all__ = ["LayerSpectra", "layer_spectra", "radius_gap_chart"]


class LayerSpectra:
    """Eigenvalues and principal eigen-structure of every layer matrix of one model.

    Attributes:
        model: the model's label (for figure subtitles).
        eigvals: ``(L, d)`` complex128, each row sorted by the book's convention.
        principal: one :class:`lib.spectra.Principal` per layer.
        table: one row per layer (``layer`` is 1-based) with ``spectral_radius``, ``lambda1``
            (as text), ``lambda1_complex``, ``gap_ratio`` (``|λ_next|/|λ_1|``), ``abs_gap``
            (``|λ_1| − |λ_next|``, the paper's "gap" wording, skipping a conjugate partner),
            ``residual`` (``‖F v − λ v‖/‖F‖_F``), ``condition`` (``κ(λ_1)``, computed by default
            when ``d ≤ 1024``) and ``frobenius`` (``‖F‖_F``).
    """

    def __init__(self, F: torch.Tensor | np.ndarray, model: str, *, condition: bool | None = None) -> None:
        F64 = spectra.as_float64(F)
        if F64.ndim != 3:
            raise InputError(f"expected a stack of layer matrices (L, d, d), got shape {F64.shape}")
        self.model = model
        with_condition = F64.shape[-1] <= 1024 if condition is None else condition
        self.principal = [spectra.principal(F64[t], condition=with_condition) for t in range(F64.shape[0])]
        self.eigvals = np.stack([p.eigvals for p in self.principal])
        rows = []
        for t, p in enumerate(self.principal):
            rows.append(
                {
                    "model": model,
                    "layer": t + 1,
                    "spectral_radius": abs(p.eigval),
                    "lambda1": _fmt(p.eigval, p.is_complex),
                    "lambda1_complex": p.is_complex,
                    "gap_ratio": p.gap_ratio,
                    "abs_gap": abs(p.eigval) * (1.0 - p.gap_ratio),
                    "residual": p.residual,
                    "condition": p.condition,
                    "frobenius": float(np.linalg.norm(F64[t])),
                }
            )
        self.table = pd.DataFrame(rows)


def _fmt(lam: complex, is_complex: bool) -> str:
    return f"{lam.real:.4f} ± {abs(lam.imag):.4f}i" if is_complex else f"{lam.real:.4f}"


def layer_spectra(model) -> LayerSpectra:
    """:class:`LayerSpectra` of a loaded :class:`lib.models.SpectralModel`."""
    return LayerSpectra(model.layer_matrices(), model.label)


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
        color=alt.Color("model:N", legend=alt.Legend(orient="bottom", columns=1)),
    )
    lines = base.mark_line(point=False) + base.mark_point(filled=True, size=60).encode(
        shape=alt.Shape("lambda1_complex:N", title="λ₁ complex?"),
        tooltip=["model:N", "layer:O", alt.Tooltip("value:Q", format=".4f"), "lambda1_complex:N"],
    )
    chart = lines.properties(width=260, height=200).facet(
        column=alt.Column("quantity:N", title=None)
    ).resolve_scale(y="independent")
    models = ", ".join(s.model for s in spectra_list)
    return titled(chart, title or "Spectral radius and gap ratio of F_t per layer", models)
