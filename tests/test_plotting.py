"""Charts render with no network: in the site (tested in test_site_browser) and in JupyterLab.

The JupyterLab renderer is checked the way JupyterLab shows it: its HTML output, alone in a page,
opened in headless Chromium, must draw an SVG without any request leaving the page.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from lib import plotting

CHROMIUM = "/usr/bin/chromium"


def _chart() -> alt.Chart:
    data = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
    return plotting.titled(alt.Chart(data).mark_line().encode(x="x:Q", y="y:Q"), "test", "toy")


def test_renderer_choice(monkeypatch):
    monkeypatch.setenv(plotting.BOOK_BUILD_ENV, "1")
    assert plotting.configure_renderer() == "html"
    monkeypatch.delenv(plotting.BOOK_BUILD_ENV)
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


@pytest.mark.browser
def test_jupyterlab_output_renders_offline(tmp_path: Path):
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed")
    from playwright.sync_api import sync_playwright

    html = plotting._OfflineHtmlRenderer()(_chart().to_dict())["text/html"]
    page_file = tmp_path / "out.html"
    page_file.write_text(f"<!doctype html><html><body>{html}</body></html>", encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        outside: list[str] = []
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith("file://") else None)
        page.goto(page_file.as_uri())
        page.wait_for_selector(".vega-embed svg", timeout=15000)
        browser.close()
    assert not outside, outside


def test_progress_bars_are_silent_in_the_book_build(monkeypatch, capsys):
    """A widget progress bar would be a dead widget view in the static site, a text one a wall of lines."""
    import tqdm.std

    from lib.progress import progress

    monkeypatch.setenv(plotting.BOOK_BUILD_ENV, "1")
    bar = progress(range(3), desc="work")
    assert type(bar) is tqdm.std.tqdm and list(bar) == [0, 1, 2]
    assert "work" not in capsys.readouterr().err
    monkeypatch.delenv(plotting.BOOK_BUILD_ENV)
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


def test_coupling_chart_panels_show_only_their_own_model():
    """Each facet panel is that model's rows: no layer keeps data of its own inside the facet."""
    from lib import funnel_plots

    df = pd.DataFrame({"model": ["A", "A", "B", "B"], "series": ["trained"] * 4, "layer": [1, 2, 1, 2],
                       "depth": [0.5, 1.0, 0.5, 1.0], "r_s": [0.1, 0.2, -0.1, -0.2], "q": [0.01, 0.5, 0.01, 0.5],
                       "p_relabel": [0.3] * 4})
    spec = funnel_plots.coupling_chart(df, title="t", model="m").to_dict()
    assert "facet" in spec and all("data" not in layer for layer in spec["spec"]["layer"])


def test_titled_and_side_by_side_charts_carry_a_description():
    df = pd.DataFrame({"x": [0, 1], "y": [1, 2]})
    a = plotting.titled(alt.Chart(df).mark_line().encode(x="x", y="y"), "Error against depth", "toy (d = 8)")
    assert a.to_dict()["description"] == "Error against depth, for toy (d = 8)."
    b = plotting.titled(alt.Chart(df).mark_point().encode(x="x", y="y"), "Rate", "toy", description="Two points.")
    both = plotting.side_by_side(a, b, vertical=True).to_dict()
    assert both["description"] == "Panel 1: Error against depth, for toy (d = 8). Panel 2: Two points."
    assert "vconcat" in both and both["resolve"]["scale"] == {"color": "independent", "opacity": "independent"}
