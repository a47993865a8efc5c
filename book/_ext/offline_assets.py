"""Sphinx extension: ship every script a page needs, so the site works with no network.

* **Vega.** Altair's ``html`` renderer loads Vega, Vega-Lite and Vega-Embed from a CDN unless
  ``window.VEGA_DEBUG`` already records their versions and a global ``vegaEmbed`` exists. At build
  time we write :func:`lib.page.plotting.vega_bundle_script` to one local script and load it in every
  page's ``<head>`` before any chart. Right after it, ``book/_static/charts.js`` wraps ``vegaEmbed``: a chart
  wider than its output box (a phone) is drawn again with its panels stacked and its plots narrower, never
  scaled down, so its text keeps its size; ``charts.css`` gives the charts the dark theme's colours.
* **Notebooks.** The download button offers every chapter as an executed ``.ipynb`` (which
  ``plain_notebooks.py`` then rewrites in plain Markdown, for front ends without MyST).
* **MathJax.** ``make vendor`` unpacks MathJax 3 from the npm registry into ``.vendor/mathjax``;
  this extension serves it from ``_static/mathjax`` instead of the CDN. A build without it fails
  with a message that says how to fetch it. Only MathJax goes into the site: ``.vendor`` also holds
  the browser test's accessibility checker (axe-core), which a reader has no use for.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

from lib.page.plotting import vega_bundle_script

VEGA_SCRIPT = "vega-offline.js"
CHARTS_SCRIPT = "charts.js"
"""book/_static/charts.js: wraps ``vegaEmbed`` so that a chart too wide for the screen is drawn again narrower."""
CHARTS_STYLE = "charts.css"
"""book/_static/charts.css: the charts' colours in dark mode."""
MATHJAX_ENTRY = "mathjax/tex-mml-chtml.js"


def _add_vega(app: Sphinx) -> None:
    static = Path(app.outdir).parent / "vega_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / VEGA_SCRIPT).write_text(vega_bundle_script(), encoding="utf-8")
    app.config.html_static_path.append(str(static))
    app.add_js_file(VEGA_SCRIPT, priority=100)
    # right after it, before any chart is drawn: charts that fit the reader's screen and follow the dark theme
    app.add_js_file(CHARTS_SCRIPT, priority=101)
    app.add_css_file(CHARTS_STYLE)


def _add_mathjax(app: Sphinx) -> None:
    vendor = Path(app.srcdir) / ".vendor"
    if not (vendor / MATHJAX_ENTRY).is_file():
        raise ExtensionError(
            f"MathJax is not vendored ({vendor / MATHJAX_ENTRY} is missing). Run `make vendor` "
            "(it unpacks MathJax 3 from the npm registry), or build with `make book`."
        )
    # a static folder holding only a link to .vendor/mathjax (Sphinx copies through links), so that
    # _static/mathjax/ is MathJax and nothing else of .vendor reaches the site
    static = Path(app.outdir).parent / "mathjax_static"
    static.mkdir(parents=True, exist_ok=True)
    link = static / MATHJAX_ENTRY.split("/")[0]
    if link.is_symlink():
        link.unlink()
    link.symlink_to((vendor / MATHJAX_ENTRY).parent.resolve(), target_is_directory=True)
    app.config.html_static_path.append(str(static))
    app.config.mathjax_path = MATHJAX_ENTRY


def _dedupe_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Drop repeated inline scripts (sphinx-thebe registers its config twice under Jupyter Book 1,
    which redeclares a ``const`` and logs a console error on every page)."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for js in context.get("script_files", []):
        # an inline script is registered once with filename None and once with "": same script
        key = (str(getattr(js, "filename", js) or ""), repr(sorted(getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    context["script_files"] = unique


def _offer_ipynb(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: object) -> None:
    """Let the download button offer each chapter as an executed ``.ipynb``.

    sphinx-book-theme does this only when a launch service (Binder, Colab, …) is configured; the
    book has none, so we copy myst-nb's executed notebook next to the page sources ourselves; at the end
    of the build ``plain_notebooks.py`` renders its markdown for front ends without MyST.
    """
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _on_builder_inited(app: Sphinx) -> None:
    if app.builder.format != "html":
        return
    _add_vega(app)
    _add_mathjax(app)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _on_builder_inited)
    app.connect("html-page-context", _dedupe_scripts, priority=999)  # after sphinx-thebe adds its copy
    app.connect("html-page-context", _offer_ipynb, priority=400)  # before the theme draws its buttons
    return {"parallel_read_safe": True, "parallel_write_safe": True}
