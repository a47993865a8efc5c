"""Numbered figures and exercises: the kernel side (lib.page.figures) and the site side (book/_ext), built
on a two-chapter sample book whose numbers are known.

The sample book's chapter 3 shows two figures and refers to both, has two exercises (one with a gated
solution whose text sits in the ``{solution-start}`` directive) and an equation; its chapter 5 has one figure
and one equation, which must be (1) again. On the site the
figures must read "Fig. 3.1", "Fig. 3.2" and "Fig. 5.1" (per chapter, not through the book), the prose's
``{eval}`` must link to them with that text, the exercises must read "Exercise 3.1" and "Exercise 3.2", and
the gated solution must keep its text. A wrong ``:enumerator:`` must fail the build.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import altair as alt
import pandas as pd
import pytest
from conftest import MYST_HEADER, ROOT

from lib.errors import InputError
from lib.page import figures
from lib.page.setup import book_setup


def _chart() -> alt.Chart:
    return alt.Chart(pd.DataFrame({"x": [0, 1]})).mark_point().encode(x="x")


def test_figures_are_numbered_in_order_and_keep_their_number():
    figures.set_chapter(4)
    a = figures.figure(_chart(), "first", "One.")
    b = figures.figure(_chart(), "second", "Two.")
    again = figures.figure(_chart(), "first", "One, shown again.")
    assert (str(a.ref), str(b.ref), str(again.ref)) == ("Fig. 4.1", "Fig. 4.2", "Fig. 4.1")
    assert b.ref.target == "fig-4-second"
    figures.set_chapter(5)
    assert str(figures.figure(_chart(), "first", "Restarts.").ref) == "Fig. 5.1"


def test_a_figures_html_is_the_chart_then_its_caption_and_parses_back():
    figures.set_chapter(2)
    fig = figures.figure(_chart(), "demo_plot", "A <caption> & more.")
    html = fig._repr_mimebundle_()["text/html"]
    meta, chart = figures.parse_figure_html(html)
    assert meta == {"target": "fig-2-demo-plot", "number": "2.1", "caption": "A <caption> & more."}
    assert "altair-viz" in chart or "vega" in chart
    assert figures.CAPTION_MARK not in chart and "caption" not in chart.split("vegaEmbed")[-1][-200:]
    assert "<b>Fig. 2.1</b> A &lt;caption&gt; &amp; more." in html  # what JupyterLab shows
    assert figures.parse_figure_html("<div>not a figure</div>") is None


def test_bad_figure_calls_say_what_to_do():
    figures.set_chapter(1)
    with pytest.raises(InputError, match="lower-case identifier"):
        figures.figure(_chart(), "Bad Name", "x")
    with pytest.raises(InputError, match="needs a caption"):
        figures.figure(_chart(), "ok", "  ")
    with pytest.raises(InputError, match="non-negative int"):
        figures.set_chapter(-1)
    figures._state["chapter"] = None
    with pytest.raises(InputError, match="book_setup"):
        figures.figure(_chart(), "ok", "x")


HEADER = MYST_HEADER

CHAPTER_3 = HEADER + textwrap.dedent('''
    # 3. Sample

    See {eval}`fig_line` and {eval}`fig_dots`, and {numref}`ex-one`, and {eq}`eq-a`.

    $$ a = 1 $$ (eq-a)

    ```{code-cell} ipython3
    import lib, altair as alt, pandas as pd
    from lib.page.figures import figure
    from lib.page.setup import book_setup
    book_setup(chapter=3)
    df = pd.DataFrame({"x": [0, 1, 2], "y": [0, 1, 0]})
    figure(alt.Chart(df).mark_line().encode(x="x", y="y"), "line", "A line.")
    ```

    ```{code-cell} ipython3
    figure(alt.Chart(df).mark_point().encode(x="x", y="y"), "dots", "Three dots.")
    ```

    :::{exercise}
    :label: ex-one
    :enumerator: 3.1

    Double it.
    :::

    ::::{solution-start} ex-one
    :class: dropdown

    The kept explanation text.
    ::::

    ```{code-cell} ipython3
    # Solution to Exercise 3.1
    double = lambda x: 2 * x
    ```

    ::::{solution-end}
    ::::

    :::{exercise}
    :label: ex-two
    :enumerator: ENUM_TWO

    Why?
    :::

    :::{solution} ex-two
    :class: dropdown

    Because.
    :::
    ''')

CHAPTER_5 = HEADER + textwrap.dedent('''
    # 5. Another

    As {eval}`fig_only` shows, and {eq}`eq-b`.

    $$ b = 2 $$ (eq-b)

    ```{code-cell} ipython3
    import lib, altair as alt, pandas as pd
    from lib.page.figures import figure
    from lib.page.setup import book_setup
    book_setup(chapter=5)
    figure(alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x"), "only", "One point.")
    ```
    ''')


def _build(tmp_path, enum_two: str) -> tuple[subprocess.CompletedProcess, object]:
    from bs4 import BeautifulSoup

    book = tmp_path / "book"
    book.mkdir()
    (book / "intro.md").write_text("# Intro\n")
    (book / "03_sample.md").write_text(CHAPTER_3.replace("ENUM_TWO", enum_two))
    (book / "05_another.md").write_text(CHAPTER_5)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                       "  - file: book/03_sample\n  - file: book/05_another\n")
    ext = ROOT / "book" / "_ext"
    (tmp_path / "_config.yml").write_text(textwrap.dedent(f"""\
        title: sample
        execute: {{execute_notebooks: force, raise_on_error: true, timeout: 900}}
        parse: {{myst_enable_extensions: [colon_fence, dollarmath]}}
        sphinx:
          local_extensions: {{eval_glue: {ext}, figures: {ext}, chapter_numbers: {ext}}}
        """))
    env = dict(os.environ, SPECTRAL_BOOK_BUILD="1", PYTHONPATH=str(ROOT))
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    proc = subprocess.run([jb, "build", str(tmp_path), "-W", "-n", "--keep-going"], env=env,
                          capture_output=True, text=True, timeout=600)
    page = tmp_path / "_build" / "html" / "book" / "03_sample.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser") if page.exists() else None
    return proc, soup


@pytest.mark.slow
def test_the_site_numbers_figures_and_exercises_per_chapter(tmp_path):
    proc, soup = _build(tmp_path, "3.2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    captions = [f.select_one("figcaption").get_text(" ", strip=True) for f in soup.select("figure")]
    assert [c.rstrip(" #") for c in captions] == ["Fig. 3.1 A line.", "Fig. 3.2 Three dots."]  # '#': the anchor
    assert [f["id"] for f in soup.select("figure")] == ["fig-3-line", "fig-3-dots"]
    links = {a.get_text(strip=True): a["href"] for a in soup.select("article a.reference")}
    assert links.get("Fig. 3.1") == "#fig-3-line" and links.get("Fig. 3.2") == "#fig-3-dots"
    text = soup.get_text(" ")
    assert "Exercise 3.1" in text and "Exercise 3.2" in text
    assert "The kept explanation text." in soup.select_one(".solution").get_text(" ")
    assert "spectral-book-caption" not in str(soup.select("figure"))  # the lab's caption paragraph is gone
    other = (tmp_path / "_build" / "html" / "book" / "05_another.html").read_text(encoding="utf-8")
    assert "Fig. 5.1" in other
    # equations from (1) on every page, as JupyterLab numbers a notebook's (Sphinx alone: (1), then (2))
    assert "(1)" in soup.select_one("div.math").get_text() and 'class="eqno">(1)' in other


@pytest.mark.slow
def test_a_wrong_exercise_number_fails_the_build(tmp_path):
    proc, _ = _build(tmp_path, "3.7")
    assert proc.returncode != 0
    assert "says ':enumerator: 3.7' but is Exercise 3.2 on the site" in proc.stdout + proc.stderr
