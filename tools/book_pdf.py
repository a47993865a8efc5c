"""Print the built book to one PDF: each page of ``_toc.yml`` in headless Chromium, merged with pypdf.

The HTML site (``_build/html``, from ``make book``) is served on 127.0.0.1 and every page is opened in
Debian's Chromium with print media emulated. Before a page is printed, every Altair chart must hold
its SVG/canvas and MathJax must have finished typesetting. The per-page PDFs are merged in
table-of-contents order, with one outline entry (bookmark) per chapter and the book's title as the
document title. Links between chapters become links inside the PDF.

The print stylesheet is ``book/_static/print.css``. A site built before it existed does not link it,
so it is added to each page here when the page lacks it.

Usage::

    python -m tools.book_pdf [--html _build/html] [--out _build/pdf/spectral-dynamics-book.pdf]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.site_browser import CHROMIUM, CHROMIUM_ARGS, serve_site, wait_until_rendered  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Page
    from pypdf import PdfWriter

__all__ = ["Chapter", "build_pdf", "main"]

DEFAULT_HTML = ROOT / "_build" / "html"
DEFAULT_OUT = ROOT / "_build" / "pdf" / "spectral-dynamics-book.pdf"
PRINT_CSS = ROOT / "book" / "_static" / "print.css"
PAGE_FORMAT = "A4"
MARGIN = {"top": "14mm", "bottom": "14mm", "left": "12mm", "right": "12mm"}
SCALE = 0.8  # a 96-dpi CSS layout at 80 %: about the density of a printed technical book
VIEWPORT = {"width": 1000, "height": 1400}

_FIRST_HEADING = """() => {
    const h = document.querySelector('main h1, article h1, h1');
    if (!h) return document.title;
    const c = h.cloneNode(true);
    c.querySelectorAll('.headerlink').forEach(a => a.remove());
    return c.textContent.replace(/\\s+/g, ' ').trim();
}"""


@dataclass(frozen=True)
class Chapter:
    """One printed page of the table of contents."""

    name: str  # ``book/<name>`` as in ``_toc.yml``
    title: str  # its first heading
    first_page: int  # 0-based index of its first page in the merged PDF
    n_pages: int


def book_title(root: Path = ROOT) -> str:
    """The ``title`` of ``_config.yml``."""
    import yaml

    return str(yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["title"])


def toc_pages(root: Path = ROOT) -> list[str]:
    """The pages of ``_toc.yml`` in reading order (see :func:`lib.page.build_info.toc_pages`)."""
    from lib.page.build_info import toc_pages as pages

    return pages(root)


def _print_page(page: Page, url: str, css: str, timeout_ms: int) -> tuple[str, bytes]:
    """Open ``url``, wait for charts and math, and return (first heading, PDF bytes)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(url, wait_until="load", timeout=timeout_ms)
    if not page.evaluate("() => !!document.querySelector('link[href*=\"print.css\"]')"):
        page.add_style_tag(content=css)
    try:
        wait_until_rendered(page, timeout_ms=timeout_ms)
    except PlaywrightTimeout as e:
        raise RuntimeError(f"{url}: charts or math not rendered after {timeout_ms / 1000:.0f} s") from e
    title = page.evaluate(_FIRST_HEADING)
    pdf = page.pdf(
        format=PAGE_FORMAT,
        margin=MARGIN,
        scale=SCALE,
        print_background=True,
        outline=False,
        tagged=True,
    )
    return title, pdf


def _link_chapters(writer: PdfWriter, chapters: list[Chapter], base_url: str) -> int:
    """Turn links to the local server into links to the chapter's first page; returns how many."""
    from pypdf.generic import ArrayObject, NameObject, NullObject

    start = {c.name: c.first_page for c in chapters}
    n = 0
    for page in writer.pages:
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            action = annot.get("/A")
            uri = action.get_object().get("/URI") if action is not None else None
            if not uri or not str(uri).startswith(base_url):
                continue
            path = urlsplit(str(uri)).path.lstrip("/")
            name = path.removesuffix(".html")
            if name in ("", "index"):
                name = chapters[0].name
            target = start.get(name)
            if target is None:
                continue  # genindex, search, …: leave the link as it is
            target_ref = writer.pages[target].indirect_reference
            dest = ArrayObject([target_ref, NameObject("/XYZ"), NullObject(), NullObject(), NullObject()])
            del annot["/A"]
            annot[NameObject("/Dest")] = dest
            n += 1
    return n


def build_pdf(
    html: Path = DEFAULT_HTML,
    out: Path = DEFAULT_OUT,
    pages: list[str] | None = None,
    *,
    timeout_ms: int = 60_000,
    log: Callable[[str], object] = print,
) -> list[Chapter]:
    """Print ``pages`` (default: the table of contents) of the site in ``html`` to ``out``.

    Returns the chapters with their page ranges in the merged PDF.
    """
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    html = Path(html)
    if not (html / "index.html").is_file():
        raise SystemExit(f"{html} holds no built site (no index.html); run `make book` first")
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing; install Debian's chromium (apt-get install chromium)")
    pages = pages or toc_pages()
    missing = [p for p in pages if not (html / f"{p}.html").is_file()]
    if missing:
        raise SystemExit(f"{html} lacks {missing}; rebuild the site with `make book`")
    css = PRINT_CSS.read_text(encoding="utf-8")

    writer = PdfWriter()
    chapters: list[Chapter] = []
    with serve_site(html) as base_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.emulate_media(media="print")
            for name in pages:
                t0 = time.perf_counter()
                title, pdf = _print_page(page, f"{base_url}/{name}.html", css, timeout_ms)
                reader = PdfReader(io.BytesIO(pdf))
                first = len(writer.pages)
                writer.append(reader, import_outline=False)
                chapters.append(Chapter(name, title, first, len(reader.pages)))
                log(f"  {name}: {len(reader.pages)} pages ({time.perf_counter() - t0:.1f} s) — {title}")
        finally:
            browser.close()
        n_links = _link_chapters(writer, chapters, base_url)

    for c in chapters:
        writer.add_outline_item(title=c.title, page_number=c.first_page)
    writer.add_metadata({"/Title": book_title(), "/Creator": "tools.book_pdf (Chromium + pypdf)"})
    writer.page_mode = "/UseOutlines"
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    log(f"  {n_links} links between chapters kept inside the PDF")
    return chapters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.book_pdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=DEFAULT_HTML, help="built site (default: _build/html)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PDF to write (default: %(default)s)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    chapters = build_pdf(args.html, args.out)
    n = sum(c.n_pages for c in chapters)
    size = args.out.stat().st_size / 2**20
    print(f"wrote {args.out} ({n} pages, {size:.1f} MiB) in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
