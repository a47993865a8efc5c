"""Tables for the page: pandas tables that fit the book's text column.

A results table keeps its column names as they are in the code (``spectral_alignment``,
``final_simplified``, …), so that a reader can use them; but such a name has no break
opportunity, and a table of eight of them was wider than the column and hid its last columns
behind a horizontal scroll. :func:`page_table` lets a column name wrap after each underscore
(an invisible zero-width space) and, for a plain DataFrame, hides the row index and rounds the
numbers. The book's style sheet (``book/_static/tables.css``) sets output tables a little smaller.
"""

from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

__all__ = ["BREAK", "breakable", "page_table"]

BREAK = "\u200b"
"""Zero-width space: a line-break opportunity that renders as nothing."""


def breakable(label: object) -> str:
    """``label`` as text with a break opportunity after every underscore."""
    return str(label).replace("_", "_" + BREAK)


def page_table(data: pd.DataFrame | Styler, precision: int | None = 3, *, index: bool = False) -> Styler:
    """A table for the page: column names that may wrap after an underscore.

    Args:
        data: a DataFrame, or a Styler whose formats (and hidden index) are kept as they are.
        precision: a DataFrame's numbers are rounded to this many decimals and shown without
            trailing zeros (``1000``, ``0.25``, ``0.997``; missing values as ``–``); ``None``
            keeps pandas' default format. Ignored for a Styler, which brings its own formats.
        index: show a DataFrame's row index (a Styler decides that itself).

    Returns:
        A Styler; the data are not changed, only their display.
    """
    if isinstance(data, Styler):
        sty = data
    else:
        if precision is None:
            sty = data.style
        else:
            numbers = data.select_dtypes("number").columns
            sty = data.round(precision).style.format("{:g}", subset=numbers, na_rep="–")
        if not index:
            sty = sty.hide(axis="index")
    return sty.format_index(breakable, axis="columns")
