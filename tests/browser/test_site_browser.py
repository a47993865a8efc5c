"""The built site as a reader sees it, in headless Chromium (Debian's, never a downloaded browser).

For every page of the table of contents: no request leaves 127.0.0.1, no console error, every chart
container holds a rendered SVG or canvas with no label cut short, no axis title glued from a column
name, and no wider than its output box; no output table or printed output hides anything behind a
horizontal scroll; every Altair slider changes its chart, math is typeset, and no output shows a
traceback. A full-page screenshot of each page is saved in ``test-artifacts/``.

Then, with every dropdown and solution opened, each page must serve every reader (``tools/accessibility.py``):
axe-core (the real checker, ``make vendor``) finds no serious or critical violation of the WCAG 2.0/2.1 A and
AA rules; at the desktop width no display equation or table is wider than the text column; at a phone's width
a wider one scrolls and none is cut off at the column's edge.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from conftest import ROOT, toc_pages

from tools import accessibility as a11y
from tools.site_browser import wait_until_rendered

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def axe_ready():
    """axe-core is vendored (``make test`` runs ``make vendor`` first); skipped without it outside CI."""
    if not a11y.AXE_SCRIPT.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{a11y.AXE_SCRIPT} is missing in CI; `make test` vendors it (`make vendor`)")
        pytest.skip(f"axe-core is not vendored ({a11y.AXE_SCRIPT}): run `make vendor`")


_ALL_DRAWN = "() => [...document.querySelectorAll('.vega-embed')].every(e => e.querySelector('svg, canvas'))"
_REDRAWN = "([i, before]) => { const e = document.querySelectorAll('.vega-embed')[i]; return !!e && e.innerHTML !== before; }"


def _wait_quietly(page, predicate: str, arg, timeout_ms: int) -> None:
    """Wait until ``predicate`` holds, at most ``timeout_ms``; the assertion after it says what did not happen."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(predicate, arg=arg, timeout=timeout_ms)


def _svg_markup(page, index: int) -> str:
    return page.evaluate(
        "(i) => { const el = document.querySelectorAll('.vega-embed')[i]; return el ? el.innerHTML : ''; }", index
    )


@pytest.mark.parametrize("page_name", toc_pages())
def test_page_in_browser(browser, site_url, axe_ready, page_name):
    page = browser.new_page(viewport=a11y.DESKTOP)
    outside: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((site_url, "data:", "blob:")) else None)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.goto(f"{site_url}/{page_name}.html", wait_until="load")
    # charts: every Vega container rendered (waited for, up to 60 s on a busy machine, then counted)
    _wait_quietly(page, _ALL_DRAWN, None, 60_000)
    n_charts = page.evaluate("document.querySelectorAll('.vega-embed').length")
    n_rendered = page.evaluate(
        "[...document.querySelectorAll('.vega-embed')].filter(e => e.querySelector('svg, canvas')).length"
    )
    assert n_rendered == n_charts, f"{page_name}: {n_charts - n_rendered} of {n_charts} charts did not render"

    # charts: no label cut short (Vega ends a truncated text with "…" right after a character; a
    # deliberate ", …" in a label is fine) and no chart wider than the article column
    cut = page.evaluate(
        "[...document.querySelectorAll('.vega-embed svg text')].map(t => t.textContent).filter(s => /[^\\s,]…$/.test(s))"
    )
    assert not cut, f"{page_name}: chart texts cut short: {cut[:3]}"
    # charts: no axis title glued from a raw column name (Vega-Lite joins the titles of a chart's
    # layers, so an error-bar layer without its own title reads "gamma_lo, γ_t = …", a reference
    # line drawn from a column "x" reads "x, gap ratio")
    glued = page.evaluate(
        "[...document.querySelectorAll('.vega-embed .role-axis-title text')].map(t => t.textContent)"
        ".filter(s => /(^|, )[A-Za-z0-9_]+, /.test(s))"
    )
    assert not glued, f"{page_name}: axis titles joined with a column name: {glued[:3]}"
    # (measured against the cell's output box, which scrolls: the article itself is wider than that
    # box, and Altair's embed puts its actions button beside the chart, not over it)
    too_wide = page.evaluate(
        """[...document.querySelectorAll('.vega-embed')].map(e => e.parentElement)
             .filter(p => p.scrollWidth > p.clientWidth + 1)
             .map(p => [p.scrollWidth, p.clientWidth, (p.querySelector('.role-title-text text') || {}).textContent])"""
    )
    assert not too_wide, f"{page_name}: charts wider than their output box [px, px, title]: {too_wide}"
    # output tables fit their cell (no last columns hidden behind a horizontal scroll)
    wide_tables = page.evaluate(
        """[...document.querySelectorAll('article .cell_output table')]
             .filter(t => t.scrollWidth > t.parentElement.clientWidth + 1)
             .map(t => [t.scrollWidth, t.parentElement.clientWidth, t.innerText.slice(0, 40)])"""
    )
    assert not wide_tables, f"{page_name}: output tables wider than the column: {wide_tables}"
    # printed output wraps (outputs.css): no line of it hidden behind a horizontal scroll
    wide_text = page.evaluate(
        """[...document.querySelectorAll('article .cell_output pre')]
             .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.innerText.slice(0, 60))"""
    )
    assert not wide_text, f"{page_name}: printed output wider than the column: {wide_text}"

    # sliders: each Altair range input changes the markup of its chart
    sliders = page.evaluate(
        """[...document.querySelectorAll('.vega-embed')].map((e, i) =>
             [...e.querySelectorAll('.vega-bindings input[type=range]')].map((s, k) => [i, k])).flat()"""
    )
    for chart_i, slider_k in sliders:
        before = _svg_markup(page, chart_i)
        page.evaluate(
            """([i, k]) => { const s = document.querySelectorAll('.vega-embed')[i]
                                 .querySelectorAll('.vega-bindings input[type=range]')[k];
                             const lo = +s.min, hi = +s.max, v = +s.value;
                             s.value = (v - lo) > (hi - lo) / 2 ? lo : hi;
                             s.dispatchEvent(new Event('input', {bubbles: true}));
                             s.dispatchEvent(new Event('change', {bubbles: true})); }""",
            [chart_i, slider_k],
        )
        _wait_quietly(page, _REDRAWN, [chart_i, before], 30_000)  # Vega redraws asynchronously
        assert _svg_markup(page, chart_i) != before, f"{page_name}: slider {slider_k} of chart {chart_i} changed nothing"

    # math typeset by the site's own MathJax
    has_math = page.evaluate("document.querySelectorAll('.math, span.math, div.math').length") > 0
    if has_math:
        page.wait_for_function("document.querySelectorAll('mjx-container').length > 0", timeout=15000)

    # widgets: the static site shows no widget view (it would be dead without a kernel)
    n_widget_views = page.evaluate(
        "document.querySelectorAll('script[type=\"application/vnd.jupyter.widget-view+json\"]').length"
    )
    assert n_widget_views == 0, f"{page_name}: {n_widget_views} widget views would render as broken widgets"

    text = page.inner_text("body")
    assert "Traceback (most recent call last)" not in text, page_name

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{page_name.replace('/', '_')}.png"), full_page=True)

    # for every reader: with the dropdowns and solutions open, axe-core's WCAG 2 A/AA audit, and every
    # display equation and table inside the column (at a phone's width: scrolling, never cut off)
    wait_until_rendered(page)
    still_closed = a11y.open_everything(page)
    violations = a11y.axe_violations(page)
    wide = a11y.wide_boxes(page)
    page.set_viewport_size(a11y.NARROW)
    cut = a11y.cut_off(a11y.wide_boxes(page))
    page.close()
    assert not outside, f"{page_name}: requests left 127.0.0.1: {sorted(set(outside))[:5]}"
    assert not errors, f"{page_name}: console errors: {errors[:5]}"
    assert still_closed == 0, f"{page_name}: {still_closed} solutions or dropdowns did not open"
    blocking = [v for v in violations if v["impact"] in a11y.BLOCKING_IMPACTS]
    assert not blocking, f"{page_name}: axe-core finds WCAG 2 A/AA violations:\n{a11y.describe(blocking)}"
    assert not wide, f"{page_name}: display equations or tables wider than the text column at 1280 px: {wide}"
    assert not cut, f"{page_name}: at {a11y.NARROW['width']} px, cut off instead of scrolling: {cut}"


def test_screenshots_saved(browser, site_url):
    """Every page left a screenshot artifact (run after the per-page tests)."""
    missing = [p for p in toc_pages() if not (ARTIFACTS / f"{p.replace('/', '_')}.png").is_file()]
    assert not missing, missing


def test_site_ships_no_test_tools(built_site):
    """axe-core lives in .vendor beside MathJax, but only MathJax is served by the site."""
    static = built_site / "_static"
    assert (static / "mathjax" / "tex-mml-chtml.js").is_file()
    assert not list(static.rglob("axe*.js")), "the site ships the accessibility checker"


# The checks themselves find what they are for, on small pages of their own (no built site needed).
_CLIPPED_PAGE = """<!doctype html><html lang="en"><head><title>t</title></head><body><main>
<article class="bd-article" style="width: 400px; padding: 0 20px">
  <div class="math" style="overflow: hidden"><mjx-container display="true" id="cut" style="display: block">
    <span style="display: inline-block; width: 600px">wide equation</span></mjx-container></div>
  <div style="overflow-x: auto"><mjx-container display="true" id="scrolls" style="display: block">
    <span style="display: inline-block; width: 600px">scrolled equation</span></mjx-container></div>
  <mjx-container display="true" style="display: block"><span>narrow equation</span></mjx-container>
  <div style="overflow-x: auto"><table><tr><td style="min-width: 500px">wide table</td></tr></table></div>
  <details><summary></summary><table><tr><td>hidden until opened</td></tr></table></details>
</article></main></body></html>"""


def test_width_check_finds_cut_and_scrolling_boxes(browser):
    page = browser.new_page(viewport=a11y.DESKTOP)
    page.set_content(_CLIPPED_PAGE)
    wide = {b["text"]: b for b in a11y.wide_boxes(page)}
    assert set(wide) == {"wide equation", "scrolled equation", "wide table"}
    assert [b["text"] for b in a11y.cut_off(list(wide.values()))] == ["wide equation"]
    assert wide["wide equation"]["clipper"] == "div.math" and wide["wide table"]["scroller"] == "div"
    assert a11y.open_everything(page) == 0
    page.close()


def test_axe_finds_a_nameless_summary(browser, axe_ready):
    page = browser.new_page(viewport=a11y.DESKTOP)
    page.set_content(_CLIPPED_PAGE)
    found = {v["id"]: v for v in a11y.axe_violations(page)}
    page.close()
    assert found["summary-name"]["impact"] in a11y.BLOCKING_IMPACTS


_FADING_PAGE = """<html lang="en"><head><title>fade</title><style>
  @keyframes fade-in { from { opacity: 0; } to { opacity: 1; } }
  details[open] p { animation: fade-in 60s linear; color: #000; background: #fff; }
</style></head><body><main><details><summary>Open me</summary><p>a link-coloured line</p></details></main></body></html>"""


def test_audit_sees_the_page_at_rest(browser, axe_ready):
    """A dropdown that fades in (sphinx-togglebutton's 0.3 s fade, here 60 s) is audited at full opacity, never
    mid-fade: CI's axe run once measured half-faded links on the Results page as a contrast fault."""
    page = browser.new_page(viewport=a11y.DESKTOP)
    page.set_content(_FADING_PAGE)
    assert a11y.open_everything(page) == 0
    assert page.evaluate("getComputedStyle(document.querySelector('p')).opacity") == "1"
    assert "color-contrast" not in {v["id"] for v in a11y.axe_violations(page)}
    page.close()
