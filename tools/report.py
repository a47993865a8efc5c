"""``make report``: the book's model-driven chapters re-run on one model, as a static site in the book's theme.

::

    python -m tools.report --model <alias|folder|hub id> [--device cuda] [--prompts FILE] [--out _build/report]

writes ``<out>/<model slug>/index.html`` (:func:`model_slug`), a Jupyter Book 1 site with the book's theme,
configuration and static files, whose pages are:

* **Exactness checks** (``tools/report_pages/exactness.md``, run first): ``F_t`` against the model's forward
  pass at uniform attention, the closed-form block and in-context Jacobians against autodiff of its real modules,
  in float64, each with its relative error (:mod:`lib.methods.exactness`);
* every chapter of :data:`CHAPTERS`, executed with papermill, its ``parameters`` cell given the model, device,
  dtype and prompts (only the names the cell defines). A chapter whose first code cell is not a ``parameters``
  cell is skipped with a note on the About page; a chapter that raises stops the report with one
  :class:`lib.ReportError` naming the chapter and the error (its notebook, as far as it ran, is kept);
* **Results**: the claims table of the chapters that ran, read from what they glued with
  :func:`lib.page.claims.glue_claim`, in the Results page's words and colours (:data:`lib.page.claims.VERDICTS`);
* **About this report**: the model, the device, dtype and package versions, and how long each part took.

A model that cannot be loaded is refused before anything runs, with the library's own error
(a misspelt alias gets the alias it resembles). The chapters run with ``SPECTRAL_BOOK_BUILD=1`` (their progress
bars stay out of the pages); the report shows its own, one over the parts and papermill's over each part's cells.
The sources and executed notebooks stay in ``<out>/.work/<model slug>/``.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from lib.models import SpectralModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tools/ is not an installed package
    sys.path.insert(0, str(ROOT))

CHAPTERS: tuple[str, ...] = ("00_layer_spectra", "03_real_models", "04_jacobian_funnel", "05_steering_lab",
                             "06_two_views")
"""The model-driven chapters a report runs, in order (``book/<slug>.md``)."""

EXACTNESS = ROOT / "tools" / "report_pages" / "exactness.md"
"""The report's first page, a parameterised notebook like the chapters."""

EXTENSIONS = ("offline_assets", "eval_glue", "figures", "chapter_numbers", "accessibility")
"""The book's Sphinx extensions the report's site uses (not the course and download ones, which read the book)."""

SECOND_ROLE: dict[str, str] = {"04_jacobian_funnel": "post", "05_steering_lab": "pre", "06_two_views": "pre"}
"""Chapters with two model places, and the norm placement whose models take the second (``second_model``): chapter 4
tests the paper's claims on its pre-norm ``model`` beside a post-LayerNorm contrast; chapters 5 and 6 put an encoder
in ``model``'s place and a decoder in ``second_model``'s. Any other placement (pre, output, sandwich norms) is the
decoder's place."""

PASSED = ("model", "device", "dtype", "prompts")
"""The parameters a report sets, where a page's ``parameters`` cell defines them (the others keep the page's
defaults, e.g. the twins' seeds)."""


@dataclass
class Part:
    """One part of a report: a page that ran (or was skipped), how long it took and a note for the About page."""

    slug: str
    title: str
    seconds: float = 0.0
    ran: bool = False
    note: str = ""


def model_slug(name: str) -> str:
    """The report's folder name for a model: its alias, hub id (``/`` as ``--``) or, for an existing folder, the
    folder's name; lower case, ``[a-z0-9._-]`` only.

    Example:
        >>> model_slug("openai-community/gpt2"), model_slug("minilm")
        ('openai-community--gpt2', 'minilm')
    """
    text = name.rstrip("/\\")
    path = Path(text).expanduser()
    if path.is_dir():
        text = path.resolve().name
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower().replace("/", "--")).strip("-.")
    return slug or "model"


def model_place(slug: str, model: SpectralModel) -> str:
    """The parameter of chapter ``slug`` that ``model`` fills: ``"model"``, or ``"second_model"`` where the chapter
    keeps that place for models of the model's kind (:data:`SECOND_ROLE`)."""
    role = SECOND_ROLE.get(slug)
    if role is None:
        return "model"
    post = model.adapter.norm_placement == "post"
    return "second_model" if post == (role == "post") else "model"


def parameter_names(path: Path) -> list[str] | None:
    """The names a MyST notebook's ``parameters`` cell assigns (its first code cell), or ``None`` if it has none."""
    import jupytext

    cells = [c for c in jupytext.read(path, fmt="md:myst").cells if c.cell_type == "code"]
    if not cells or "parameters" not in cells[0].metadata.get("tags", []):
        return None
    return [m.group(1) for m in re.finditer(r"^([A-Za-z_]\w*)\s*=", cells[0].source, re.MULTILINE)]


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def _execute(src: Path, out: Path, parameters: dict, label: str) -> None:
    """Execute the MyST notebook ``src`` with papermill into ``out`` (an ``.ipynb``), in ``book/``."""
    import jupytext
    import papermill

    from lib.errors import ReportError

    source_nb = out.with_suffix(".source.ipynb")
    jupytext.write(jupytext.read(src, fmt="md:myst"), source_nb)
    try:
        papermill.execute_notebook(str(source_nb), str(out), parameters=parameters, kernel_name="python3",
                                   cwd=str(ROOT / "book"), progress_bar={"desc": label, "leave": False},
                                   execution_timeout=3600)
    except papermill.PapermillExecutionError as exc:
        raise ReportError(f"{label} could not analyse {parameters.get('model')!r}: {exc.ename}: {exc.evalue} "
                          f"(the notebook as far as it ran: {out})") from None
    finally:
        source_nb.unlink(missing_ok=True)
    _hide_default_parameters(out)


def _hide_default_parameters(path: Path) -> None:
    """Tag the page's own ``parameters`` cell ``remove-cell`` when papermill injected the values that ran after it,
    so the page shows what ran, not the defaults it replaced."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    if any("injected-parameters" in t for t in tags):
        for cell, t in zip(nb.cells, tags):
            if "parameters" in t:
                cell.metadata["tags"] = [*t, "remove-cell"]
        nbformat.write(nb, path)


def _glued(nb_path: Path) -> dict[str, str]:
    """name → plain text of every value an executed notebook glued (myst-nb's ``scrapbook`` outputs)."""
    from ast import literal_eval

    import nbformat

    out = {}
    for cell in nbformat.read(nb_path, as_version=4).cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is None:
                continue
            plain = next(v for k, v in o["data"].items() if k.endswith("text/plain"))
            plain = "".join(plain) if isinstance(plain, list) else plain
            try:
                out[name] = str(literal_eval(plain))
            except (SyntaxError, ValueError):
                out[name] = plain
    return out


def results_markdown(label: str, glued: dict[str, dict[str, str]]) -> str:
    """The report's Results page: one row per claim of the chapters in ``glued`` (chapter slug → glued values).

    The verdict is a word in a cell coloured by the verdict, as on the book's Results page
    (``book/_static/tables.css``); claims of chapters that did not run are listed by id below the table.
    """
    from lib.page.claims import CLAIMS, SOURCES, VERDICTS, answer, verdict_slug

    e = html.escape
    ran = [c for c in CLAIMS if c.chapter in glued and c.key("verdict") in glued[c.chapter]]
    lines = ["(report-results)=", "# Results", "",
             (f"Every claim that the chapters of this report test, measured on **{e(label)}** and its random-init "
             "twins, with the verdict each chapter's code decided from its numbers (the same rules and the same "
             "words as the book's *Results at a glance*). Nothing here is typed in: each cell is the text the "
             "chapter glued when it ran."), ""]
    if ran:
        counts = Counter(glued[c.chapter][c.key("verdict")] for c in ran)
        lines += ["**Verdicts:** " + " · ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]), ""]
    for source, heading in SOURCES.items():
        claims = [c for c in ran if c.source == source]
        if not claims:
            continue
        rows = []
        for c in claims:
            g = glued[c.chapter]
            v = g[c.key("verdict")]
            rows.append(f'<tr><td class="claim-id"><a href="{c.chapter}.html#{c.label}">{e(c.id)}</a></td>'
                        f"<td>{e(c.short)}</td><td>{e(g[c.key('models')])}</td><td>{e(g[c.key('measured')])}</td>"
                        f'<td class="verdict verdict-{verdict_slug(v)}">{e(answer(c, v))}</td></tr>')
        lines += [f"## {heading}", "", "```{raw} html", '<table class="claims-overview-table report-claims">',
                  ("<thead><tr><th>Claim</th><th>In a few words</th><th>Models</th><th>What we measured</th>"
                  "<th>Verdict</th></tr></thead>"), "<tbody>", *rows, "</tbody></table>", "```", ""]
    missing = [c.id for c in CLAIMS if c not in ran]
    if missing:
        lines += [("Not tested in this report (their chapters are not among its parts, or did not run: see "
                  f"{{ref}}`report-about`): {', '.join(missing)}."), ""]
    return "\n".join(lines)


def _table(rows: Sequence[tuple[str, str]], header: tuple[str, str]) -> list[str]:
    e = html.escape
    body = "".join(f"<tr><td>{e(a)}</td><td>{e(b)}</td></tr>" for a, b in rows)
    return ["```{raw} html", (f"<table class=\"table\"><thead><tr><th>{e(header[0])}</th><th>{e(header[1])}</th>"
            f"</tr></thead><tbody>{body}</tbody></table>"), "```", ""]


def about_markdown(model: SpectralModel, spec: dict, parts: Sequence[Part], total: float, command: str) -> str:
    """The report's About page: what ran, where (device, dtype, versions) and how long each part took."""
    from lib.page.build_info import build_info

    what = [("model", spec["model"]), ("loaded as", model.label), ("family", model.family),
            ("layers × width", f"{model.n_layers} × {model.d_model}"), ("device", spec["device"]),
            ("dtype", spec["dtype"]), ("prompts", spec["prompts"] or "the book's prompts"),
            ("command", command)]
    timing = [(p.title, f"{p.seconds:.0f} s" if p.ran else f"skipped: {p.note}") for p in parts]
    timing.append(("total, from loading the model to this page (the site build follows)", f"{total:.0f} s"))
    info = [(str(k), str(v)) for k, v in build_info()["value"].items()]
    return "\n".join(["(report-about)=", "# About this report", "",
                      ("What ran, where, and how long each part took. Every page was executed by `make report` "
                      "with the model set in its parameters cell; the site was built from the executed "
                      "notebooks with the book's theme."), "",
                      "## What ran", "", *_table(what, ("item", "value")),
                      "## How long each part took", "", *_table(timing, ("part", "wall time")),
                      *[f"- {p.title}: {p.note}" for p in parts if p.ran and p.note], "",
                      "## Machine and versions", "", *_table(info, ("item", "value"))])


def index_markdown(label: str, parts: Sequence[Part]) -> str:
    ran = [p for p in parts if p.ran]
    return "\n".join([f"# Report: {label}", "",
                      (f"The book *Spectral dynamics of transformers*, re-run on **{html.escape(label)}**: the "
                      "same analyses, statistics and verdicts as the book's chapters, computed for this model "
                      "and its random-init twins."), "",
                      "- {ref}`report-exactness`: the book's formulas against this model's own modules;",
                      "- {ref}`report-results`: every claim the chapters below test, with its verdict;",
                      *[f"- {p.title}" for p in ran if p.slug != "exactness"],
                      "- {ref}`report-about`: what ran, where, and how long it took.", ""])


def _write_project(work: Path, label: str, parts: Sequence[Part]) -> None:
    """The Jupyter Book project in ``work``: the book's ``_config.yml`` (execution off: the pages are executed)."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = f"Report: {label}"
    config["execute"] = {"execute_notebooks": "off"}
    config["only_build_toc_files"] = True
    footer = "Every number on these pages was computed by the code on the page when the report was built."
    config["html"]["extra_footer"] = footer
    sphinx = config["sphinx"]
    sphinx["local_extensions"] = {name: "book/_ext" for name in EXTENSIONS}
    sphinx["config"]["html_theme_options"]["extra_footer"] = footer
    sphinx["config"]["suppress_warnings"] = [*sphinx["config"].get("suppress_warnings", []), "myst.xref_missing"]
    (work / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    chapters = ["book/results", *[f"book/{p.slug}" for p in parts if p.ran], "book/about"]
    toc = {"format": "jb-book", "root": "book/index", "chapters": [{"file": f} for f in chapters]}
    (work / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    for name in ("_ext", "_static", "_templates"):
        shutil.copytree(ROOT / "book" / name, work / "book" / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "book" / "references.bib", work / "book" / "references.bib")
    vendor = work / ".vendor"
    if not vendor.exists():
        vendor.symlink_to(ROOT / ".vendor", target_is_directory=True)


def build_report(model: str, *, device: str = "cpu", dtype: str = "float32", prompts: str | None = None,
                 out: Path = ROOT / "_build" / "report", chapters: Sequence[str] = CHAPTERS) -> Path:
    """Run the report's parts on ``model`` and build its site; the site's folder (``out/<model slug>``).

    Args:
        model: an offline alias, a checkpoint folder or a hub id (as :func:`lib.load_model`).
        device, dtype: where and in what the chapters hold the model.
        prompts: a text file of prompts, one per line (``None``: each chapter's own prompts).
        chapters: the chapter slugs to run (default :data:`CHAPTERS`).
    Raises:
        The library's loading errors (ModelNotAvailableError with the close alias for a misspelt one, ...) before
        anything runs; InputError for a prompts file that does not exist or is empty; ReportError when a part
        raises.
    """
    import lib
    from lib.models.prompts import load_prompts
    from lib.progress import progress

    start = time.perf_counter()
    if prompts is not None:
        load_prompts(prompts)  # refused here, not in the middle of a chapter
        prompts = str(Path(prompts).expanduser().resolve())
    loaded = lib.load_model(model, device=device, dtype=dtype)
    model_arg = str(Path(model).expanduser().resolve()) if Path(model).expanduser().is_dir() else model
    spec = {"model": model_arg, "device": device, "dtype": dtype, "prompts": prompts}
    slug = model_slug(model)
    work = Path(out) / ".work" / slug
    shutil.rmtree(work, ignore_errors=True)
    (work / "book").mkdir(parents=True)

    sources = {"exactness": EXACTNESS, **{c: ROOT / "book" / f"{c}.md" for c in chapters}}
    parts = [Part(s, "Exactness checks" if s == "exactness" else _title(p)) for s, p in sources.items()]
    env_before = os.environ.copy()
    os.environ.update({"SPECTRAL_BOOK_BUILD": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])})
    try:
        for part in progress(parts, desc=f"report on {loaded.label}", unit="part"):
            names = parameter_names(sources[part.slug])
            if names is None:
                part.note = "no parameters cell yet (it runs only on the book's models)"
                print(f"report: skipping {part.title}: {part.note}", file=sys.stderr)
                continue
            given = {k: v for k, v in spec.items() if k in names and (k != "prompts" or v is not None)}
            place = model_place(part.slug, loaded)
            if place != "model" and place in names:  # the chapter's other place; its own default fills "model"
                given[place] = given.pop("model")
                part.note = f"{loaded.label} ran as its {place} (the other place keeps the page's default)"
            t0 = time.perf_counter()
            _execute(sources[part.slug], work / "book" / f"{part.slug}.ipynb", given, part.title)
            part.seconds, part.ran = time.perf_counter() - t0, True
            unused = [k for k in PASSED if k not in names and spec.get(k) is not None and k != "dtype"]
            if unused:
                part.note = "; ".join(filter(None, [part.note, f"its parameters cell takes no {', '.join(unused)}: "
                                                                 "the page's own default ran"]))
    finally:
        os.environ.clear()
        os.environ.update(env_before)

    glued = {p.slug: _glued(work / "book" / f"{p.slug}.ipynb") for p in parts if p.ran}
    book = work / "book"
    (book / "results.md").write_text(results_markdown(loaded.label, glued), encoding="utf-8")
    (book / "index.md").write_text(index_markdown(loaded.label, parts), encoding="utf-8")
    _write_project(work, loaded.label, parts)
    command = " ".join(["make report", f"MODEL={model}", *([f"DEVICE={device}"] if device != "cpu" else []),
                        *([f"PROMPTS={prompts}"] if prompts else [])])
    (book / "about.md").write_text(about_markdown(loaded, spec, parts, time.perf_counter() - start, command),
                                   encoding="utf-8")
    _build_site(work)
    site = Path(out) / slug
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(work / "_build" / "html", site, symlinks=False)
    return site


def _build_site(work: Path) -> None:
    """``jupyter-book build`` of the report's project (the pages are already executed)."""
    from lib.errors import ReportError

    proc = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(work), "--keep-going"],
                          cwd=work, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          check=False)
    if proc.returncode != 0 or not (work / "_build" / "html" / "index.html").is_file():
        raise ReportError(f"the report's site did not build:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="offline alias, checkpoint folder or hub id")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument("--dtype", default="float32", help="float32 (default) or bfloat16")
    parser.add_argument("--prompts", default=None, help="a text file of prompts, one per line")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "report")
    parser.add_argument("--chapters", nargs="+", default=list(CHAPTERS), choices=CHAPTERS, metavar="SLUG",
                        help=f"the chapters to run (default: all of {', '.join(CHAPTERS)})")
    args = parser.parse_args(argv)
    from lib.errors import SpectralBookError

    try:
        site = build_report(args.model, device=args.device, dtype=args.dtype, prompts=args.prompts, out=args.out,
                            chapters=args.chapters)
    except SpectralBookError as exc:
        print(f"make report: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"report: {site / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
