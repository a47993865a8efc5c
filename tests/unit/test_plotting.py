"""``lib.page.plotting``: the renderer choice, the theme, descriptions and colours of the book's charts.

That the charts render with no network is checked in Chromium: in the site by
``tests/browser/test_site_browser.py``, in JupyterLab's output by ``tests/browser/test_lab_chart_browser.py``.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import pytest

import lib
from lib.page import plotting


def _chart() -> alt.Chart:
    data = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
    return plotting.titled(alt.Chart(data).mark_line().encode(x="x:Q", y="y:Q"), "test", "toy")


def test_renderer_choice(monkeypatch):
    monkeypatch.setenv(lib.BOOK_BUILD_ENV, "1")
    assert plotting.configure_renderer() == "html"
    monkeypatch.delenv(lib.BOOK_BUILD_ENV)
    assert plotting.configure_renderer() == plotting.OFFLINE_RENDERER


def test_first_chart_carries_vega_and_later_ones_do_not():
    renderer = plotting._OfflineHtmlRenderer()
    spec = _chart().to_dict()
    first, second = renderer(spec)["text/html"], renderer(spec)["text/html"]
    assert "vegaEmbed" in first and len(first) > 500_000
    assert len(second) < 50_000


def test_eigenvalue_chart_names_its_model():
    lams = np.array([[2.0, 1 + 1j, 1 - 1j, 0.1], [1.0, -0.5, 0.2, 0.0]])
    spec = plotting.eigenvalue_chart(lams, model="toy model").to_dict()
    assert spec["title"]["subtitle"] == ["model: toy model"]
    assert "resolve" not in spec  # normalized: one unit circle, shared axes
    raw = plotting.eigenvalue_chart(lams, model="toy model", normalize=False).to_dict()
    assert raw["resolve"]["scale"] == {"x": "independent", "y": "independent"}


def test_progress_bars_are_silent_in_the_book_build(monkeypatch, capsys):
    """A widget progress bar would be a dead widget view in the static site, a text one a wall of lines."""
    import tqdm.std

    from lib.progress import progress

    monkeypatch.setenv(lib.BOOK_BUILD_ENV, "1")
    bar = progress(range(3), desc="work")
    assert type(bar) is tqdm.std.tqdm and list(bar) == [0, 1, 2]
    assert "work" not in capsys.readouterr().err
    monkeypatch.delenv(lib.BOOK_BUILD_ENV)
    import tqdm.auto

    assert isinstance(progress(range(3), disable=True), tqdm.auto.tqdm)


def test_long_subtitles_wrap_and_model_labels_are_never_cut():
    models = ", ".join(f"all-MiniLM-L6-v2 (random init, seed {s})" for s in range(4))
    chart = plotting.titled(alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q"), "T", models)
    spec = chart.to_dict()
    lines = spec["title"]["subtitle"]
    assert len(lines) > 1 and all(len(line) <= plotting.SUBTITLE_CHARS for line in lines)
    assert " ".join(lines) == f"model: {models}"
    short = plotting.titled(alt.Chart(pd.DataFrame({"x": [1]})).mark_point(), "T", "toy")
    assert short.to_dict()["title"]["subtitle"] == ["model: toy"]
    assert alt.theme.active == plotting.BOOK_THEME
    assert spec["config"]["legend"]["labelLimit"] == 0 and spec["config"]["axis"]["labelLimit"] >= 300


def test_charts_are_one_image_to_a_screen_reader():
    """The book theme hides the marks from assistive technology (mark-level ``aria: false`` in the compiled Vega,
    also for a layer of a facet), and the chart keeps its description as its text alternative."""
    import vl_convert as vlc

    df = pd.DataFrame({"x": [1, 2], "y": [3, 4], "panel": ["a", "b"]})
    base = alt.Chart(df).encode(x="x:Q", y="y:Q")
    chart = plotting.titled(alt.layer(base.mark_line(), base.mark_rule()).facet(column="panel:N"), "T", "toy")
    spec = chart.to_dict()
    assert spec["config"]["mark"]["aria"] is False
    vega = vlc.vegalite_to_vega(spec, vl_version=alt.VEGALITE_VERSION.rsplit(".", 1)[0])

    def marks(group: dict) -> list[dict]:
        return [m for g in group.get("marks", []) for m in ([g] if g["type"] != "group" else []) + marks(g)]

    drawn = marks(vega)
    assert {m["type"] for m in drawn} >= {"line", "rule"}
    assert all(m.get("aria") is False for m in drawn if m.get("role") not in ("axis", "legend")), drawn
    assert vega["description"] == "T, for toy."


def test_coupling_chart_panels_show_only_their_own_model():
    """Each facet panel is that model's rows: no layer keeps data of its own inside the facet."""
    from lib.page import jacobian_funnel

    df = pd.DataFrame({"model": ["A", "A", "B", "B"], "series": ["trained"] * 4, "layer": [1, 2, 1, 2],
                       "depth": [0.5, 1.0, 0.5, 1.0], "r_s": [0.1, 0.2, -0.1, -0.2], "q": [0.01, 0.5, 0.01, 0.5],
                       "p_relabel": [0.3] * 4})
    spec = jacobian_funnel.coupling_chart(df, title="t", model="m").to_dict()
    assert "facet" in spec and all("data" not in layer for layer in spec["spec"]["layer"])


def test_titled_and_side_by_side_charts_carry_a_description():
    df = pd.DataFrame({"x": [0, 1], "y": [1, 2]})
    a = plotting.titled(alt.Chart(df).mark_line().encode(x="x", y="y"), "Error against depth", "toy (d = 8)")
    assert a.to_dict()["description"] == "Error against depth, for toy (d = 8)."
    b = plotting.titled(alt.Chart(df).mark_point().encode(x="x", y="y"), "Rate", "toy", description="Two points.")
    both = plotting.side_by_side(a, b, vertical=True).to_dict()
    assert both["description"] == "Panel 1: Error against depth, for toy (d = 8). Panel 2: Two points."
    assert "vconcat" in both and both["resolve"]["scale"] == {"color": "independent", "opacity": "independent"}


# Machado, Oliveira & Fernandes (2009), severity 1.0, applied to linear RGB
_CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}


def _lab(hex_colour: str, cvd: str | None = None) -> np.ndarray:
    """CIELAB (D65) of an sRGB colour, as seen with a colour-vision deficiency ``cvd`` (or normal vision)."""
    srgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    lin = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    if cvd:
        lin = np.clip(np.array(_CVD[cvd]) @ lin, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ lin
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("cvd", [None, *_CVD])
def test_trained_and_random_init_stay_apart_for_colour_blind_readers(cvd):
    """Trained (blue) against every random-init colour: a CIELAB difference of at least 30 under normal
    vision and each simulated dichromacy (an obvious difference is about 10)."""
    for rnd in plotting.RANDOM_COLORS:
        d = np.linalg.norm(_lab(plotting.TRAINED_COLOR, cvd) - _lab(rnd, cvd))
        assert d >= 30, f"{cvd or 'normal vision'}: trained {plotting.TRAINED_COLOR} vs random {rnd}: ΔE = {d:.1f}"


def test_the_lab_colour_simulation_matches_a_known_value():
    """Sanity of the test's colour maths: pure red under deuteranopia turns olive-brown (L* about 40-60,
    b* > 0), and a colour against itself differs by 0."""
    red = _lab("#ff0000", "deuteranopia")
    assert 40 < red[0] < 65 and red[2] > 20
    assert np.linalg.norm(_lab("#0072B2") - _lab("#0072B2")) == 0


def test_model_palette_gives_trained_and_twins_fixed_colours():
    domain, colours = plotting.model_palette(["toy", "x (trained)", "x (random init, seed 1)", "random 2", "x (trained)"])
    assert domain == ["toy", "x (trained)", "x (random init, seed 1)", "random 2"]
    assert colours == [plotting.OTHER_COLORS[0], plotting.TRAINED_COLOR, *plotting.RANDOM_COLORS[:2]]
    assert plotting.model_kind("random direction") is None and plotting.model_kind("random init") == "random"


def test_a_line_on_top_is_drawn_last_and_dashed():
    # Fig. 1.3: the power method coincides with uniform attention; drawn first, it was hidden under it
    df = pd.DataFrame({"t": [0, 1, 0, 1], "a": [0.1, 0.5, 0.1, 0.5],
                       "variant": ["power method", "power method", "uniform", "uniform"]})
    spec = plotting.line_chart(df, x="t", y="a", color="variant", model="toy", title="t",
                               on_top="power method").to_dict()
    layers = spec["layer"]
    last = layers[-1]
    assert last["transform"] == [{"filter": "(datum['variant'] === 'power method')"}]
    assert last["mark"]["strokeDash"] == [6, 4]
    assert layers[0]["transform"] == [{"filter": "(datum['variant'] !== 'power method')"}]
    with pytest.raises(ValueError, match="not a value"):
        plotting.line_chart(df, x="t", y="a", color="variant", model="toy", title="t", on_top="nope")


def test_tick_and_legend_text_is_at_least_11_px():
    """Vega's defaults (10 px tick and legend labels, 10 px facet headers) were too small to read at a glance."""
    config = _chart().to_dict()["config"]
    for part in ("axis", "legend"):
        assert config[part]["labelFontSize"] >= 11 and config[part]["titleFontSize"] >= 12, part
    assert config["header"]["labelFontSize"] >= 11


def _blend(hex_colour: str, opacity: float) -> str:
    """``hex_colour`` drawn at ``opacity`` over a white page, as hex."""
    rgb = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(opacity * c + (1 - opacity) * 255):02x}" for c in rgb)


@pytest.mark.parametrize("cvd", [None, *_CVD])
def test_trained_line_stands_apart_from_the_twin_band(cvd):
    """The twins' band (:data:`RANDOM_COLOR` at :data:`TWIN_BAND_OPACITY` over white) against the trained blue: the
    fill a reader compares the trained line with is paler than the colour itself, and must still differ by ΔE ≥ 30
    under normal vision and each simulated dichromacy; its outline and median line are the full colour."""
    fill = _blend(plotting.RANDOM_COLOR, plotting.TWIN_BAND_OPACITY)
    for colour in (fill, plotting.RANDOM_COLOR):
        d = np.linalg.norm(_lab(plotting.TRAINED_COLOR, cvd) - _lab(colour, cvd))
        assert d >= 30, f"{cvd or 'normal vision'}: trained vs twin band {colour}: ΔE = {d:.1f}"


def test_twin_band_collapses_the_seeds_into_one_labelled_band():
    df = pd.DataFrame({
        "series": ["trained", "trained", "random init, seed 0", "random init, seed 0", "random init, seed 1",
                   "random init, seed 1", "random init, seed 2", "random init, seed 2"],
        "layer": [1, 2] * 4, "v": [5.0, 6.0, 1.0, 2.0, 3.0, 7.0, 2.0, 4.0], "panel": "A"})
    out = plotting.twin_band(df, keys=["panel", "layer"], values=["v"])
    assert list(out.series) == ["trained", "trained", "random init, 3 seeds", "random init, 3 seeds"]
    band = out[out.band].set_index("layer")
    assert band.v_min.tolist() == [1.0, 2.0] and band.v_max.tolist() == [3.0, 7.0] and band.v.tolist() == [2.0, 4.0]
    assert band.n_seeds.tolist() == [3, 3] and out[~out.band].v_min.isna().all()
    assert plotting.model_palette(out.series)[1] == [plotting.TRAINED_COLOR, plotting.RANDOM_COLOR]
    with pytest.raises(ValueError, match="not in the frame"):
        plotting.twin_band(df, keys=["nope"], values=["v"])


def test_a_frame_without_twins_is_kept_as_it_is():
    df = pd.DataFrame({"series": ["trained", "toy"], "layer": [1, 1], "v": [1.0, 2.0]})
    out = plotting.twin_band(df, keys=["layer"], values=["v"])
    assert list(out.series) == ["trained", "toy"] and not out.band.any()
