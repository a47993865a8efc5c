"""Sphinx extension: the ``claims-table`` directive of the *Results at a glance* page.

One table row per :data:`lib.page.claims.CLAIMS` entry of the requested source. The directive writes the
table as MyST (a ``list-table`` whose cells paste, across documents, the values that the claim's chapter
glued with :func:`lib.page.claims.glue_claim`) and parses it in place, so the registry in ``lib`` is the one
list of claims and the page never repeats it by hand. A missing glue key or section label is a Sphinx
warning, which fails the ``-W`` build.

Usage in a MyST page::

    ```{claims-table} li2026power
    ```
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from lib.page.claims import CLAIMS, Claim

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


def setup(app: Sphinx) -> dict:
    app.add_directive("claims-table", ClaimsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
