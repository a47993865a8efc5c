"""The book builds offline with every chapter executed, within each chapter's time budget."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from conftest import ROOT, toc_pages

from lib.page.build_info import is_notebook

pytestmark = pytest.mark.slow

def _soup(html_dir, page: str) -> BeautifulSoup:
    return BeautifulSoup((html_dir / f"{page}.html").read_text(encoding="utf-8"), "html.parser")


def test_every_toc_page_is_built(built_site):
    for page in toc_pages():
        assert (built_site / f"{page}.html").is_file(), page


@pytest.mark.parametrize("page", toc_pages())
def test_no_cell_output_is_an_error(built_site, page):
    soup = _soup(built_site, page)
    text = soup.get_text(" ")
    assert "Traceback (most recent call last)" not in text, page
    assert not soup.select(".output.traceback, .output.error"), page


def test_execution_table_reports_every_notebook(built_site):
    """The About page's nb-exec-table lists each executed chapter, its status and its run time.

    The time is not held against a budget here: it depends on the machine and on what else runs on it
    (no test may); ``python -m benchmarks.bench_book`` sets each chapter beside its budget.
    """
    soup = _soup(built_site, "book/about_build")
    table = soup.find("table", class_=re.compile("docutils|table"))
    assert table is not None, "no execution table on the About page"
    header = [th.get_text(strip=True) for th in table.find_all("th")]
    rows = [[td.get_text(strip=True) for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]
    doc_i = next(i for i, h in enumerate(header) if h.lower().startswith("document"))
    time_i = next(i for i, h in enumerate(header) if "time" in h.lower())
    status_i = next(i for i, h in enumerate(header) if "status" in h.lower())
    seen = {r[doc_i]: r for r in rows}
    for page in toc_pages():
        if not is_notebook(ROOT / f"{page}.md"):
            continue  # a plain markdown page, not executed
        assert page in seen, f"{page} missing from the execution table: {sorted(seen)}"
        row = seen[page]
        assert row[status_i] in ("✅", "ok", "OK"), (page, row)
        assert float(row[time_i]) > 0, (page, row)


@pytest.mark.parametrize("page", [p for p in toc_pages() if is_notebook(ROOT / f"{p}.md")])
def test_lab_only_cells_are_not_on_the_site(built_site, page):
    """A live-widget cell (tagged ``lab-only``) shows nothing useful without a kernel: the site leaves it out,
    code and all (chapters 1 and 5 had shown its code under "the cell shows its code only")."""
    import jupytext

    cells = [c for c in jupytext.read(ROOT / f"{page}.md", fmt="md:myst").cells if c.cell_type == "code"
             and ("lab-only" in c.metadata.get("tags", []) or re.search(r"\bwidget_\w+\(", c.source))]
    untagged = [c.source.splitlines()[-1] for c in cells if "lab-only" not in c.metadata.get("tags", [])]
    assert not untagged, f"{page}: live-widget cells not tagged lab-only: {untagged}"
    text = _soup(built_site, page).get_text(" ")
    shown = [line for c in cells for line in c.source.splitlines()[-1:] if line.strip().rstrip(";") in text]
    assert not shown, f"{page}: lab-only cells on the site: {shown}"


@pytest.mark.parametrize("page", [p for p in toc_pages() if is_notebook(ROOT / f"{p}.md")])
def test_no_glued_value_shows_as_a_stray_output(built_site, page):
    """A value glued for the prose (``glue(name, value)`` without ``display=False``) in a cell the reader
    sees also prints as a bare output box ("220", "4", ...) with nothing to say what it is."""
    import jupytext

    nb = jupytext.read(built_site.parent / "jupyter_execute" / f"{page}.ipynb")
    stray = [
        (i, o["metadata"]["scrapbook"].get("name"))
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and not {"remove-cell", "remove-output"} & set(cell.metadata.get("tags", []))
        for o in cell.get("outputs", [])
        if "scrapbook" in o.get("metadata", {})
    ]
    assert not stray, f"{page}: glued values shown as outputs (cell, name): {stray}"

