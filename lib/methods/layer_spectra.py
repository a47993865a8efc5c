"""Per-layer spectra of ``F_t = O_t V_t``: the table of one model (its chart and the page's version of the table:
:func:`lib.page.layer_spectra.radius_gap_chart`, :func:`lib.page.layer_spectra.readable_table`).

All eigenvalues come from :mod:`lib.linalg.spectra` (float64 LAPACK, the book's ordering).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from lib.errors import InputError
from lib.linalg import spectra
from lib.parallel import map_matrices

if TYPE_CHECKING:
    from lib.models import SpectralModel

__all__ = ["LayerSpectra", "ginibre_product_inner_fraction", "inner_fraction", "layer_spectra", "summary_table"]


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
