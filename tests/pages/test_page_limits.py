"""Pages that teach (read from the chapters' sources): short cells, exercises as objects, figures referred to.

* A visible code cell has at most :data:`MAX_LINES` lines of at most :data:`MAX_WIDTH` characters (wider
  lines are cut off on the page) and defines no function, except an exercise's template: what a page
  computes lives in ``lib``. A cell hidden on the site (``remove-input``/``remove-cell``) is hidden in
  JupyterLab too (``jupyter.source_hidden``), which ignores the site's tags. The one way round: a live-widget
  cell, which needs a kernel, is tagged ``lab-only`` and left out of the site whole (myst-nb's cell-level
  ``remove_code_source`` and ``remove_code_outputs``), while the lab, Colab and the student editions show it.
* Exercises are sphinx-exercise ``{exercise}`` directives with a label and the number JupyterLab shows
  (``:enumerator: N.k``, in order); each is followed by its solution; a solution with code is an executed code
  cell (collapsed in the lab, first line ``# Solution to Exercise N.k``) inside ``{solution-start}`` …
  ``{solution-end}``, never a code block the build does not run; a coding exercise has a template cell.
* Every figure a chapter shows with :func:`lib.page.figures.figure` is referred to in its prose
  (``{eval}`fig_<name>```), and chapters refer to each other with ``{ref}``, not "chapter 3" in plain text.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT, code_cell_trees

MAX_LINES = 12
MAX_WIDTH = 88
CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
_FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")


def _cells(path: Path) -> list:
    return jupytext.read(path, fmt="md:myst").cells


def _chapter(path: Path) -> int:
    return int(path.name[:2])


def _in_solution(cells: list) -> list[bool]:
    """For each cell: whether it lies between a ``{solution-start}`` and its ``{solution-end}``."""
    inside, flags = False, []
    for cell in cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = _FENCE.match(line.strip())
                if m and m["name"] == "solution-start":
                    inside = True
                elif m and m["name"] == "solution-end":
                    inside = False
            flags.append(False)
        else:
            flags.append(inside)
    return flags


def _visible(cell) -> bool:
    tags = set(cell.metadata.get("tags", []))
    return not (tags & HIDDEN_TAGS) and not cell.metadata.get("jupyter", {}).get("source_hidden")


def _is_template(source: str) -> bool:
    """An exercise's template: every top-level function's body is ``raise NotImplementedError`` (after
    comments and an optional docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    def stub(fn: ast.FunctionDef) -> bool:
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])
    return bool(defs) and all(stub(fn) for fn in defs)


def _prose(cells: list) -> str:
    """The chapter's markdown, without code blocks, math and the contents of roles."""
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    text = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", text, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$", "", text, flags=re.S)
    return re.sub(r"\{[\w:-]+\}`[^`]*`", "ROLE", text)


ids = [p.stem for p in CHAPTERS]


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_visible_code_cells_are_short_and_narrow(path):
    cells = _cells(path)
    problems = []
    for i, (cell, solution) in enumerate(zip(cells, _in_solution(cells))):
        if cell.cell_type != "code" or solution or not _visible(cell):
            continue
        lines = cell.source.rstrip().splitlines()
        if len(lines) > MAX_LINES:
            problems.append(f"cell {i}: {len(lines)} lines ({lines[0][:50]!r}...)")
        problems += [f"cell {i}: {len(line)} characters: {line[:60]!r}..." for line in lines if len(line) > MAX_WIDTH]
    assert not problems, f"{path.name}: {len(problems)} visible cell(s) too long or too wide:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_no_function_is_defined_in_a_visible_cell(path):
    cells = _cells(path)
    found = [f"cell {i}: {line.strip()}" for i, (cell, solution) in enumerate(zip(cells, _in_solution(cells)))
             if cell.cell_type == "code" and not solution and _visible(cell) and not _is_template(cell.source)
             for line in cell.source.splitlines() if re.match(r"\s*(async\s+)?def \w+|\s*class \w+", line)]
    assert not found, f"{path.name}: functions defined on the page (they belong in lib, with a test): {found}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_cells_hidden_on_the_site_are_hidden_in_the_lab(path):
    shown = [i for i, c in enumerate(_cells(path)) if c.cell_type == "code"
             and {"remove-input", "remove-cell"} & set(c.metadata.get("tags", []))
             and not c.metadata.get("jupyter", {}).get("source_hidden")]
    assert not shown, f"{path.name}: cells {shown} are hidden on the site but not in JupyterLab (jupyter.source_hidden)"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_no_role_is_split_across_lines(path):
    """A role broken by a line break (``{ref}`section 6.2`` then ``<claim-tv2>`` on the next line) reaches the plain
    notebooks unconverted, as raw MyST (Exercise 6.2 did)."""
    split = [m.group(0) for c in _cells(path) if c.cell_type == "markdown"
             for m in re.finditer(r"\{[a-z][\w:-]*\}`[^`\n]*\n", c.source)]
    assert not split, f"{path.name}: roles split across lines: {split}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_the_takeaway_writes_its_three_labels(path):
    """The Takeaway's labels are typed as the book's convention, never glued or reworded: a glued label rendered
    as "Held :" and a "Held, in part:" both failed the built page's Takeaway test (tests/pages/test_results_page.py)
    after a 40-minute build; this finds them in the source."""
    text = path.read_text(encoding="utf-8")
    box = text[text.index("{admonition} Takeaway"):]
    box = box[:box.index("\n:::")]
    missing = [label for label in ("**Held:**", "**Did not hold:**", "**So:**") if label not in box]
    assert not missing, f"{path.name}: the Takeaway lacks {missing}"


LAB_ONLY = "lab-only"
_OFF_SITE = {"remove_code_source": True, "remove_code_outputs": True}


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_only_lab_only_cells_leave_the_site_and_they_leave_it_whole(path):
    """A cell tagged ``lab-only`` (a live widget) is removed from the site, input and output, and is never run
    there (``skip-execution``); no other cell uses myst-nb's cell-level removal, which the lab rule above
    would not see."""
    bad = []
    for i, c in enumerate(_cells(path)):
        if c.cell_type != "code":
            continue
        tags, site = set(c.metadata.get("tags", [])), c.metadata.get("mystnb", {})
        off = {k: site.get(k) for k in _OFF_SITE}
        if LAB_ONLY in tags and (off != _OFF_SITE or "skip-execution" not in tags or "glue(" in c.source):
            bad.append(f"cell {i}: lab-only needs mystnb {_OFF_SITE}, skip-execution and no glue")
        if LAB_ONLY not in tags and any(off.values()):
            bad.append(f"cell {i}: removed from the site by mystnb metadata without the lab-only tag")
    assert not bad, f"{path.name}: {bad}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_the_chapter_numbers_its_figures(path):
    first = next(c.source for c in _cells(path)
                 if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))
    assert re.search(rf"book_setup\([^)]*chapter={_chapter(path)}\b", first), \
        f"{path.name}: the first code cell must call lib.page.setup.book_setup(chapter={_chapter(path)})"


def _exercise_blocks(cells: list) -> list[dict]:
    """Every exercise and solution directive of the chapter, in order, with its options."""
    blocks = []
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        lines = cell.source.splitlines()
        for j, line in enumerate(lines):
            m = _FENCE.match(line.strip())
            if m and m["name"] in ("exercise", "solution", "solution-start", "exercise-start"):
                opts = {}
                for opt in lines[j + 1:]:
                    o = re.match(r"^:(\w+):\s*(.*)$", opt.strip())
                    if not o:
                        break
                    opts[o[1]] = o[2]
                blocks.append({"name": m["name"], "arg": m["arg"], **opts})
    return blocks


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_exercises_are_numbered_objects_each_followed_by_its_solution(path):
    cells = _cells(path)
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"^\*\*Exercise", text, re.M), f"{path.name}: an exercise written as bold text"
    assert "{admonition} Solution" not in text, f"{path.name}: a solution written as an admonition"
    blocks = _exercise_blocks(cells)
    exercises = [b for b in blocks if b["name"].startswith("exercise")]
    assert exercises, f"{path.name} has no exercises"
    for k, ex in enumerate(exercises, start=1):
        assert ex.get("label", "").startswith("ex-"), f"{path.name}: exercise {k} needs a :label: ex-..."
        assert ex.get("enumerator") == f"{_chapter(path)}.{k}", \
            f"{path.name}: exercise {ex.get('label')} must say ':enumerator: {_chapter(path)}.{k}'"
    for a, b in zip(blocks, blocks[1:] + [None]):
        if a["name"].startswith("exercise"):
            assert b is not None and b["name"].startswith("solution") and b["arg"] == a["label"], \
                f"{path.name}: exercise {a['label']} is not followed by its solution"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_coding_solutions_are_executed_cells(path):
    cells = _cells(path)
    in_solution = _in_solution(cells)
    for cell in cells:
        if cell.cell_type == "markdown" and re.search(r"\{solution", cell.source):
            assert not re.search(r"^\s*```\s*(python|py|ipython3?)\s*$", cell.source, re.M), \
                f"{path.name}: a solution holds a python block the build never runs: {cell.source[:80]!r}"
    solution_cells = [c for c, inside in zip(cells, in_solution) if inside]
    for c in solution_cells:
        assert c.metadata.get("jupyter", {}).get("source_hidden"), \
            f"{path.name}: solution cell not collapsed in JupyterLab: {c.source[:60]!r}"
        assert re.match(rf"# Solution to Exercise {_chapter(path)}\.\d+\b", c.source), \
            f"{path.name}: a solution cell's first line must be '# Solution to Exercise N.k': {c.source[:60]!r}"
        # JupyterLab shows a cell's output even when its input is collapsed: a solution cell prints nothing
        # (its numbers go into the solution's text, glued by a hidden cell)
        tree = ast.parse(c.source)
        last = tree.body[-1] if tree.body else None
        shows = (isinstance(last, ast.Expr) and not isinstance(last.value, ast.Constant)) or any(
            isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("print", "display") for n in ast.walk(tree))
        assert not shows, f"{path.name}: a solution cell shows output, visible in the lab: {c.source[:60]!r}"
    checked = [c for c in cells if c.cell_type == "code" and _is_template(c.source) and "check_" in c.source]
    proved = [c for c in solution_cells if re.search(r"^assert check_\w+\(", c.source, re.M)]
    assert len(proved) >= len(checked), \
        f"{path.name}: {len(checked)} checked templates but {len(proved)} solution cells assert their checker"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_every_figure_is_referred_to_in_the_prose(path):
    cells = _cells(path)
    names = []
    for tree in code_cell_trees(cells):
        online = {id(n) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                  and "real_models_enabled" in ast.unparse(branch.test) for n in ast.walk(branch)}
        names += [n.args[1].value for n in ast.walk(tree) if isinstance(n, ast.Call) and id(n) not in online
                  and getattr(n.func, "id", getattr(n.func, "attr", "")) == "figure" and len(n.args) >= 2
                  and isinstance(n.args[1], ast.Constant)]
    assert names, f"{path.name} shows no numbered figure"  # (figures of the real-model switch excepted)
    assert len(names) == len(set(names)), f"{path.name}: a figure name is used twice: {names}"
    prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    missing = [n for n in names if f"{{eval}}`fig_{n}`" not in prose]
    assert not missing, f"{path.name}: figures never referred to in the text: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids)
def test_chapters_refer_to_each_other_by_reference(path):
    plain = re.findall(r"[^\n]{0,30}\b[Cc]hapters? \d[^\n]{0,20}", _prose(_cells(path)))
    assert not plain, f"{path.name}: chapters named in plain text (use {{ref}}`chapter 3 <ch-real-models>`): {plain[:6]}"
