"""Chapter 3's charts draw what their captions say: γ_t over its own chance level against the layer's own null band."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from lib.page import realmodel_plots as rp


def _fields(chart) -> set[str]:
    """Every field name an encoding of the chart's Vega-Lite spec refers to."""
    spec = json.dumps(chart.to_dict())
    return {f for f in ("gamma_ratio", "gamma_ratio_lo", "gamma_ratio_hi", "gamma_ratio_null_lo", "gamma_ratio_null_hi",
                        "rho_null_lo", "rho_null_hi", "gamma", "chance", "null_ratio_lo", "ratio")
            if f'"field": "{f}"' in spec}


def test_gamma_rho_chart_plots_the_ratio_over_its_own_null_band():
    res = pd.DataFrame({
        "layer": [1, 2, 1, 2], "variant": ["a · x", "a · x", "a · y", "a · y"],
        **{c: np.linspace(0.5, 2.0, 4) for c in ("gamma_ratio", "gamma_ratio_lo", "gamma_ratio_hi", "gamma_ratio_null_lo",
                                                 "gamma_ratio_null_hi", "rho", "rho_lo", "rho_hi", "rho_null_lo", "rho_null_hi")},
    })
    f = _fields(rp.gamma_rho_chart(res, model="M"))
    assert {"gamma_ratio", "gamma_ratio_lo", "gamma_ratio_null_lo", "gamma_ratio_null_hi", "rho_null_lo"} <= f
    assert "gamma" not in f  # the raw γ_t (whose chance level depends on k_t) is not drawn


def test_convergence_and_depth_charts_use_each_targets_chance_level():
    conv = pd.DataFrame({"step": [0, 1] * 2, "target": ["v₁"] * 2 + ["span{v₁, v₂}"] * 2, "alignment": 0.5, "lo": 0.4,
                         "hi": 0.6, "distance": 0.5, "predicted": 0.5, "rate": 0.9, "chance": [0.04, 0.04, 0.08, 0.08]})
    assert "chance" in _fields(rp.convergence_chart(conv, model="M"))
    prof = pd.DataFrame({"step": [0, 1], "variant": "v", "ratio": 1.0, "ratio_lo": 0.9, "ratio_hi": 1.1,
                         "null_ratio_lo": 0.8, "null_ratio_hi": 1.2})
    assert {"ratio", "null_ratio_lo"} <= _fields(rp.depth_profile_chart(prof, model="M", title="t"))
