"""Colab notebooks of the chapters (tools.colab) and the Colab buttons that open them (book/_ext/colab_links.py)."""

from __future__ import annotations

import sys

import jupytext
import nbformat
import pytest
from conftest import ROOT

from tools import book_config, colab

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import colab_links  # noqa: E402

REPO = "https://github.com/spectral-book/spectral-dynamics"
CHAPTER = ROOT / "book" / "01_power_method.md"


def test_the_notebook_is_the_chapter_after_one_install_cell():
    nb = colab.colab_notebook(CHAPTER, REPO + ".git", "0123456789abcdef0123456789abcdef01234567")
    nbformat.validate(nb)
    chapter = jupytext.read(CHAPTER)
    assert [c.source for c in nb.cells[1:]] == [c.source for c in chapter.cells]
    assert [c.cell_type for c in nb.cells[1:]] == [c.cell_type for c in chapter.cells]
    first = nb.cells[0]
    assert first.cell_type == "code" and first.metadata["tags"] == ["colab-install"]
    src = first.source
    assert f'"git", "clone", "--quiet", "{REPO}"' in src  # ".git" dropped, URL as given
    assert '"checkout", "--quiet", "0123456789abcdef0123456789abcdef01234567"' in src
    assert "grep -v '^torch=='" in src and "--no-deps -e /content/spectral-book" in src
    assert 'os.chdir("/content/spectral-book/book")' in src
    compile(src, "install", "exec")
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code")
    assert nb.metadata["kernelspec"]["name"] == "python3"


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


def test_make_colab_writes_every_chapter_under_book(tmp_path):
    chapters = sorted(ROOT.glob(colab.CHAPTERS))
    assert colab.main(["--out", str(tmp_path), "--repo-url", REPO, "--ref", "main"]) == 0
    assert sorted(p.name for p in (tmp_path / "book").iterdir()) == [c.stem + ".ipynb" for c in chapters]
    assert colab.main(["--out", str(tmp_path / "x"), "--repo-url", ""]) == 2  # unset URL: a clear refusal


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
