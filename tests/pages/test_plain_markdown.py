"""The renderer of MyST markdown for plain-Markdown notebook front ends (tools.plain_markdown), construct by
construct, on a small made-up site index (no build needed)."""

from __future__ import annotations

import re

import jupytext
import nbformat
import pytest
from conftest import MYST_HEADER, ROOT

from tools.plain_markdown import (
    BUILT_VALUE_TITLE,
    RenderError,
    SiteIndex,
    Target,
    Value,
    render_markdown,
    render_notebook,
    value_text,
    values_from_glue,
)

DOC = "book/01_power_method"
SITE = "https://example.org/book/"
INDEX = SiteIndex(
    site_url=SITE,
    labels={"ch-real-models": Target("book/03_real_models", "ch-real-models", "3. Real models"),
            "sec-x": Target(DOC, "sec-x", "1.2 A section")},
    terms={"power method": Target("book/glossary", "term-Power-method", "Power method")},
    equations={"eq-power-step": Target(DOC, "equation-eq-power-step", "(1)"),
               "eq-other": Target(DOC, "equation-eq-other", "(2)")},
    proofs={"prop-consensus": Target("book/02_shared_weights", "prop-consensus", "Proposition 2.1")},
    exercises={"ex-power-method": Target(DOC, "ex-power-method", "1.1"),
               "ex-head-sum": Target(DOC, "ex-head-sum", "1.2")},
    figures={"fig-1-tilt": Target(DOC, "fig-1-tilt", "Fig. 1.3")},
    citations={"li2026power": Target("book/intro", "id1", "LA26")},
    pages={"book/notation": "Notation", DOC: "1. The power method"},
)
VALUES = {"toy_a0": Value("0.109"), "fig_tilt": Value("Fig. 1.3", "fig-1-tilt"), "odd": Value("a_b*c|d $x$")}


def render(text: str, index: SiteIndex = INDEX) -> str:
    return render_markdown(text, DOC, index, VALUES)


def test_eval_is_the_built_value_marked_as_built():
    out = render("tilt {eval}`toy_a0` here")
    assert out == f'tilt <span title="toy_a0: {BUILT_VALUE_TITLE}">0.109</span> here'


def test_a_built_value_is_literal_text():
    out = render("{eval}`odd`")
    assert r"a\_b\*c\|d \$x\$" in out  # no emphasis, table cell or math from the value's characters


def test_a_figure_reference_links_to_the_figure_on_the_site():
    assert render("as {eval}`fig_tilt` shows") == f"as [Fig. 1.3]({SITE}book/01_power_method.html#fig-1-tilt) shows"
    assert render("as {eval}`fig_tilt` shows", SiteIndex(figures=INDEX.figures)) == "as Fig. 1.3 shows"


def test_ref_term_eq_prf_cite_and_page_links():
    out = render("{ref}`chapter 3 <ch-real-models>`, {ref}`sec-x`, {term}`power method <Power method>`, "
                 "{term}`Power method`, {eq}`eq-power-step`, {prf:ref}`prop-consensus`, {cite}`li2026power`, "
                 "[notation page](notation.md), [web](https://example.com/a_b)")
    assert out == (f"[chapter 3]({SITE}book/03_real_models.html#ch-real-models), "
                   f"[1.2 A section]({SITE}book/01_power_method.html#sec-x), "
                   f"[power method]({SITE}book/glossary.html#term-Power-method), "
                   f"[Power method]({SITE}book/glossary.html#term-Power-method), "
                   f"[(1)]({SITE}book/01_power_method.html#equation-eq-power-step), "
                   f"[Proposition 2.1]({SITE}book/02_shared_weights.html#prop-consensus), "
                   f"\\[[LA26]({SITE}book/intro.html#id1)\\], "
                   f"[notation page]({SITE}book/notation.html), [web](https://example.com/a_b)")


def test_without_the_sites_address_references_are_plain_text():
    index = SiteIndex(**{**INDEX.__dict__, "site_url": ""})
    out = render("{ref}`chapter 3 <ch-real-models>`, {term}`Power method`, {eq}`eq-power-step`, "
                 "[notation page](notation.md)", index)
    assert out == "chapter 3, Power method, (1), notation page"


def test_inline_code_and_code_blocks_are_never_changed():
    text = "write ``{eval}`name` `` or `{term}`x`` here\n\n```python\n:::{admonition} x\n$$ y $$ (eq-z)\n```"
    assert render(text) == text


def test_admonition_becomes_a_box_whose_body_stays_markdown():
    out = render(":::{admonition} Takeaway\n:class: important\n\n**Held:** {eval}`toy_a0`.\n:::")
    assert out.startswith('<div style="border-left: 4px solid #c77c02;')
    assert "\n\n**Takeaway**\n\n**Held:** <span" in out and out.endswith("\n\n</div>")
    assert ":::" not in out and "{" not in out.replace('style="', "")


def test_nested_fences_and_named_admonitions():
    out = render("::::{admonition} Outer\n:::{note}\ninner $x$\n:::\n::::")
    assert out.count("<div") == 2 and "**Note**" in out and "inner $x$" in out and ":::" not in out


def test_exercise_is_a_numbered_box_and_its_number_is_checked_against_the_site():
    out = render(":::{exercise}\n:label: ex-head-sum\n:enumerator: 1.2\n\nSum the heads.\n:::")
    assert "**Exercise 1.2**" in out and '<a name="ex-head-sum"></a>' in out and "Sum the heads." in out
    with pytest.raises(RenderError, match="Exercise 1.2 on the site"):
        render(":::{exercise}\n:label: ex-head-sum\n:enumerator: 1.3\n\nx\n:::")


def test_solution_is_details_closed_until_clicked():
    out = render(":::{solution} ex-head-sum\n:class: dropdown\n\nBecause $F = OV$.\n:::")
    assert out.startswith("<details>\n<summary><b>Solution to Exercise 1.2</b></summary>\n\nBecause $F = OV$.")
    assert out.endswith("</details>") and " open" not in out


def test_a_solution_region_spans_cells():
    nb = jupytext.reads(MYST_HEADER + """
::::{solution-start} ex-power-method
:class: dropdown

Normalise in the loop.
::::

```{code-cell} ipython3
x = 1
```

::::{solution-end}
::::

After.
""", fmt="md:myst")
    out = render_notebook(nb, DOC, INDEX, VALUES)
    md = [c.source for c in out.cells if c.cell_type == "markdown"]
    assert md[0].startswith("<details>\n<summary><b>Solution to Exercise 1.1</b></summary>\n\nNormalise in the loop.")
    assert md[1] == "<p><i>End of the solution to Exercise 1.1.</i></p>\n\nAfter."
    assert [c.source for c in out.cells if c.cell_type == "code"] == ["x = 1"]
    nbformat.validate(out)


def test_an_unclosed_solution_region_or_a_stray_end_is_an_error():
    with pytest.raises(RenderError, match="never closed"):
        render("::::{solution-start} ex-power-method\n::::")
    with pytest.raises(RenderError, match="without a"):
        render("::::{solution-end}\n::::")


def test_proposition_and_proof():
    out = render(":::{prf:proposition} Consensus on $\\pm v_1$ [paper]\n:label: prop-consensus\n\nTokens "
                 "converge.\n:::\n\n:::{prf:proof}\nSplit $x$.\n:::")
    assert "**Proposition 2.1 (Consensus on $\\pm v_1$ [paper])**" in out and "Tokens converge." in out
    assert "*Proof.* Split $x$. ∎" in out


def test_labelled_display_math_gets_the_sites_number():
    out = render("$$\nx_{t+1} = F x_t\n$$ (eq-power-step)\n\n$$\ny = 1\n$$\n\n$$ z = 2 $$ (eq-other)")
    assert out == "$$\nx_{t+1} = F x_t\n\\tag{1}\n$$\n\n$$\ny = 1\n$$\n\n$$\nz = 2\n\\tag{2}\n$$"
    assert render("```{math}\n:label: eq-other\nw = 3\n```") == "$$\nw = 3\n\\tag{2}\n$$"


def test_the_execution_table_points_to_the_site():
    assert render("```{nb-exec-table}\n```") == (
        f"*The table of this build's notebook execution times is on [the site's page]({SITE}book/01_power_method.html).*")


def test_targets_and_comments_go():
    assert render("(ch-power-method)=\n# 1. Title\n% a comment\ntext") == "# 1. Title\ntext"


@pytest.mark.parametrize("text, message", [
    ("{eval}`nope`", "glued no value"), ("{ref}`x <nope>`", "no such target"), ("{foo}`x`", "role {foo}"),
    (":::{figure} a.png\n:::", "directive {figure}"), ("[x](missing.md)", "no page of the book"),
    (":::{admonition} x\nnever closed", "never closed"), ("$$\nx", "never closed"),
])
def test_what_cannot_be_rendered_is_a_clear_error(text, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        render(text)


def test_values_from_glue_read_like_the_site():
    glue = {"a": {"data": {"text/plain": "'4.1e-15'"}}, "n": {"data": {"text/plain": "6"}},
            "f": {"data": {"text/plain": "Fig. 1.3", "application/vnd.spectral-book.figref+json":
                           {"target": "fig-1-tilt", "number": "1.3"}}}, "img": {"data": {"image/png": "x"}}}
    assert values_from_glue(glue) == {"a": Value("4.1e-15"), "n": Value("6"), "f": Value("Fig. 1.3", "fig-1-tilt")}
    assert value_text("'a'") == "a" and value_text("Fig. 1.3") == "Fig. 1.3"


def test_the_index_survives_json():
    assert SiteIndex.from_json(INDEX.to_json()) == INDEX


def stand_in_render(path, header: str | None = None) -> nbformat.NotebookNode:
    """Chapter ``path`` rendered with a stand-in index: every name it uses has the value "1.0", every target
    exists, each exercise has the number its ``:enumerator:`` writes (no links: no site address)."""
    nb = jupytext.read(path)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    doc = f"book/{path.stem}"
    anything = _AnyTarget(doc)
    index = SiteIndex(site_url="", labels=anything, terms=anything, equations=anything, proofs=anything,
                      exercises=_Exercises(text), figures=anything, citations=anything, pages=_AnyPage())
    values = {m: Value("1.0") for m in re.findall(r"\{eval\}`(\w+)`", text)}
    return render_notebook(nb, doc, index, values, header=header)


def test_every_chapter_renders_without_myst_left():
    """No role, directive fence, target or labelled equation is left in any chapter's markdown."""
    for path in sorted(ROOT.glob("book/[0-9][0-9]_*.md")):
        out = stand_in_render(path)
        for cell in out.cells:
            if cell.cell_type == "markdown":
                src = re.sub(r"`[^`]*`", "", cell.source)  # inline code may show MyST on purpose
                assert not re.search(r"\{[\w:-]+\}`|^:::|^\s*\(\S+\)=\s*$|\$\$\s*\(", src, re.M), (path, src)


class _AnyTarget(dict):
    def __init__(self, doc: str) -> None:
        super().__init__()
        self.doc = doc

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Target:
        return Target(self.doc, key, "(1)")

    def get(self, key, default=None):
        return self[key]


class _Exercises(dict):
    """Each exercise's number as its ``:enumerator:`` writes it."""

    def __init__(self, text: str) -> None:
        super().__init__({m[0]: Target("", m[0], m[1]) for m in
                          re.findall(r":label: (ex-[\w-]+)\n:enumerator: ([\d.]+)", text)})


class _AnyPage(dict):
    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return key
