"""The code that runs, shown on the page: a function's source from ``lib``, highlighted, on both surfaces.

A page that explains an algorithm ``lib`` implements shows ``show_source(lib.linalg.power.power_method)`` instead
of a copy, so the page and the library cannot drift apart.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from IPython.display import Code

__all__ = ["show_source"]


def show_source(obj: Callable[..., Any] | type, *, docstring: bool = False) -> Code:
    """``obj``'s source as highlighted Python (an IPython ``Code`` display: HTML on the site and in the lab).

    Args:
        obj: a function or class of ``lib``.
        docstring: keep the docstring (by default it is dropped: the page's prose explains the code).

    Example:
        >>> from lib.linalg import power
        >>> print(show_source(power.steps_needed).data.splitlines()[0])
        def steps_needed(ratio: float, tol: float = 1e-6) -> int:
    """
    source = textwrap.dedent(inspect.getsource(obj))
    if not docstring:
        node = ast.parse(source).body[0]
        first = node.body[0] if getattr(node, "body", None) else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            lines = source.splitlines(keepends=True)
            source = "".join(lines[:first.lineno - 1] + lines[first.end_lineno:])
    return Code(source, language="python")
