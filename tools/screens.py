"""The built site on every screen: what a reader sees at a phone's width and in dark mode, measured in Chromium.

* :func:`overflowing`: elements of a page that reach past the window's right edge with no box inside the page that
  scrolls or holds them (at 390 px nothing may: the page itself must never scroll sideways).
* :func:`charts_too_wide`: charts drawn wider than their output box (``book/_static/charts.js`` stacks their
  panels and narrows their plots on a small screen).
* :func:`small_chart_text`: axis and legend text of the charts drawn smaller than :data:`MIN_TEXT_PX` on the screen
  (the font size times the scale at which the chart's SVG is shown).
* :func:`glaring_charts`: in dark mode, charts still drawn on a white or light background or with black text.

``tests/browser/test_screens.py`` runs them on every page of the built site. By hand::

    python -m tools.screens _build/html                      # every page of the table of contents
    python -m tools.screens _build/html book/04_jacobian_funnel
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["CHART_TEXT_ROLES", "MIN_TEXT_PX", "PHONE", "charts_too_wide", "dark_mode", "glaring_charts",
           "overflowing", "settle_charts", "small_chart_text"]

PHONE = {"width": 390, "height": 844}
"""A phone's window (an iPhone 12 to 15 held upright)."""
MIN_TEXT_PX = 11.0
"""The smallest axis or legend text a chart may show, in CSS px on the screen."""
CHART_TEXT_ROLES = ("role-axis-label", "role-axis-title", "role-legend-label", "role-legend-title")
"""Vega's classes of the groups holding axis and legend text."""

_OVERFLOWING = """() => {
    const vw = document.documentElement.clientWidth;
    const ox = e => getComputedStyle(e).overflowX;
    const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
        + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\\s+/).slice(0, 3).join('.') : '');
    const past = e => e.getBoundingClientRect().right > vw + 1;
    const flagged = new Set(), out = [];
    for (const e of document.body.querySelectorAll('*')) {
        if (e.ownerSVGElement) continue;   // an SVG counts as one box (its own overflow is hidden)
        if (!e.getClientRects().length || !past(e) || e.getBoundingClientRect().width < 1) continue;
        if (getComputedStyle(e).visibility === 'hidden') continue;
        // held: a box on the way up that scrolls or clips it and itself ends inside the window (a table's scroller)
        let held = false;
        for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
            if (getComputedStyle(a).position === 'fixed' && a.getBoundingClientRect().left >= vw) { held = true; break; }
            if (ox(a) !== 'visible' && !past(a)) { held = true; break; }
        }
        if (held) continue;
        flagged.add(e);
        if (e.parentElement && flagged.has(e.parentElement)) continue;   // its box is reported already
        const r = e.getBoundingClientRect();
        out.push({element: name(e), right: Math.round(r.right), width: Math.round(r.width), window: vw,
                  text: (e.innerText || e.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 60)});
    }
    return {page_width: document.documentElement.scrollWidth, window: vw, elements: out};
}"""

_CHART_TITLE = """const title = e => (([...e.querySelectorAll('.role-title-text text')].pop() || {}).textContent || '').slice(0, 60);"""

_TOO_WIDE = """() => {
    """ + _CHART_TITLE + """
    return [...document.querySelectorAll('.vega-embed')].filter(e => e.getClientRects().length).map(e => {
        const svg = e.querySelector('svg.marks, canvas.marks');
        const box = e.parentElement, bs = getComputedStyle(box), es = getComputedStyle(e);
        const room = box.clientWidth - parseFloat(bs.paddingLeft) - parseFloat(bs.paddingRight)
            - parseFloat(es.paddingLeft) - parseFloat(es.paddingRight);
        return {title: title(e), width: svg ? Math.round(svg.getBoundingClientRect().width) : 0, room: Math.round(room)};
    }).filter(c => c.width > c.room + 1);
}"""

_SMALL_TEXT = """([roles, minPx]) => {
    """ + _CHART_TITLE + """
    const out = [];
    for (const e of document.querySelectorAll('.vega-embed')) {
        const svg = e.querySelector('svg.marks');
        if (!svg || !svg.getClientRects().length) continue;
        const vb = svg.viewBox && svg.viewBox.baseVal, drawn = svg.getBoundingClientRect().width;
        const scale = vb && vb.width ? drawn / vb.width : 1;
        for (const t of svg.querySelectorAll(roles.map(r => '.' + r + ' text').join(', '))) {
            if (!t.textContent.trim()) continue;
            const px = parseFloat(getComputedStyle(t).fontSize) * scale;
            if (px < minPx - 0.05) out.push({title: title(e), role: t.closest(roles.map(r => '.' + r).join(', ')).classList
                .value.split(' ').find(c => roles.includes(c)), text: t.textContent.slice(0, 40), px: Math.round(px * 10) / 10});
        }
    }
    return out;
}"""

_GLARING = """() => {
    """ + _CHART_TITLE + """
    const lum = c => { const m = c.match(/[\\d.]+/g); if (!m) return null;
        const [r, g, b, a] = m.map(Number); if (a === 0) return null;
        const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
    const out = [];
    for (const e of document.querySelectorAll('.vega-embed')) {
        const svg = e.querySelector('svg.marks');
        if (!svg || !svg.getClientRects().length) continue;
        let bg = null;   // the first background behind the chart that is not transparent: its own, or a box's
        for (let a = svg; a && bg === null; a = a.parentElement) bg = lum(getComputedStyle(a).backgroundColor);
        const dark = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()
            && (lum(getComputedStyle(t).fill) ?? 1) < 0.05).length;
        if ((bg !== null && bg > 0.5) || dark) out.push({title: title(e), background_luminance: bg, dark_texts: dark});
    }
    return out;
}"""


_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
"""Resolves after two rendered frames: every ResizeObserver callback due for a layout change has run by then."""


def settle_charts(page: Page, timeout_ms: int = 30_000) -> None:
    """Wait until every chart of ``page`` is drawn and none is being drawn again to fit (``charts.js``)."""
    from tools.site_browser import wait_until_rendered

    wait_until_rendered(page, timeout_ms)
    for _ in range(2):  # a resize is seen a frame later (ResizeObserver), and a refit may draw twice
        page.evaluate(_TWO_FRAMES)
        page.wait_for_function("() => !(window.vegaEmbed && window.vegaEmbed.refitting) || window.vegaEmbed.refitting() === 0",
                               timeout=timeout_ms)
    wait_until_rendered(page, timeout_ms)


def overflowing(page: Page) -> dict[str, Any]:
    """What of ``page`` reaches past the window's right edge.

    Returns:
        ``page_width`` (the document's scroll width, px), ``window`` (the window's width) and ``elements``: one dict
        per outermost element past the right edge that no scrolling or clipping box inside the window holds, with
        ``element`` (tag, id, classes), ``right`` and ``width`` (px) and ``text`` (its start). Nothing overflows
        when ``elements`` is empty and ``page_width <= window``.
    """
    return page.evaluate(_OVERFLOWING)


def charts_too_wide(page: Page) -> list[dict[str, Any]]:
    """Charts of ``page`` drawn wider than the room of their output box: ``title``, ``width`` and ``room`` (px)."""
    return page.evaluate(_TOO_WIDE)


def small_chart_text(page: Page, min_px: float = MIN_TEXT_PX) -> list[dict[str, Any]]:
    """Axis and legend texts (:data:`CHART_TEXT_ROLES`) of ``page``'s charts shown smaller than ``min_px`` CSS px:
    ``title`` (the chart's), ``role``, ``text`` and ``px`` (font size times the SVG's scale on the screen)."""
    return page.evaluate(_SMALL_TEXT, [list(CHART_TEXT_ROLES), min_px])


def dark_mode(page: Page) -> None:
    """Switch ``page`` to the theme's dark mode, as its colour-mode button does (pydata-sphinx-theme)."""
    from tools.site_browser import finish_animations

    page.evaluate("""() => { document.documentElement.dataset.theme = 'dark';
                             document.documentElement.dataset.mode = 'dark'; }""")
    finish_animations(page)  # the theme's colour transitions


def glaring_charts(page: Page) -> list[dict[str, Any]]:
    """Charts of ``page`` drawn on a light background (relative luminance over 0.5: the SVG's own, or the first box
    behind it that has one, such as the theme's panel under HTML outputs) or with near-black text: ``title``,
    ``background_luminance`` (``None`` when nothing behind it has a colour) and ``dark_texts`` (how many)."""
    return page.evaluate(_GLARING)


def main(argv: list[str] | None = None) -> int:
    """Check the pages of a built site at :data:`PHONE`'s width and in dark mode; exit 1 if one fails."""
    from tools.site_browser import each_page, page_arguments

    html, pages = page_arguments(__doc__.splitlines()[0], argv)
    failed = False
    for name, page in each_page(html, pages, PHONE):
        settle_charts(page)
        over, wide, small = overflowing(page), charts_too_wide(page), small_chart_text(page)
        dark_mode(page)
        glaring = glaring_charts(page)
        bad = over["elements"] or over["page_width"] > over["window"] or wide or small or glaring
        failed |= bool(bad)
        print(f"{name}: page {over['page_width']} px in {over['window']}; {len(over['elements'])} elements past "
              f"the edge, {len(wide)} charts too wide, {len(small)} chart texts under {MIN_TEXT_PX:g} px, "
              f"{len(glaring)} charts glaring in dark mode")
        for item in [*over["elements"], *wide, *small[:5], *glaring]:
            print(f"  {item}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
