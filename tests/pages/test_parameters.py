"""A model-driven chapter re-runs on any supported checkpoint through its parameters cell, with papermill.

Chapters 0, 3, 4, 5 and 6 open with a code cell tagged ``parameters`` (papermill's convention): ``papermill -p
model <folder>`` re-computes every figure, number and verdict of the chapter for that model and its random-init
twins (chapters 3-6 also take ``second_model`` and a ``prompts`` file).
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

PARAMETERISED = ["00_layer_spectra", "03_real_models", "04_jacobian_funnel", "05_steering_lab", "06_two_views"]
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
    twins = set() if slug == "05_steering_lab" else {"twin_seeds"}  # chapter 5's control is a random direction
    assert {"model", "device", "dtype"} | twins <= names, names
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
    name = lib.load_model(str(folder)).name
    assert name in glued["tk_held"] + glued["tk_not_held"]
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


def test_chapter_3_runs_on_a_readers_checkpoints_and_prompts(tmp_path, monkeypatch, tokenized_tiny):
    """Both models, the twins' seeds and the prompt set replaced: every glued number, name and Takeaway line is
    the tiny models'; the prompts (words of the decoder's grammar) are read from a text file."""
    import lib
    from lib.models.decoder.language import prompts as decoder_prompts

    texts = decoder_prompts(6)
    prompts_file = tmp_path / "my_prompts.txt"
    prompts_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
    bert, llama = (str(tokenized_tiny[f]) for f in ("bert", "llama"))
    nb = _run(tmp_path, "03_real_models", monkeypatch, model=bert, second_model=llama, twin_seeds=[5, 6],
              prompts=str(prompts_file))
    glued = _glued(nb)
    first, second = lib.load_model(bert), lib.load_model(llama)
    assert glued["model_name"] == first.label and glued["name1"] == first.label
    assert glued["name2"] == second.label
    assert glued["n_prompts"] == glued["dec_prompts"] == str(len(texts))
    assert glued["n_twins"] == "2" and glued["twin_seeds_txt"] == "5, 6"
    assert glued["n_layers"] == str(first.n_layers) and glued["dec_layers"] == str(second.n_layers)
    assert glued["d_minilm"] == str(first.d_model) and glued["dec_d"] == str(second.d_model)
    assert glued["second_desc"] == second.label and glued["l1_kind"] in ("real", "complex")
    for key in ("gaps_finding", "l1_finding", "l2_finding", "rnd_finding", "own_finds", "twin_worse"):
        assert glued[key], key  # the Findings' phrases, decided from the tiny models' numbers
    takeaway = " ".join(glued[k] for k in ("tk_held", "tk_not_held", "tk_so"))
    assert "MiniLM" not in takeaway and "decoder" not in takeaway and first.label in takeaway
    page = json.dumps(nb, ensure_ascii=False)
    assert f"every layer of trained {first.label}" in page  # the captions name the loaded model
    assert f"{first.label}: " in page and "min on this machine" in page  # the time estimate, printed first


@pytest.fixture(scope="module")
def story_prompts(tmp_path_factory):
    """A text file of 6 stories of the decoder's grammar (few prompts keep the chapters' runs short)."""
    from lib.models.decoder.language import prompts as decoder_prompts

    path = tmp_path_factory.mktemp("prompts") / "stories.txt"
    path.write_text("\n".join(decoder_prompts(6)) + "\n", encoding="utf-8")
    return path


def test_chapter_4_runs_on_a_readers_decoder_and_encoder(tmp_path, monkeypatch, tokenized_tiny, story_prompts):
    """A tiny Llama as the pre-norm model, a tiny BERT as the post-LN contrast, two twins and six prompts: the
    book-decoder-only parts (training curve, saved steps) are skipped with one line, every verdict is glued."""
    import lib

    llama, bert = (str(tokenized_tiny[f]) for f in ("llama", "bert"))
    nb = _run(tmp_path, "04_jacobian_funnel", monkeypatch, model=llama, second_model=bert, twin_seeds=[5, 6],
              prompts=str(story_prompts))
    glued = _glued(nb)
    assert glued["n_prompts"] == "6" and glued["decoder_d"] == str(lib.load_model(llama).d_model)
    assert glued["n_boot"] == "200"  # a small model keeps the book's resamples (lib.models.paper.bootstrap_resamples)
    for claim in ("FG3", "FG4", "FG7"):
        assert glued[f"claim_{claim}_verdict"], claim
    page = json.dumps(nb, ensure_ascii=False)
    assert "section 4.1's curve needs the book decoder's" in page  # its training log is the book decoder's alone
    assert "d = 32, 3 layers; Jacobians of it and 2 twins on 6 prompts" in page  # the estimate, printed first


def test_chapter_4_refuses_an_encoder_as_its_pre_norm_model(tmp_path, monkeypatch, tokenized_tiny):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as err:
        _run(tmp_path, "04_jacobian_funnel", monkeypatch, model=str(tokenized_tiny["bert"]))
    assert err.value.ename == "InputError" and "give it as second_model" in err.value.evalue


def test_chapter_5_steers_a_readers_encoder_and_decoder(tmp_path, monkeypatch, tokenized_tiny, story_prompts):
    """A tiny BERT steered toward 'ocean', a tiny Llama (with its LM head) toward 'boat': the Results-page rows
    name the tiny models, not the stand-ins."""
    import lib

    bert, llama = (str(tokenized_tiny[f]) for f in ("bert", "llama"))
    nb = _run(tmp_path, "05_steering_lab", monkeypatch, model=bert, second_model=llama, prompts=str(story_prompts))
    glued = _glued(nb)
    assert glued["n_prompts_m"] == glued["n_prompts_d"] == "6"
    for claim in ("LA10", "LA11"):
        assert glued[f"claim_{claim}_verdict"], claim
        assert "MiniLM" not in glued[f"claim_{claim}_models"] + glued[f"claim_{claim}_measured"]
    assert lib.load_model(bert).name in glued["claim_LA10_models"]
    assert "forward passes, about" in json.dumps(nb)  # the estimate, printed first


def test_chapter_6_runs_on_a_readers_encoder_and_decoder(tmp_path, monkeypatch, tokenized_tiny, story_prompts):
    """Tiny BERT and Llama in MiniLM's and the decoder's places, two twins each, six prompts: every claim TV1-TV7
    gets a verdict, and the Results page names the tiny models."""
    import lib

    bert, llama = (str(tokenized_tiny[f]) for f in ("bert", "llama"))
    nb = _run(tmp_path, "06_two_views", monkeypatch, model=bert, second_model=llama, twin_seeds=[5, 6],
              prompts=str(story_prompts))
    glued = _glued(nb)
    for claim in ("TV1", "TV2", "TV3", "TV4", "TV5", "TV6", "TV7"):
        assert glued[f"claim_{claim}_verdict"], claim
        assert "MiniLM" not in glued[f"claim_{claim}_models"], glued[f"claim_{claim}_models"]
    assert lib.load_model(bert).name in glued["claim_TV1_models"]
    assert "2 random-init twins each" in glued["claim_TV1_models"]
