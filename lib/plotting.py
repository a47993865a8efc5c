"""Altair set-up and the figures that several chapters share.

Every figure in the book says which model made it: pass ``model=`` (a model label such as
``"all-MiniLM-L6-v2 (trained)"``) and the chart's title carries it as a subtitle.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

__all__ = ["configure_renderer", "eigenvalue_chart", "titled", "unit_circle"]

BOOK_BUILD_ENV = "SPECTRAL_BOOK_BUILD"


def configure_renderer() -> str:
    """Choose Altair's renderer for where the code runs, and return its name.

    * In the book build (``SPECTRAL_BOOK_BUILD=1``) charts use the ``html`` renderer, whose Vega
      scripts the site ships itself (see ``book/_ext/offline_vega.py``), so pages work offline.
    * Elsewhere (JupyterLab) Altair's default mimetype renderer is kept: JupyterLab renders it
      natively, with no network.
    """
    name = "html" if os.environ.get(BOOK_BUILD_ENV) == "1" else "default"
    alt.renderers.enable(name)
    alt.data_transformers.disable_max_rows()
    return name


def titled(chart: alt.TopLevelMixin, title: str, model: str) -> alt.TopLevelMixin:
    """Give ``chart`` a title and a subtitle naming the model that produced it."""
    return chart.properties(title=alt.TitleParams(title, subtitle=[f"model: {model}"], anchor="start"))


def unit_circle(radius: float = 1.0, n: int = 256) -> pd.DataFrame:
    """Points ``(re, im)`` on a circle of the given radius, for overlays on eigenvalue plots."""
    t = np.linspace(0, 2 * np.pi, n)
    return pd.DataFrame({"re": radius * np.cos(t), "im": radius * np.sin(t), "order": np.arange(n)})


def eigenvalue_chart(
    eigvals: np.ndarray,
    *,
    model: str,
    layer_labels: Sequence[str] | None = None,
    normalize: bool = True,
    title: str = "Eigenvalues of F_t = O_t V_t",
    width: int = 190,
    height: int = 190,
    columns: int = 3,
) -> alt.TopLevelMixin:
    """Eigenvalue clouds in the complex plane, one small panel per layer.

    Args:
        eigvals: ``(L, d)`` sorted eigenvalues (complex), one row per layer.
        model: label of the model, shown in the subtitle.
        layer_labels: one label per row (default ``"layer 1"`` … ``"layer L"``, 1-based).
        normalize: divide each layer's eigenvalues by its spectral radius, so that every panel shows
            the unit circle and ``λ_1`` sits on it.
    """
    eigvals = np.atleast_2d(np.asarray(eigvals, dtype=np.complex128))
    L, d = eigvals.shape
    labels = list(layer_labels) if layer_labels is not None else [f"layer {t + 1}" for t in range(L)]
    frames = []
    for t in range(L):
        lam = eigvals[t]
        radius = np.abs(lam).max() if normalize and np.abs(lam).max() > 0 else 1.0
        lam = lam / radius
        kind = np.where(np.arange(d) == 0, "λ₁", np.where(np.abs(lam.imag) > 1e-8, "complex", "real"))
        frames.append(
            pd.DataFrame(
                {
                    "layer": labels[t],
                    "re": lam.real,
                    "im": lam.imag,
                    "modulus": np.abs(lam),
                    "rank": np.arange(1, d + 1),
                    "kind": kind,
                }
            )
        )
    # Dashed ring: the circle |λ| = |λ₁| of each layer (the unit circle once normalized).
    frames += [
        unit_circle(1.0 if normalize else float(np.abs(eigvals[t]).max())).assign(layer=labels[t], kind="circle")
        for t in range(L)
    ]
    data = pd.concat(frames, ignore_index=True)
    axis_title = "/ |λ₁|" if normalize else ""
    base = alt.Chart(data)
    points = (
        base.transform_filter("datum.kind != 'circle'")
        .mark_circle(opacity=0.7)
        .encode(
            x=alt.X("re:Q", title=f"Re λ {axis_title}".strip()),
            y=alt.Y("im:Q", title=f"Im λ {axis_title}".strip()),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["λ₁", "complex", "real"], range=["#d62728", "#1f77b4", "#ff7f0e"]),
                title="eigenvalue",
            ),
            size=alt.condition("datum.kind == 'λ₁'", alt.value(70), alt.value(14)),
            tooltip=[
                "layer:N",
                "rank:Q",
                alt.Tooltip("re:Q", format=".3f"),
                alt.Tooltip("im:Q", format=".3f"),
                alt.Tooltip("modulus:Q", format=".3f"),
            ],
        )
    )
    ring = (
        base.transform_filter("datum.kind == 'circle'")
        .mark_line(color="#999", strokeDash=[3, 3])
        .encode(x="re:Q", y="im:Q", order="order:Q")
    )
    chart = (
        alt.layer(ring, points)
        .properties(width=width, height=height)
        .facet(facet=alt.Facet("layer:N", sort=labels, title=None), columns=columns)
    )
    return titled(chart, title, model)
