"""Sphinx extension: ship Vega, Vega-Lite and Vega-Embed with the site so charts render offline.

Altair's ``html`` renderer loads its three scripts from a CDN unless ``window.VEGA_DEBUG`` already
records their versions and a global ``vegaEmbed`` exists. At build time we write one local script,
made from ``vl_convert.javascript_bundle()`` (which defines ``window.vegaEmbed``, ``window.vega`` and
``window.vegaLite``) wrapped in a function, followed by the version record Altair checks, and load
it in every page's ``<head>`` before any chart.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import vl_convert as vlc
from sphinx.application import Sphinx

SCRIPT = "vega-offline.js"


def _write_bundle(app: Sphinx) -> None:
    static = Path(app.outdir).parent / "vega_static"
    static.mkdir(parents=True, exist_ok=True)
    bundle = vlc.javascript_bundle(vl_version=alt.VEGALITE_VERSION.rsplit(".", 1)[0])
    record = (
        "window.VEGA_DEBUG = Object.assign(window.VEGA_DEBUG || {}, {"
        f'vega_version: "{alt.VEGA_VERSION}", '
        f'vegalite_version: "{alt.VEGALITE_VERSION}", '
        f'vegaembed_version: "{alt.VEGAEMBED_VERSION}"}});\n'
        "var VEGA_DEBUG = window.VEGA_DEBUG;\n"
    )
    (static / SCRIPT).write_text("(function () {\n" + bundle + "\n})();\n" + record, encoding="utf-8")
    app.config.html_static_path.append(str(static))
    app.add_js_file(SCRIPT, priority=100)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("builder-inited", _write_bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
