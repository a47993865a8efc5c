"""Two runs of every chapter give identical numbers.

The book build (the ``built_site`` fixture) keeps each executed notebook in
``_build/jupyter_execute``. Here every chapter is executed a second time, independently, and every
result it displays (``execute_result`` and ``display_data``: tables, printed reprs, chart specs with
their data, glued values) must match the build's byte for byte, after removing what is random by
design (Altair's element ids, pandas' table ids, widget model ids, object addresses) and the timing
lines of progress bars. The text around the numbers must match exactly; the numbers themselves to
a relative 1e-6 (absolute 1e-12 for values at round-off level). A multithreaded float64 BLAS
reduction can differ in its last bits between two runs (its summation order depends on memory
alignment and thread scheduling), and the chapters' perturbation experiments amplify such bits a
little; both stay far below what a page displays.
"""

from __future__ import annotations

import os
import re

import jupytext
import numpy as np
import pytest
from conftest import ROOT, toc_pages
from nbclient import NotebookClient

from lib.page.build_info import is_notebook

pytestmark = pytest.mark.slow

# Pages whose outputs describe the build itself, not the science.
MACHINE_PAGES = {"book/about_build"}
_VOLATILE = [
    (re.compile(r"altair-viz-[0-9a-f]+"), "altair-viz-ID"),
    (re.compile(r"\bT_[0-9a-f]{5}"), "T_ID"),  # pandas Styler table ids
    (re.compile(r" at 0x[0-9a-f]+"), " at 0xADDR"),  # object reprs
    (re.compile(r"data-[0-9a-f]{32}"), "data-HASH"),  # Altair names datasets by a hash of their bytes
    (re.compile(r"\d+(\.\d+)?(it/s|s/it)"), "RATE"),
    (re.compile(r"\[\d\d:\d\d<[^\]]*\]"), "[ETA]"),
]


def _notebooks() -> list[str]:
    return [p for p in toc_pages() if p not in MACHINE_PAGES and is_notebook(ROOT / f"{p}.md")]


_FLOAT = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")
_SKIP_MIME = ("application/vnd.jupyter.widget-view+json",)  # random model ids; no numbers


def _normalise(text: str) -> tuple[str, list[float]]:
    """``(skeleton, numbers)``: the text with volatile ids replaced and every float pulled out."""
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return _FLOAT.sub("<num>", text), [float(x) for x in _FLOAT.findall(text)]


def _results(nb) -> list[tuple[str, tuple[str, list[float]]]]:
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for o in cell.get("outputs", []):
            if o.output_type in ("execute_result", "display_data"):
                for mime in sorted(o.get("data", {})):
                    if mime.startswith(("text/", "application/json", "application/vnd")) and mime not in _SKIP_MIME:
                        data = o["data"][mime]
                        data = "".join(data) if isinstance(data, list) else str(data)
                        out.append((f"cell {i} {mime}", _normalise(data)))
    return out


@pytest.mark.parametrize("page", _notebooks())
def test_second_run_matches_the_build(built_site, page):
    built = built_site.parent / "jupyter_execute" / f"{page}.ipynb"
    assert built.is_file(), f"the build kept no executed notebook for {page}"
    first = _results(jupytext.read(built))
    nb = jupytext.read(ROOT / f"{page}.md")
    env_backup = dict(os.environ)
    os.environ.update(SPECTRAL_BOOK_BUILD="1", HF_HUB_OFFLINE="1", PYTHONHASHSEED="0")
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "book")}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    second = _results(nb)
    assert len(first) == len(second), f"{page}: {len(first)} results in the build, {len(second)} in the rerun"
    for (where, (text1, nums1)), (_, (text2, nums2)) in zip(first, second, strict=True):
        assert text1 == text2, f"{page}, {where}: outputs differ between two runs:\n{text1[:300]}\n---\n{text2[:300]}"
        np.testing.assert_allclose(nums2, nums1, rtol=1e-6, atol=1e-12, err_msg=f"{page}, {where}")
