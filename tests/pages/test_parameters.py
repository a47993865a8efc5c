"""A model-driven chapter re-runs on any supported checkpoint through its parameters cell, with papermill.

Chapter 0 opens with a code cell tagged ``parameters`` (papermill's convention): ``papermill -p model <folder>``
re-computes every figure, number and Takeaway line of the chapter for that model and its random-init twins.
Tested here with the real papermill on tiny random-initialised checkpoints of an encoder family (BERT) and a
decoder family (Llama, grouped-query attention), and with a misspelt alias, which must stop at the loading cell
with the library's one-line message.
"""

from __future__ import annotations

import json
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow

PARAMETERISED = ["00_layer_spectra"]
"""The chapters whose first code cell is a papermill ``parameters`` cell (the others follow, issue by issue)."""


def _notebook(tmp_path: Path, slug: str) -> Path:
    nb = jupytext.read(ROOT / "book" / f"{slug}.md", fmt="md:myst")
    path = tmp_path / f"{slug}.ipynb"
    jupytext.write(nb, path)
    return path


def _run(tmp_path: Path, slug: str, monkeypatch, **parameters):
    import papermill

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports lib from this checkout
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / f"{slug}.out.ipynb"
    papermill.execute_notebook(str(_notebook(tmp_path, slug)), str(out), parameters=parameters,
                               kernel_name="python3", cwd=str(ROOT / "book"), progress_bar=False,
                               execution_timeout=600)
    return json.loads(out.read_text(encoding="utf-8"))


def _glued(nb: dict) -> dict[str, str]:
    """name → text/plain of every value the notebook glued (myst-nb's scrapbook outputs)."""
    def text(data: dict) -> str:
        plain = next(v for k, v in data.items() if k.endswith("text/plain"))  # myst-nb's papermill.record mime
        return ("".join(plain) if isinstance(plain, list) else plain).strip("'\"")

    return {o["metadata"]["scrapbook"]["name"]: text(o["data"])
            for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
            if "scrapbook" in o.get("metadata", {})}


@pytest.mark.parametrize("slug", PARAMETERISED)
def test_the_first_code_cell_is_papermills_parameters_cell(slug):
    cells = [c for c in jupytext.read(ROOT / "book" / f"{slug}.md", fmt="md:myst").cells if c.cell_type == "code"]
    first = cells[0]
    assert "parameters" in first.metadata.get("tags", []), f"{slug}: the first code cell is not tagged parameters"
    names = {line.split("=")[0].strip() for line in first.source.splitlines() if "=" in line}
    assert {"model", "twin_seeds", "device", "dtype"} <= names, names
    assert len(first.source.splitlines()) <= 12


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_chapter_0_runs_on_a_readers_checkpoint(tmp_path, tiny_dir, monkeypatch, family):
    folder = tiny_dir(family)
    nb = _run(tmp_path, "00_layer_spectra", monkeypatch, model=str(folder), twin_seeds=[5, 6])
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])
    glued = _glued(nb)
    import lib

    label = lib.load_model(str(folder)).label
    assert glued["model_name"] == label
    assert glued["n_twins"] == "2"
    assert glued["n_layers"] == str(lib.load_model(str(folder)).n_layers)
    assert label in glued["tk_gaps"] and glued["tk_gaps_label"] in ("Held", "Did not hold")
    assert "MiniLM" not in json.dumps([glued[k] for k in glued if k.startswith("tk_")])
    captions = json.dumps(nb)
    assert f"Every eigenvalue of every layer of {label}" in captions


def test_a_misspelt_model_stops_at_the_loading_cell_with_one_message(tmp_path, monkeypatch):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as err:
        _run(tmp_path, "00_layer_spectra", monkeypatch, model="minilmm")
    assert err.value.ename == "ModelNotAvailableError"
    assert "did you mean 'minilm'?" in err.value.evalue, err.value.evalue
    assert (tmp_path / "00_layer_spectra.out.ipynb").exists()  # papermill keeps what ran, for the reader
