"""Colab notebooks of the chapters (tools.colab) and the Colab buttons that open them (book/_ext/colab_links.py).

The Colab notebooks are made from the chapters the html build renders for plain Markdown
(``_build/html/_sources/book/NN_*.ipynb``, book/_ext/plain_notebooks.py); here a made-up site holds them,
rendered with a stand-in index (tests/pages/test_plain_markdown.py), so no build is needed.
"""

from __future__ import annotations

import re
import sys

import jupytext
import nbformat
import pytest
from conftest import ROOT
from test_plain_markdown import stand_in_render

from tools import book_config, colab
from tools.plain_markdown import HEADER_TAG

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import colab_links  # noqa: E402

REPO = "https://github.com/spectral-book/spectral-dynamics"
CHAPTER = ROOT / "book" / "01_power_method.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A made-up built site: every chapter rendered, as the html build writes it, with the build's outputs."""
    site = tmp_path_factory.mktemp("site")
    for path in sorted(ROOT.glob(colab.CHAPTERS)):
        nb = stand_in_render(path, header="Chapter header.")
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [nbformat.v4.new_output("stream", text="built output\n")]
        colab.rendered_path(path, site).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, colab.rendered_path(path, site))
    return site


def test_the_notebook_is_the_rendered_chapter_after_one_install_cell(site):
    nb = colab.colab_notebook(colab.rendered_path(CHAPTER, site), REPO + ".git",
                              "0123456789abcdef0123456789abcdef01234567")
    nbformat.validate(nb)
    chapter = jupytext.read(CHAPTER)
    rendered = nbformat.read(colab.rendered_path(CHAPTER, site), as_version=4)
    assert [c.source for c in nb.cells[1:]] == [c.source for c in rendered.cells]
    assert nb.cells[1].metadata["tags"] == [HEADER_TAG]
    code = [c.source for c in chapter.cells if c.cell_type == "code"]
    assert [c.source for c in nb.cells[1:] if c.cell_type == "code"] == code  # the code as the chapter has it
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "{eval}" not in markdown and ":::" not in markdown  # the markdown as plain Markdown reads it
    first = nb.cells[0]
    assert first.cell_type == "code" and first.metadata["tags"] == ["colab-install"]
    src = first.source
    assert f'"git", "clone", "--quiet", "{REPO}"' in src  # ".git" dropped, URL as given
    assert '"checkout", "--quiet", "0123456789abcdef0123456789abcdef01234567"' in src
    assert "grep -v '^torch=='" in src and "--no-deps -e /content/spectral-book" in src
    assert 'os.chdir("/content/spectral-book/book")' in src
    compile(src, "install", "exec")
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code")  # the build's outputs go
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_a_missing_or_unrendered_chapter_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="make book"):
        colab.colab_notebook(tmp_path / "01_x.ipynb", REPO)
    raw = tmp_path / "raw.ipynb"
    nbformat.write(jupytext.read(CHAPTER), raw)  # myst-nb's executed notebook, as a build without the extension
    with pytest.raises(ValueError, match="not a chapter rendered"):
        colab.colab_notebook(raw, REPO)


def test_the_install_cell_does_nothing_outside_colab(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(colab.install_cell(REPO).source, {})  # would clone, pip install and chdir on Colab
    assert list(tmp_path.iterdir()) == [] and __import__("os").getcwd() == str(tmp_path)


@pytest.mark.parametrize("url, ref", [("https://gitlab.com/a/b", "main"), ("", "main"), (REPO, "--upload-pack=x"),
                                      (REPO, "main; rm -rf /"), (REPO, "")])
def test_bad_repository_or_ref_is_refused(url, ref):
    with pytest.raises(ValueError):
        colab.install_cell(url, ref)


def test_make_colab_writes_every_chapter_under_book(tmp_path, site):
    chapters = sorted(ROOT.glob(colab.CHAPTERS))
    assert colab.main(["--out", str(tmp_path), "--repo-url", REPO, "--ref", "main", "--site", str(site)]) == 0
    assert sorted(p.name for p in (tmp_path / "book").iterdir()) == [c.stem + ".ipynb" for c in chapters]
    assert colab.main(["--out", str(tmp_path / "x"), "--repo-url", "", "--site", str(site)]) == 2  # unset URL
    assert colab.main(["--out", str(tmp_path / "y"), "--repo-url", REPO, "--site", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "y").exists()  # nothing written without a built site


def test_the_branch_is_one_setting():
    assert colab.COLAB_BRANCH == book_config.COLAB_BRANCH


THEME_URL = "https://colab.research.google.com/github/spectral-book/spectral-dynamics/blob/main/book/01_power_method.md"


@pytest.mark.parametrize("page, branch, expected", [
    ("book/01_power_method", "colab",
     "https://colab.research.google.com/github/spectral-book/spectral-dynamics/blob/colab/book/01_power_method.ipynb"),
    ("book/about_build", "colab", None),  # not a chapter: no Colab notebook
    ("book/01_power_method", "", None),   # no branch configured
])
def test_the_button_points_at_the_notebook(page, branch, expected):
    assert colab_links.colab_url(THEME_URL, page, branch) == expected


def test_the_links_go_to_the_published_site(monkeypatch):
    from types import SimpleNamespace

    import plain_notebooks

    def app(baseurl: str = "", repo: str = "") -> SimpleNamespace:
        return SimpleNamespace(config=SimpleNamespace(html_baseurl=baseurl, html_theme_options={"repository_url": repo}))

    monkeypatch.delenv("SPECTRAL_BOOK_SITE_URL", raising=False)
    assert plain_notebooks.site_url(app(repo=REPO)) == "https://spectral-book.github.io/spectral-dynamics/"
    assert plain_notebooks.site_url(app("https://book.example.org", REPO)) == "https://book.example.org/"
    assert plain_notebooks.site_url(app()) == ""  # no address: references stay plain text
    monkeypatch.setenv("SPECTRAL_BOOK_SITE_URL", "https://elsewhere.example/b/")
    assert plain_notebooks.site_url(app("https://book.example.org", REPO)) == "https://elsewhere.example/b/"


_TINY_CHAPTER = """---
jupytext:
  text_representation: {extension: .md, format_name: myst}
kernelspec: {display_name: Python 3, language: python, name: python3}
---
(ch-tiny)=
# 1. Tiny

:::{admonition} Takeaway
:class: important
The ratio is {eval}`ratio_txt` ({eval}`fig_dots`), see {ref}`the start <ch-tiny>` and the {term}`gap <Gap>`.
:::

```{code-cell} ipython3
import altair as alt
import pandas as pd

from lib.page import figures
from lib.page.prose import glue

figures.set_chapter(1)
glue("ratio_txt", f"{0.5:.3f}")
figures.figure(alt.Chart(pd.DataFrame({"x": [0, 1]})).mark_point().encode(x="x"), "dots", "Two dots.")
```

$$
x = y
$$ (eq-tiny)

By {eq}`eq-tiny`.

:::{exercise}
:label: ex-tiny
:enumerator: 1.1

Do it.
:::

:::{solution} ex-tiny
:class: dropdown

Done.
:::
"""


@pytest.mark.slow
def test_the_html_build_writes_the_download_rendered(tmp_path):
    """A tiny book built with the project's extensions: the chapter's ``_sources/...ipynb`` is rendered with
    this build's value, figure, exercise and equation numbers, and ``make colab``'s notebook is made from it."""
    import subprocess

    book = tmp_path / "tiny"
    (book / "book").mkdir(parents=True)
    (book / "book" / "01_tiny.md").write_text(_TINY_CHAPTER)
    (book / "book" / "intro.md").write_text("# Intro\n")
    (book / "book" / "glossary.md").write_text("# Glossary\n\n```{glossary}\nGap\n  A ratio.\n```\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01_tiny\n"
                                   "  - file: book/glossary\n")
    ext = ROOT / "book" / "_ext"
    exts = "".join(f"    {name}: {ext}\n" for name in ("eval_glue", "figures", "chapter_numbers", "plain_notebooks"))
    (book / "_config.yml").write_text(
        "title: Tiny\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: force\n  timeout: 600\n"
        "parse:\n  myst_enable_extensions: [amsmath, dollarmath, colon_fence]\n"
        f"sphinx:\n  local_extensions:\n{exts}  config:\n    html_baseurl: https://tiny.example/\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT), "SPECTRAL_BOOK_BUILD": "1"}
    env.pop("SPECTRAL_BOOK_SITE_URL", None)
    run = subprocess.run([str(ROOT / ".venv" / "bin" / "jupyter-book"), "build", str(book), "-W", "-n"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    site = book / "_build" / "html"
    nb = nbformat.read(colab.rendered_path("01_tiny", site), as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].metadata["tags"] == [HEADER_TAG]
    assert '>0.500</span>' in md and "[Fig. 1.1](https://tiny.example/book/01_tiny.html#fig-1-dots)" in md
    assert "[the start](https://tiny.example/book/01_tiny.html#ch-tiny)" in md
    assert "[gap](https://tiny.example/book/glossary.html#term-Gap)" in md
    assert "\\tag{1}" in md and "[(1)](https://tiny.example/book/01_tiny.html#equation-eq-tiny)" in md
    assert "**Exercise 1.1**" in md and "<summary><b>Solution to Exercise 1.1</b></summary>" in md
    assert not re.search(r"\{[a-z:-]+\}|:::", md), md
    assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code")  # the build's outputs are kept
    page = (site / "book" / "01_tiny.html").read_text()
    assert "Fig. 1.1" in page and "0.500" in page and "{eval}" not in page  # the site says the same
    written = colab.write_notebooks([book / "book" / "01_tiny.md"], tmp_path / "colab", REPO, site=site)
    assert [c.source for c in nbformat.read(written[0], as_version=4).cells[1:]] == [c.source for c in nb.cells]


def test_the_downloaded_chapter_says_how_to_run_it():
    """The .ipynb the download button offers imports the book's package: its first cell points to the Colab
    button and to the repository's README (a reader who downloaded it had no way to know)."""
    import plain_notebooks

    text = plain_notebooks.header("1. The power method", "https://x.github.io/r/", "book/01_power_method",
                                  "https://github.com/x/r")
    assert "Colab button" in text and "(https://github.com/x/r#readme)" in text and "`make lab`" in text
    assert "the repository's README" in plain_notebooks.header("t", "", "book/01_power_method")
