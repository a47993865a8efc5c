"""Colab notebooks of the chapters (tools.colab) and the Colab buttons that open them (book/_ext/colab_links.py).

The Colab notebooks are made from the chapters the html build renders for plain Markdown
(``_build/html/_sources/book/NN_*.ipynb``, book/_ext/plain_notebooks.py); here a made-up site holds them,
rendered with a stand-in index (tests/test_plain_markdown.py), so no build is needed.
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
