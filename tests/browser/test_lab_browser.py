"""The chapters as a student reads them in JupyterLab, in headless Chromium (Debian's, never a downloaded one).

JupyterLab is started from ``.venv`` on a free loopback port, serving a copy of ``book/`` (so that the lab's
autosave never rewrites a chapter file; ``lib`` is importable there because ``make`` installs it editable).
Each chapter is opened the way the README tells a student (right-click → *Open With → Notebook*; jupytext's
contents manager reads the ``.md`` as a notebook), run with *Run → Run All Cells*, and then checked:

* every code cell ran, none printed an error, and none is still running when the run stalls
  (:data:`STALL_LIMIT_S` without a finished cell);
* every ``{eval}`` of the prose was evaluated without error and its value shows in the rendered cell;
* jupyterlab-myst rendered every markdown cell: the cells use only roles and directives it renders (it
  shows an unknown role such as ``{glue:text}`` as its bare content), and no raw MyST (``{eval}``, ``:::``,
  ``:class:``, a ``(label)=`` target, ...) is visible;
* every written solution is collapsed (it takes a click to see it), and one click opens it; the code cells of a
  solution are collapsed too (JupyterLab shows their first line, ``# Solution to Exercise N.k``);
* the ipywidgets panels of chapters 1 and 5 render.

Two chapters run side by side (each in its own lab workspace and kernel). Screenshots of each chapter's
top, of an opened solution and of the widget panels go to ``test-artifacts/lab/``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import ROOT, require_chromium, stop_server, wait_for_server

from tools.site_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ARTIFACTS = ROOT / "test-artifacts" / "lab"
#: every chapter; ``SPECTRAL_BOOK_LAB_CHAPTERS=00_layer_spectra,03_real_models`` runs only those (while writing one)
CHAPTERS = [name for name in sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.md"))
            if name in os.environ.get("SPECTRAL_BOOK_LAB_CHAPTERS", name).split(",")]
#: chapters whose ipywidgets panel must render (their ``widget_*`` cell runs in the lab)
WIDGET_CHAPTERS = {"01_power_method", "05_steering_lab"}
#: a chapter's Run All fails only when no code cell has finished for this many seconds (a hang, not a slow
#: machine: on a loaded 2-core machine chapter 3 alone took over 420 s, the old fixed budget) ...
STALL_LIMIT_S = 600
#: ... or, as a last bound on a run that keeps crawling, after this many seconds in all
RUN_CAP_S = 3600
PARALLEL = 2
#: the lab's user settings for the test: every cell in the DOM (the default windowing keeps off-screen
#: cells out of it, so the page could not be searched), and no news prompt over the notebook
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": '{"windowingMode": "none"}',
    "@jupyterlab/apputils-extension/notification": '{"fetchNews": "false"}',
}
#: raw MyST a rendered markdown cell must not show (math is removed before the search)
RAW_MYST = re.compile(
    r"\{(?:eval|glue[a-z:]*|admonition|dropdown|code-cell|figure|prf:[a-z]+|numref|ref|doc|cite|math|"
    r"note|tip|important|warning|list-table|table|exercise|solution[a-z-]*)\}|^:::|^```|:class:|:label:|^\([\w-]+\)=\s*$",
    re.M,
)

#: roles and directives jupyterlab-myst renders (seen in the screenshots; ``{cite}`` shows the BibTeX key,
#: the lab having no bibliography)
LAB_ROLES = {"eval", "cite", "ref", "numref", "doc", "prf:ref", "math", "sub", "sup", "abbr", "term", "eq"}
LAB_DIRECTIVES = {"admonition", "note", "tip", "important", "warning", "dropdown", "figure", "math", "list-table",
                  "prf:proposition", "prf:lemma", "prf:theorem", "prf:definition", "prf:proof",
                  "exercise", "solution", "solution-start", "solution-end"}

# code cells from the notebook's widgets: a cell whose input is collapsed has no prompt in the DOM, so the
# execution count comes from the model and "running" from the widget's prompt text (`[*]`)
_STATE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const code = panel.content.widgets.filter(c => c.model.type === 'code');
  const prompts = code.map(c => (c.promptNode && c.promptNode.textContent) || '');
  return {n_code: code.length, n_cells: panel.content.widgets.length,
          running: prompts.map((p, i) => p.includes('*') ? i : -1).filter(i => i >= 0),
          done: code.filter(c => c.model.executionCount !== null).length};
}"""

# text of each rendered markdown cell, math left out: as the reader sees it (closed <details> left out
# too), and in full (every <details> opened)
_MARKDOWN_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell')]
  .map(cell => {
    const text = (opened) => {
      const copy = cell.cloneNode(true);
      copy.querySelectorAll('.jp-Toolbar, .jp-InputPrompt, .jp-Editor, .jp-CodeMirrorEditor, .jp-CellHeader, .jp-CellFooter')
        .forEach(m => m.remove());
      copy.querySelectorAll('.katex, mjx-container, math, .math, [class*="math"]').forEach(m => m.remove());
      copy.querySelectorAll('details').forEach(d => { if (opened) d.open = true; });
      copy.style.position = 'absolute'; copy.style.left = '-99999px';
      document.body.appendChild(copy);
      const t = copy.innerText;
      copy.remove();
      return t;
    };
    return {visible: text(false), full: text(true)};
  })"""

_ERRORS_JS = """() => {
  const root = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const outs = [...root.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText)
    .filter(t => /Traceback \\(most recent call last\\)|Error in callback|^\\w+(Error|Exception)\\b/m.test(t));
  const inline = [...root.querySelectorAll('.jp-MarkdownCell [data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(e => 'inline expression: ' + e.innerText);
  return outs.concat(inline).map(t => t.slice(0, 400));
}"""

# the notebook model: each markdown cell's source and the {eval} results jupyterlab-myst stored in its metadata
_MODEL_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.model.sharedModel.cells.filter(c => c.cell_type === 'markdown').map(c => ({
    source: c.source, expressions: (c.getMetadata('user_expressions') || []).map(e => ({
      expression: e.expression, status: e.result.status,
      text: e.result.status === 'ok' ? ((e.result.data || {})['text/plain'] || '') : `${e.result.ename}: ${e.result.evalue}`}))}));
}"""

_KERNEL_JS = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return kernel ? `${kernel.name}:${kernel.status}` : '';
}"""

# solutions: jupyterlab-myst renders a {solution} (or a gated {solution-start}) with class `dropdown` as <details>
_SOLUTIONS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell details')]
  .filter(d => /^\\s*(Start of )?Solution/.test((d.querySelector('summary') || {}).innerText || ''))
  .map(d => ({open: d.open,
              visible: [...d.children].filter(c => c.tagName !== 'SUMMARY').some(c => c.checkVisibility())}))"""

# code cells of solutions: their input must be collapsed (a placeholder showing the first line)
_SOLUTION_CODE_JS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets.filter(c => c.model.type === 'code'
      && c.model.sharedModel.source.startsWith('# Solution to Exercise'))
    .map(c => ({first: c.model.sharedModel.source.split('\\n')[0], collapsed: c.inputHidden,
                placeholder: !!c.node.querySelector('.jp-InputPlaceholder'), outputs: c.model.outputs.length}));
}"""

_WIDGETS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output')]
  .filter(o => o.querySelector('.jupyter-widgets, .widget-box, .jp-OutputArea-output .widget-slider'))
  .map(o => ({w: o.getBoundingClientRect().width, h: o.getBoundingClientRect().height,
              n_controls: o.querySelectorAll('.widget-slider, .widget-dropdown, .widget-toggle-buttons, .widget-button, input, select').length,
              text: o.innerText.slice(0, 200)}))"""


@dataclass
class ChapterRun:
    """What one chapter showed in the lab after Run All."""

    name: str
    seconds: float = 0.0
    opened: bool = False
    n_code: int = 0
    still_running: list[int] = field(default_factory=list)
    not_run: int = 0
    errors: list[str] = field(default_factory=list)
    raw_myst: list[str] = field(default_factory=list)
    unknown_markup: list[str] = field(default_factory=list)
    n_eval: int = 0
    eval_problems: list[str] = field(default_factory=list)
    solutions: list[dict] = field(default_factory=list)
    solution_code: list[dict] = field(default_factory=list)
    solution_opens: bool = False
    widgets: list[dict] = field(default_factory=list)
    failure: str = ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_url(tmp_path_factory):
    """JupyterLab from ``.venv`` on a free loopback port, serving a copy of ``book/``; its URL."""
    require_chromium()
    tmp = tmp_path_factory.mktemp("lab")
    book = tmp / "book"
    shutil.copytree(ROOT / "book", book, ignore=shutil.ignore_patterns("_build", ".ipynb_checkpoints"))
    for plugin, value in LAB_SETTINGS.items():
        path = tmp / "settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONHASHSEED="0",
    )
    cmd = [
        str(Path(sys.executable).with_name("jupyter")), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
        f"--ServerApp.root_dir={book}", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test reads the notebook model
        "--allow-root",  # CI containers run as root
    ]
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(proc, url, tmp / "lab.log", "jupyter lab")
        yield url
    finally:
        stop_server(proc)
        log.close()


def _open_as_notebook(page, url: str, name: str) -> None:
    """Open ``name.md`` as the README says: right-click in the file browser → Open With → Notebook."""
    page.goto(f"{url}/lab/workspaces/{name}?reset", wait_until="domcontentloaded")
    item = page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=f"{name}.md"))
    item.first.wait_for(timeout=60_000)
    item.first.click(button="right")
    page.locator(".lm-Menu-item", has_text="Open With").first.hover()
    page.locator(".lm-Menu-item .lm-Menu-itemLabel", has_text=re.compile(r"^Notebook$")).first.click()
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    # the chapter's kernelspec (python3) is preselected; if the lab still asks, accept it as a student would
    for _ in range(120):
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        if dialog.count() and dialog.first.is_visible():
            dialog.first.click()
        if page.evaluate(_KERNEL_JS) == "python3:idle":
            return
        page.wait_for_timeout(1000)
    raise AssertionError(f"{name}: the python3 kernel did not start (kernel: {page.evaluate(_KERNEL_JS)!r})")


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()


def _kernel_idle(page) -> bool:
    return page.evaluate(_KERNEL_JS) == "python3:idle"


def _prose(page) -> tuple[list[str], list[str], int, list[str]]:
    """Raw MyST seen, markup the lab does not render, the number of ``{eval}`` written, and problems with
    their values (not evaluated, an error, or not shown in the rendered cell)."""
    raw_myst, unknown, n_eval, problems = [], [], 0, []
    markdown = page.evaluate(_MARKDOWN_JS)
    for i, text in enumerate(m["visible"] for m in markdown):
        raw_myst += [f"markdown cell {i}: {m.group(0)!r} in …{text[max(0, m.start() - 40):m.end() + 40]!r}…"
                     for m in RAW_MYST.finditer(text)]
    for i, cell in enumerate(page.evaluate(_MODEL_JS)):
        source = re.sub(r"^(`{3,})(?!\{).*?^\1", "", cell["source"], flags=re.M | re.S)  # plain code blocks
        unknown += [f"markdown cell {i}: role {{{r}}}" for r in re.findall(r"\{([a-zA-Z][\w:-]*)\}`", source)
                    if r not in LAB_ROLES]
        unknown += [f"markdown cell {i}: directive {{{d}}}" for d in
                    re.findall(r"^\s*(?::{3,}|`{3,})\{([a-zA-Z][\w:-]*)\}", source, re.M)
                    if d not in LAB_DIRECTIVES]
        written = re.findall(r"\{eval\}`([^`]*)`", cell["source"])
        n_eval += len(written)
        got = [e["expression"] for e in cell["expressions"]]
        if got != written:
            problems.append(f"markdown cell {i}: {len(written)} {{eval}} written, {len(got)} evaluated")
        for e in cell["expressions"]:
            shown = re.sub(r"^([\"'])(.*)\1$", r"\2", e["text"])
            if e["status"] != "ok":
                problems.append(f"markdown cell {i}: {{eval}}`{e['expression']}` -> {e['text']}")
            elif " ".join(shown.split()) not in " ".join(markdown[i]["full"].split()):
                problems.append(f"markdown cell {i}: {{eval}}`{e['expression']}` = {shown!r} not shown")
    return raw_myst, unknown, n_eval, problems


def _finish(page, run: ChapterRun) -> None:
    """Collect what the chapter shows after Run All, and take its screenshots."""
    page.wait_for_timeout(3000)  # the markdown cells' {eval} requests queue behind the last code cell
    state = page.evaluate(_STATE_JS)
    run.n_code, run.still_running = state["n_code"], state["running"]
    run.not_run = state["n_code"] - state["done"]
    run.errors = page.evaluate(_ERRORS_JS)
    # jupyterlab-myst re-renders a markdown cell when its {eval} results arrive; on a loaded machine the
    # last cells' results can land after the kernel went idle, so the check waits up to 2 min for them
    for _ in range(60):
        prose = _prose(page)
        if not any(p.endswith(" not shown") for p in prose[3]):
            break
        page.wait_for_timeout(2000)
    run.raw_myst, run.unknown_markup, run.n_eval, run.eval_problems = prose
    run.solutions = page.evaluate(_SOLUTIONS_JS)
    run.solution_code = page.evaluate(_SOLUTION_CODE_JS)
    run.widgets = page.evaluate(_WIDGETS_JS)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("() => { const s = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                  ".jp-WindowedPanel-outer'); if (s) s.scrollTop = 0; }")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / f"{run.name}_top.png"))
    widget_out = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output", has=page.locator(".jupyter-widgets"))
    if widget_out.count():
        widget_out.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"{run.name}_widgets.png"))
    solution = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell details",
                            has=page.locator("summary", has_text="Solution"))
    if solution.count():
        solution.first.locator("summary").first.click()
        page.wait_for_timeout(300)
        run.solution_opens = solution.first.evaluate(
            "d => d.open && [...d.children].filter(c => c.tagName !== 'SUMMARY').some(c => c.checkVisibility())"
        )
        page.screenshot(path=str(ARTIFACTS / f"{run.name}_solution.png"))


@pytest.fixture(scope="module")
def lab_runs(lab_url) -> dict[str, ChapterRun]:
    """Every chapter opened and run in the lab, :data:`PARALLEL` at a time; what each showed."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    runs = {name: ChapterRun(name) for name in CHAPTERS}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        queue = list(CHAPTERS)
        active: dict[str, tuple[object, float]] = {}
        progress: dict[str, tuple[int, float]] = {}  # name -> (cells done, when that count last grew)
        while queue or active:
            while queue and len(active) < PARALLEL:
                name = queue.pop(0)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    _open_as_notebook(page, lab_url, name)
                    runs[name].opened = True
                    _run_all(page)
                    active[name] = (page, time.monotonic())
                    progress[name] = (0, time.monotonic())
                except PlaywrightError as exc:
                    runs[name].failure = f"could not open and run: {exc}"[:1500]
                    page.screenshot(path=str(ARTIFACTS / f"{name}_open_failed.png"))
                    page.close()
            time.sleep(2)
            for name, (page, t0) in list(active.items()):
                state = page.evaluate(_STATE_JS)
                now = time.monotonic()
                elapsed = now - t0
                if state["done"] > progress[name][0]:
                    progress[name] = (state["done"], now)
                stalled = now - progress[name][1] > STALL_LIMIT_S
                done = not state["running"] and _kernel_idle(page) and elapsed > 10
                if done or stalled or elapsed > RUN_CAP_S:
                    runs[name].seconds = round(elapsed, 1)
                    try:
                        _finish(page, runs[name])
                    except PlaywrightError as exc:
                        runs[name].failure = f"inspection failed: {exc}"[:1500]
                    page.close()
                    del active[name]
        browser.close()
    return runs


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_in_lab(lab_runs, name):
    run = lab_runs[name]
    assert not run.failure, f"{name}: {run.failure}"
    assert run.opened and run.n_code > 0, f"{name}: the notebook did not open with code cells"
    assert not run.still_running, (f"{name}: code cells {run.still_running} still running after {run.seconds} s "
                                   f"(no cell finished for {STALL_LIMIT_S} s, or {RUN_CAP_S} s in all)")
    assert not run.errors, f"{name}: error output: {run.errors[:5]}"
    assert run.not_run == 0, f"{name}: {run.not_run} of {run.n_code} code cells never ran"
    assert not run.unknown_markup, f"{name}: markup the lab does not render: {run.unknown_markup[:8]}"
    assert not run.eval_problems, f"{name}: {{eval}} in the prose: {run.eval_problems[:8]}"
    assert not run.raw_myst, f"{name}: raw MyST visible in {len(run.raw_myst)} places: {run.raw_myst[:8]}"
    source = (ROOT / "book" / f"{name}.md").read_text(encoding="utf-8")
    n_written = len(re.findall(r"^:{3,}\{solution(?:-start)?\}", source, re.M))
    assert len(run.solutions) == n_written, f"{name}: {len(run.solutions)} collapsible solutions, {n_written} written"
    n_code = len(re.findall(r"^# Solution to Exercise", source, re.M))
    assert len(run.solution_code) == n_code, f"{name}: {len(run.solution_code)} solution code cells found, {n_code} written"
    open_code = [c["first"] for c in run.solution_code if not (c["collapsed"] and c["placeholder"]) or c["outputs"]]
    assert not open_code, f"{name}: solution code (or its output) shown without a click: {open_code}"
    shown = [i for i, s in enumerate(run.solutions) if s["open"] or s["visible"]]
    assert not shown, f"{name}: solutions {shown} visible without a click"
    if run.solutions:
        assert run.solution_opens, f"{name}: a click on a solution's title did not open it"
    if name in WIDGET_CHAPTERS:
        panels = [w for w in run.widgets if w["w"] > 100 and w["h"] > 100 and w["n_controls"] > 0]
        assert panels, f"{name}: no ipywidgets panel rendered: {run.widgets}"
