"""Sphinx extension: a chart shown with :func:`lib.page.figures.figure` becomes a numbered figure of the site.

In the notebook the figure's output is one HTML block: a marker with the figure's target, number and caption,
the chart, and the caption as a paragraph (what JupyterLab shows). Here the cell output is wrapped in a
``figure`` node whose id is the target (``fig-3-spectrum``, so ``{numref}`` and the prose's ``{eval}`` reach
it), the paragraph is dropped from the HTML, and the caption becomes the figure's caption, which Sphinx
prefixes with its number ("Fig. 3.2", per chapter: ``chapter_numbers.py``).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

from lib.page.figures import parse_figure_html


def _bundle(raw: nodes.raw) -> nodes.Element:
    """The output's mime bundle (myst-nb: a container of one container per mime type), or the raw node."""
    node: nodes.Element = raw
    while node.parent is not None and not (isinstance(node, nodes.container)
                                           and node.get("nb_element") == "mime_bundle"):
        node = node.parent
    return node if node.parent is not None else raw


class FigureOutputs(SphinxTransform):
    """Wrap every figure output of a page in a captioned ``figure`` node with the figure's target."""

    default_priority = 500

    def apply(self, **kwargs: object) -> None:
        for raw in list(self.document.findall(nodes.raw)):
            if "html" not in raw.get("format", "").split():
                continue
            parsed = parse_figure_html(raw.astext())
            if parsed is None:
                continue
            meta, chart = parsed
            new_raw = nodes.raw("", chart, format="html", classes=raw.get("classes", []))
            raw.replace_self(new_raw)
            bundle = _bundle(new_raw)
            fig = nodes.figure("", classes=["spectral-book-figure"])
            fig["spectral_book_number"] = meta["number"]
            fig["names"].append(meta["target"])
            self.document.note_explicit_target(fig, fig)
            bundle.replace_self(fig)
            fig += bundle
            fig += nodes.caption(meta["caption"], meta["caption"])


def setup(app: Sphinx) -> dict:
    app.add_transform(FigureOutputs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
