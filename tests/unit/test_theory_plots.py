"""The figures of chapters 1 and 2 (lib.page.power_method, lib.page.explorer) and their page helpers.

Each chart: a title, a description (its ARIA label), Unicode text (no TeX), toy series in the book's
"other" colours, references (a prediction, a threshold, a chance level, a null band) with a legend entry,
and no value drawn at an axis floor.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from chart_specs import nodes as _nodes

from lib.linalg import power, spectra
from lib.page import explorer, plotting, shared_weights
from lib.page import power_method as tp
from lib.page.plotting import NULL_COLOR, OTHER_COLORS, TRAINED_COLOR
from lib.page.tables import p_text
from lib.theory import dynamics, toys

_TEX = re.compile(r"\\[a-zA-Z]+|[\^_]\{")


def _texts(spec):
    return [d[k] for d in _nodes(spec) for k in ("title", "text") if isinstance(d.get(k), str)]


def _scales(spec, field):
    return [d["scale"] for d in _nodes(spec) if d.get("field") == field and isinstance(d.get("scale"), dict)]


def _check(chart):
    spec = chart.to_dict()
    assert len(spec.get("description", "").split()) >= 4
    assert not [t for t in _texts(spec) if _TEX.search(t)]
    return spec


@pytest.fixture(scope="module")
def toy_runs():
    x0 = np.random.default_rng(0).standard_normal(16)
    conv = power.convergence_runs([toys.toy_matrix("real", 16, gap=g, seed=0) for g in (0.5, 0.9)], x0, 80)
    rate = dynamics.consensus_rates([0.5, 0.7], [0], d=16, steps=120, heads=2, n_tokens=5)
    F = toys.toy_matrix("real", 12, gap=0.6, seed=0, cond=2.0)
    v1 = spectra.principal(F).vector
    bip = dynamics.bipartite_threshold_scan(F, v1, [1] * 4 + [-1] * 2, [0.1, 0.6], seed=1)
    surv = dynamics.bipartite_survival(F, v1, [1] * 4 + [-1] * 2, heads=(1, 2), runs=2, steps=20)
    return conv, rate, bip, surv


def test_convergence_chart_leaves_out_rounding_and_uses_other_colours(toy_runs):
    conv = toy_runs[0]
    spec = _check(tp.convergence_chart(conv, model=plotting.toy_label(16, 0)))
    data = [r for rows in spec["datasets"].values() for r in rows]
    assert min(r["error"] for r in data) > 1e-15  # not drawn at a floor: left out
    (scale,) = _scales(spec, "gap_ratio")
    assert scale["range"] == list(OTHER_COLORS[:2])


def test_line_chart_colours_facets_and_log_axis():
    df = pd.DataFrame({"t": [0, 1, 0, 1], "v": [1.0, 0.1, 1.0, 0.01], "s": ["a", "a", "b", "b"], "p": "x"})
    spec = _check(plotting.line_chart(df, x="t", y="v", color="s", column="p", log_y=True, model="toy", title="A title"))
    assert _scales(spec, "s")[0]["range"] == list(OTHER_COLORS[:2])
    assert any(d.get("format") == ".0e" for d in _nodes(spec))
    assert plotting.line_chart(df, x="t", y="v", model="toy", title="T", y_title="").to_dict()["encoding"]["y"]["title"] == ""


def test_rate_chart_has_the_prediction_in_its_legend(toy_runs):
    spec = _check(shared_weights.rate_chart(toy_runs[1], model="toy"))
    (scale, *_) = _scales(spec, "series")
    assert scale["domain"][1].startswith("prediction") and scale["range"] == [OTHER_COLORS[0], "black"]


def test_bipartite_threshold_chart_holds_every_point_and_names_the_threshold(toy_runs):
    bip = toy_runs[2]
    spec = _check(shared_weights.bipartite_threshold_chart(bip, 0.5 * np.log(2), model="toy"))
    (scale, *_) = _scales(spec, "series")
    assert "threshold c* = ½ log(n₊/n₋) = 0.347" in scale["domain"]
    (y,) = [s["domain"] for s in _scales(spec, "largest token change ‖Δxᵢ‖")]
    change = bip["largest token change ‖Δxᵢ‖"]
    assert y[0] <= change.min() and change.max() * 3 <= y[1]  # the flipped group (2r) is off the top edge
    assert "e²ᶜ" in spec["title"]["text"]
    with pytest.raises(ValueError, match="cannot be drawn on the log scale"):
        shared_weights.bipartite_threshold_chart(bip.assign(**{"largest token change ‖Δxᵢ‖": 0.0}), 0.3, model="toy")


def test_survival_chart(toy_runs):
    spec = _check(shared_weights.survival_chart(toy_runs[3], model="toy"))
    assert _scales(spec, "Q, K")[0]["domain"] == ["aligned", "random"]


def test_plane_orbit_chart():
    coords = np.random.default_rng(0).uniform(-1, 1, (5, 4, 2))
    spec = _check(shared_weights.plane_orbit_chart(coords, model="toy", title="Tokens orbit in the plane"))
    assert len({r["token"] for rows in spec["datasets"].values() for r in rows}) == 3


def _gamma_rows():
    return pd.DataFrame({"layer": [1, 2], "k": [1, 2], "gamma": [0.06, 0.07], "chance": [0.0407, 0.064],
                         "gamma_ratio": [1.47, 1.09], "gamma_ratio_lo": [1.3, 1.0], "gamma_ratio_hi": [1.6, 1.2],
                         "gamma_ratio_null_lo": [0.7, 0.8], "gamma_ratio_null_hi": [1.4, 1.3],
                         "q_gamma": [0.0004, 0.2]})


def test_gamma_null_chart_colours_trained_null_and_chance():
    spec = _check(tp.gamma_null_chart(_gamma_rows(), model="all-MiniLM-L6-v2 (trained)"))
    (scale, *_) = _scales(spec, "series")
    assert scale["range"] == [TRAINED_COLOR, NULL_COLOR, "black"]
    assert scale["domain"] == ["γₜ / chance, all-MiniLM-L6-v2 (trained)", "null: random subspaces, central 95%",
                               "chance level"]


def test_gamma_table_is_readable():
    table = tp.gamma_table(_gamma_rows())
    assert list(table.columns) == ["layer t", "dimension k", "γₜ", "chance level", "γₜ / chance", "95% CI",
                                   "null 95% range", "q (BH)"]
    assert not [c for c in table.columns if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", c)]
    assert table["q (BH)"].tolist() == ["<0.001", "0.200"] and table["95% CI"].iloc[0] == "1.30–1.60"


def test_explorer_leaves_out_values_below_its_floor():
    df = explorer.explore_run(0.1, 0, 4, 1.0, steps=30)
    assert (df.pred < 1e-16).any()  # 0.1^30 underflows the axis: such rows are filtered, not clamped
    spec = explorer.explorer_chart(df, model="toy", title="Explorer").to_dict()
    assert any("datum.value >= 1e-16" in str(d.get("filter", "")) for d in _nodes(spec))
    assert not [t for t in _texts(spec) if _TEX.search(t)]


def test_p_text():
    assert p_text(0.0312) == "0.0312"
    assert p_text(1 / 1001) == "0.0010, no draw of 1000 as high"
    assert p_text(1 / 101, 100) == "0.0099, no draw of 100 as high"
    assert p_text(2 / 1001) == "0.0020"
