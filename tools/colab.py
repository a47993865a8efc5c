"""Colab notebooks of the chapters: each chapter as an ``.ipynb`` whose first cell installs the book.

Colab opens notebooks (``.ipynb``) from a GitHub branch, not the book's MyST sources, starts without the
book's code or requirements, and renders plain Markdown, not MyST. ``make colab`` writes, for every chapter
``book/NN_*.md``, ``_build/colab/book/NN_*.ipynb``: one first code cell that, on Colab only, clones the
repository at the commit the notebooks were made from, installs its requirements (all but ``torch``, which
Colab provides) and the book's package, and moves into ``book/`` where the chapters expect to run; then
the chapter as the site's download offers it (``_build/html/_sources/book/NN_*.ipynb``, written by
``book/_ext/plain_notebooks.py``: markdown rendered without MyST, the numbers in the text the built
values), without its outputs. The publishing workflow pushes the folder to the repository's ``colab``
branch (:data:`COLAB_BRANCH`), and the site's Colab buttons open the notebooks there
(``book/_ext/colab_links.py``)::

    python -m tools.colab --repo-url https://github.com/owner/repo --ref <commit> --out _build/colab

Outside Colab the first cell does nothing, so the same notebook also runs in a local JupyterLab.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from tools.plain_markdown import HEADER_TAG
from tools.student import fresh_notebook, write_notebook

__all__ = ["COLAB_BRANCH", "install_cell", "colab_notebook", "rendered_path", "write_notebooks"]

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = "book/[0-9][0-9]_*.md"
SITE = ROOT / "_build" / "html"
COLAB_BRANCH = "colab"
"""The branch the publishing workflow pushes the Colab notebooks to, and the Colab buttons open."""
_GITHUB = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+")
_REF = re.compile(r"[\w./-]+")
_INSTALL = '''\
# Colab only: fetch the book's code ({ref_text}) and install what it needs (a few minutes).
# Anywhere else this cell does nothing.
import os
import subprocess
import sys

if "google.colab" in sys.modules and not os.path.isdir("/content/spectral-book"):
    subprocess.run(["git", "clone", "--quiet", "{repo_url}", "/content/spectral-book"], check=True)
    subprocess.run(["git", "-C", "/content/spectral-book", "checkout", "--quiet", "{ref}"], check=True)
    subprocess.run("grep -v '^torch==' /content/spectral-book/requirements.txt > /tmp/requirements.txt && "
                   "pip install --quiet -r /tmp/requirements.txt && "
                   "pip install --quiet --no-deps -e /content/spectral-book", shell=True, check=True)
    sys.path.insert(0, "/content/spectral-book")
if "google.colab" in sys.modules:
    os.chdir("/content/spectral-book/book")'''


def install_cell(repo_url: str, ref: str = "main") -> NotebookNode:
    """The first code cell of a Colab notebook: clone ``repo_url`` at ``ref`` and install the book (Colab only).

    Raises:
        ValueError: ``repo_url`` is not ``https://github.com/<owner>/<repo>``, or ``ref`` is not a plain
            branch, tag or commit name.
    """
    repo_url = repo_url.strip().rstrip("/").removesuffix(".git")
    if not _GITHUB.fullmatch(repo_url):
        raise ValueError(f"the repository URL must be https://github.com/<owner>/<repo>; got {repo_url!r}")
    if not _REF.fullmatch(ref) or ref.startswith("-"):
        raise ValueError(f"ref must be a branch, tag or commit name; got {ref!r}")
    ref_text = f"commit {ref[:12]}" if re.fullmatch(r"[0-9a-f]{40}", ref) else ref
    source = _INSTALL.format(repo_url=repo_url, ref=ref, ref_text=ref_text)
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["colab-install"]})


def rendered_path(chapter: str | Path, site: str | Path = SITE) -> Path:
    """Where the html build wrote chapter ``book/NN_*.md`` rendered: ``<site>/_sources/book/NN_*.ipynb``."""
    return Path(site) / "_sources" / "book" / f"{Path(chapter).stem}.ipynb"


def colab_notebook(rendered: str | Path, repo_url: str, ref: str = "main") -> NotebookNode:
    """The rendered chapter at ``rendered`` (:func:`rendered_path`) as a Colab notebook: :func:`install_cell`,
    then every cell of the chapter, outputs dropped.

    Returns a validated nbformat-4 notebook without outputs; cell ids are ``cell-000``, ``cell-001``, ...

    Raises:
        FileNotFoundError: no such notebook (the book was not built: ``make book``).
        ValueError: the notebook is not a rendered chapter (a build without ``plain_notebooks``).
    """
    path = Path(rendered)
    if not path.is_file():
        raise FileNotFoundError(f"no rendered chapter at {path}: build the book first (make book), which writes it")
    source = nbformat.read(path, as_version=4)
    if not source.cells or HEADER_TAG not in source.cells[0].metadata.get("tags", []):
        raise ValueError(f"{path} is not a chapter rendered for plain Markdown (built without "
                         "book/_ext/plain_notebooks.py?): rebuild the book (make book)")
    return fresh_notebook(source, [install_cell(repo_url, ref), *source.cells], colab={"provenance": []})


def write_notebooks(chapters: Iterable[str | Path], out: str | Path, repo_url: str, ref: str = "main",
                    site: str | Path = SITE) -> list[Path]:
    """Write ``out/book/<stem>.ipynb`` for every chapter, from its rendered notebook in the built ``site``
    (all converted before any is written).

    The ``book/`` prefix mirrors the repository, so a chapter's Colab address differs from its source's
    only in the branch and the suffix.
    """
    out = Path(out)
    done = [(Path(c).stem, colab_notebook(rendered_path(c, site), repo_url, ref)) for c in chapters]
    return [write_notebook(nb, out / "book" / f"{stem}.ipynb") for stem, nb in done]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.colab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="folder to write book/<chapter>.ipynb into")
    parser.add_argument("--repo-url", default=os.environ.get("SPECTRAL_BOOK_REPO_URL", ""),
                        help="the repository's public URL (default: $SPECTRAL_BOOK_REPO_URL)")
    parser.add_argument("--ref", default=os.environ.get("GITHUB_SHA", "main"),
                        help="the commit the install cell checks out (default: $GITHUB_SHA, else main)")
    parser.add_argument("--site", default=SITE, type=Path,
                        help="the built html site with the rendered chapters (default: _build/html)")
    parser.add_argument("chapters", nargs="*", type=Path, help=f"MyST chapters (default: {CHAPTERS})")
    args = parser.parse_args(argv)
    chapters = args.chapters or sorted(ROOT.glob(CHAPTERS))
    try:
        written = write_notebooks(chapters, args.out, args.repo_url, args.ref, args.site)
    except (ValueError, FileNotFoundError) as exc:
        print(f"tools.colab: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} Colab notebooks to {args.out}/book")
    return 0


if __name__ == "__main__":
    sys.exit(main())
