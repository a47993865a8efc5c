"""Chapter 6's charts (lib.page.two_views) in the book's style: trained and random-init twins in the book's
colours, a legend entry for every null, chance level and reference line, a description, no TeX, facets that split
all their data."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from chart_specs import nodes as _nodes
from test_bridge_findings import _angles, _context, _rates, _share, _steer

from lib.chapters import two_views as bv
from lib.page import two_views as bp
from lib.page.plotting import NULL_COLOR, RANDOM_COLORS, TRAINED_COLOR


def _gamma_table() -> pd.DataFrame:
    frames = []
    for key in ("MiniLM", "decoder"):
        for s in ("trained", "random init, seed 0", "random init, seed 1"):
            for view in bv.GAMMA_VIEWS:
                g = 0.1 + 0.01 * np.arange(6)
                frames.append(pd.DataFrame({"layer": np.arange(1, 7), "view": view, "gamma": g, "gamma_lo": g - 0.01,
                                            "gamma_hi": g + 0.01, "chance": 0.05, "gamma_null_hi": 0.08, "rho": 0.5,
                                            "rho_lo": 0.45, "rho_hi": 0.55, "rho_null_hi": 0.6})
                              .assign(model=key, series=s, random=s != "trained"))
    return pd.concat(frames, ignore_index=True)


def _pert() -> pd.DataFrame:
    eps = np.array([1e-4, 1e-3, 1e-2])
    return pd.concat([pd.DataFrame({"eps": eps, "jacobian": j, "error": e, "error_lo": e / 2, "error_hi": 2 * e})
                      .assign(model=key) for key in ("MiniLM", "decoder")
                      for j, e in (("in-context", eps), ("single-token", np.full(3, 0.5)))], ignore_index=True)


CHARTS = {
    "share": lambda: bp.share_chart(bv.share_both(*_share(0.8, 0.2)), model="m"),
    "angle": lambda: bp.angle_chart(_angles(0.01, 0.5).assign(k=8, p=0.01), model="m"),
    "rates": lambda: bp.rates_chart(_rates(True), model="m"),
    "gamma": lambda: bp.gamma_chart(_gamma_table(), "gamma", model="m"),
    "rho": lambda: bp.gamma_chart(_gamma_table(), "rho", model="m"),
    "context": lambda: bp.context_chart(_context(0.6)[0], model="m"),
    "perturbation": lambda: bp.perturbation_chart(_pert(), model="m"),
    "steering": lambda: bp.steering_chart(bp.steering_long(_steer(0.7, 0.1), bv.STEERING_QUANTITIES), model="m"),
}


def _colour_scales(spec: dict) -> list[tuple[str, list, list]]:
    return [(n["color"]["field"], n["color"]["scale"]["domain"], n["color"]["scale"]["range"])
            for n in _nodes(spec) if isinstance(n.get("color"), dict) and "field" in n["color"]
            and "scale" in n["color"]]


@pytest.mark.parametrize("name", CHARTS)
def test_chart_is_in_the_books_style(name):
    spec = CHARTS[name]().to_dict()
    assert len(spec["description"].split()) >= 8 and spec["title"]["subtitle"] == ["model: m"]
    texts = [v for n in _nodes(spec) for k, v in n.items() if k in ("title", "text") and isinstance(v, str)]
    assert not [t for t in texts if re.search(r"\\[a-zA-Z]+|[\^_]\{", t)]
    assert not [t for t in texts if re.search(r"[^\W\d]_[^\W\d_]", t)], "a code-like subscript (δ_H) in the chart's text"
    inner = [n for n in _nodes(spec) if "facet" in n and any("data" in x for x in _nodes(n.get("spec", {})))]
    assert not inner, "a layer inside a facet brings its own data"
    for field, domain, colours in _colour_scales(spec):
        got = dict(zip(domain, colours))
        if "trained" in got:
            assert got["trained"] == TRAINED_COLOR, (field, got)
            twins = [c for d, c in got.items() if d.startswith("random init")]
            assert twins == list(RANDOM_COLORS[:len(twins)]), (field, got)


@pytest.mark.parametrize(("name", "entry", "colour"), [
    ("share", "½: half of the update", bp.REFERENCE_COLOR),
    ("angle", "closer than 95% of random subspaces", NULL_COLOR),
    ("gamma", "null: 95% quantile of random subspaces", NULL_COLOR),
    ("gamma", "chance level", bp.REFERENCE_COLOR),
    ("rho", "null: 95% quantile of random subspaces", NULL_COLOR),
])
def test_nulls_and_references_have_a_legend_entry(name, entry, colour):
    """The reference is drawn with ``color=datum(entry)`` and its entry sits in the colour legend's scale."""
    spec = CHARTS[name]().to_dict()
    scales = [dict(zip(d, c)) for _, d, c in _colour_scales(spec)]
    assert any(s.get(entry) == colour for s in scales), scales
    assert any(isinstance(n.get("color"), dict) and n["color"].get("datum") == entry for n in _nodes(spec))


@pytest.mark.parametrize("name", CHARTS)
def test_legend_entries_and_panel_headers_fit_a_phone(name):
    """Issue 28: on a phone (a 320 px output box) a legend lists its entries one a line under the plot, and a
    panel's header stands over its plot: an entry of 45 characters or more (about 290 px at 11 px) or a header
    line of 42 or more (12 px bold) made Figs 6.2, 6.4, 6.5 and 6.8 scroll sideways in their box."""
    spec = CHARTS[name]().to_dict()
    entries = {str(d) for _, domain, _ in _colour_scales(spec) for d in domain}
    assert not [e for e in entries if len(e) >= 45], entries
    if name == "steering":
        long = bp.steering_long(_steer(0.7, 0.1), bv.STEERING_QUANTITIES)
        lines = [line for m in ("all-MiniLM-L6-v2", "book-decoder") for q in long.quantity.unique()
                 for line in bp._panel(m, bp._typeset(q)).split(" · ")]
        assert max(map(len, lines)) < 42, lines


def test_series_order_puts_trained_first():
    assert bp.series_order(["random init, seed 1", "trained", "toy", "random init, seed 0", "trained"]) == [
        "trained", "random init, seed 0", "random init, seed 1", "toy"]


def test_gamma_chart_rejects_an_unknown_metric():
    with pytest.raises(ValueError, match="metric must be"):
        bp.gamma_chart(_gamma_table(), "sigma", model="m")


def test_steering_chart_ticks_at_the_strengths():
    spec = CHARTS["steering"]().to_dict()
    values = [n["axis"]["values"] for n in _nodes(spec) if isinstance(n.get("axis"), dict) and "values" in n["axis"]]
    assert values and all(v == [0.0, 1.0, 5.0, 20.0, 100.0, 1000.0] for v in values)


@pytest.mark.parametrize("name", ["share", "angle", "gamma", "rho", "context", "steering"])
def test_the_twins_are_one_band_with_one_legend_entry(name):
    """Issue 28: the random-init seeds are one band ("random init, 2 seeds" here) in one colour, not one
    near-identical orange per seed."""
    spec = CHARTS[name]().to_dict()
    for _, domain, colours in _colour_scales(spec):
        twins = [d for d in domain if d.startswith("random init")]
        assert twins in ([], ["random init, 2 seeds"]), domain
    marks = [n["mark"]["type"] if isinstance(n.get("mark"), dict) else n.get("mark") for n in _nodes(spec)
             if "mark" in n and {"filter": "datum.band"} in n.get("transform", [])]
    assert {"bar", "area"} & set(marks), marks
