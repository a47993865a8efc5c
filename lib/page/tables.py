"""Tables for the page: pandas tables that fit the book's text column.

A results table keeps its column names as they are in the code (``spectral_alignment``,
``final_simplified``, …), so that a reader can use them; but such a name has no break
opportunity, and a table of eight of them was wider than the column and hid its last columns
behind a horizontal scroll. :func:`page_table` lets a column name wrap after each underscore
(an invisible zero-width space) and, for a plain DataFrame, hides the row index and rounds the
numbers. The book's style sheet (``book/_static/tables.css``) sets output tables a little smaller.

:func:`value_range` formats a range of results for the prose ("0.92–0.94", or one number when both
ends print alike).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

__all__ = ["BREAK", "Dropdown", "breakable", "dropdown_table", "interval_text", "p_text", "page_table", "text_columns",
           "value_range"]

BREAK = "\u200b"
"""Zero-width space: a line-break opportunity that renders as nothing."""


def breakable(label: object) -> str:
    """``label`` as text with a break opportunity after every underscore."""
    return str(label).replace("_", "_" + BREAK)


def page_table(data: pd.DataFrame | Styler, precision: int | None = 3, *, index: bool = False) -> Styler:
    """A table for the page: column names that may wrap after an underscore, and are HTML-escaped.

    pandas' Styler writes labels and text cells into the HTML as they are, so a header such as
    ``|<v₁', u>|`` was read by the browser as a tag and vanished; names and a DataFrame's text cells are
    escaped here (a Styler passed in keeps its own cell formats).

    Args:
        data: a DataFrame, or a Styler whose formats (and hidden index) are kept as they are.
        precision: decimals for a DataFrame's numbers, the same for a whole column (``0.740``,
            ``1.000``), except that a column of whole numbers shows none (``0``, ``1000``);
            missing values show as ``–``. ``None`` keeps pandas' default format. Ignored for a
            Styler, which brings its own formats.
        index: show a DataFrame's row index (a Styler decides that itself).

    Returns:
        A Styler; the data are not changed, only their display.
    """
    if isinstance(data, Styler):
        sty = data
    else:
        if precision is None:
            sty = data.style.format(escape="html")
        else:
            formats = {c: f"{{:.{_decimals(data[c], precision)}f}}" for c in data.select_dtypes("number").columns}
            sty = data.style.format(formats, na_rep="–", escape="html")
        if not index:
            sty = sty.hide(axis="index")
    sty = sty.format_index(lambda label: html.escape(str(label), quote=False), axis="index")
    return sty.format_index(lambda label: html.escape(breakable(label), quote=False), axis="columns")


class Dropdown:
    """HTML that shows ``summary`` and opens on a click to show ``body`` (an HTML ``<details>``), the same on
    the site and in JupyterLab. Displayed by IPython through ``_repr_html_``."""

    def __init__(self, summary: str, body: str) -> None:
        self.summary, self.body = summary, body

    def _repr_html_(self) -> str:
        return (f'<details class="spectral-book-table"><summary style="cursor:pointer;display:list-item">{html.escape(self.summary)}'
                f"</summary>\n{self.body}\n</details>")

    def __repr__(self) -> str:
        return f"Dropdown({self.summary!r})"


def dropdown_table(data: pd.DataFrame | Styler, summary: str, precision: int | None = 3, *,
                   index: bool = False) -> Dropdown:
    """:func:`page_table` behind a click: the numbers behind a figure, which the figure shows first.

    Args:
        data, precision, index: as :func:`page_table`.
        summary: what the closed dropdown says, e.g. ``"The numbers of Fig. 3.2 (γ_t per layer)"``.
    """
    return Dropdown(summary, page_table(data, precision, index=index).to_html())


def _decimals(column: pd.Series, precision: int) -> int:
    """``0`` for a column of whole numbers (``α = 0, 1, …, 1000``), else ``precision``."""
    v = column.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return 0 if np.array_equal(v, np.round(v)) else precision


def value_range(values: object, fmt: str = ".2f") -> str:
    """The range of ``values`` for the prose, ``"0.92–0.94"``; one number when both ends print alike.

    A range whose ends round to the same text ("0.95–0.95") reads like a typo; it is shown as
    ``"0.95"``. NaNs are ignored; an empty or all-NaN input raises ``ValueError``.
    """
    arr = np.asarray(values, dtype=float).ravel()
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        raise ValueError("value_range needs at least one number")
    lo, hi = format(arr.min(), fmt), format(arr.max(), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def interval_text(lo: object, hi: object, fmt: str = ".3f") -> list[str]:
    """One ``"lo–hi"`` text per pair of interval ends, for a table column (two numeric columns take more
    room than one text column, and a wide table hides its last columns); ``"–"`` where an end is missing."""
    los, his = np.asarray(lo, dtype=float).ravel(), np.asarray(hi, dtype=float).ravel()
    if los.shape != his.shape:
        raise ValueError(f"lo and hi differ in length: {los.size} and {his.size}")
    return ["–" if np.isnan(a) or np.isnan(b) else f"{a:{fmt}}–{b:{fmt}}" for a, b in zip(los, his)]


def p_text(p: float, draws: int = 1000) -> str:
    """An empirical p-value for the prose, ``"0.0312"``; at its smallest possible value ``1/(draws+1)``
    (no null draw reached the observation) it says so: ``"0.0010, no draw of 1000 as high"``."""
    return f"{p:.4f}" + (f", no draw of {draws} as high" if p <= 1 / (draws + 1) + 1e-12 else "")


def text_columns(frame: pd.DataFrame, columns: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """A table for the page from ``frame``: ``columns`` maps each readable label to ``(column, format)``, the
    column formatted as text with that format spec (one precision per quantity; ``""`` keeps the values).

    Example:
        >>> text_columns(pd.DataFrame({"r_s": [0.123, -0.2]}), {"coupling": ("r_s", "+.2f")})["coupling"].tolist()
        ['+0.12', '-0.20']
    """
    return pd.DataFrame({label: (list(frame[col]) if not fmt else [format(v, fmt) for v in frame[col]])
                         for label, (col, fmt) in columns.items()})
