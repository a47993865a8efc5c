"""`make pdf`: the built site printed by headless Chromium (Debian's) and merged into one PDF.

The PDF is made from the session's own build (the ``built_site`` fixture) into a temporary folder.
It must hold every page of the table of contents in order, one outline entry per page titled by
the page's first heading, the book's title as metadata, and no traceback anywhere.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from conftest import require_chromium, toc_pages

pytestmark = [pytest.mark.slow, pytest.mark.browser]

def _norm(text: str) -> str:
    """Fold ligatures (ﬁ → fi) and whitespace, and rejoin a hyphenated word broken over two lines
    ("power- method" → "power-method"), as text extracted from a PDF needs."""
    folded = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()
    return re.sub(r"(?<=\w)- (?=\w)", "-", folded)


def _first_heading(html: Path) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser")
    h1 = soup.select_one("main h1") or soup.find("h1")
    for a in h1.select(".headerlink"):
        a.decompose()
    return _norm(h1.get_text())


@pytest.fixture(scope="module")
def book_pdf(built_site, tmp_path_factory):
    """``(path, chapters)`` of the PDF printed from the session's build."""
    require_chromium()
    from tools.book_pdf import build_pdf

    out = tmp_path_factory.mktemp("pdf") / "book.pdf"
    chapters = build_pdf(built_site, out, log=lambda _: None)
    return out, chapters


def test_print_css_is_linked(built_site):
    """The print stylesheet is part of the site (so a reader's own "Print" gets it too)."""
    for name in toc_pages():
        html = (built_site / f"{name}.html").read_text(encoding="utf-8")
        assert "_static/print.css" in html, name


def test_pdf_pages_outline_and_text(built_site, book_pdf):
    from pypdf import PdfReader

    path, chapters = book_pdf
    pages = toc_pages()
    assert path.read_bytes()[:5] == b"%PDF-"
    reader = PdfReader(path)
    assert len(reader.pages) >= len(pages)
    assert reader.metadata.title == "Spectral dynamics of transformers"

    # one outline entry per page of the table of contents, in order, titled by its first heading
    want = [_first_heading(built_site / f"{name}.html") for name in pages]
    outline = reader.outline
    assert [_norm(o.title) for o in outline] == want
    starts = [reader.get_destination_page_number(o) for o in outline]
    assert starts == sorted(starts) and starts[0] == 0 and len(set(starts)) == len(starts)
    assert [c.name for c in chapters] == pages

    texts = [_norm(p.extract_text() or "") for p in reader.pages]
    for title, start in zip(want, starts):
        assert title in texts[start], f"first heading {title!r} not on the chapter's first page {start + 1}"
    bad = [i + 1 for i, t in enumerate(texts) if "Traceback" in t]
    assert not bad, f"'Traceback' printed on pages {bad}"
