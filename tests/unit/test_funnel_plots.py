"""lib.page.jacobian_funnel: chapter 4's figures in the book's style (trained blue, twins orange, baselines in the
legend, no TeX), and the community graph laid out by community."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from chart_specs import nodes as _nodes

from lib.chapters import jacobian_funnel as fs
from lib.methods import funnel
from lib.page import jacobian_funnel as fp
from lib.page.plotting import NULL_COLOR, TRAINED_COLOR, model_kind, model_palette

SERIES = ["trained", "random init, seed 0", "random init, seed 1", "random init, seed 2"]
_TEX = re.compile(r"\\[a-zA-Z]+|[\^_]\{")


def _check_style(chart) -> dict:
    """Every trained/random colour scale follows the book's palette; no TeX; a description; no layer inside a facet
    with its own data."""
    spec = chart.to_dict()
    assert len(spec.get("description", "").split()) >= 4
    for d in _nodes(spec):
        colour = d.get("color") if isinstance(d.get("color"), dict) else None
        if colour and colour.get("field") and "scale" in colour and "domain" in colour["scale"]:
            dom, rng = colour["scale"]["domain"], colour["scale"]["range"]
            want = dict(zip(*model_palette(dom)))
            assert all(dict(zip(dom, rng))[v] == want[v] for v in dom if model_kind(v)), (dom, rng)
        for k in ("title", "text"):
            if isinstance(d.get(k), str):
                assert not _TEX.search(d[k]), d[k]
        if "facet" in d and isinstance(d.get("spec"), dict):
            assert not any("data" in x for x in _nodes(d["spec"]))
    return spec


def _has_reference_legend(spec: dict) -> bool:
    return any(d.get("strokeDash", {}).get("field") == "reference" for d in _nodes(spec) if isinstance(d.get("strokeDash"), dict))


def test_community_layout_draws_each_community_as_a_ring():
    rng = np.random.default_rng(0)
    memb = np.repeat([0, 1, 2], [50, 30, 20])
    P = rng.random(100)
    xy = fp.community_layout(memb, P)
    centres = []
    for c in range(3):
        pts = xy[memb == c]
        centre = pts.mean(0)
        r = np.linalg.norm(pts - centre, axis=1)
        np.testing.assert_allclose(r, r[0], rtol=1e-9)  # a ring
        centres.append((centre, r[0]))
    for i in range(3):
        for j in range(i + 1, 3):
            (a, ra), (b, rb) = centres[i], centres[j]
            assert np.linalg.norm(a - b) > ra + rb  # rings never overlap
    assert centres[0][1] > centres[1][1] > centres[2][1]  # bigger community, bigger ring
    # the most participating unit of a community faces the middle of the figure
    idx = np.flatnonzero(memb == 1)
    top = idx[np.argmax(P[idx])]
    assert np.linalg.norm(xy[top]) == pytest.approx(np.linalg.norm(xy[idx], axis=1).min())
    np.testing.assert_array_equal(xy, fp.community_layout(memb, P))  # deterministic
    one = fp.community_layout(np.zeros(5, dtype=int), np.ones(5))
    np.testing.assert_allclose(np.linalg.norm(one, axis=1), 1.0)
    with pytest.raises(ValueError):
        fp.community_layout(memb, P[:3])


def test_community_graph_chart_is_laid_out_by_community():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((12, 12))
    W = (W + W.T) / 2
    np.fill_diagonal(W, 0)
    memb = np.repeat([0, 1], 6)
    spec = _check_style(fp.community_graph_chart(W, memb, rng.random(12), rng.standard_normal(12), title="Graph of coordinates",
                                                 model="toy (trained)"))
    nodes = next(v for v in spec["datasets"].values() if "community" in v[0])
    xy = np.array([[n["x"], n["y"]] for n in nodes])
    np.testing.assert_allclose(xy, fp.community_layout(memb, [n["participation"] for n in nodes]))
    assert [n["community"] for n in nodes] == ["C1"] * 6 + ["C2"] * 6


def _runs():
    rng = np.random.default_rng(2)
    per = {s: np.eye(6) + 0.3 * rng.standard_normal((4, 8, 6, 6)) for s in SERIES}
    return {s: funnel.bootstrap_run(p, n_boot=5) for s, p in per.items()}, per


def test_depth_slope_funnel_and_block_charts_use_the_books_colours():
    runs, per = _runs()
    depth = fs.depth_frame({"decoder (J̄ − I)": runs, "other": runs}, {"decoder (J̄ − I)": 0.9, "other": 0.8})
    spec = _check_style(fp.depth_chart(depth, "f_C", title="Complex fraction by depth", model="toy", y_title="f_C",
                                       baseline="real Ginibre, same d"))
    assert _has_reference_legend(spec)
    assert spec["facet"]["column"]["sort"] == ["decoder (J̄ − I)", "other"]  # the panels in the given order
    trends = fs.trend_frame(fs.depth_trends(runs))
    assert _has_reference_legend(_check_style(fp.slope_chart(trends, title="Slopes against depth", model="toy")))
    curves = fs.funnel_curves({"m": (runs, per["trained"].mean(1))})
    _check_style(fp.funnel_chart(curves, title="The funnel of a toy", model="toy"))
    spec = _check_style(fp.block_erank_chart(fs.block_erank_frame(runs), title="Effective rank per block", model="toy", d=6))
    assert _has_reference_legend(spec)
    colours = [d["color"]["scale"] for d in _nodes(spec) if isinstance(d.get("color"), dict) and "scale" in d["color"]]
    assert colours and colours[0]["range"][0] == TRAINED_COLOR


def test_training_coupling_and_community_charts():
    log = {"steps": [0, 1, 2], "loss": [5.0, 3.0, 2.0], "heldout_loss": 2.0, "heldout_loss_random_init": 5.1,
           "uniform_loss": 5.15}
    spec = _check_style(fp.training_curve_chart(log, model="book-decoder (trained)"))
    scale = next(d["color"]["scale"] for d in _nodes(spec) if isinstance(d.get("color"), dict) and "scale" in d["color"])
    assert dict(zip(scale["domain"], scale["range"]))["uniform over the vocabulary"] == NULL_COLOR
    coup = pd.DataFrame([{"model": "m", "weights": s, "layer": l, "depth": l / 3, "r_s": 0.1 * l, "q": 0.5,
                          "p_relabel": 0.5} for s in SERIES for l in (1, 2, 3)])
    assert _has_reference_legend(_check_style(fp.coupling_chart(coup, title="Coupling against depth", model="toy")))
    comm = pd.DataFrame([{"weights": s, "layer": 1, "community": 0, "size": 20, "boundary": 0.5, "log_gain": 0.1}
                         for s in SERIES])
    assert _has_reference_legend(_check_style(fp.community_scatter_chart(comm, title="Boundary against gain", model="toy")))


def test_a_slope_outside_its_own_interval_is_ringed_and_named():
    """Fig. 4.5 once showed seed 2's slope outside its own 95% interval with nothing on the page saying so: the
    percentile interval of the resampled slopes need not contain the full-sample slope (a count of complex
    eigenvalues is not smooth in the prompts). The chart rings such a point and the caption's note names it."""
    df = pd.DataFrame({"metric": ["f", "f", "f"], "series": ["trained", "random init, seed 0", "random init, seed 1"],
                       "slope": [0.1, 0.05, 0.3], "lo": [0.0, 0.0, 0.0], "hi": [0.2, 0.1, 0.2],
                       "direction": ["flat"] * 3})
    note = fp.slope_outside_note(df)
    assert "random init, seed 1, f" in note and "trained" not in note
    assert fp.slope_outside_note(df.iloc[:2]) == "Every point lies inside its own interval."
    spec = fp.slope_chart(df, title="t", model="m").to_dict()
    rings = [n for n in _nodes(spec) if {"filter": "datum.slope < datum.lo || datum.slope > datum.hi"}
             in n.get("transform", [])]
    assert len(rings) == 1
    rows = {r["row"] for rows in spec["datasets"].values() for r in rows}
    assert rows == {"trained", "random init, 2 seeds"}  # the twins share one row
