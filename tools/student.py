"""Course editions of the chapters: a student notebook and an instructor notebook per chapter.

``make student`` runs this on every chapter (``book/NN_*.md``) and the html build offers the result for
download (``book/_ext/student_downloads.py``, page ``book/course.md``)::

    python -m tools.student --out DIR [book/01_power_method.md ...]

writes, for each chapter, two nbformat-4 notebooks without outputs:

- ``DIR/student/NN_name.ipynb``: the chapter with every solution block removed (its text *and* its code);
  exercise texts, template cells and checker calls stay, every other cell is kept as it is, and a first
  markdown cell says what the edition is and how the checkers grade.
- Neither edition has the cells tagged ``solution-numbers``: hidden glue cells that compute what only the
  solutions quote (the answers' numbers), which the site and the lab still run.
- ``DIR/instructor/NN_name.ipynb``: the chapter with its solutions, in nbgrader's format (cell metadata
  ``nbgrader`` of schema version 3). A template cell becomes an *autograded answer* cell (``solution``)
  whose stubs hold the solution's code between ``### BEGIN SOLUTION`` / ``### END SOLUTION``, so
  ``nbgrader generate_assignment`` gives back the template; each checker call becomes a locked
  *autograded test* cell ``assert check_...(...)`` worth 1 point; each written solution is a *manually
  graded answer* markdown cell (1 point; 0 where the exercise is already graded by a test cell).
  The first cell and each answer cell also carry their *release text* (metadata :data:`RELEASE_KEY`): the
  student's header, and the template exactly as the student edition has it (``my_spectrum = []`` included,
  where a solution region would leave a bare ``raise``); the course folder's nbgrader configuration
  (``tools.course``, ``make course``) puts it in place when it generates the students' release.

A solution block is sphinx-exercise's markup, the one the chapters use (``tests/pages/test_page_limits.py``): a
``{solution}`` directive, or everything between a ``{solution-start}`` and a ``{solution-end}`` directive, code
cells included; :func:`split_solutions` finds both.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
from nbformat import NotebookNode

from tools.course import RELEASE_KEY

__all__ = ["BEGIN_SOLUTION", "END_SOLUTION", "RELEASE_KEY", "SOLUTION_NUMBERS", "EditionError", "Chapter", "Piece", "Solution", "editions",
           "fresh_notebook", "read_chapter", "split_solutions", "write_editions", "write_notebook"]

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = "book/[0-9][0-9]_*.md"
BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
NBGRADER_SCHEMA = 3
#: The tag of a chapter's cells that compute only what its solutions quote (hidden glue): neither edition has them
SOLUTION_NUMBERS = "solution-numbers"
_PY_INFO = re.compile(r"^(python3?|py|ipython3?)$")
_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\s*(?P<info>.*?)\s*$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:-]+)\}")


class EditionError(ValueError):
    """A chapter that cannot be turned into editions: missing, an unclosed solution, an unmatched template."""


@dataclass(frozen=True)
class Piece:
    """A whole cell, or a run of lines of a markdown cell, with the solution block it belongs to.

    ``solution`` is the 1-based number of the block in the chapter (blocks are numbered in order), or
    ``None`` outside every solution.
    """

    cell: NotebookNode
    solution: int | None


@dataclass
class Solution:
    """One solution block: its markdown as written (code cells of a start/end region as python fences)
    and the python code it contains (fenced ``python`` blocks and code cells), one source per block."""

    number: int
    markdown: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)


@dataclass
class Chapter:
    """A chapter read with jupytext: its notebook, split into pieces, and its solutions by number."""

    path: Path
    number: str
    title: str
    notebook: NotebookNode
    pieces: list[Piece]
    solutions: dict[int, Solution]


def _closing(lines: Sequence[str], start: int, fence: str) -> int | None:
    """Index of the line that closes the fence opened on ``lines[start]`` (CommonMark: a line of only
    the same character, at least as many), or ``None`` if none does."""
    for j in range(start + 1, len(lines)):
        s = lines[j].strip()
        if len(s) >= len(fence) and s == fence[0] * len(s):
            return j
    return None


def _solution_kind(info: str) -> str | None:
    """``"block"``, ``"solution-start"``, ``"solution-end"`` or ``None`` for a fence's info string."""
    m = _DIRECTIVE.match(info)
    if m is None:
        return None
    name = m["name"]
    if name == "solution":
        return "block"
    return name if name in ("solution-start", "solution-end") else None


def _add(runs: list[tuple[int | None, list[str]]], number: int | None, chunk: list[str]) -> None:
    """Append ``chunk`` to the last run if it has the same solution number, else start a new run."""
    if runs[-1][0] != number:
        runs.append((number, []))
    runs[-1][1].extend(chunk)


def split_solutions(cells: Sequence[NotebookNode], where: str = "chapter",
                    first_lines: Sequence[int | None] | None = None) -> list[Piece]:
    """Split ``cells`` into pieces inside and outside solution blocks, in order.

    Recognises ``{solution}`` blocks (backtick or colon fences, within a markdown cell) and ``{solution-start}`` … ``{solution-end}`` regions, which may span cells: every
    code cell between them belongs to the solution. Fences follow CommonMark: a block closes at the first
    line made only of its fence character, at least as long as its opening.

    Args:
        cells: the notebook's cells (not modified; markdown pieces are new cells).
        where: the chapter's name for error messages.
        first_lines: 1-based line of each cell in the source file, for error messages (optional).

    Raises:
        EditionError: a solution block never closed, a solution inside a ``{solution-start}`` region,
            or a ``{solution-end}`` without a start.
    """
    pieces: list[Piece] = []
    count = 0
    region: tuple[int, str] | None = None  # (number, location) of an open {solution-start}

    def at(ci: int, i: int) -> str:
        first = first_lines[ci] if first_lines is not None else None
        return f"{where}:{first + i}" if first is not None else f"{where}, cell {ci} line {i + 1}"

    for ci, cell in enumerate(cells):
        current = region[0] if region else None
        if cell.cell_type != "markdown":
            pieces.append(Piece(cell, current))
            continue
        lines = cell.source.split("\n")
        runs: list[tuple[int | None, list[str]]] = [(current, [])]
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if m is None:
                _add(runs, current, [lines[i]])
                i += 1
                continue
            kind = _solution_kind(m["info"])
            end = _closing(lines, i, m["fence"])
            if end is None:
                if kind is not None:
                    raise EditionError(f"{at(ci, i)}: the solution block `{lines[i].strip()}` is never "
                                       f"closed (no line of only {m['fence']!r} after it in this cell)")
                end = len(lines) - 1  # an unclosed code fence runs to the end of its cell
            if kind is not None and kind != "solution-end" and region is not None:
                raise EditionError(f"{at(ci, i)}: `{lines[i].strip()}` inside the solution region opened at "
                                   f"{region[1]}, which has no `{{solution-end}}` before it")
            if kind in ("block", "solution-start"):
                count += 1
                _add(runs, count, lines[i:end + 1])
                if kind == "solution-start":
                    region, current = (count, at(ci, i)), count
            elif kind == "solution-end":
                if region is None:
                    raise EditionError(f"{at(ci, i)}: `{{solution-end}}` without a `{{solution-start}}` "
                                       "before it")
                _add(runs, current, lines[i:end + 1])
                region, current = None, None
            else:
                _add(runs, current, lines[i:end + 1])
            i = end + 1
        for number, chunk in runs:
            text = "\n".join(chunk).strip("\n")
            if text.strip():
                part = copy.deepcopy(cell)
                part.source = text
                pieces.append(Piece(part, number))
    if region is not None:
        raise EditionError(f"{region[1]}: the solution region `{{solution-start}}` is never closed "
                           "(no `{solution-end}` after it)")
    return pieces


def _python_blocks(markdown: str) -> list[str]:
    """The contents of every fenced python block in ``markdown``, at any depth."""
    lines, blocks, i = markdown.split("\n"), [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is not None and m["fence"][0] == "`" and _PY_INFO.match(m["info"]):
            end = _closing(lines, i, m["fence"])
            end = len(lines) if end is None else end
            blocks.append(textwrap.dedent("\n".join(lines[i + 1:end])))
            i = end
        i += 1
    return blocks


def _first_lines(text: str, cells: Sequence[NotebookNode]) -> list[int | None]:
    """1-based line of each cell's source in the file ``text`` (jupytext keeps sources verbatim)."""
    out: list[int | None] = []
    pos = 0
    for cell in cells:
        k = text.find(cell.source, pos) if cell.source else -1
        out.append(text.count("\n", 0, k) + 1 if k >= 0 else None)
        pos = k + len(cell.source) if k >= 0 else pos
    return out


def read_chapter(path: str | Path) -> Chapter:
    """Read a MyST chapter with jupytext and find its solutions.

    Raises:
        EditionError: the file is missing, or :func:`split_solutions` rejects it.
    """
    path = Path(path)
    if not path.is_file():
        raise EditionError(f"chapter not found: {path}")
    text = path.read_text(encoding="utf-8")
    nb = jupytext.reads(text, fmt="md:myst" if path.suffix == ".md" else path.suffix.lstrip("."))
    pieces = split_solutions(nb.cells, str(path), _first_lines(text, nb.cells))
    solutions: dict[int, Solution] = {}
    for p in pieces:
        if p.solution is None:
            continue
        sol = solutions.setdefault(p.solution, Solution(p.solution))
        if p.cell.cell_type == "code":
            sol.code.append(p.cell.source)
            if "remove-cell" not in p.cell.metadata.get("tags", []):  # the site shows it: so does the answer
                sol.markdown.append(f"```python\n{p.cell.source}\n```")
        else:
            sol.code.extend(_python_blocks(p.cell.source))
            sol.markdown.append(p.cell.source)
    for sol in solutions.values():
        sol.markdown = _ungated(sol.markdown)
    title = next((line[2:].strip() for c in nb.cells if c.cell_type == "markdown"
                  for line in c.source.split("\n") if line.startswith("# ")), path.stem)
    number = re.match(r"\d*", path.stem).group(0).lstrip("0") or "0"
    return Chapter(path, number, title, nb, pieces, solutions)


def _ungated(parts: list[str]) -> list[str]:
    """A ``{solution-start}`` … ``{solution-end}`` region's markdown (its start, its code as python fences, its
    end) as one ``{solution}`` block, which renders alone in a notebook cell; other solutions unchanged."""
    first = parts[0].split("\n") if parts else []
    m = _FENCE.match(first[0]) if first else None
    if m is None or _solution_kind(m["info"]) != "solution-start":
        return parts
    fence = m["fence"]
    head = [first[0].replace("{solution-start}", "{solution}", 1)]
    end = _closing(first, 0, fence)
    head += first[1:end if end is not None else len(first)]
    rest = [part for part in parts[1:] if not _FENCE.match(part.split("\n")[0] or "")
            or _solution_kind(_FENCE.match(part.split("\n")[0])["info"]) != "solution-end"]
    return ["\n\n".join(["\n".join(head).rstrip(), *rest, fence])]


# ---------------------------------------------------------------------------------------------------------
# The instructor edition: templates filled in between nbgrader's markers


@dataclass
class _Definitions:
    """Top-level definitions of one solution's code: function bodies, assignments, imports (by name)."""

    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    bodies: dict[str, list[str]] = field(default_factory=dict)
    assigns: dict[str, str] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)


def _definitions(sol: Solution, where: str) -> _Definitions:
    defs = _Definitions()
    for src in sol.code:
        try:
            tree = ast.parse(src)
        except SyntaxError as exc:
            raise EditionError(f"{where}: solution {sol.number} has python code that does not parse "
                               f"({exc.msg}, line {exc.lineno} of the block)") from exc
        lines = src.split("\n")
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                body = stmt.body[1:] if _docstring(stmt) and len(stmt.body) > 1 else stmt.body
                if body[0].lineno == stmt.lineno:  # `def f(x): return x`
                    code = [ast.unparse(s) for s in body]
                else:
                    code = textwrap.dedent("\n".join(lines[body[0].lineno - 1:stmt.end_lineno])).split("\n")
                defs.functions[stmt.name], defs.bodies[stmt.name] = stmt, code
            elif (name := _assigned_name(stmt)) is not None:
                defs.assigns[name] = ast.get_source_segment(src, stmt)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for alias in stmt.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    defs.imports[bound] = ast.get_source_segment(src, stmt)
    return defs


def _docstring(fn: ast.FunctionDef) -> bool:
    first = fn.body[0]
    return (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str))


def _is_stub(stmt: ast.stmt) -> bool:
    """A template function: its body is an optional docstring and ``raise NotImplementedError``."""
    if not isinstance(stmt, ast.FunctionDef):
        return False
    body = stmt.body[1:] if _docstring(stmt) else stmt.body
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _start(stmt: ast.stmt) -> int:
    """0-based index of a top-level statement's first line, decorators included."""
    return min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]) - 1


def _assigned_name(stmt: ast.stmt) -> str | None:
    """The name ``stmt`` assigns if it is ``name = ...``, else ``None``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


def _checker_call(stmt: ast.stmt, checkers: set[str]) -> ast.Call | None:
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in checkers):
        return stmt.value
    return None


def _checkers(pieces: Iterable[Piece]) -> set[str]:
    """Names imported from ``lib.exercises`` by the chapter's own (non-solution) code cells."""
    names: set[str] = set()
    for p in pieces:
        if p.solution is None and p.cell.cell_type == "code":
            try:
                tree = ast.parse(p.cell.source)
            except SyntaxError:  # IPython magics: not an exercise cell
                continue
            for stmt in tree.body:
                if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("lib.exercises"):
                    names.update(a.asname or a.name for a in stmt.names)
    return names


def _meta(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": NBGRADER_SCHEMA,
            "solution": solution}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _region(indent: str, lines: Sequence[str]) -> list[str]:
    body = [indent + line if line.strip() else "" for line in lines]
    return [indent + BEGIN_SOLUTION, *body, indent + END_SOLUTION]


def _needed_imports(node: ast.AST, imports: dict[str, str]) -> list[str]:
    """The solutions' import statements that bind a name ``node`` uses, sorted and without repeats."""
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return sorted({imports[name] for name in used if name in imports})


class _Instructor:
    """Builds the instructor cells of one chapter (see the module docstring)."""

    def __init__(self, ch: Chapter) -> None:
        self.ch = ch
        self.defs = {n: _definitions(s, str(ch.path)) for n, s in ch.solutions.items()}
        self.imports = {k: v for d in self.defs.values() for k, v in d.imports.items()}
        self.checkers = _checkers(ch.pieces)
        self.graded: set[int] = set()  # solutions graded by a test cell
        self.ids: set[str] = set()

    def grade_id(self, numbers: Iterable[int], role: str) -> str:
        base = "_".join(f"ex{self.ch.number}_{n}" for n in sorted(set(numbers))) + f"_{role}"
        gid, k = base, 1
        while gid in self.ids:
            k += 1
            gid = f"{base}{k}"
        self.ids.add(gid)
        return gid

    def defining(self, name: str) -> int | None:
        """Number of the first solution that defines ``name`` at top level."""
        return next((n for n, d in self.defs.items() if name in d.functions or name in d.assigns), None)

    def exercise_cells(self, cell: NotebookNode) -> list[NotebookNode] | None:
        """The cells that replace a template/checker code cell, or ``None`` if ``cell`` is neither."""
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            return None
        stubs = [s for s in tree.body if _is_stub(s)]
        calls = [c for s in tree.body if (c := _checker_call(s, self.checkers)) is not None]
        if not stubs and not calls:
            return None
        lines = cell.source.split("\n")
        where = f"{self.ch.path}: cell `{lines[0]}`"
        matched: dict[str, int] = {}
        for stub in stubs:
            number = next((n for n, d in self.defs.items() if stub.name in d.functions), None)
            if number is None:
                raise EditionError(f"{where}: no solution defines the template function `{stub.name}`")
            matched[stub.name] = number
        # template assignments (`my_spectrum = []`) that a matched solution also makes: the first one wins
        assigns = {name: n for stmt in tree.body if (name := _assigned_name(stmt)) is not None
                   for n in sorted(set(matched.values()), reverse=True) if name in self.defs[n].assigns}
        imports, answer, release, pos = [], [], [], 0  # release: the answer cell as the template has it
        for stmt in tree.body:
            start = _start(stmt)
            gap, pos = lines[pos:start], stmt.end_lineno
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and stubs:
                imports.extend(lines[start:pos])
                continue
            if _checker_call(stmt, self.checkers) is not None:
                answer.extend(gap)
                release.extend(gap)
                continue
            release.extend(gap + lines[start:pos])
            if isinstance(stmt, ast.FunctionDef) and stmt.name in matched:
                answer.extend(gap + self._filled(stmt, lines, matched[stmt.name]))
            elif (name := _assigned_name(stmt)) in assigns:
                code = self.defs[assigns[name]].assigns[name]
                needed = _needed_imports(ast.parse(code), self.imports)
                answer.extend(gap + _region("", [*needed, *code.split("\n")]))
            else:
                answer.extend(gap + lines[start:pos])
        answer.extend(lines[pos:])
        release.extend(lines[pos:])
        out: list[NotebookNode] = []
        if imports:
            out.append(nbformat.v4.new_code_cell(_tidy(imports)))
        if _tidy(answer):
            code = nbformat.v4.new_code_cell(_tidy(answer))
            if matched:
                code.metadata.update(_meta(self.grade_id(matched.values(), "code"), solution=True,
                                           grade=False, locked=False))
                _set_release(code, _tidy(release))
            out.append(code)
        for call in calls:
            names = [a.id for a in call.args if isinstance(a, ast.Name)]
            numbers = [n for a in names if (n := matched.get(a, self.defining(a))) is not None][:1]
            if not numbers:
                raise EditionError(f"{where}: the checker call `{ast.unparse(call)}` grades no exercise that "
                                   "has a solution")
            self.graded.update(numbers)
            test = nbformat.v4.new_code_cell(f"assert {ast.get_source_segment(cell.source, call)}")
            test.metadata.update(_meta(self.grade_id(numbers, "test"), solution=False, grade=True,
                                       locked=True, points=1))
            out.append(test)
        return out

    def _filled(self, stub: ast.FunctionDef, lines: Sequence[str], number: int) -> list[str]:
        """The stub's header (signature, docstring) and the solution's body between the markers."""
        body_stmt = stub.body[-1]
        end = stub.body[0].end_lineno if _docstring(stub) else body_stmt.lineno - 1
        header = list(lines[_start(stub):end])
        while header and (not header[-1].strip() or header[-1].strip().startswith("#")) and len(header) > 1:
            header.pop()
        fn = self.defs[number].functions[stub.name]
        body = [*_needed_imports(fn, self.imports), *self.defs[number].bodies[stub.name]]
        return header + _region(" " * body_stmt.col_offset, body)

    def writeup(self, number: int) -> NotebookNode:
        """The written solution as a manually graded answer (0 points when a test cell grades it)."""
        cell = nbformat.v4.new_markdown_cell("\n\n".join(self.ch.solutions[number].markdown))
        cell.metadata.update(_meta(self.grade_id([number], "answer"), solution=True, grade=True, locked=False,
                                   points=0 if number in self.graded else 1))
        return cell


def _set_release(cell: NotebookNode, source: str) -> None:
    """Record in ``cell``'s metadata the source its nbgrader release shows (see :data:`RELEASE_KEY`)."""
    cell.metadata[RELEASE_KEY] = {"release": source}


def _tidy(lines: Sequence[str]) -> str:
    """Join lines without leading/trailing blank lines and with at most two blank lines in a row."""
    text = re.sub(r"\n{4,}", "\n\n\n", "\n".join(line.rstrip() for line in lines))
    return text.strip("\n")


# ---------------------------------------------------------------------------------------------------------
# Both editions


def _header(ch: Chapter, edition: str) -> NotebookNode:
    """The first cell of an edition: what it is and how its exercises are graded.

    ``edition`` is ``"student"``, ``"instructor"`` or ``"release"`` (the student's notebook that
    ``nbgrader generate_assignment`` writes from the instructor edition; the instructor's header carries
    it as its release text).
    """
    name = f"*{ch.title}*, from the book *Spectral dynamics of transformers*"
    checkers = ("the checker (from `lib.exercises`) runs a few cases, prints ✓ or ✗ for each with what went "
                "wrong, and returns `True` when every case passes.")
    if edition == "student":
        text = (f"**Student edition** of {name}: the chapter with the solutions of its exercises removed.\n\n"
                "Run the notebook from the top: the exercises use the chapter's variables. For an "
                "auto-checked exercise, replace `raise NotImplementedError` in its template cell with your "
                f"code and run the cell again: {checkers} The "
                "other exercises are answered in words or with code of your own. The notebook needs the "
                "book's Python environment (see the book's README: `make lab`).")
    elif edition == "release":
        text = (f"**Student edition** of {name}, as an assignment: the chapter with the solutions of its "
                "exercises removed.\n\n"
                "Run the notebook from the top: the exercises use the chapter's variables. For an "
                "auto-checked exercise, replace `raise NotImplementedError` in its template cell with your "
                f"code and run the cell and the test cell below it: {checkers} Each test cell is "
                "worth 1 point when its checker returns `True`; a failing one raises `AssertionError`, which "
                "stops *Run All* (*Run → Run Selected Cell and All Below* goes on). The written answers (the "
                "cells that read YOUR ANSWER HERE) are graded by hand. Do not delete or copy cells, and submit "
                "the notebook under its own name. It needs the book's Python environment.")
    else:  # no marker text here: nbgrader takes any line that contains one for a marker
        text = (f"**Instructor edition** of {name}: the chapter with the solutions in place, in nbgrader's "
                "format. Template cells are autograded answer cells whose solution code sits between "
                "nbgrader's solution markers; each checker call is a locked autograded test "
                "cell (1 point); each written solution is a manually graded answer cell. In the course "
                "folder that `make course` writes, `nbgrader generate_assignment` turns this notebook into "
                "the student's (this cell included) and `nbgrader autograde` grades the submissions by "
                "running the test cells.")
    cell = nbformat.v4.new_markdown_cell(text)
    if edition == "instructor":
        _set_release(cell, _header(ch, "release").source)
    return cell


def fresh_notebook(source: NotebookNode, cells: Iterable[NotebookNode], **metadata: object) -> NotebookNode:
    """A validated nbformat-4 notebook of copies of ``cells``: ids ``cell-000``, ``cell-001``, ..., no
    outputs, the kernelspec of the ``source`` notebook (Python 3 if it has none) and extra ``metadata``."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": copy.deepcopy(source.metadata.get(
        "kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})), **metadata})
    for i, cell in enumerate(cells):
        cell = copy.deepcopy(cell)
        cell.id = f"cell-{i:03d}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def write_notebook(nb: NotebookNode, path: Path) -> Path:
    """Write ``nb`` to ``path`` (folders made as needed) and return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return path


def _numbers_only(cell: NotebookNode) -> bool:
    return cell.cell_type == "code" and SOLUTION_NUMBERS in cell.metadata.get("tags", [])


def _bound_names(source: str) -> set[str]:
    """Names a cell binds: assignment and loop targets, and the names it glues (``glue("name", ...)``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names | {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                    and getattr(n.func, "id", "") == "glue" and isinstance(n.args[0], ast.Constant)}


def _check_numbers_cells(ch: Chapter) -> None:
    """Refuse a ``solution-numbers`` cell whose names a cell the editions keep uses (it would fail there)."""
    dropped: dict[str, str] = {}
    for p in ch.pieces:
        if p.solution is not None or p.cell.cell_type != "code":
            continue
        if _numbers_only(p.cell):
            dropped.update(dict.fromkeys(_bound_names(p.cell.source), p.cell.source.split("\n")[0]))
            continue
        try:
            used = {n.id for n in ast.walk(ast.parse(p.cell.source)) if isinstance(n, ast.Name)}
        except SyntaxError:
            continue
        if clash := sorted(used & dropped.keys()):
            first = p.cell.source.split("\n")[0]
            raise EditionError(f"{ch.path}: the cell `{first}` uses {clash}, which only the {SOLUTION_NUMBERS} "
                               f"cell `{dropped[clash[0]]}` defines (neither edition has it)")


def editions(ch: Chapter) -> tuple[NotebookNode, NotebookNode]:
    """The ``(student, instructor)`` notebooks of a chapter (validated nbformat 4).

    Neither has the chapter's ``solution-numbers`` cells (:data:`SOLUTION_NUMBERS`), which compute what only
    its solutions quote.

    Raises:
        EditionError: a cell the editions keep uses a name that only a ``solution-numbers`` cell defines.
    """
    _check_numbers_cells(ch)
    pieces = [p for p in ch.pieces if not _numbers_only(p.cell)]
    ch = Chapter(ch.path, ch.number, ch.title, ch.notebook, pieces, ch.solutions)
    student = [_header(ch, "student")] + [p.cell for p in ch.pieces if p.solution is None]
    inst = _Instructor(ch)
    # first the exercise cells (a write-up's points depend on whether a test cell grades its exercise)
    replaced = {i: inst.exercise_cells(p.cell) for i, p in enumerate(ch.pieces)
                if p.solution is None and p.cell.cell_type == "code"}
    instructor, written = [_header(ch, "instructor")], set()
    for i, p in enumerate(ch.pieces):
        if p.solution is None:
            instructor.extend(replaced.get(i) or [p.cell])
        elif p.solution not in written:
            written.add(p.solution)
            instructor.append(inst.writeup(p.solution))
    return fresh_notebook(ch.notebook, student), fresh_notebook(ch.notebook, instructor)


def write_editions(chapters: Iterable[str | Path], out: str | Path) -> list[Path]:
    """Write ``out/student/<stem>.ipynb`` and ``out/instructor/<stem>.ipynb`` for every chapter.

    Every chapter is read and converted before anything is written, so a bad chapter writes nothing.

    Returns:
        The paths written, student edition then instructor edition, chapter by chapter.
    """
    out = Path(out)
    done = [(Path(c).stem, editions(read_chapter(c))) for c in chapters]
    written = []
    for stem, notebooks in done:
        for edition, nb in zip(("student", "instructor"), notebooks):
            written.append(write_notebook(nb, out / edition / f"{stem}.ipynb"))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.student", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for student/ and instructor/")
    parser.add_argument("chapters", nargs="*", type=Path, help=f"MyST chapters (default: {CHAPTERS})")
    args = parser.parse_args(argv)
    chapters = args.chapters or sorted(ROOT.glob(CHAPTERS))
    try:
        written = write_editions(chapters, args.out)
    except EditionError as exc:
        print(f"tools.student: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written) // 2} chapters to {args.out}/student and {args.out}/instructor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
