"""The charts of the built book say what they show (their Vega-Lite specs, read from the executed notebooks).

Each test guards a defect that once reached the site: a chart whose categories had no legend, a
faceted chart whose panels all drew every model, side-by-side charts whose different colour fields
were merged into one scale, and a curve drawn in the colour that the legend gave to something else.
What the browser shows (labels cut short, charts wider than the page) is in ``test_site_browser``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from chart_specs import nodes as _nodes
from conftest import ROOT, toc_pages

from lib.page.build_info import is_notebook

pytestmark = pytest.mark.slow

NOTEBOOK_PAGES = [p for p in toc_pages() if is_notebook(ROOT / f"{p}.md")]


def _chart_outputs(built_site, page: str) -> list[str]:
    """The HTML of every output of ``page`` that draws an Altair chart."""
    import jupytext

    nb = jupytext.read(built_site.parent / "jupyter_execute" / f"{page}.ipynb")
    outs = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            if "altair-viz" in html:
                outs.append(html)
    return outs


def _chart_specs(built_site, page: str) -> list[dict]:
    """The Vega-Lite spec of every Altair chart of ``page`` as the build executed it (Altair's HTML
    output ends with ``})(<spec>, <embed options>);``)."""
    return [json.JSONDecoder().raw_decode(html[html.rfind("})(") + 3:])[0]
            for html in _chart_outputs(built_site, page)]


def _has(obj, pred: Callable[[dict], bool]) -> bool:
    return any(pred(d) for d in _nodes(obj))


def _colour_field(encoding: dict) -> str | None:
    colour = encoding.get("color")
    return colour.get("field") if isinstance(colour, dict) else None


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_every_chart_has_a_description(built_site, page):
    """Vega gives a chart its top-level ``description`` as the ARIA label a screen reader announces:
    every figure has one that names what it shows and the model (course material must be accessible)."""
    for spec in _chart_specs(built_site, page):
        text = spec.get("description", "")
        assert len(text.split()) >= 4, f"{page}: a chart titled {spec.get('title')!r} has no description"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_every_chart_with_categories_has_a_legend(built_site, page):
    """A chart that colours its marks by a category shows a legend (compiled by Vega-Lite, as the
    browser does). The funnel's six curves once had none: ``legend=None`` on the stroke-dash channel
    of the same field removed the merged legend of both channels."""
    import vl_convert as vlc

    for i, spec in enumerate(_chart_specs(built_site, page)):
        if _has(spec, lambda d: _colour_field(d) is not None and d["color"].get("type") in ("nominal", "ordinal")):
            vega = vlc.vegalite_to_vega(spec)
            assert _has(vega, lambda d: bool(d.get("legends"))), f"{page}: chart {i} colours by a category but has no legend"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_faceted_charts_split_all_their_data(built_site, page):
    """In a faceted chart no inner layer brings its own data: such a layer is not split by the facet,
    so every panel draws all of it. (Chapter 4's coupling chart showed both models in both panels.)"""
    for i, spec in enumerate(_chart_specs(built_site, page)):
        own_data = _has(spec, lambda d: "facet" in d and isinstance(d.get("spec"), dict) and _has(d["spec"], lambda x: "data" in x))
        assert not own_data, f"{page}: chart {i} has a layer with its own data inside a facet"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_concatenated_charts_do_not_merge_different_colour_scales(built_site, page):
    """Charts placed side by side share one colour scale unless told otherwise. When they colour by
    different fields (γ and ρ; tokens and measures) that merges two meanings into one scale: chapter
    3's γ heatmap lost its contrast to ρ's range, and chapter 2's tokens took the measures' colours."""
    def merges(d: dict) -> bool:
        if d.get("resolve", {}).get("scale", {}).get("color") == "independent":
            return False
        for key in ("hconcat", "vconcat", "concat"):
            fields = {frozenset(f for n in _nodes(sub) if (f := _colour_field(n))) for sub in d.get(key, [])}
            if len(fields - {frozenset()}) > 1:
                return True
        return False

    for i, spec in enumerate(_chart_specs(built_site, page)):
        assert not _has(spec, merges), f"{page}: chart {i} merges different colour fields into one scale"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_no_layer_borrows_a_category_colour(built_site, page):
    """In a layered chart where a layer colours by a field, every other mark has a colour of its own:
    Vega-Lite's default blue is also the first category's colour. (Chapter 4's training curve had
    none, and read as the legend's "held-out, random init".)"""
    def borrows(d: dict) -> bool:
        layers = d.get("layer")
        if not (isinstance(layers, list) and all(isinstance(x, dict) for x in layers)):
            return False
        shared = d.get("encoding") or {}
        if _colour_field(shared) is None and not any(_colour_field(x.get("encoding") or {}) for x in layers):
            return False
        for layer in layers:
            mark = layer.get("mark") if isinstance(layer.get("mark"), dict) else {"type": layer.get("mark")}
            encoding = {**shared, **(layer.get("encoding") or {})}
            if ("layer" not in layer and mark.get("type") != "text" and "color" not in encoding
                    and not {"color", "stroke", "fill"} & set(mark)):
                return True
        return False

    for i, spec in enumerate(_chart_specs(built_site, page)):
        assert not _has(spec, borrows), f"{page}: chart {i} has a layer in the default colour next to coloured categories"


# -- figures and the book's style (issue #17) -------------------------------------------------------------------------
CHAPTER_PAGES = [p for p in NOTEBOOK_PAGES if p.split("/")[-1][:2].isdigit()]


@pytest.mark.parametrize("page", CHAPTER_PAGES)
def test_every_chart_is_a_numbered_figure_the_text_refers_to(built_site, page):
    """Each chart is shown with ``lib.page.figures.figure``: on the site a figure "Fig. N.k" with a caption,
    and the page links to it at least once."""
    from bs4 import BeautifulSoup

    from lib.page.figures import FIGURE_MARK

    bare = [i for i, html in enumerate(_chart_outputs(built_site, page)) if not html.startswith(FIGURE_MARK)]
    assert not bare, f"{page}: charts {bare} are not numbered figures (show them with lib.page.figures.figure)"
    soup = BeautifulSoup((built_site / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    chapter = int(page.split("/")[-1][:2])
    figures = soup.select("figure.spectral-book-figure")
    assert figures, f"{page}: no figure"
    for k, fig in enumerate(figures, start=1):
        caption = fig.select_one("figcaption").get_text(" ", strip=True)
        assert caption.startswith(f"Fig. {chapter}.{k} "), f"{page}: figure {k} is captioned {caption[:40]!r}"
        assert fig.select("div[id^='altair-viz-']"), f"{page}: figure {fig['id']} holds no chart"
        assert soup.select(f"a[href='#{fig['id']}']"), f"{page}: no link to {fig['id']} in the text"


_TEX = re.compile(r"\\[a-zA-Z]+|[\^_]\{")


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_no_raw_tex_in_chart_text(built_site, page):
    """Titles, axis titles and legends are Unicode (``e²ᶜ``, ``max_j≠k`` written out), never TeX source."""
    for i, spec in enumerate(_chart_specs(built_site, page)):
        texts = [d.get(k) for d in _nodes(spec) for k in ("title", "text", "subtitle") if isinstance(d.get(k), str)]
        texts += [t for d in _nodes(spec) for k in ("title", "subtitle") if isinstance(d.get(k), list)
                  for t in d[k] if isinstance(t, str)]
        tex = [t for t in texts if _TEX.search(t)]
        assert not tex, f"{page}: chart {i} shows TeX: {tex[:3]}"


# a one-letter symbol with a subscript that Unicode has a letter for (γ_t, J̄_l, d_h, n_kv, A_ij, λ_1)
_ASCII_SUBSCRIPT = re.compile(r"(?<![\w\\])(?:[^\W\d_]|J̄|Ā)_(?:kv|ij|[0-9tlhkji])(?![\w{])")
# a quantity whose subscript Unicode has no letter for, written as code; chart text names it in words (issue 28)
_CODE_SYMBOL = re.compile(r"(?<!\w)(?:f_C|δ_H|r_rot|r_S|J_ctx|J_single)(?!\w)")


@pytest.mark.parametrize("page", CHAPTER_PAGES)
def test_plain_text_subscripts_are_unicode(built_site, page):
    """Where math cannot be typeset (chart text, captions, glued prose, table headers) subscripts follow the
    notation page: γₜ, J̄ₜ, dₕ, not ``γ_t``; a chart names ``f_C``-style ones, with no Unicode letter, in words
    (complex fraction, Henrici departure)."""
    from bs4 import BeautifulSoup

    found = []
    for spec in _chart_specs(built_site, page):
        for d in _nodes(spec):
            for k in ("title", "text", "subtitle", "description"):
                vals = d.get(k) if isinstance(d.get(k), list) else [d.get(k)]
                found += [v for v in vals if isinstance(v, str) and (_ASCII_SUBSCRIPT.search(v) or _CODE_SYMBOL.search(v))]
    soup = BeautifulSoup((built_site / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    for el in soup.select("article figcaption, article .pasted-text, article table th, article summary"):
        text = el.get_text(" ", strip=True)
        found += [text] if _ASCII_SUBSCRIPT.search(text) else []
    shown = [_ASCII_SUBSCRIPT.findall(t) + _CODE_SYMBOL.findall(t) for t in found]
    assert not found, f"{page}: plain-text subscripts written with '_': {shown[:5]}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES)
def test_trained_and_random_init_have_the_books_colours(built_site, page):
    """Wherever a chart colours series that are trained weights or random-init twins, trained is
    ``TRAINED_COLOR`` and the twins ``RANDOM_COLORS`` (lib.page.plotting.model_color), in every chapter."""
    from lib.page.plotting import model_kind, model_palette

    for i, spec in enumerate(_chart_specs(built_site, page)):
        datasets = spec.get("datasets", {})
        for enc in _nodes(spec):
            colour = enc.get("color") if isinstance(enc.get("color"), dict) else None
            field = colour.get("field") if colour else None
            if not field:
                continue
            values = {str(row[field]) for rows in datasets.values() for row in rows
                      if isinstance(row, dict) and field in row}
            if not any(model_kind(v) for v in values):
                continue
            scale = colour.get("scale") or {}
            domain, colours = scale.get("domain"), scale.get("range")
            assert domain and colours, f"{page}: chart {i} colours {field!r} (trained/random) with the default palette"
            expected = dict(zip(*model_palette(domain)))
            got = dict(zip(domain, colours))
            wrong = {v: got.get(v) for v in domain if model_kind(v) and got.get(v) != expected[v]}
            assert not wrong, f"{page}: chart {i} gives trained/random series other colours: {wrong}"


@pytest.mark.parametrize("page", CHAPTER_PAGES)
def test_table_headers_are_words_not_code_names(built_site, page):
    """Tables say "spectral radius |λ₁|", not ``spectral_radius`` or ``gamma_lo``."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((built_site / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    heads = [th.get_text("", strip=True).replace("\u200b", "") for th in soup.select("article table th")]
    code = [h for h in heads if re.search(r"[A-Za-z0-9]_[A-Za-z0-9]", h) and not re.search(r"[₀-₉]|\{", h)]
    assert not code, f"{page}: table headers that are code names: {sorted(set(code))[:10]}"
