"""lib.page.source.show_source: the real code of ``lib`` on the page, without docstrings unless asked, and the
functions the chapters show exist and are shown whole."""

from __future__ import annotations

import ast
import inspect
import re

import pytest
from conftest import ROOT

from lib.errors import InputError
from lib.jacobians import single_token
from lib.linalg import power
from lib.page.source import show_source


def test_drops_the_docstring_and_keeps_the_code():
    code = show_source(power.steps_needed).data
    assert code.startswith("def steps_needed(") and '"""' not in code
    assert code.endswith("\n") and not code.endswith("\n\n")
    body = inspect.getsource(power.steps_needed)
    assert all(line in body for line in code.splitlines())  # nothing is rewritten, only left out


def test_keeps_the_docstring_when_asked():
    code = show_source(power.steps_needed, docstring=True).data
    assert code == inspect.getsource(power.steps_needed)


def test_keeps_decorators():
    code = show_source(single_token.block_jacobians).data
    assert code.startswith("@torch.no_grad()\ndef block_jacobians(")
    assert "Single-token Jacobians" not in code and "return J_mlp if part" in code


def test_several_objects_in_order_a_blank_line_apart():
    code = show_source(power.steps_needed, power.power_method).data
    first, second = code.split("\n\ndef ")
    assert first.startswith("def steps_needed(") and second.startswith("power_method(")
    assert "\n\n\n" not in code  # one blank line apart: the page stays compact
    ast.parse(code)  # still one valid Python text
    assert show_source(power.steps_needed).data in code and show_source(power.power_method).data in code


def test_renders_as_highlighted_html():
    html = show_source(power.steps_needed)._repr_html_()
    assert "steps_needed" in html and "<span" in html


def test_nothing_to_show_is_a_clear_error():
    with pytest.raises(InputError, match="at least one"):
        show_source()


CHAPTERS = sorted((ROOT / "book").glob("[0-9][0-9]_*.md"))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_shown_code_is_introduced_in_the_prose(chapter):
    """Each ``show_source`` cell follows a paragraph that introduces it (ends with a colon), never a bare cell."""
    text = chapter.read_text(encoding="utf-8")
    for m in re.finditer(r"\n\n```\{code-cell\} ipython3\n(?:(?!```).)*?show_source\(", text, flags=re.DOTALL):
        before = text[:m.start()].rstrip()
        assert before.endswith(":"), f"{chapter.name}: a show_source cell without a sentence that introduces it"
