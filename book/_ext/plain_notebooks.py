"""Sphinx extension: the ``.ipynb`` a reader downloads from a page reads like the site, without MyST.

The download button offers each executed page (the chapters, the About page) as myst-nb's executed notebook (``offline_assets.py`` copies it to
``_sources/<page>.ipynb``), whose markdown is MyST: opened in Colab, VS Code or Jupyter without
jupyterlab-myst it would show ``{eval}`name```, ``:::{admonition}`` and ``{ref}`` as literal text. When the
html builder writes such a page, this extension replaces that file with the page rendered by
:func:`tools.plain_markdown.render_notebook`: the build's outputs kept, every markdown cell in plain Markdown
and HTML, the prose's numbers the values this build glued (``<page>.glue.json``, the data the site's
``{eval}`` reads), figure, exercise, equation and proposition numbers and section titles the site's own
(:func:`site_index`, read from the environment after ``chapter_numbers.py`` has renumbered), and a first
cell that says so. ``make colab`` (:mod:`tools.colab`) makes the Colab notebooks from these files.

Links go to the published site, whose address is the first of: ``$SPECTRAL_BOOK_SITE_URL``, Sphinx's
``html_baseurl``, and the GitHub Pages address of the theme's ``repository_url``
(``https://github.com/<owner>/<repo>`` -> ``https://<owner>.github.io/<repo>/``). With none, references
are plain text.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import nbformat
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[2]  # the repository: tools/ is not an installed package
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.plain_markdown import RenderError, SiteIndex, Target, render_notebook, values_from_glue  # noqa: E402

_GITHUB = re.compile(r"^https://github\.com/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$")
INDEX_FILE = "plain-notebooks-index.json"
"""Written next to the rendered notebooks (``_sources/``): the :class:`SiteIndex` they were rendered with."""


def site_url(app: Sphinx) -> str:
    """The published site's address ending in ``/``, or ``""`` (see the module docstring)."""
    url = os.environ.get("SPECTRAL_BOOK_SITE_URL", "") or app.config.html_baseurl or ""
    if not url:
        repo = (app.config.html_theme_options or {}).get("repository_url", "") or ""
        m = _GITHUB.match(repo.strip())
        if m:
            url = f"https://{m['owner'].lower()}.github.io/{m['repo']}/"
    return url.rstrip("/") + "/" if url else ""


def _number(numbers: dict[str, Any], doc: str, kind: str, node_id: str) -> str | None:
    got = numbers.get(doc, {}).get(kind, {}).get(node_id)
    return ".".join(map(str, got)) if got else None


def site_index(env: BuildEnvironment, url: str = "") -> SiteIndex:
    """Every reference target of the built book, with the text the site shows for it.

    Reads the standard domain (labels, glossary terms), the math domain and ``toc_fignumbers`` (equation,
    figure and exercise numbers, after ``chapter_numbers.py``), sphinx-proof's ``proof_list`` and
    sphinxcontrib-bibtex's citations.
    """
    numbers = env.toc_fignumbers
    std = env.domaindata["std"]
    index = SiteIndex(site_url=url)
    index.pages = {doc: env.titles[doc].astext() for doc in env.found_docs if doc in env.titles}
    for label, (doc, anchor, title) in std.get("labels", {}).items():
        if doc:
            index.labels[label] = Target(doc, anchor, str(title))
    terms = std.get("terms", {})
    written = {name.lower(): name for (kind, name) in std.get("objects", {}) if kind == "term"}
    for key, (doc, anchor) in terms.items():
        index.terms[key] = Target(doc, anchor, written.get(key, key))
    for label, (doc, _eqno) in env.domaindata.get("math", {}).get("objects", {}).items():
        number = _number(numbers, doc, "displaymath", f"equation-{label}")
        if number:
            index.equations[label] = Target(doc, f"equation-{label}", f"({number})")
    for doc, kinds in numbers.items():
        for node_id, got in kinds.get("figure", {}).items():
            index.figures[node_id] = Target(doc, node_id, "Fig. " + ".".join(map(str, got)))
        for node_id, got in kinds.get("exercise", {}).items():
            index.exercises[node_id] = Target(doc, node_id, ".".join(map(str, got)))
    for label, proof in getattr(env, "proof_list", {}).items():
        kind = proof["realtype"].title()
        number = "" if proof.get("nonumber") else _number(numbers, proof["docname"], proof["countertype"], label)
        index.proofs[label] = Target(proof["docname"], label, f"{kind} {number}".strip())
    for citation in env.domaindata.get("cite", {}).get("citations", []):  # sphinxcontrib-bibtex's Citation
        index.citations[citation.key] = Target(citation.bibliography_key.docname, citation.citation_id,
                                               citation.formatted_entry.label)
    return index


def header(title: str, url: str, doc: str, repo: str = "") -> str:
    """The first markdown cell of a rendered chapter: what this notebook is, and how to run it (the cells import
    the book's package ``lib``, which a downloaded notebook does not carry): the Colab button of the chapter's
    page, or the repository's README (``repo``: its address, ``""`` when unknown)."""
    page = f"[the book's site]({url}{doc}.html)" if url else "the book's site"
    readme = f"[the repository's README]({repo.rstrip('/')}#readme)" if repo else "the repository's README"
    return (f"*Spectral dynamics of transformers*: **{title}**\n\n"
            "This notebook is the page written for notebook front ends without MyST (Colab, VS Code, "
            "Jupyter): boxes, solutions (closed until clicked), numbered figures, exercises and equations, "
            f"and cross-references read as on {page}. **The numbers in the text are the values computed "
            "when the book was built** (hover over one to see its name); running the cells recomputes "
            "every output below, but not the text. JupyterLab with jupyterlab-myst (`make lab`) shows the "
            "MyST source live instead.\n\n"
            "**To run it**, the cells need the book's Python package `lib` and its pinned libraries: open the "
            f"chapter in Colab with the Colab button at the top of its page on {page} (the Colab edition's first "
            f"cell installs them), or clone the repository and follow {readme} (`make lab`; everything runs "
            "offline on a CPU).")


def rendered_chapter(build: Path, pagename: str, index: SiteIndex, repo: str = "") -> nbformat.NotebookNode | None:
    """The chapter ``pagename`` rendered from the executed notebook and glue data of the build in ``build``
    (``_build``: its ``jupyter_execute/``), or ``None`` if it has none; ``repo`` is the repository's address
    for the first cell's pointer to its README."""
    executed = Path(build) / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return None
    nb = nbformat.read(executed, as_version=4)
    glue = executed.with_name(executed.stem + ".glue.json")
    values = values_from_glue(json.loads(glue.read_text(encoding="utf-8"))) if glue.is_file() else {}
    title = index.pages.get(pagename, pagename)
    out = render_notebook(nb, pagename, index, values, header=header(title, index.site_url, pagename, repo))
    for key in ("jupytext", "source_map"):
        out.metadata.pop(key, None)
    nbformat.validate(out)
    return out


def _index(app: Sphinx) -> SiteIndex:
    if getattr(app, "_plain_notebooks_index", None) is None:
        app._plain_notebooks_index = site_index(app.env, site_url(app))
        path = Path(app.outdir) / "_sources" / INDEX_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(app._plain_notebooks_index.to_json(), indent=1, sort_keys=True), encoding="utf-8")
    return app._plain_notebooks_index


def write_rendered(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    """Write ``_sources/<page>.ipynb``, the file the download button offers (``offline_assets.py`` sets the
    button), as the rendered chapter: after the copies of the executed notebook there and by the theme."""
    if app.builder.format != "html":
        return
    try:
        repo = (app.config.html_theme_options or {}).get("repository_url", "") or ""
        nb = rendered_chapter(Path(app.outdir).parent, pagename, _index(app), repo)
    except RenderError as exc:
        raise ExtensionError(f"plain notebook of {pagename}: {exc}") from exc
    if nb is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("html-page-context", write_rendered, priority=900)  # after the theme's copy (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
