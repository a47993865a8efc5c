"""The built Results page shows a computed value in every cell, and every chapter opens with its Takeaway."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from conftest import toc_pages

from lib.page import claims

pytestmark = pytest.mark.slow

CHAPTERS = [p for p in toc_pages() if p.split("/")[-1][:2].isdigit()]


def _soup(html_dir, page: str) -> BeautifulSoup:
    return BeautifulSoup((html_dir / f"{page}.html").read_text(encoding="utf-8"), "html.parser")


def test_results_page_follows_the_introduction():
    pages = toc_pages()
    assert pages[pages.index("book/intro") + 1] == "book/results"


def test_every_claim_row_is_filled_from_its_chapter(built_site):
    soup = _soup(built_site, "book/results")
    rows = {}
    for tr in soup.select("table.claims-table tbody tr"):
        cells = tr.find_all("td")
        claim_id = cells[0].get_text(" ", strip=True).split(".")[0]
        rows[claim_id] = cells
    assert set(rows) == {c.id for c in claims.CLAIMS}
    for c in claims.CLAIMS:
        cells = rows[c.id]
        models, measured, verdict = (td.get_text(" ", strip=True) for td in cells[1:])
        assert models and measured, f"{c.id}: empty models or measured cell"
        assert verdict in claims.VERDICTS, f"{c.id}: verdict {verdict!r}"
        link = cells[0].find("a", href=lambda h: h and f"#{c.label}" in h)
        assert link is not None, f"{c.id}: no link to its section"
        page, anchor = link["href"].split("#")
        target = _soup(built_site, f"book/{page.removesuffix('.html')}")
        assert target.find(id=anchor) is not None, f"{c.id}: {link['href']} has no anchor"


def test_the_overview_comes_first_and_agrees_with_the_tables(built_site):
    """The first screen: every claim in one line, its verdict in a cell of the verdict's class, the same verdict
    as the claim's row in the detailed tables (which open behind a click), and counts that add up."""
    soup = _soup(built_site, "book/results")
    overview = soup.select_one("div.claims-overview")
    assert overview is not None, "no overview on the Results page"
    first_table = soup.select_one("table")
    assert "claims-overview-table" in first_table.get("class", []), "the overview is not the page's first table"
    detail = {tr.find_all("td")[0].get_text(" ", strip=True).split(".")[0]: tr.find_all("td")[-1].get_text(" ", strip=True)
              for tr in soup.select("table.claims-table tbody tr")}
    for table in soup.select("table.claims-table"):
        assert table.find_parent("details") or table.find_parent(class_="dropdown"), "a detailed table is not collapsed"
    seen = {}
    for tr in overview.select("table.claims-overview-table tbody tr"):
        cells = tr.find_all("td")
        cid = cells[0].get_text(strip=True)
        c = claims.claim(cid)
        verdict = detail[cid]
        word = cells[-1].get_text(strip=True).replace("\u2019", "'")  # docutils' smart quotes
        assert word == claims.answer(c, verdict), f"{cid}: overview says {word!r}, its row {verdict!r}"
        assert f"verdict-{claims.verdict_slug(verdict)}" in cells[-1]["class"], cid
        assert cells[1].get_text(strip=True).replace("\u2019", "'") == c.short
        link = cells[0].find("a", href=lambda h: h and f"#{c.label}" in h)
        assert link is not None, f"{cid}: no link to its section"
        seen[cid] = verdict
    assert set(seen) == {c.id for c in claims.CLAIMS}
    counts = [p.get_text(" ", strip=True).replace("\u2019", "'") for p in overview.select(".claims-overview-count")]
    assert len(counts) == len(claims.SOURCES)
    for source, text in zip(claims.SOURCES, counts):
        n = {v: k for v, k in claims.verdict_counts({i: v for i, v in seen.items()
                                                     if claims.claim(i).source == source}, source).items()}
        total = sum(n.values())
        assert f"({total} " in text, text
        for v, k in n.items():
            word = claims.answer(claims.CLAIMS[[c.source for c in claims.CLAIMS].index(source)], v)
            assert f"{k} {word}" in text, f"{text!r} lacks '{k} {word}'"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_opens_with_a_takeaway(built_site, page):
    """The first admonition of every chapter is its Takeaway: what held, what did not, and so what."""
    article = _soup(built_site, page).select_one("article, .bd-article")
    first = article.select_one("div.admonition")
    assert first is not None and first.select_one(".admonition-title").get_text(strip=True) == "Takeaway", page
    text = first.get_text(" ", strip=True)
    for part in ("Held:", "Did not hold:", "So:"):
        assert part in text, f"{page}: Takeaway lacks {part!r}"
