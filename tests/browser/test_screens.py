"""The built site on every screen (``tools/screens.py``), in headless Chromium (Debian's, never a downloaded browser).

For every page of the table of contents, at a phone's width (390 px): nothing reaches past the window's right edge
(the page never scrolls sideways; a wide equation, code line or table scrolls inside its own box), every chart fits
its output box (``book/_static/charts.js`` stacks its panels and narrows its plots), and every chart's axis and
legend text is at least 11 px on the screen; in dark mode no chart keeps a white background or black text
(``book/_static/charts.css``); back at the desktop width each chart is drawn as the book made it. The Results page
shows its picture (the one-line-per-claim overview) above its tables, with every verdict in view on a phone.

The checks themselves are shown to fail on small pages of their own: a chart in Vega's default theme (10 px text)
or with 9 px labels, drawn without ``charts.js`` and ``charts.css``, is too wide for a phone, too small and white
in dark mode, and a wide block with no scrolling box overflows the page.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, toc_pages

from tools import screens
from tools.accessibility import DESKTOP
from tools.site_browser import finish_animations

pytestmark = [pytest.mark.slow, pytest.mark.browser]

STATIC = ROOT / "book" / "_static"


# -- the checks on pages of their own (no built site needed) ------------------------------------------------------

_PAGE = """<!doctype html><html lang="en" data-theme="light"><head><meta charset="utf-8"><title>t</title>
<style>body {{ margin: 0 }} article {{ padding: 0 16px }} .cell_output {{ overflow-x: auto }}
  /* as pydata-sphinx-theme 0.17 does: HTML outputs on a light panel in dark mode */
  html[data-theme=dark] body {{ background: #14181e }}
  html[data-theme=dark] .bd-content div.cell_output .text_html:not(:has(table.dataframe)) {{ background-color: #ced6dd }}
</style></head>
<body><main class="bd-content"><article class="bd-article">
  <div class="cell_output"><div class="output text_html"><div id="chart"></div></div></div>
  {extra}
</article></main></body></html>"""


def _eigenvalue_spec(theme: str) -> dict:
    """Chapter 1's kind of chart (six panels, three a row, about 630 px wide) in the book's theme, in Vega's
    default sizes (``"vega"``: 10 px tick and legend labels) or with 9 px labels (``"9px"``)."""
    from lib.page.plotting import eigenvalue_chart

    lams = np.exp(2j * np.pi * np.arange(6 * 12).reshape(6, 12) / 12) * np.linspace(1, 0.2, 12)
    spec = eigenvalue_chart(lams, model="toy matrix").to_dict()
    for part in ("axis", "legend", "header"):
        spec["config"].get(part, {}).pop("labelFontSize", None)
        spec["config"].get(part, {}).pop("titleFontSize", None)
    if theme == "9px":
        spec["config"]["axis"]["labelFontSize"] = spec["config"]["legend"]["labelFontSize"] = 9
    return spec


def _chart_page(browser, spec: dict, *, site_scripts: bool, extra: str = ""):
    """A phone-sized page holding one chart drawn by the site's Vega (with or without charts.js and charts.css)."""
    from lib.page.plotting import vega_bundle_script

    page = browser.new_page(viewport=screens.PHONE)
    page.set_content(_PAGE.format(extra=extra))
    page.add_script_tag(content=vega_bundle_script())
    if site_scripts:
        page.add_script_tag(path=str(STATIC / "charts.js"))
        page.add_style_tag(path=str(STATIC / "charts.css"))
    page.evaluate("(spec) => vegaEmbed('#chart', spec, {mode: 'vega-lite'}).then(() => true)", spec)
    screens.settle_charts(page)
    return page


@pytest.mark.parametrize("theme", ["vega", "9px"])
def test_checks_flag_a_chart_drawn_as_before(browser, theme):
    wide_block = '<div style="width: 600px">a wide block</div><div style="overflow-x: auto"><div style="width: 600px">scrolls</div></div>'
    page = _chart_page(browser, _eigenvalue_spec(theme), site_scripts=False, extra=wide_block)
    over, too_wide, small = screens.overflowing(page), screens.charts_too_wide(page), screens.small_chart_text(page)
    screens.dark_mode(page)
    glaring = screens.glaring_charts(page)
    page.close()
    assert [e["text"] for e in over["elements"]] == ["a wide block"] and over["page_width"] > over["window"]
    assert too_wide and too_wide[0]["width"] > 600 and too_wide[0]["room"] < 360
    assert {s["role"] for s in small} == {"role-axis-label", "role-legend-label"}
    assert {s["px"] for s in small} == ({10.0} if theme == "vega" else {9.0})
    assert glaring and glaring[0]["background_luminance"] == 1 and glaring[0]["dark_texts"] > 10


def test_book_chart_fits_a_phone_and_follows_dark_mode(browser):
    from lib.page.plotting import eigenvalue_chart

    lams = np.exp(2j * np.pi * np.arange(6 * 12).reshape(6, 12) / 12) * np.linspace(1, 0.2, 12)
    spec = eigenvalue_chart(lams, model="a model label long enough to need two lines on a phone " * 2).to_dict()
    page = _chart_page(browser, spec, site_scripts=True)
    assert screens.charts_too_wide(page) == [] and screens.small_chart_text(page) == []
    assert screens.overflowing(page)["elements"] == []
    screens.dark_mode(page)
    assert screens.glaring_charts(page) == []
    page.set_viewport_size(DESKTOP)  # a wider window: drawn as the book made it again, three panels a row
    screens.settle_charts(page)
    width = page.evaluate("document.querySelector('#chart svg.marks').getBoundingClientRect().width")
    page.close()
    assert width > 600


def test_a_grid_of_panels_per_model_and_quantity_stacks_on_a_phone(browser):
    """Chapter 6's saturation chart (two models by two quantities) was a row × column grid, which stayed 433 px
    wide in a 320 px box; as one wrapped facet it stacks."""
    from lib.page.two_views_saturation import SATURATION_QUANTITIES, saturation_chart

    rows = [{"model": m, "weights": w, "quantity": q, "ratio": r, "alpha": r, "value": 0.5, "lo": 0.4, "hi": 0.6}
            for m in ("all-MiniLM-L6-v2", "book-decoder") for w in ("trained", "random init, seed 0")
            for q in SATURATION_QUANTITIES.values() for r in (1.0, 10.0, 100.0)]
    page = _chart_page(browser, saturation_chart(pd.DataFrame(rows), model="toy").to_dict(), site_scripts=True)
    too_wide, small = screens.charts_too_wide(page), screens.small_chart_text(page)
    page.close()
    assert too_wide == [] and small == []


# -- every page of the built site ----------------------------------------------------------------------------------

@pytest.mark.parametrize("page_name", toc_pages())
def test_page_on_a_phone_and_in_dark_mode(browser, site_url, page_name):
    page = browser.new_page(viewport=screens.PHONE)
    page.set_default_timeout(120_000)
    page.goto(f"{site_url}/{page_name}.html", wait_until="load")
    screens.settle_charts(page)
    over, too_wide, small = screens.overflowing(page), screens.charts_too_wide(page), screens.small_chart_text(page)
    screens.dark_mode(page)
    glaring = screens.glaring_charts(page)
    page.set_viewport_size(DESKTOP)
    screens.settle_charts(page)
    small_desktop, too_wide_desktop = screens.small_chart_text(page), screens.charts_too_wide(page)
    page.close()
    assert not over["elements"], f"{page_name}: at 390 px, past the window's edge: {over['elements'][:5]}"
    assert over["page_width"] <= over["window"], f"{page_name}: the page scrolls sideways at 390 px: {over}"
    assert not too_wide, f"{page_name}: at 390 px, charts wider than their box: {too_wide[:5]}"
    assert not small, f"{page_name}: chart text under {screens.MIN_TEXT_PX:g} px at 390 px: {small[:5]}"
    assert not glaring, f"{page_name}: in dark mode, charts with a white background or black text: {glaring[:5]}"
    assert not small_desktop, f"{page_name}: chart text under {screens.MIN_TEXT_PX:g} px at 1280 px: {small_desktop[:5]}"
    assert not too_wide_desktop, f"{page_name}: at 1280 px, charts wider than their box: {too_wide_desktop[:5]}"


def test_results_page_shows_its_picture_first_with_every_verdict_in_view(browser, site_url):
    page = browser.new_page(viewport=screens.PHONE)
    page.goto(f"{site_url}/book/results.html", wait_until="load")
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    finish_animations(page)
    layout = page.evaluate("""() => {
        const top = e => e.getBoundingClientRect().top + window.scrollY;
        const overview = document.querySelector('.claims-overview');
        const tables = [...document.querySelectorAll('table.claims-table')];
        const verdicts = [...document.querySelectorAll('.claims-overview td.verdict')].map(td => {
            const r = td.getBoundingClientRect();
            return {text: td.innerText.trim(), left: r.left, right: r.right, shown: r.width > 0 && r.height > 0};
        });
        return {overview: overview ? top(overview) : null, first_table: tables.length ? Math.min(...tables.map(top)) : null,
                window: document.documentElement.clientWidth, verdicts};
    }""")
    page.close()
    assert layout["overview"] is not None and layout["first_table"] is not None, layout
    assert layout["overview"] < layout["first_table"], "the Results page's overview is not above its tables"
    verdicts = layout["verdicts"]
    assert verdicts and all(v["text"] for v in verdicts)
    hidden = [v for v in verdicts if not v["shown"] or v["left"] < 0 or v["right"] > layout["window"] + 1]
    assert not hidden, f"verdicts out of view at 390 px: {hidden[:3]}"


# -- search results ------------------------------------------------------------------------------------------------

_RAW_TEX = r"\\[A-Za-z()\[\]|]|[_^]\{"


def test_search_snippets_read_tex_as_text(browser):
    page = browser.new_page()
    page.set_content("<!doctype html><html><body></body></html>")
    page.add_script_tag(path=str(STATIC / "search_snippets.js"))
    samples = [r"the ratio \(|\lambda_2|/|\lambda_1|\) of", r"\(\lVert W \rVert_2 \le 1\)",
               r"\[ J_{\mathrm{mlp}} S + x^{\top} \mathbb{R}^{d\times d} \]", r"\(\frac{1}{\sqrt{d}}\), \(\sigma_{\min}(A)\)"]
    plain = [page.evaluate("(t) => window.spectralPlainTex(t)", t) for t in samples]
    page.close()
    assert plain == ["the ratio |λ₂|/|λ₁| of", "‖ W ‖₂ ≤ 1", " Jₘₗₚ S + xᵀ ℝ^(d× d) ", "1/(√d), σₘᵢₙ(A)"]


def test_search_results_show_no_raw_tex(browser, site_url):
    import re

    page = browser.new_page(viewport=DESKTOP)
    page.goto(f"{site_url}/search.html?q=eigenvalue", wait_until="load")
    page.wait_for_function("document.querySelectorAll('#search-results p.context').length >= 3", timeout=60_000)
    page.wait_for_timeout(500)
    snippets = page.evaluate("[...document.querySelectorAll('#search-results p.context')].map(p => p.textContent)")
    page.close()
    raw = [s for s in snippets if re.search(_RAW_TEX, s)]
    assert not raw, f"search snippets with raw TeX: {raw[:3]}"
