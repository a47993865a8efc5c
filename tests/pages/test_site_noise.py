"""The static page without noise (issue #28 §3), read from the chapters' sources.

* **Plotting code folds away, the method stays in view** (d2l's rule). A *display cell* is a code cell
  outside the solutions that shows something (it calls a function of ``lib.page``: a chart, ``figure``, a
  table) and calls nothing of the method: no function imported from ``lib`` outside ``lib.page``
  (``lib.chapters``, ``lib.methods``, ``lib.jacobians``, ``lib.linalg``, ``lib.models``, ``lib.theory``,
  ``lib.stats``, ``lib.load_*``) and no ``show_source`` (the method's own code) or ``book_setup``. Every
  display cell carries ``hide-input`` (the site folds its code behind a "show code" button) and no other cell
  does. ``hide-input`` is a site tag only: JupyterLab, Colab and the student editions ignore tags, so they
  show these cells as before.
* **Nothing that only says "nothing happened"**: an exercise's template cell (the checker run on the
  unfilled template prints its failed checks) carries ``remove-output``; no code cell prints an offline
  "Skipped" or "Offline build" message (the prose says once, in a note, what
  ``SPECTRAL_BOOK_REAL_MODELS=1`` adds); no visible cell ends in a bare name (an object's printout such as
  ``Twins(...)``).
* **One notation**: the layer index is $t$ in every chapter and on the notation page (Li & Altafini's
  layer time; Fernando & Guitchounts' $l$ is not used), and a block's update $J_t - R$ is $U_t$, its mean
  $\\bar U_t$.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT, code_cell_trees
from test_page_limits import _in_solution, _is_template

CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))
ids = [p.stem for p in CHAPTERS]
HIDE = "hide-input"
OFF_SITE = {"remove-input", "remove-cell", "lab-only"}  # input not on the site at all
_NOT_DISPLAY = {"lib.page.source", "lib.page.setup"}  # the method's own code; the page's setup


def _cells(path: Path) -> list:
    return jupytext.read(path, fmt="md:myst").cells


def _imports(cells: list) -> dict[str, str]:
    """Every name a chapter's code cells bind by import, with its module (or ``module.name``)."""
    names: dict[str, str] = {}
    for tree in code_cell_trees(cells):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update({(a.asname or a.name).split(".")[0]: a.name for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return names


def _root(func: ast.expr) -> str | None:
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.func if isinstance(func, ast.Call) else func.value
    return func.id if isinstance(func, ast.Name) else None


def _origins(source: str, imports: dict[str, str]) -> list[str]:
    """The module of every call in ``source`` to a name imported from ``lib`` (``lib`` for ``lib.x()``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            origin = imports.get(_root(node.func) or "", "")
            if origin == "lib" or origin.startswith("lib."):
                out.append(origin)
    return out


def display_cell(source: str, imports: dict[str, str]) -> bool:
    """Whether a code cell only builds what the page shows (see the module docstring)."""
    origins = _origins(source, imports)
    shows = any(o.startswith("lib.page") and not any(o.startswith(n) for n in _NOT_DISPLAY) for o in origins)
    method = any(not o.startswith("lib.page") or any(o.startswith(n) for n in _NOT_DISPLAY) for o in origins)
    return shows and not method and "real_models_enabled" not in source


def _code(path: Path):
    cells = _cells(path)
    imports = _imports(cells)
    for i, (c, solution) in enumerate(zip(cells, _in_solution(cells))):
        if c.cell_type == "code" and not solution:
            yield i, c, set(c.metadata.get("tags", [])), imports


def test_the_rule_tells_plotting_from_method():
    imports = {"fp": "lib.page.jacobian_funnel", "figure": "lib.page.figures.figure", "fs": "lib.chapters.x",
               "show_source": "lib.page.source.show_source", "lib": "lib", "np": "numpy"}
    assert display_cell('c = fp.depth_chart(depth.assign(b=np.sqrt(2)))\nfigure(c, "x", "c")', imports)
    assert not display_cell('t = fs.depth_trends(boot)\nfigure(fp.slope_chart(t), "t", "c")', imports)
    assert not display_cell("show_source(fs.f)", imports)
    assert not display_cell('twins = lib.load_twins("minilm")', imports)
    assert not display_cell("x = np.ones(3)\nprint(x)", imports)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_plotting_cells_fold_and_method_cells_stay_in_view(path):
    missing = [f"cell {i}: {c.source.splitlines()[0][:60]!r}" for i, c, tags, imp in _code(path)
               if display_cell(c.source, imp) and not tags & {HIDE, *OFF_SITE}]
    extra = [f"cell {i}: {c.source.splitlines()[0][:60]!r}" for i, c, tags, imp in _code(path)
             if HIDE in tags and not display_cell(c.source, imp)]
    assert not missing, f"{path.name}: display cells without {HIDE}: {missing}"
    assert not extra, f"{path.name}: {HIDE} on cells that run the method (keep them in view): {extra}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_hide_input_cells_are_shown_in_the_lab(path):
    """``hide-input`` folds a cell on the site only; in the lab and the editions the cell reads as before."""
    collapsed = [i for i, c, tags, _ in _code(path)
                 if HIDE in tags and c.metadata.get("jupyter", {}).get("source_hidden")]
    assert not collapsed, f"{path.name}: cells {collapsed} are folded in the lab too"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_unfilled_exercise_checkers_print_nothing_on_the_site(path):
    """The checker under an unfilled template prints "0/9 checks passed" in the build: noise on the site, the
    student's feedback in the lab (tags do not reach it)."""
    bare = [f"cell {i}" for i, c, tags, _ in _code(path)
            if "check_" in c.source and _is_template(c.source) and "remove-output" not in tags]
    assert not bare, f"{path.name}: exercise templates whose checker output reaches the site: {bare}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_no_cell_prints_that_it_was_skipped(path):
    """The offline build prints no "Skipped: needs SPECTRAL_BOOK_REAL_MODELS=1" / "Offline build" (the prose says once
    what the switch adds). A part skipped because a reader's own model lacks something ("Skipped: <model> has no
    training log") is the one line issue #27 asks for, printed only for that model: allowed."""
    said = [f"cell {i}: {m.group(0)!r}" for i, c, tags, _ in _code(path) if "remove-output" not in tags
            for m in re.finditer(r"print\((f?\"|f?')(Skipped: needs|Offline build)[^\n]*", c.source)]
    assert not said, f"{path.name}: offline 'skipped' messages as output (say it once in the prose): {said}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_no_visible_cell_prints_an_object(path):
    """A bare name at a cell's end prints the object's repr (``Twins(...)``, a list of labels)."""
    bare = []
    for i, c, tags, _ in _code(path):
        if tags & {"remove-cell", "remove-output", "lab-only"}:
            continue
        try:
            body = ast.parse(c.source).body
        except SyntaxError:
            continue
        if body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, (ast.Name, ast.Attribute,
                                                                               ast.List, ast.Tuple)):
            bare.append(f"cell {i}: {ast.unparse(body[-1])}")
    assert not bare, f"{path.name}: cells ending in an object's printout: {bare}"


# -- one notation ------------------------------------------------------------------------------------------
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S)
_LAYER_L = re.compile(r"_\{?l\b(?![a-z])|_\{l[-+]|_\{[^}]*,\s*l\}|\bl\s*=\s*0|\(l\+1\)")
_LAYER_L_TEXT = re.compile(r"[A-Za-zΑ-ω]\u0304?ₗ")
_UPDATE_A = re.compile(r"\\bar\s*\{?A\}?|Ā")


def _prose_and_math(path: Path) -> tuple[str, list[str]]:
    """A page's markdown (prose and math, not code) and its math fragments."""
    if path.name == "notation.md":
        text = path.read_text(encoding="utf-8")
    else:
        text = "\n".join(c.source for c in _cells(path) if c.cell_type == "markdown")
    text = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", text, flags=re.S | re.M)  # code blocks
    return text, [m.group(0) for m in _MATH.finditer(text)]


NOTATION_PAGES = [*CHAPTERS, ROOT / "book" / "notation.md", ROOT / "book" / "glossary.md"]


@pytest.mark.parametrize("path", NOTATION_PAGES, ids=[p.stem for p in NOTATION_PAGES])
def test_one_layer_index_and_one_update_symbol(path):
    text, math = _prose_and_math(path)
    layer_l = [m for m in math if _LAYER_L.search(m)] + _LAYER_L_TEXT.findall(text)
    assert not layer_l, f"{path.name}: the layer index is t in every chapter, not l: {layer_l[:6]}"
    update_a = [m for m in math if _UPDATE_A.search(m)] + re.findall(r"Ā\S*", text)
    assert not update_a, f"{path.name}: a block's mean update is Ū (\\bar U_t), not Ā: {update_a[:6]}"


def test_the_notation_page_defines_the_update_and_the_edit_strength():
    text = (ROOT / "book" / "notation.md").read_text(encoding="utf-8")
    assert r"\bar U_t" in text and r"\bar J_t" in text, "the notation page names the update Ū_t"
    assert "edit strength" in text
    ch5 = (ROOT / "book" / "05_steering_lab.md").read_text(encoding="utf-8")
    assert "**edit strength**" in ch5, "chapter 5 names α|c|/|λ₁| once, as the edit strength"


# -- the built site (slow: the whole book is built once per session) ------------------------------------------
_NOISE = re.compile(r"Skipped: needs|Offline build|checks passed|\bTwins\(|\bTwinViews\(")


def _notebook_pages() -> list[str]:
    from conftest import toc_pages

    from lib.page.build_info import is_notebook

    return [p for p in toc_pages() if is_notebook(ROOT / f"{p}.md")]


@pytest.mark.slow
@pytest.mark.parametrize("page", _notebook_pages())
def test_the_built_page_shows_no_noise_and_folds_its_plotting_code(built_site, page):
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((built_site / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    outputs = " ".join(o.get_text(" ") for o in soup.select("article div.cell_output"))
    noise = sorted(set(_NOISE.findall(outputs)))
    assert not noise, f"{page}: outputs that only say nothing ran: {noise}"
    folded = soup.select("article div.cell.tag_hide-input details.hide")
    tagged = soup.select("article div.cell.tag_hide-input")
    assert len(folded) == len(tagged), f"{page}: {len(tagged) - len(folded)} plotting cells not folded"


def test_the_fold_button_is_named_by_its_text():
    """myst-nb's ``aria-label="Toggle hidden content"`` on a folded cell's "Show code" button failed axe's
    label-content-name-mismatch (serious) on every page with a plotting cell; book/_ext/accessibility.py drops it."""
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import accessibility

    body = '<details class="hide above-input">\n<summary aria-label="Toggle hidden content">\n<span>Show code</span>'
    context = {"body": body}
    accessibility._folded_code_named_by_its_text(None, "p", "page.html", context, None)
    assert "aria-label" not in context["body"] and "<summary>" in context["body"]
