"""The eigenvalue-density facts chapter 0 states about random layer matrices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.errors import InputError
from lib.methods.layer_spectra import ginibre_product_inner_fraction, inner_fraction


def _eigvals(m: int, d: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    M = np.eye(d)
    for _ in range(m):
        M = M @ rng.standard_normal((d, d)) / np.sqrt(d)
    return np.linalg.eigvals(M)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_inner_fraction_matches_the_product_law(m):
    """Half the radius holds r^(2/m) of the eigenvalues: 1/4 for one Gaussian matrix (a uniform disc),
    1/2 for a product of two (chapter 0 once said such a product 'fills a disc almost uniformly')."""
    got = inner_fraction(np.stack([_eigvals(m, seed=s) for s in range(3)]), 0.5)
    assert got == pytest.approx(ginibre_product_inner_fraction(m, 0.5), abs=0.04)


def test_a_product_of_two_is_not_a_uniform_disc():
    got = inner_fraction(_eigvals(2), 0.5)
    assert abs(got - ginibre_product_inner_fraction(1, 0.5)) > 0.15


def test_inner_fraction_per_row_radius_and_bad_input():
    lams = np.array([[1.0, 0.5, 0.2, 0.9], [10.0, 6.0, 4.0, 1.0]])
    assert inner_fraction(lams, 0.5) == pytest.approx(4 / 8)  # 0.5, 0.2 | 4.0, 1.0
    with pytest.raises(InputError):
        inner_fraction(lams, 0.0)
    with pytest.raises(InputError):
        ginibre_product_inner_fraction(0)


def test_readable_table_labels_formats_and_the_model_column():
    """The page's spectrum table: readable headers (no code names), one format per quantity, and the ``model``
    column only when several models are stacked (chapter 3)."""
    import re

    from lib.methods.layer_spectra import LayerSpectra
    from lib.page.layer_spectra import TABLE_LABELS, readable_table

    rng = np.random.default_rng(0)
    table = LayerSpectra(rng.standard_normal((2, 6, 6)), "M (trained)").table
    one = readable_table(table)
    html = one.to_html()
    assert "M (trained)" not in html and "model" not in one.data.columns
    headers = [str(c) for c in one.data.columns]
    assert headers == [TABLE_LABELS[c] for c in table.columns if c != "model"]
    assert not [h for h in headers if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", h)]
    stacked = readable_table(table, with_model=True)
    assert list(stacked.data.columns)[0] == "model" and "M (trained)" in stacked.to_html()
    assert f"{table.spectral_radius.iloc[0]:.4f}" in html  # TABLE_FORMAT: four decimals for |λ₁|


def _diag_stack(*layers: list[float]) -> np.ndarray:
    """Layer matrices with known spectra: a diagonal block per real eigenvalue, a 2×2 rotation block for 'c'."""
    out = []
    for eig in layers:
        M = np.zeros((len(eig) + eig.count("c"), len(eig) + eig.count("c")))
        i = 0
        for e in eig:
            if e == "c":  # λ₁ = ±2i, a rotation
                M[i:i + 2, i:i + 2] = [[0.0, -2.0], [2.0, 0.0]]
                i += 2
            else:
                M[i, i] = e
                i += 1
        out.append(M)
    return np.stack(out)


def test_chapter_0_takeaway_is_decided_by_the_numbers_not_typed():
    from lib.methods.layer_spectra import LayerSpectra
    from lib.page.layer_spectra import takeaway

    # trained: layer 1 gap 0.25, layer 2 gap 0.95 (weak); twins: every gap at least 0.9
    trained = LayerSpectra(_diag_stack([4.0, 1.0, 0.5], [2.0, 1.9, 0.1]), "M")
    twins = [LayerSpectra(_diag_stack([1.0, 0.95, 0.5], [1.0, 0.9, 0.2]), "M (random init, seed 0)")]
    t = takeaway(trained, twins, model="M")
    assert t["held"].startswith("training opens spectral gaps") and "from 0.25 to 0.95" in t["held"]
    assert "at least 0.900" in t["held"]
    assert t["not_held"].startswith("not every trained layer") and "1 of 2 have a gap ratio above 0.9" in t["not_held"]
    assert "in 1 of the 2 layers, not in all" in t["so"]
    # a model whose training opened no gap beyond its twins', and whose layers are all real and gapped
    flat = LayerSpectra(_diag_stack([1.0, 0.5, 0.1], [1.0, 0.6, 0.1]), "N")
    wide = [LayerSpectra(_diag_stack([1.0, 0.2, 0.1], [1.0, 0.3, 0.1]), "N (random init, seed 0)")]
    t = takeaway(flat, wide, model="N")
    assert t["not_held"].startswith("training opens no spectral gap beyond")
    assert t["held"].startswith("every trained layer singles out a real direction") and "in every layer" in t["so"]
    # a complex λ₁ counts against "singles out a direction"; a line with no clause says so
    rot = LayerSpectra(_diag_stack(["c", 0.5]), "R")
    t = takeaway(rot, twins, model="R")
    assert "in 1 of them λ₁ is complex" in t["not_held"] and "nothing to work with" in t["so"]
    none_held = takeaway(LayerSpectra(_diag_stack(["c", 0.5]), "R"), wide, model="R")
    assert none_held["held"] == "nothing of the above"


def test_radius_gap_chart_draws_the_twins_as_one_band():
    """Issue 28: the random-init twins of Figs 0.x and 3.1 are one band ("random init, 3 seeds") in one colour with
    each seed's point on it, not three near-identical orange and brown lines; trained keeps the book's blue."""
    from types import SimpleNamespace

    from lib.page.layer_spectra import radius_gap_chart
    from lib.page.plotting import RANDOM_COLORS, TRAINED_COLOR

    def spectra(model: str, radius: float) -> SimpleNamespace:
        return SimpleNamespace(model=model, table=pd.DataFrame({
            "model": model, "layer": np.arange(1, 4), "spectral_radius": radius + 0.01 * np.arange(3),
            "gap_ratio": 0.9, "lambda1_complex": [False, True, False]}))

    twins = [spectra(f"m (random init, seed {s})", 0.2 + 0.01 * s) for s in range(3)]
    spec = radius_gap_chart([spectra("m (trained)", 1.5), *twins]).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {r["model"] for r in rows} == {"m (trained)", "random init, 3 seeds"}
    band = [r for r in rows if r["band"]]
    assert len(band) == 6 and all(r["value_min"] <= r["value"] <= r["value_max"] for r in band)
    assert sum(r["seed"] for r in rows) == 3 * 3 * 2  # every seed's point, both panels
    scales = [s for s in (n.get("encoding", {}).get("color", {}).get("scale") for n in spec["spec"]["layer"]) if s]
    assert scales and all(dict(zip(s["domain"], s["range"])) == {"m (trained)": TRAINED_COLOR,
                                                                  "random init, 3 seeds": RANDOM_COLORS[0]}
                          for s in scales)
