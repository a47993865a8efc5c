"""Per-layer spectra of ``F_t = O_t V_t``: the table the book shows for a model (its chart:
:func:`lib.page.layer_spectra.radius_gap_chart`).

All eigenvalues come from :mod:`lib.linalg.spectra` (float64 LAPACK, the book's ordering).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from pandas.io.formats.style import Styler

from lib.errors import InputError
from lib.linalg import spectra
from lib.parallel import map_matrices

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = [
    "TABLE_FORMAT", "TABLE_LABELS", "LayerSpectra", "ginibre_product_inner_fraction", "inner_fraction",
    "layer_spectra", "readable_table", "summary_table",
]

TABLE_FORMAT = {"spectral_radius": "{:.4f}", "gap_ratio": "{:.4f}", "abs_gap": "{:.4f}", "residual": "{:.1e}",
                "condition": "{:.2f}", "frobenius": "{:.2f}"}
"""How the book shows :attr:`LayerSpectra.table` (a pandas ``Styler.format`` dict): four decimals for
the spectrum, residuals in scientific notation, two decimals for κ(λ₁) and ``‖F‖_F``."""
TABLE_LABELS = {"layer": "layer t", "spectral_radius": "|λ₁|", "lambda1": "λ₁", "lambda1_complex": "λ₁ complex",
                "gap_ratio": "gap ratio |λ_next|/|λ₁|", "abs_gap": "|λ₁| − |λ_next|",
                "residual": "residual of (λ₁, v₁)", "condition": "κ(λ₁)", "frobenius": "‖F‖_F"}
"""The column headers the page shows for :attr:`LayerSpectra.table` (its column names stay code names)."""


class LayerSpectra:
    """Eigenvalues and principal eigen-structure of every layer matrix of one model.

    Attributes:
        model: the model's label (for figure subtitles).
        eigvals: ``(L, d)`` complex128, each row sorted by the book's convention.
        principal: one :class:`lib.linalg.spectra.Principal` per layer.
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
        self.principal = map_matrices(lambda F_t: spectra.principal(F_t, condition=with_condition), F64)
        self.eigvals = np.stack([p.eigvals for p in self.principal])
        self.table = summary_table(self.eigvals, model).assign(
            residual=[p.residual for p in self.principal],
            condition=[p.condition for p in self.principal],
            frobenius=np.linalg.norm(F64, axis=(1, 2)),
        )


def readable_table(table: pd.DataFrame, *, with_model: bool = False) -> Styler:
    """:attr:`LayerSpectra.table` for the page: :data:`TABLE_FORMAT` and :data:`TABLE_LABELS`, no index.

    The ``model`` column is dropped (a table of one model), unless ``with_model`` (several models stacked:
    then it stays, first, as it is).
    """
    from lib.page.tables import page_table

    shown = table if with_model else table.drop(columns=[c for c in ("model",) if c in table])
    formats = {TABLE_LABELS[c]: f for c, f in TABLE_FORMAT.items() if c in shown}
    return page_table(shown.rename(columns=TABLE_LABELS).style.format(formats).hide(axis="index"))


def summary_table(lams: np.ndarray, model: str) -> pd.DataFrame:
    """Per-layer summary from sorted leading eigenvalues ``(L, k)``: all ``d`` of them, or the top few.

    Columns: ``model``, ``layer`` (1-based), ``spectral_radius``, ``lambda1`` (text),
    ``lambda1_complex``, ``gap_ratio`` (``|λ_next|/|λ_1|``) and ``abs_gap`` (``|λ_1| − |λ_next|``,
    the paper's "gap" wording). The three leading eigenvalues are enough, since the gap ratio skips
    a conjugate partner of ``λ_1``.
    """
    lams = np.atleast_2d(np.asarray(lams, dtype=np.complex128))
    if lams.shape[1] < 3:
        raise InputError(f"need at least the 3 leading eigenvalues per layer, got {lams.shape[1]}")
    top = np.abs(lams[:, 0])
    cplx = [bool(spectra.is_complex(z, abs(z))) for z in lams[:, 0]]
    ratio = np.atleast_1d(spectra.gap_ratio(lams))
    return pd.DataFrame({
        "model": model,
        "layer": np.arange(1, lams.shape[0] + 1),
        "spectral_radius": top,
        "lambda1": [f"{z.real:.4f} ± {abs(z.imag):.4f}i" if c else f"{z.real:.4f}" for z, c in zip(lams[:, 0], cplx)],
        "lambda1_complex": cplx,
        "gap_ratio": ratio,
        "abs_gap": top * (1 - ratio),
    })


def inner_fraction(eigvals: np.ndarray, r: float = 0.5) -> float:
    """Fraction of the eigenvalues whose modulus is at most ``r`` times their matrix's spectral radius.

    Args:
        eigvals: ``(d,)`` or ``(L, d)`` eigenvalues (each row one matrix; pooled over rows).
        r: the radius as a fraction of each row's spectral radius, ``0 < r <= 1``.
    """
    lams = np.atleast_2d(np.abs(np.asarray(eigvals)))
    if not 0 < r <= 1:
        raise InputError(f"r must lie in (0, 1], got {r}")
    return float((lams <= r * lams.max(axis=1, keepdims=True)).mean())


def ginibre_product_inner_fraction(m: int, r: float = 0.5) -> float:
    """The large-``d`` :func:`inner_fraction` of a product of ``m`` independent square Gaussian matrices.

    The eigenvalue density of such a product is ``∝ |z|^{2/m − 2}`` on its disc, so a fraction ``r^{2/m}`` of
    the eigenvalues lies within ``r`` times the radius: ``r²`` for one Gaussian matrix (a uniform disc),
    ``r`` for a product of two (``F = O V`` at random initialization), whose moduli are uniform instead.
    """
    if m < 1:
        raise InputError(f"m must be a positive number of factors, got {m}")
    return float(r ** (2 / m))


def layer_spectra(model: SpectralModel) -> LayerSpectra:
    """:class:`LayerSpectra` of a loaded :class:`lib.models.SpectralModel`."""
    return LayerSpectra(model.layer_matrices(), model.label)
