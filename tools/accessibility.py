"""The built site checked for every reader: an axe-core audit, and display equations and tables that fit.

* **axe-core** (Deque's accessibility checker, vendored from the npm registry by ``make vendor`` into
  ``.vendor/axe-core``; a test tool, not part of the site) is injected into a page and run with the WCAG 2.0
  and 2.1 level A and AA rules (:data:`WCAG_TAGS`). :func:`axe_violations` returns what it finds.
* **Width**: at the desktop width no display equation (MathJax's ``mjx-container``) or table is wider than
  the text column; at a phone's width (:data:`NARROW`) one that is wider scrolls (its own box or an ancestor in
  the column has ``overflow-x: auto`` or ``scroll``) and is never cut off at the column's edge.
  :func:`wide_boxes` lists the boxes wider than the column, :func:`cut_off` those a reader cannot see whole.

Both run after :func:`open_everything`, so the tables behind a click and the solutions are checked too. By
hand, on a built site::

    python -m tools.accessibility _build/html          # every page of the table of contents
    python -m tools.accessibility _build/html book/04_jacobian_funnel
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["AXE_SCRIPT", "BLOCKING_IMPACTS", "DESKTOP", "NARROW", "WCAG_TAGS", "axe_violations", "cut_off", "describe",
           "open_everything", "wide_boxes"]

ROOT = Path(__file__).resolve().parents[1]
AXE_SCRIPT = ROOT / ".vendor" / "axe-core" / "axe.min.js"
"""axe-core's browser build, as ``make vendor`` unpacks it (pinned in the Makefile's ``AXE_VERSION``)."""
WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
"""The rule sets run: WCAG 2.0 and 2.1, levels A and AA."""
BLOCKING_IMPACTS = ("serious", "critical")
"""Violations of these impacts fail the browser test (axe also reports "minor" and "moderate")."""
DESKTOP = {"width": 1280, "height": 900}
"""The browser test's window: every display equation and table fits the text column."""
NARROW = {"width": 390, "height": 844}
"""A phone's window: wider boxes scroll, none is cut off."""

_RUN_AXE = """async (tags) => {
    const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
    return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary,
                                  html: n.html.slice(0, 160)}))}));
}"""

# Display equations (MathJax's mjx-container) and tables of the article whose content is wider than the text
# column: for each, the box that scrolls it (the box itself or an ancestor inside the article with overflow-x
# auto or scroll) or the box that cuts it off (overflow-x hidden or clip, met first on the way up). A box that
# is not displayed (a table in a closed dropdown) is skipped.
_WIDE_BOXES = """() => {
    const ox = e => getComputedStyle(e).overflowX;
    const scrolls = e => ox(e) === 'auto' || ox(e) === 'scroll';
    const name = e => !e ? null : e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
        + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
    const article = document.querySelector('article.bd-article') || document.querySelector('article');
    if (!article) return [];
    const ar = article.getBoundingClientRect(), as = getComputedStyle(article);
    const left = ar.left + parseFloat(as.paddingLeft), right = ar.right - parseFloat(as.paddingRight);
    const inColumn = r => r.left >= left - 1 && r.right <= right + 1;
    const out = [];
    for (const box of article.querySelectorAll('mjx-container[display="true"], table')) {
        if (!box.getClientRects().length) continue;
        const r = box.getBoundingClientRect();
        const inner = box.scrollWidth > box.clientWidth + 1;   // content wider than the box itself
        if (!inner && inColumn(r)) continue;
        let scroller = null, clipper = null;
        if (inner) { if (scrolls(box)) scroller = box; else if (ox(box) !== 'visible') clipper = box; }
        for (let a = box.parentElement; !scroller && !clipper && a && a !== article; a = a.parentElement) {
            if (scrolls(a)) scroller = a;
            else if (ox(a) === 'hidden' || ox(a) === 'clip') clipper = a;
        }
        const label = box.getAttribute('aria-label') || box.textContent || '';
        out.push({what: box.tagName.toLowerCase(), text: label.replace(/\\s+/g, ' ').trim().slice(0, 60),
                  width: Math.round(Math.max(r.width, box.scrollWidth)), room: Math.round(right - left),
                  scroller: name(scroller), clipper: name(clipper),
                  scroller_in_column: scroller ? inColumn(scroller.getBoundingClientRect()) : false});
    }
    return out;
}"""

# Every <details> opened and every sphinx-togglebutton box (solutions) shown, so that what they hold is
# laid out and checked too.
_OPEN_EVERYTHING = """() => {
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    document.querySelectorAll('button.toggle-button[aria-expanded="false"]').forEach(b => b.click());
}"""


def open_everything(page: Page) -> int:
    """Open every dropdown of ``page`` (``<details>``, solutions) and end their fade-in animations.

    Returns:
        How many toggles stay closed (0 when all opened). On return no finite animation is running, so what
        the audit measures (colours, opacity, sizes) is the page at rest, on a fast machine or a busy one.
    """
    from tools.site_browser import finish_animations

    page.evaluate(_OPEN_EVERYTHING)
    finish_animations(page)  # the togglebutton fades its boxes in: an audit mid-fade sees half-transparent text
    return page.evaluate("document.querySelectorAll('.toggle-hidden').length")


def axe_violations(page: Page, tags: tuple[str, ...] = WCAG_TAGS) -> list[dict[str, Any]]:
    """Run axe-core on ``page`` (already loaded and rendered) with the rule sets ``tags``.

    Returns:
        One dict per violated rule: ``id``, ``impact`` (``"minor"`` … ``"critical"``), ``help`` and ``nodes``,
        each node a dict of ``target`` (a CSS selector), ``summary`` (axe's reason) and ``html`` (its start).

    Raises:
        FileNotFoundError: axe-core is not vendored (run ``make vendor``).
    """
    if not AXE_SCRIPT.is_file():
        raise FileNotFoundError(f"axe-core is not vendored ({AXE_SCRIPT} is missing): run `make vendor`")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE_SCRIPT))  # inlined: the page makes no request for it
    return page.evaluate(_RUN_AXE, list(tags))


def wide_boxes(page: Page) -> list[dict[str, Any]]:
    """Display equations and tables of ``page``'s article that are wider than its text column.

    Returns:
        One dict per such box: ``what`` (``"mjx-container"`` or ``"table"``), ``text`` (its start), ``width``
        and ``room`` (the column's width, px), ``scroller`` (the box that scrolls it, ``None`` if none),
        ``clipper`` (the box that cuts it off, ``None`` if none) and ``scroller_in_column`` (whether that
        scrolling box itself fits the column). At the desktop width the list must be empty; at a phone's
        width each box must have a ``scroller`` in the column and no ``clipper``.
    """
    return page.evaluate(_WIDE_BOXES)


def cut_off(boxes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Those of :func:`wide_boxes`' boxes that a reader cannot see whole: cut off, or with no scrolling box that
    fits the column."""
    return [b for b in boxes if b["clipper"] or not b["scroller"] or not b["scroller_in_column"]]


def describe(violations: list[dict[str, Any]], limit: int = 3) -> str:
    """One line per rule, with up to ``limit`` of the elements it flags."""
    lines = []
    for v in violations:
        nodes = "; ".join(f"{n['target']} ({n['summary'].splitlines()[-1].strip()})" for n in v["nodes"][:limit])
        lines.append(f"[{v['impact']}] {v['id']} × {len(v['nodes'])}: {v['help']} — {nodes}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Audit the pages of a built site; exit 1 if one has a serious or critical violation, a display equation or
    table wider than the column at the desktop width, or one cut off at a phone's width."""
    from tools.site_browser import each_page, page_arguments, wait_until_rendered

    html, pages = page_arguments(__doc__.splitlines()[0], argv)
    failed = False
    for name, page in each_page(html, pages, DESKTOP):
        wait_until_rendered(page)
        closed = open_everything(page)
        found = axe_violations(page)
        wide = wide_boxes(page)
        page.set_viewport_size(NARROW)
        narrow = wide_boxes(page)
        cut = cut_off(narrow)
        blocking = [v for v in found if v["impact"] in BLOCKING_IMPACTS]
        failed |= bool(blocking or wide or cut or closed)
        print(f"{name}: {sum(len(v['nodes']) for v in blocking)} serious or critical, "
              f"{sum(len(v['nodes']) for v in found)} in all; {len(wide)} wider than the column, "
              f"at {NARROW['width']} px {len(narrow)} wider, {len(cut)} of them cut off" + (f"; {closed} toggles did not open" if closed else ""))
        if found:
            print("  " + describe(found).replace("\n", "\n  "))
        for b in wide:
            print(f"  wide {b['what']} ({b['width']} px in {b['room']} px, scrolled by {b['scroller']}): {b['text']!r}")
        for b in cut:
            print(f"  at {NARROW['width']} px: {b['what']} ({b['width']} px in {b['room']} px) cut by {b['clipper']}, "
                  f"scrolled by {b['scroller']}: {b['text']!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
