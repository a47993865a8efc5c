"""The code that runs, shown on the page: a function's source from ``lib``, highlighted, on both surfaces.

A page that explains an algorithm ``lib`` implements shows ``show_source(lib.linalg.power.power_method)`` instead
of a copy, so the page and the library cannot drift apart (d2l's rule: the code on the page is the library).
Chapters show the code where they teach the method: the power method (1), γ_t and ρ_t (3), the closed-form
block Jacobian and the prompt bootstrap's resampled means (4), the steering edit's choice of ``w`` (5), the
split of a block Jacobian into the attention path and the rest (6).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from IPython.display import Code

from lib.errors import InputError

__all__ = ["show_source"]


def show_source(*objs: Callable[..., Any] | type, docstring: bool = False) -> Code:
    """The source of ``objs`` as highlighted Python (an IPython ``Code`` display: HTML on the site and in the lab).

    Args:
        objs: functions or classes of ``lib``, shown in this order, a blank line apart (decorators included).
        docstring: keep their docstrings (by default they are dropped: the page's prose explains the code).

    Raises:
        InputError: no object given.

    Example:
        >>> from lib.linalg import power
        >>> print(show_source(power.steps_needed).data.splitlines()[0])
        def steps_needed(ratio: float, tol: float = 1e-6) -> int:
    """
    if not objs:
        raise InputError("show_source needs at least one function or class")
    return Code("\n".join(_source(obj, docstring) for obj in objs), language="python")


def _source(obj: Callable[..., Any] | type, docstring: bool) -> str:
    """``obj``'s source, dedented, without its docstring unless ``docstring``; ends in one newline."""
    source = textwrap.dedent(inspect.getsource(obj))
    if not docstring:
        node = ast.parse(source).body[0]
        first = node.body[0] if getattr(node, "body", None) else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            lines = source.splitlines(keepends=True)
            source = "".join(lines[:first.lineno - 1] + lines[first.end_lineno:])
    return source.rstrip("\n") + "\n"
