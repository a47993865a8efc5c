"""Walking a chart's Vega-Lite spec (a JSON tree), for the chart tests of every folder."""

from __future__ import annotations

from collections.abc import Iterator


def nodes(obj) -> Iterator[dict]:
    """Every dict in a JSON tree, depth first."""
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from nodes(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from nodes(v)
