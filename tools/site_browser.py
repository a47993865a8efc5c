"""Headless Chromium on the built site: the launch options and a local server, shared by tools and tests.

Debian's Chromium (``/usr/bin/chromium``) is driven by Playwright; a browser is never downloaded.
The site is served from ``127.0.0.1`` on a free port, so nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import socketserver
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "each_page", "finish_animations", "page_arguments", "serve_site",
           "wait_until_rendered"]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Altair's html renderer writes one empty <div id="altair-viz-…"> per chart; vegaEmbed fills it.
CHART_SELECTOR = "div[id^='altair-viz-']"
_CHARTS_RENDERED = f"""() => [...document.querySelectorAll("{CHART_SELECTOR}")]
    .every(c => c.querySelector('svg, canvas'))"""
_MATHJAX_READY = """async () => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
    if (document.fonts) await document.fonts.ready;
    return true;
}"""
# Every finite CSS animation and transition jumped to its end (the theme's colour transitions, the togglebutton's
# fade-in), then awaited; infinite ones (spinners) are left running.
_FINISH_ANIMATIONS = """async () => {
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const finite = document.getAnimations().filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity);
    finite.forEach(a => a.finish());
    await Promise.all(finite.map(a => a.finished.catch(() => null)));
}"""
_MATHJAX_LOADED = """() => !document.querySelector('script[src*="mathjax"]')
    || (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise)"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # no request log on stderr
        pass


@contextlib.contextmanager
def serve_site(html_dir: Path) -> Iterator[str]:
    """Serve ``html_dir`` on 127.0.0.1 (a free port) in a daemon thread; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def wait_until_rendered(page: Page, timeout_ms: int = 30_000) -> None:
    """Block until every Altair chart on ``page`` holds an SVG or canvas and MathJax has typeset."""
    page.wait_for_function(_CHARTS_RENDERED, timeout=timeout_ms)
    page.wait_for_function(_MATHJAX_LOADED, timeout=timeout_ms)
    page.evaluate(_MATHJAX_READY)


def finish_animations(page: Page) -> None:
    """End every finite CSS animation and transition of ``page`` now, so what is measured next is the page at rest.

    A check that waits a fixed time instead would see a half-faded box on a slow or busy machine.
    """
    page.evaluate(_FINISH_ANIMATIONS)


def page_arguments(description: str, argv: list[str] | None = None) -> tuple[Path, list[str]]:
    """The command line of a checker of the built site: ``html`` (the ``_build/html`` folder) and the pages to check
    (``book/<name>``; default: every page of ``_toc.yml``)."""
    from lib.page.build_info import toc_pages

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("html", type=Path, help="the built site (_build/html)")
    parser.add_argument("pages", nargs="*", help="pages as book/<name> (default: every page of _toc.yml)")
    args = parser.parse_args(argv)
    return args.html, args.pages or toc_pages(ROOT)


def each_page(html: Path, pages: Sequence[str], viewport: dict[str, int]) -> Iterator[tuple[str, Page]]:
    """Serve ``html`` and open each of ``pages`` in headless Chromium at ``viewport``: yields ``(name, page)`` once the
    page has loaded, and closes it when the caller asks for the next."""
    from playwright.sync_api import sync_playwright

    with serve_site(html) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name in pages:
                page = browser.new_page(viewport=viewport)
                page.set_default_timeout(120_000)
                page.goto(f"{url}/{name}.html", wait_until="load")
                try:
                    yield name, page
                finally:
                    page.close()
        finally:
            browser.close()
