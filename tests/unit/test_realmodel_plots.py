"""Chapter 3's charts draw what their captions say (γ_t over its own chance level against the layer's own null band),
in the book's one style: trained and random init in their colours, grey nulls with a legend entry, shared axes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from chart_specs import nodes as _nodes

from lib.page import real_models as rp


def _drawn(chart) -> pd.DataFrame:
    """Every row of the chart's inline datasets, in one frame."""
    return pd.concat([pd.DataFrame(rows) for rows in chart.to_dict()["datasets"].values()], ignore_index=True)


def test_gamma_rho_chart_plots_the_ratio_over_its_own_null_band():
    res = pd.DataFrame({
        "layer": [1, 2, 1, 2], "variant": ["a · x", "a · x", "a · y", "a · y"], "gamma": 0.123,
        **{c: np.linspace(0.5, 2.0, 4) + k for k, c in enumerate(
            ("gamma_ratio", "gamma_ratio_lo", "gamma_ratio_hi", "gamma_ratio_null_lo", "gamma_ratio_null_hi", "rho",
             "rho_lo", "rho_hi", "rho_null_lo", "rho_null_hi"))},
    })
    drawn = _drawn(rp.gamma_rho_chart(res, model="M"))
    est, null = drawn[drawn.kind == "estimate"], drawn[drawn.kind == "null"]
    # the estimates are γ_t / chance (and ρ_t) with their intervals, the bars each layer's own null range
    assert set(res.gamma_ratio) <= set(est.y) and set(res.gamma_ratio_lo) <= set(est.y_lo)
    assert set(res.gamma_ratio_null_lo) <= set(null.y_lo) and set(res.gamma_ratio_null_hi) <= set(null.y_hi)
    assert set(res.rho_null_lo) <= set(null.y_lo) and set(res.rho) <= set(est.y)
    assert 0.123 not in set(drawn.y)  # the raw γ_t (whose chance level depends on k_t) is not drawn


def test_convergence_and_depth_charts_use_each_targets_chance_level():
    conv = pd.DataFrame({"step": [0, 1] * 2, "target": ["v₁"] * 2 + ["span{v₁, v₂}"] * 2, "alignment": 0.5, "lo": 0.4,
                         "hi": 0.6, "distance": 0.5, "predicted": 0.5, "rate": 0.9, "chance": [0.04, 0.04, 0.08, 0.08]})
    drawn = _drawn(rp.convergence_chart(conv, model="M"))
    chance = drawn[drawn.curve == "chance level c(d, k)"]
    assert set(zip(chance.target, chance.a)) == {("v₁", 0.04), ("span{v₁, v₂}", 0.08)}
    prof = pd.DataFrame({"step": [0, 1], "variant": "v", "ratio": [1.0, 1.5], "ratio_lo": 0.9, "ratio_hi": 1.6,
                         "null_ratio_lo": [0.8, 0.7], "null_ratio_hi": 1.2})
    drawn = _drawn(rp.depth_profile_chart(prof, model="M", title="t"))
    assert set(drawn[drawn.kind == "estimate"].y) == {1.0, 1.5} and set(drawn[drawn.kind == "null"].y_lo) == {0.8, 0.7}


# -- the book's one style (issue #17): trained/random colours, grey nulls with a legend entry, shared axes --------
def _colour_scales(spec):
    """``{field: (domain, range)}`` of every colour encoding with an explicit scale."""
    out = {}
    for d in _nodes(spec):
        c = d.get("color")
        if isinstance(c, dict) and c.get("field") and isinstance(c.get("scale"), dict) and "domain" in c["scale"]:
            out[c["field"]] = (c["scale"]["domain"], c["scale"]["range"])
    return out


def _results_frame():
    rows = []
    for who in ("trained", "random init s0", "random init s1"):
        for source in ("simplified", "real forward pass"):
            for layer in (1, 2, 3):
                rows.append({"variant": f"{who} · {source}", "layer": layer, "gamma_ratio": 1.5, "gamma_ratio_lo": 1.2,
                             "gamma_ratio_hi": 1.8, "gamma_ratio_null_lo": 0.7, "gamma_ratio_null_hi": 1.4, "rho": 0.6,
                             "rho_lo": 0.5, "rho_hi": 0.7, "rho_null_lo": 0.2, "rho_null_hi": 0.8})
    return pd.DataFrame(rows)


def _check_book_colours(spec):
    from lib.page.plotting import NULL_COLOR, model_kind, model_palette

    scales = _colour_scales(spec)
    assert scales, "no explicit colour scale"
    for domain, colours in scales.values():
        expected = dict(zip(*model_palette(domain)))
        for v, c in zip(domain, colours):
            if model_kind(v):
                assert c == expected[v], (v, c)
    return scales, NULL_COLOR


def test_gamma_rho_chart_colours_models_and_gives_the_null_and_chance_their_legend_entries():
    from lib.page.plotting import RANDOM_COLORS, TRAINED_COLOR

    chart = rp.gamma_rho_chart(_results_frame(), model="M")
    spec = chart.to_dict()
    scales, null_colour = _check_book_colours(spec)
    domain, colours = scales["key"]
    assert domain == ["trained", "random init, seed 0", "random init, seed 1", rp.NULL_LABEL, rp.CHANCE_LABEL]
    assert colours == [TRAINED_COLOR, *RANDOM_COLORS[:2], null_colour, "black"]
    # 2 sources × 2 metrics, every panel colouring by the same field (no merged colour scales)
    assert len(spec["vconcat"]) == 2 and all(len(row["hconcat"]) == 2 for row in spec["vconcat"])
    fields = {c["field"] for d in _nodes(spec) if isinstance(c := d.get("color"), dict) and "field" in c}
    assert fields == {"key"}
    # one y domain per metric, shared by both sources, holding every value drawn
    doms = [[d["scale"]["domain"] for d in _nodes(row["hconcat"][i]) if isinstance(d.get("scale"), dict)
             and "domain" in d["scale"] and d.get("field") in ("y", "y_lo")] for row in spec["vconcat"] for i in (0, 1)]
    assert doms[0][0] == doms[2][0] and doms[1][0] == doms[3][0]
    assert doms[0][0][0] < 0.7 and doms[0][0][1] > 1.8 and doms[1][0][0] < 0.2 and doms[1][0][1] > 0.8
    assert len(spec["description"].split()) >= 4


def test_depth_profile_and_convergence_charts_use_the_books_colours():
    prof = pd.DataFrame({"step": [0, 1] * 2, "variant": ["trained · simplified"] * 2 + ["random init s0 · simplified"] * 2,
                         "ratio": 1.0, "ratio_lo": 0.9, "ratio_hi": 1.1, "null_ratio_lo": 0.8, "null_ratio_hi": 1.2})
    scales, _ = _check_book_colours(rp.depth_profile_chart(prof, model="M", title="t").to_dict())
    assert scales["key"][0][:2] == ["trained", "random init, seed 0"]
    conv = pd.DataFrame({"step": [0, 1] * 4, "target": (["v₁"] * 2 + ["span{v₁, v₂}"] * 2) * 2, "alignment": 0.5,
                         "lo": 0.4, "hi": 0.6, "distance": 0.5, "predicted": 0.4, "rate": 0.9, "chance": 0.04,
                         "series": ["trained"] * 4 + ["random init, seed 0"] * 4})
    spec = rp.convergence_chart(conv, model="M").to_dict()
    scales, _ = _check_book_colours(spec)
    assert scales["series"][0] == ["trained", "random init, seed 0"]
    titles = {d.get("title") for d in _nodes(spec) if isinstance(d.get("title"), str)}
    assert {"toward v₁ (or the plane of a complex λ₁)", "toward span{v₁, v₂}"} <= titles
    # a single run without a series column is named by the model's kind
    one = rp.convergence_chart(conv[conv.series == "trained"].drop(columns="series"), model="X (trained), layer 1")
    assert _colour_scales(one.to_dict())["series"][0] == ["trained"]


def test_spectrum_summary_colours_trained_and_random_init():
    from lib.page.plotting import RANDOM_COLORS, TRAINED_COLOR

    table = pd.DataFrame({"model": ["M (trained)", "M (trained)", "A config (random init, seed 0)"],
                          "layer": ["1", "2", "shared"], "gap_ratio": [0.6, 0.9, 0.98],
                          "spectral_radius": [1.5, 2.0, 0.3], "lambda1_complex": [False, True, True],
                          "lambda1": ["1.5", "1 ± 1i", "0.3 ± 0.1i"]})
    scales = _colour_scales(rp.spectrum_summary_chart(table, model="M").to_dict())
    assert scales["weights"] == (["trained", "random init"], [TRAINED_COLOR, RANDOM_COLORS[0]])


def test_paper_model_figure_picks_the_chart_of_the_model_kind():
    from types import SimpleNamespace

    conv = pd.DataFrame({"step": [0, 1] * 2, "target": ["v₁"] * 2 + ["span{v₁, v₂}"] * 2, "alignment": 0.5, "lo": 0.4,
                         "hi": 0.6, "distance": 0.5, "predicted": 0.4, "rate": 0.9, "chance": 0.04})
    shared = SimpleNamespace(name="org/shared", label="shared (trained)", prompts=8, steps=100, convergence=conv,
                             layer_varying=None)
    chart, name, caption = rp.paper_model_figure(shared, "real_1")
    assert name == "real_1" and caption.startswith("org/shared: its shared layer iterated 100 times")
    assert "org/shared: alignment" in json.dumps(chart.to_dict(), ensure_ascii=False)
    varying = SimpleNamespace(name="org/bert", label="bert (trained)", prompts=5, steps=0, convergence=None,
                              layer_varying=SimpleNamespace(results=_results_frame()))
    chart, _, caption = rp.paper_model_figure(varying, "real_2")
    assert caption.startswith("org/bert: γₜ") and "org/bert: γₜ / chance" in json.dumps(chart.to_dict(),
                                                                                          ensure_ascii=False)


def test_series_of_reads_the_variants_model_part():
    assert rp.series_of("random init s2") == "random init, seed 2"
    assert rp.series_of("trained") == "trained"
