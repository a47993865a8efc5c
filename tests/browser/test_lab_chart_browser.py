"""Charts render with no network in JupyterLab (in the site: ``test_site_browser``).

The JupyterLab renderer is checked the way JupyterLab shows it: its HTML output, alone in a page,
opened in headless Chromium, must draw an SVG without any request leaving the page.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest

from lib.page import plotting

CHROMIUM = "/usr/bin/chromium"


def _chart() -> alt.Chart:
    data = pd.DataFrame({"x": np.arange(5), "y": np.arange(5) ** 2})
    return plotting.titled(alt.Chart(data).mark_line().encode(x="x:Q", y="y:Q"), "test", "toy")


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
