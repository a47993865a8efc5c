"""The chapters a reader downloads from the site or opens in Colab, in Jupyter Notebook 7 without MyST.

Colab, VS Code and Jupyter without jupyterlab-myst render plain Markdown. The built site's download of each
chapter (``_sources/book/NN_*.ipynb``, written by ``book/_ext/plain_notebooks.py``) and its Colab notebook
(``make colab``: :mod:`tools.colab`) are opened in the real Notebook 7 from ``.venv``, served on a free
loopback port with the jupyterlab-myst extension disabled for that server only (``page_config.json``'s
``disabledExtensions`` in a temporary ``JUPYTER_CONFIG_DIR``), in headless Chromium. No kernel is started. In
the rendered DOM of every markdown cell (math left out, every ``<details>`` opened) the test finds:

* no raw MyST: no role (``{eval}`x```), no ``:::`` fence, no directive option, no ``(label)=`` target, no
  equation label left after its ``$$ ... $$``;
* every number of the prose as the built value, marked so (its tooltip), every solution closed;
* the boxes drawn (the sanitizer kept their border), and MathJax without an error.

A control proves the check can fail: myst-nb's executed notebook of a chapter, opened the same way, shows
``{eval}`` and ``:::`` raw. Screenshots of chapter 1 (rendered and raw) go to ``test-artifacts/plain/``.
``SPECTRAL_BOOK_BUILT_HTML=<_build/html>`` uses an existing build instead of building the book.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, require_chromium, stop_server, wait_for_server

from tools import colab
from tools.plain_markdown import BUILT_VALUE_TITLE, HEADER_TAG
from tools.site_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ARTIFACTS = ROOT / "test-artifacts" / "plain"
CHAPTERS = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.md"))
REPO = "https://github.com/spectral-book/spectral-dynamics"
#: Notebook 7's settings for the test: every cell in the DOM, no news prompt
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": '{"windowingMode": "none"}',
    "@jupyterlab/apputils-extension/notification": '{"fetchNews": "false"}',
}
#: raw MyST in rendered text (math removed first; a role's backticks are gone there: ``{eval}`x``` shows as
#: "{eval}x")
RAW_MYST = re.compile(r"\{[a-z][\w:-]*\}(?=[\w`])|^\s*:{3,}|^:(class|label|enumerator):|^\s*\([\w-]+\)=\s*$"
                      r"|\((eq|ex|fig|prop|lem|ch|sec|claim)-[\w-]+\)", re.M)
#: lab extensions off for this server: MyST (the point), and those a plain front end lacks (less to load)
DISABLED = ["jupyterlab-myst", "@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager", "jupyterlab-jupytext"]

# each markdown cell as a reader sees it: text with math removed (every <details> opened), the built values'
# tooltips, its solutions, the boxes' borders, MathJax errors
_CELLS_JS = """() => [...document.querySelectorAll('.jp-MarkdownCell')].map(cell => {
  const out = cell.querySelector('.jp-RenderedMarkdown');
  if (!out) return {rendered: false};
  const copy = out.cloneNode(true);
  copy.querySelectorAll('mjx-container, .MathJax, math, script').forEach(m => m.remove());
  copy.querySelectorAll('details').forEach(d => d.open = true);
  copy.style.position = 'absolute'; copy.style.left = '-99999px';
  document.body.appendChild(copy);
  const text = copy.innerText;
  copy.remove();
  return {rendered: true, text,
          built: [...out.querySelectorAll('span[title]')].map(s => s.title),
          solutions: [...out.querySelectorAll('details')].map(d => ({open: d.open,
            summary: (d.querySelector('summary') || {}).innerText || ''})),
          boxes: [...out.querySelectorAll('div[style]')].map(d => getComputedStyle(d).borderLeftWidth),
          math_errors: out.querySelectorAll('mjx-merror, .MathJax_Error').length};
})"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(request) -> Path:
    given = os.environ.get("SPECTRAL_BOOK_BUILT_HTML")
    return Path(given) if given else request.getfixturevalue("built_site")


@pytest.fixture(scope="module")
def notebooks(site, tmp_path_factory) -> Path:
    """The notebooks to open: ``download/NN.ipynb`` (the site's), ``colab/book/NN.ipynb`` (``make colab``'s
    from that site) and ``raw/01_power_method.ipynb`` (myst-nb's executed notebook: the control)."""
    root = tmp_path_factory.mktemp("plain-notebooks")
    for name in CHAPTERS:
        (root / "download").mkdir(exist_ok=True)
        shutil.copy(colab.rendered_path(name, site), root / "download" / f"{name}.ipynb")
    colab.write_notebooks(CHAPTERS, root / "colab", REPO, "main", site=site)
    (root / "raw").mkdir()
    shutil.copy(site.parent / "jupyter_execute" / "book" / "01_power_method.ipynb", root / "raw")
    return root


@pytest.fixture(scope="module")
def notebook_url(notebooks, tmp_path_factory):
    """Jupyter Notebook 7 from ``.venv`` on a free loopback port, serving ``notebooks``, jupyterlab-myst off."""
    require_chromium()
    tmp = tmp_path_factory.mktemp("nb7")
    (tmp / "config" / "labconfig").mkdir(parents=True)
    (tmp / "config" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {name: True for name in DISABLED}}))
    for plugin, value in SETTINGS.items():
        path = tmp / "settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)
    port = _free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"), JUPYTER_RUNTIME_DIR=str(tmp / "runtime"))
    cmd = [str(Path(sys.executable).with_name("jupyter")), "notebook", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={notebooks}", "--JupyterNotebookApp.news_url=None",
           "--JupyterNotebookApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--JupyterNotebookApp.notebook_starts_kernel=False",  # nothing runs: the test reads the markdown
           "--allow-root"]
    log_path = tmp / "notebook.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_server(proc, url, log_path, "jupyter notebook")
            page = urllib.request.urlopen(f"{url}/tree", timeout=10).read().decode()
            config = json.loads(re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S)[1])
            assert "jupyterlab-myst" in config["disabledExtensions"]  # off for this server only
            yield url
        finally:
            stop_server(proc)


@pytest.fixture(scope="module")
def browser(notebook_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)


def _wait_for_mathjax(page, timeout_s: float = 180.0) -> None:
    """Until the number of typeset formulas has stopped growing (MathJax typesets cell by cell)."""
    count, stable, start = -1, 0, time.monotonic()
    while stable < 3 and time.monotonic() - start < timeout_s:
        now = page.evaluate("() => document.querySelectorAll('.jp-RenderedMarkdown mjx-container').length")
        stable, count = (stable + 1, now) if now == count else (0, now)
        page.wait_for_timeout(300)


def _open(browser, url: str, path: str, n_markdown: int, shot: Path | None = None) -> list[dict]:
    """Open notebook ``path`` in Notebook 7 and return what :data:`_CELLS_JS` reads once every markdown
    cell is rendered and MathJax is done."""
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    try:
        page.goto(f"{url}/notebooks/{path}", wait_until="domcontentloaded")
        # generous waits: a busy 2-core machine renders a long notebook slowly (a limit, not a measurement)
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=180_000)
        page.wait_for_function(
            f"() => document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown').length >= {n_markdown}",
            timeout=180_000)
        _wait_for_mathjax(page)
        cells = page.evaluate(_CELLS_JS)
        for cell in cells:  # math MathJax has not typeset yet is not MyST
            cell["text"] = _MATH.sub(" ", cell.get("text", ""))
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot))
        return cells
    finally:
        page.close()


def _evals(chapter: str) -> int:
    """How many ``{eval}`` of a chapter are values (not figure references)."""
    return len(re.findall(r"\{eval\}`(?!fig_)\w+`", chapter))


def _check(rel: str, cells: list[dict], chapter: str) -> list[str]:
    """What is wrong in one notebook's rendered markdown cells (:data:`_CELLS_JS`)."""
    problems = []
    built = [t for c in cells for t in c["built"] if t.endswith(BUILT_VALUE_TITLE)]
    if len(built) != _evals(chapter):
        problems.append(f"{rel}: {len(built)} built values shown, the chapter writes {_evals(chapter)}")
    for k, cell in enumerate(cells):
        for m in RAW_MYST.finditer(cell["text"]):
            line = cell["text"][max(0, m.start() - 60):m.end() + 60].replace("\n", " ")
            problems.append(f"{rel}, markdown cell {k}: raw MyST {m.group(0)!r} in '…{line}…'")
        if any(s["open"] for s in cell["solutions"]):
            problems.append(f"{rel}, markdown cell {k}: a solution is open before a click")
        if any(w != "4px" for w in cell["boxes"]):
            problems.append(f"{rel}, markdown cell {k}: a box lost its border ({cell['boxes']})")
        if cell["math_errors"]:
            problems.append(f"{rel}, markdown cell {k}: {cell['math_errors']} MathJax errors")
    text = "\n".join(c["text"] for c in cells)
    for needed in ("Takeaway", "Exercise", "Solution to Exercise"):
        if needed not in text:
            problems.append(f"{rel}: no {needed!r} in the rendered text")
    return problems


def _markdown(path: Path) -> list[nbformat.NotebookNode]:
    """The markdown cells of the notebook at ``path`` (read without validation: the files are megabytes)."""
    nb = nbformat.from_dict(json.loads(path.read_text(encoding="utf-8")))
    for cell in nb.cells:
        cell.source = "".join(cell.source) if isinstance(cell.source, list) else cell.source
    return [c for c in nb.cells if c.cell_type == "markdown"]


def test_every_chapter_reads_without_myst(browser, notebook_url, notebooks):
    """Every chapter's Colab notebook, and chapter 1's download (with the build's outputs), in Notebook 7.
    The other downloads have the same markdown as their Colab notebook (checked here, not opened)."""
    problems = []
    opened = [f"colab/book/{name}.ipynb" for name in CHAPTERS] + ["download/01_power_method.ipynb"]
    for rel in opened:
        markdown = _markdown(notebooks / rel)
        assert HEADER_TAG in markdown[0].metadata.get("tags", []), rel
        name = Path(rel).stem
        shot = ARTIFACTS / f"{rel.split('/')[0]}-{name}.png" if name == "01_power_method" else None
        cells = _open(browser, notebook_url, rel, len(markdown), shot)
        assert len(cells) == len(markdown) and all(c["rendered"] for c in cells), rel
        problems += _check(rel, cells, (ROOT / "book" / f"{name}.md").read_text(encoding="utf-8"))
    for name in CHAPTERS:
        download = [c.source for c in _markdown(notebooks / "download" / f"{name}.ipynb")]
        assert download == [c.source for c in _markdown(notebooks / "colab" / "book" / f"{name}.ipynb")], name
    assert not problems, "\n".join(problems)


def test_the_check_finds_raw_myst_in_the_executed_notebook(browser, notebook_url, notebooks):
    """The control: without rendering, Notebook 7 without MyST shows the markup raw, and the check sees it."""
    n_markdown = len(_markdown(notebooks / "raw" / "01_power_method.ipynb"))
    cells = _open(browser, notebook_url, "raw/01_power_method.ipynb", n_markdown, ARTIFACTS / "raw-01_power_method.png")
    found = {m.group(0) for c in cells for m in RAW_MYST.finditer(c["text"])}
    assert "{eval}" in found and any(f.strip().startswith(":::") for f in found), found
    assert _check("raw", cells, (ROOT / "book" / "01_power_method.md").read_text(encoding="utf-8"))


def _plain(text: str) -> str:
    """Spaces collapsed, Sphinx's smart quotes straight."""
    return re.sub(r"\s+", " ", text).translate(str.maketrans("‘’“”", "''\"\""))


def _page_text(html_path: Path) -> str:
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", html_path.read_text(encoding="utf-8"), flags=re.S)
    return _plain(html.unescape(re.sub(r"<[^>]+>", " ", text)))


def test_the_download_says_what_the_site_says(site):
    """Every built value, figure, exercise and proposition number of a rendered chapter is in the site's page."""
    for name in CHAPTERS:
        page = _page_text(site / "book" / f"{name}.html")
        source = "\n".join(c.source for c in _markdown(colab.rendered_path(name, site)))
        values = [html.unescape(re.sub(r"\\(.)", r"\1", v)) for v in
                  re.findall(r'<span title="\w+: ' + BUILT_VALUE_TITLE + r'">(.*?)</span>', source)]
        numbers = re.findall(r"\b(?:Fig\.|Exercise|Proposition|Lemma) \d+(?:\.\d+)?", source)
        assert values and numbers, name
        missing = sorted({t for t in values + numbers if _plain(t) not in page})
        assert not missing, f"{name}: shown in the download but not on the site: {missing[:10]}"
