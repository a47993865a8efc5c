/* What the site's pages need for keyboard and screen-reader use that their libraries leave out
   (loaded on every page by book/_ext/accessibility.py; tests/browser/test_site_browser.py audits each page with axe-core).

   1. Vega-Embed's "…" menu beside each chart (save as SVG/PNG, view the source) opens from a <summary> that
      holds only an icon, so a screen reader announced an unnamed control: it gets a name.
   2. A code block or output that is wider than the column scrolls, and must then be reachable by keyboard.
      The pydata theme gives such boxes a tab stop when the page loads and when content is added, but not when a
      solution or a dropdown opens (a box inside one is not laid out before), so a long code line in an opened
      solution could not be scrolled without a mouse: the tab stops are updated whenever something opens. */
(function () {
  "use strict";

  var ACTIONS_NAME = "Chart actions: save as SVG or PNG, view the source";
  // the same boxes as the theme's own tab stops (pydata-sphinx-theme, addTabStopsToScrollableElements)
  var SCROLLABLE = ["pre", ".nboutput > .output_area", ".cell_output > .output", ".jp-RenderedHTMLCommon",
                    ".pst-scrollable-table-container"].join(", ");

  function nameChartMenus(root) {
    root.querySelectorAll(".vega-embed > details > summary:not([aria-label])").forEach(function (s) {
      s.setAttribute("aria-label", ACTIONS_NAME);
    });
  }

  function updateTabStops(root) {
    root.querySelectorAll(SCROLLABLE).forEach(function (el) {
      if (!el.getClientRects().length) return;  // not displayed: its turn comes when it opens
      el.tabIndex = el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight ? 0 : -1;
    });
  }

  function opened(mutation) {
    var t = mutation.target;
    return mutation.type === "attributes" && t.nodeType === 1 &&
      (t.tagName === "DETAILS" || (t.classList.contains("toggle") && !t.classList.contains("toggle-hidden")));
  }

  function start() {
    var main = document.getElementById("main-content") || document.body;
    nameChartMenus(main);
    new MutationObserver(function (mutations) {
      if (mutations.some(function (m) { return m.type === "childList" && m.addedNodes.length; })) nameChartMenus(main);
      mutations.filter(opened).forEach(function (m) { updateTabStops(m.target); });
    }).observe(main, {subtree: true, childList: true, attributes: true, attributeFilter: ["open", "class"]});
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
