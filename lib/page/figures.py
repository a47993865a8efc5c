"""Numbered, captioned figures that read the same on the site and in JupyterLab.

A chapter shows a chart as a figure and refers to it in its prose::

    figure(chart, "spectrum", "Eigenvalues of F_t, one panel per layer: λ₁ sits on the circle.")

    ... as {eval}`fig_spectrum` shows, ...

:func:`figure` numbers the figures of a chapter in the order they are first shown ("Fig. 3.2" is the
second figure of chapter 3; the chapter's number comes from ``lib.page.setup.book_setup(chapter=3)``; showing the same
name again keeps its number). Its output is the chart followed by the caption, in both surfaces:

* **JupyterLab** shows that HTML as it is: the chart, then "Fig. 3.2 <caption>".
* **The site** (``book/_ext/figures.py``) turns the output into a numbered Sphinx figure with the target
  ``fig-3-spectrum`` and the caption, numbered per chapter by ``book/_ext/chapter_numbers.py``; the build
  fails if Sphinx's number is not the one the kernel printed.

It also glues ``fig_<name>``, a :class:`FigureRef` whose text is "Fig. 3.2": the lab's ``{eval}`` shows
that text, and the site's ``{eval}`` (``book/_ext/eval_glue.py``) makes it a ``{numref}`` link to the figure.
(A ``{numref}`` written in the prose would not do: the lab resolves references between markdown cells only,
and shows one to a code cell's output as a broken link.)

Captions are plain Unicode text (no MyST, no TeX): they are written by Python and shown by both surfaces as
they are.
"""

from __future__ import annotations

import base64
import html
import json
import re
from dataclasses import dataclass
from typing import Any

from lib.errors import InputError

__all__ = ["CAPTION_MARK", "FIGREF_MIME", "FIGURE_MARK", "Figure", "FigureRef", "current_chapter", "figure",
           "figure_target", "parse_figure_html", "set_chapter"]

FIGURE_MARK = "<!--spectral-book-figure:"
"""The HTML comment that opens a figure's output; base64 JSON of its target, number and caption follows."""
CAPTION_MARK = "<!--spectral-book-caption-->"
"""The HTML comment between the chart and its caption (the site drops what follows it and makes a caption)."""
FIGREF_MIME = "application/vnd.spectral-book.figref+json"
"""The mime type a :class:`FigureRef` adds to its glued output: ``{"target": "fig-3-spectrum"}``."""
_NAME = re.compile(r"[a-z][a-z0-9_]*")

_state: dict[str, Any] = {"chapter": None, "numbers": {}}


def set_chapter(chapter: int) -> None:
    """Start numbering the figures of chapter ``chapter`` from 1 (``lib.page.setup.book_setup`` calls this)."""
    if not isinstance(chapter, int) or isinstance(chapter, bool) or chapter < 0:
        raise InputError(f"chapter must be a non-negative int, not {chapter!r}")
    _state["chapter"], _state["numbers"] = chapter, {}


def current_chapter() -> int | None:
    """The chapter :func:`set_chapter` set last, or ``None``."""
    return _state["chapter"]


def figure_target(name: str, chapter: int) -> str:
    """The Sphinx target of figure ``name`` of ``chapter``: ``"fig-3-spectrum"`` (underscores become hyphens)."""
    return f"fig-{chapter}-{name.replace('_', '-')}"


@dataclass(frozen=True)
class FigureRef:
    """A reference to a figure: the text "Fig. 3.2", and on the site a link to ``target``."""

    target: str
    number: str

    def __str__(self) -> str:
        return f"Fig. {self.number}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": str(self), FIGREF_MIME: {"target": self.target, "number": self.number}}


class Figure:
    """A chart with its number and caption; displays as the chart followed by "Fig. N.k caption".

    Attributes:
        chart: the Altair chart (anything with ``_repr_mimebundle_`` that gives ``text/html``).
        ref: its :class:`FigureRef`. caption: the caption text.
    """

    def __init__(self, chart: Any, ref: FigureRef, caption: str) -> None:
        self.chart, self.ref, self.caption = chart, ref, caption

    def __repr__(self) -> str:
        return f"{self.ref}: {self.caption}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = self.chart._repr_mimebundle_(include, exclude)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if "text/html" not in data:
            raise InputError(f"{self.ref}: the chart gave no HTML output (mime types: {sorted(data)})")
        meta = json.dumps({"target": self.ref.target, "number": self.ref.number, "caption": self.caption})
        mark = FIGURE_MARK + base64.b64encode(meta.encode()).decode() + "-->"
        caption = (f'<p class="spectral-book-caption" style="margin:0.4em 0 1em;font-size:0.9em;color:#333">'
                   f"<b>{html.escape(str(self.ref))}</b> {html.escape(self.caption)}</p>")
        return {"text/html": f"{mark}\n{data['text/html']}\n{CAPTION_MARK}\n{caption}", "text/plain": repr(self)}


def figure(chart: Any, name: str, caption: str) -> Figure:
    """Show ``chart`` as the next numbered figure of the chapter, and glue ``fig_<name>`` for the prose.

    Args:
        chart: an Altair chart (or any object whose mime bundle has ``text/html``).
        name: lower-case identifier, unique in the chapter (``"spectrum"``, ``"gap_ratio"``).
        caption: one or two plain-text sentences: what the figure shows and what to see in it.

    Returns:
        The :class:`Figure`; as a cell's last expression it displays the chart and its caption.

    Raises:
        InputError: no chapter set (call ``lib.page.setup.book_setup(chapter=N)`` first), a bad name or an empty caption.

    Example:
        >>> import altair as alt, pandas as pd
        >>> from lib.page import figures
        >>> figures.set_chapter(3)
        >>> chart = alt.Chart(pd.DataFrame({"x": [0, 1]})).mark_point().encode(x="x")
        >>> fig = figures.figure(chart, "demo", "Two points.")
        >>> fig.ref, fig.ref.target
        (Fig. 3.1, 'fig-3-demo')
    """
    from lib.page.prose import glue

    chapter = _state["chapter"]
    if chapter is None:
        raise InputError("figure() needs the chapter's number: call lib.page.setup.book_setup(chapter=N) first")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"a figure's name is a lower-case identifier such as 'spectrum', not {name!r}")
    if not isinstance(caption, str) or not caption.strip():
        raise InputError(f"figure {name!r} needs a caption: what it shows and what to see in it")
    numbers: dict[str, int] = _state["numbers"]
    k = numbers.setdefault(name, len(numbers) + 1)
    ref = FigureRef(figure_target(name, chapter), f"{chapter}.{k}")
    glue(f"fig_{name}", ref, display=False)
    return Figure(chart, ref, caption.strip())


def parse_figure_html(text: str) -> tuple[dict[str, str], str] | None:
    """Split a :class:`Figure`'s HTML into its metadata (target, number, caption) and the chart's HTML alone;
    ``None`` for any other HTML. Used by the site's extension."""
    if not text.startswith(FIGURE_MARK):
        return None
    head, _, rest = text.partition("-->")
    meta = json.loads(base64.b64decode(head[len(FIGURE_MARK):]))
    chart = rest.split(CAPTION_MARK, 1)[0].strip("\n")
    return meta, chart
