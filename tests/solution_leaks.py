"""Find a chapter's answers in a notebook given to students (a student edition, an nbgrader release).

Read from the chapter's MyST source on its own (not with ``tools.student``), a chapter's answers are

* its solutions' code: every code cell between ``{solution-start}`` and ``{solution-end}``. A notebook
  leaks it when one of its code cells holds the same piece of code up to the names of variables: any
  expression of the solution at least :data:`MIN_CODE` characters long once every variable is written
  ``_`` (``tuple(int(t) for t in null.layer[null.q_rho < 0.05])`` and the same with ``v2_null`` are one
  piece), or a literal list, tuple, set or dict a solution assigns at top level (``my_spectrum = [1.0, 0.5,
  0.2]``);
* the numbers its solutions quote: every ``{eval}`name``` in a solution's text that the chapter's other
  prose does not use. A notebook leaks one when its code writes that name as a string (``glue("name",
  ...)``, a dict key handed to ``glue``, an f-string such as ``f"null_med_{d}"``): it computes the answer.

:func:`leaks` lists what a notebook leaks, as short descriptions (empty: nothing).
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat

MIN_CODE = 30
_OPEN = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\s*\{(?P<name>solution|solution-start|solution-end)\}")
_EVAL = re.compile(r"\{eval\}`([A-Za-z]\w*)`")


@dataclass
class Answers:
    """A chapter's answers: solution code pieces (normalised), top-level values, quoted names."""

    pieces: dict[str, str] = field(default_factory=dict)  # normalised expression -> its solution source
    values: dict[str, str] = field(default_factory=dict)  # normalised value -> "name = value"
    quoted: set[str] = field(default_factory=set)


class _Anonymous(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.copy_location(ast.Name(id="_", ctx=node.ctx), node)

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = "_"
        return node


def _normal(node: ast.AST) -> str:
    return ast.unparse(_Anonymous().visit(copy.deepcopy(node)))


def _pieces(tree: ast.AST) -> set[str]:
    """The normalised expressions of ``tree`` that do something (a call, an index, a comprehension...)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Constant, ast.Name, ast.JoinedStr, ast.Slice)):
            text = _normal(node)
            if len(text) >= MIN_CODE:
                out.add(text)
    return out


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:  # IPython magics
        return None


def _split_markdown(markdown: str, in_region: bool) -> tuple[list[str], list[str], bool]:
    """The lines of a markdown cell that belong to a solution (its ``{solution}`` blocks, the text of a
    ``{solution-start}`` region), the other lines, and whether a region is still open after the cell."""
    lines, inside, rest, i = markdown.split("\n"), [], [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None:
            (inside if in_region else rest).append(lines[i])
            i += 1
            continue
        fence = m["fence"]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() and
                    set(lines[j].strip()) == {fence[0]} and len(lines[j].strip()) >= len(fence)), len(lines) - 1)
        inside.extend(lines[i:end + 1])
        in_region = {"solution-start": True, "solution-end": False}.get(m["name"], in_region)
        i = end + 1
    return inside, rest, in_region


def chapter_answers(path: Path) -> Answers:
    """Read a chapter's answers from its source (see the module docstring)."""
    answers, in_region = Answers(), False
    solution_text, other_text = [], []
    for cell in jupytext.read(path, fmt="md:myst").cells:
        if cell.cell_type == "markdown":
            inside, rest, in_region = _split_markdown(cell.source, in_region)
            solution_text += inside
            other_text += rest
        elif in_region and (tree := _parse(cell.source)) is not None:
            for piece in _pieces(tree):
                answers.pieces.setdefault(piece, cell.source.split("\n")[0])
            for stmt in tree.body:
                if isinstance(stmt, ast.Assign) and _is_literal(stmt.value):
                    answers.values[_normal(stmt.value)] = ast.unparse(stmt)
    others = set(_EVAL.findall("\n".join(other_text)))
    answers.quoted = set(_EVAL.findall("\n".join(solution_text))) - others
    return answers


def _is_literal(node: ast.expr) -> bool:
    """A list, tuple, set or dict of constants (``[1.0, 0.5, 0.2]``): an answer one can write down."""
    if not isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        return False
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _names_written(tree: ast.AST, quoted: set[str]) -> set[str]:
    """The names of ``quoted`` that ``tree`` writes as a string: a constant, or an f-string that starts with
    a constant of 3 characters or more (``f"null_med_{d}"`` writes ``null_med_128``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in quoted:
            found.add(node.value)
        elif (isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant)
              and len(node.values[0].value) >= 3):
            pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values)
            found.update(name for name in quoted if re.fullmatch(pattern, name))
    return found


def leaks(path: Path, nb: nbformat.NotebookNode, answers: Answers | None = None) -> list[str]:
    """What the notebook ``nb`` shows of the answers of the chapter at ``path`` (see the module docstring)."""
    answers = answers or chapter_answers(path)
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or (tree := _parse(cell.source)) is None:
            continue
        found += [f"cell {i}: solution code {p!r} (from {answers.pieces[p]!r})"
                  for p in sorted(_pieces(tree) & answers.pieces.keys())]
        values = {_normal(n) for n in ast.walk(tree) if isinstance(n, ast.expr)} & answers.values.keys()
        found += [f"cell {i}: the value of `{answers.values[v]}`" for v in sorted(values)]
        found += [f"cell {i}: computes {name!r}, which only a solution quotes"
                  for name in sorted(_names_written(tree, answers.quoted))]
    return found
