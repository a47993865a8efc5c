"""``lib.page.tables``: column names that may wrap, a DataFrame's numbers rounded, data untouched; ranges for the prose."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.page.tables import BREAK, breakable, dropdown_table, interval_text, page_table, value_range


def test_column_names_get_a_break_opportunity_after_each_underscore():
    assert breakable("final_real_actadd") == f"final_{BREAK}real_{BREAK}actadd"
    assert breakable(3) == "3"
    df = pd.DataFrame({"spectral_alignment": [0.5], "direction": ["word: ocean"]})
    html = page_table(df).to_html()
    assert f"spectral_{BREAK}alignment" in html and "word: ocean" in html
    assert list(df.columns) == ["spectral_alignment", "direction"]  # the data keep their names


def test_dataframe_numbers_get_the_decimals_their_column_needs_and_index_hidden():
    df = pd.DataFrame({"alpha": [0.0, 1000.0], "c": [np.nan, 0.99951], "rank": [154.5, 1.0],
                       "align": [0.74, 0.99996], "label": ["a", "b"]}, index=["row_one", "row_two"])
    html = page_table(df).to_html()
    for shown in (">0<", ">1000<", ">–<", ">1.000<", ">154.500<", ">0.740<", ">a<"):
        assert shown in html, shown
    assert ">0.9995<" not in html and "row_one" not in html
    assert "row_" in page_table(df, index=True).to_html()
    assert "1000.000000" in page_table(df, precision=None).to_html()


def test_a_styler_keeps_its_own_formats_and_multiindex_columns_wrap():
    df = pd.DataFrame([[1.23456, 2.0]], columns=pd.MultiIndex.from_tuples([("delta_H", "as_measured"), ("r_rot", "x")]))
    html = page_table(df.style.format("{:.1f}")).to_html()
    assert ">1.2<" in html and f"delta_{BREAK}H" in html and f"as_{BREAK}measured" in html


def test_value_range_is_one_number_when_the_ends_print_alike():
    assert value_range([0.921, 0.944, 0.93]) == "0.92–0.94"
    assert value_range([0.9512, 0.9549]) == "0.95"  # not "0.95–0.95"
    assert value_range(np.array([[4.61, np.nan], [4.64, 4.6]]), ".1f") == "4.6"
    assert value_range([0.1546, 0.166], ".3f") == "0.155–0.166"
    with pytest.raises(ValueError):
        value_range([np.nan])


def test_labels_and_text_cells_are_escaped_not_read_as_tags():
    df = pd.DataFrame({"|<v₁', u>| after": [0.5], "note": ["a <b> c"]})
    out = page_table(df).to_html()
    assert "|&lt;v₁', u&gt;| after" in out and "a &lt;b&gt; c" in out
    assert "<v₁" not in out
    assert "&lt;v₁" in page_table(df.style.format(precision=2)).to_html()  # a Styler's header too


def test_interval_text_one_text_per_pair():
    assert interval_text([0.7123, np.nan], [0.8601, 0.9]) == ["0.712–0.860", "–"]
    assert interval_text(pd.Series([1.0]), pd.Series([2.0]), ".1f") == ["1.0–2.0"]
    with pytest.raises(ValueError):
        interval_text([1.0], [1.0, 2.0])


def test_row_labels_are_escaped_too():
    """A table shown with its index: a row label ``|<v₁', u>|`` must reach the page, not vanish as a tag."""
    df = pd.DataFrame({"value": [0.5]}, index=["|<v₁', u>|"])
    out = page_table(df, index=True).to_html()
    assert "|&lt;v₁', u&gt;|" in out and "<v₁'" not in out


def test_dropdown_table_is_closed_html_with_its_summary():
    box = dropdown_table(pd.DataFrame({"a b": [1.5]}), "The numbers of Fig. 3.2")._repr_html_()
    assert box.startswith('<details class="spectral-book-table">') and "open" not in box.split(">")[0]
    assert "The numbers of Fig. 3.2</summary>" in box and "<table" in box
