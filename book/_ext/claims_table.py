"""Sphinx extension: the ``claims-table`` directive of the *Results at a glance* page.

One table row per :data:`lib.page.claims.CLAIMS` entry of the requested source. The directive writes the
table as MyST (a ``list-table`` whose cells paste, across documents, the values that the claim's chapter
glued with :func:`lib.page.claims.glue_claim`) and parses it in place, so the registry in ``lib`` is the one
list of claims and the page never repeats it by hand. A missing glue key or section label is a Sphinx
warning, which fails the ``-W`` build.

The ``claims-overview`` directive draws the page's first screen: for each group of claims its counts per
verdict, then one line per claim (its id linking to the section that tests it, the claim in about ten words,
the models it ran on, and the verdict as a word in a cell coloured by the verdict). It reads the verdicts and
models the chapters glued from myst-nb's glue data (``_build/jupyter_execute/book/<chapter>.glue.json``),
which exists when the page is read: Sphinx reads documents in name order, and ``book/results`` comes after
every chapter ``book/0N_*``. A missing file or key is an error, which fails the build.

Usage in a MyST page::

    ```{claims-overview}
    ```

    ```{claims-table} li2026power
    ```
"""

from __future__ import annotations

import json
from ast import literal_eval
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from lib.page.claims import CLAIMS, SOURCES, Claim, answer, model_tags, verdict_counts, verdict_slug

HEADER = ("Claim", "Models we ran", "What we measured", "Verdict")


def _row(c: Claim) -> list[str]:
    src = "[ours]" if c.source == "ours" else f"[paper] {{cite}}`{c.source}`"
    glued = {f: f"{{glue:text}}`{c.chapter}.md::{c.key(f)}:s`" for f in ("models", "measured", "verdict")}
    return [
        f"**{c.id}.** {c.text} {src}\n\n    Tested in {{ref}}`chapter {int(c.chapter[:2])} <{c.label}>`.",
        glued["models"],
        glued["measured"],
        f"**{glued['verdict']}**",
    ]


def claims_markdown(source: str) -> list[str]:
    """The MyST ``list-table`` of every claim of ``source`` (a bibtex key or ``"ours"``), one line a string."""
    rows = [_row(c) for c in CLAIMS if c.source == source]
    if not rows:
        raise ValueError(f"no claims with source {source!r}")
    lines = [":::{list-table}", ":header-rows: 1", ":widths: 34 18 34 14", ":class: claims-table", ""]
    for cells in [list(HEADER), *rows]:
        lines.append(f"* - {cells[0]}")
        lines.extend(f"  - {cell}" for cell in cells[1:])
    lines.append(":::")
    return lines


class ClaimsTable(SphinxDirective):
    """``{claims-table} <source>``: the Results table of one paper's claims (or ``ours``)."""

    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        try:
            lines = claims_markdown(self.arguments[0])
        except ValueError as exc:
            raise self.error(str(exc)) from exc
        container = nodes.container(classes=["claims"])
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, container)
        return [container]


def glued_text(glue_dir: Path, c: Claim, field: str) -> str:
    """The text a chapter glued for one field of claim ``c`` (a Python string's repr in myst-nb's glue data)."""
    path = glue_dir / "book" / f"{c.chapter}.glue.json"
    if not path.is_file():
        raise ValueError(f"no glue data of {c.chapter} at {path} (was the chapter executed?)")
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        plain = data[c.key(field)]["data"]["text/plain"]
    except KeyError as exc:
        raise ValueError(f"{c.chapter} glued no {c.key(field)}") from exc
    plain = "".join(plain) if isinstance(plain, list) else plain
    try:
        return str(literal_eval(plain))
    except (SyntaxError, ValueError):
        return plain


def _cell(*children: nodes.Node, classes: list[str] | None = None) -> nodes.entry:
    return nodes.entry("", nodes.paragraph("", "", *children), classes=classes or [])


class ClaimsOverview(SphinxDirective):
    """``{claims-overview}``: every claim in one line with its verdict, grouped by paper, with counts.

    With the flag ``:counts-only:`` it gives the counts alone, one line per group (the introduction's summary).
    """

    has_content = False
    option_spec = {"counts-only": lambda arg: True}

    def _table(self, claims: list[Claim], verdicts: dict[str, str], models: dict[str, str]) -> nodes.table:
        table = nodes.table(classes=["claims-overview-table"])
        group = nodes.tgroup(cols=4)
        table += group
        for width in (7, 47, 19, 27):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        row = nodes.row()
        for title in ("Claim", "In a few words", "Ran on", "Verdict"):
            row += nodes.entry("", nodes.paragraph(text=title))
        head += row
        body = nodes.tbody()
        group += body
        for c in claims:
            link = addnodes.pending_xref("", nodes.inline(text=c.id), refdomain="std", reftype="ref",
                                         reftarget=c.label, refexplicit=True, refwarn=True)
            v = verdicts[c.id]
            row = nodes.row()
            row += _cell(link, classes=["claim-id"])
            row += _cell(nodes.Text(c.short))
            row += _cell(nodes.Text(" · ".join(model_tags(models[c.id])) or models[c.id]), classes=["claim-models"])
            row += _cell(nodes.Text(answer(c, v)), classes=["verdict", f"verdict-{verdict_slug(v)}"])
            body += row
        return table

    def run(self) -> list[nodes.Node]:
        glue_dir = Path(self.env.app.outdir).parent / "jupyter_execute"
        out = nodes.container(classes=["claims-overview"])
        try:
            for source, heading in SOURCES.items():
                claims = [c for c in CLAIMS if c.source == source]
                verdicts = {c.id: glued_text(glue_dir, c, "verdict") for c in claims}
                models = {c.id: glued_text(glue_dir, c, "models") for c in claims}
                for c in claims:
                    self.env.note_dependency(str(glue_dir / "book" / f"{c.chapter}.glue.json"))
                counts = verdict_counts(verdicts, source)
                tally = " · ".join(f"{n} {answer(claims[0], v) if source == 'ours' else v}" for v, n in counts.items())
                out += nodes.paragraph("", "", nodes.strong(text=heading),
                                       nodes.Text(f" ({len(claims)} {'questions' if source == 'ours' else 'claims'}): "
                                                  f"{tally}"), classes=["claims-overview-count"])
                if "counts-only" not in self.options:
                    out += self._table(claims, verdicts, models)
        except (ValueError, KeyError) as exc:
            raise self.error(str(exc)) from exc
        return [out]


def setup(app: Sphinx) -> dict:
    app.add_directive("claims-table", ClaimsTable)
    app.add_directive("claims-overview", ClaimsOverview)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
