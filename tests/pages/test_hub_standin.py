"""The real-checkpoint path end to end, against a loopback stand-in for the model hub (tests/hub_standin.py).

With ``HF_ENDPOINT`` pointed at the stand-in, a fresh ``HF_HOME``, ``HF_HUB_OFFLINE=0`` and
``SPECTRAL_BOOK_REAL_MODELS=1``: each of the papers' hub ids downloads into the cache and is read by the
right family adapter, a second load sends no file again, a gated and a missing id each give the book's
one clear error and leave the cache as it was, and chapter 3's real-model cells run on every checkpoint
(and stop the build, with a message naming the checkpoint, when one cannot be fetched).

``huggingface_hub`` reads ``HF_ENDPOINT`` when it is imported, so every load runs in a fresh process
(a subprocess, or the notebook kernel) whose environment points at the stand-in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from conftest import ROOT
from hub_standin import GATED_ID, MISSING_ID, PAPER_FAMILIES, HubStandin, build_paper_checkpoints
from nbclient import NotebookClient

from lib.chapters import real_models as rm
from lib.models import paper

_PROBE = r"""
import json, os, sys, time
import lib

out = []
for arg in sys.argv[1:]:
    if arg.startswith("HF_TOKEN="):  # from here on, requests carry this token
        os.environ["HF_TOKEN"] = arg.removeprefix("HF_TOKEN=")
        continue
    t0 = time.perf_counter()
    try:
        m = lib.load_model(arg)
        res = {"family": m.family, "layers": m.n_layers, "tokens": len(m.encode("The cat sat.")["tokens"])}
    except Exception as exc:
        res = {"error": type(exc).__name__, "message": str(exc)}
    out.append([arg, {**res, "seconds": time.perf_counter() - t0}])
print("PROBE " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The stand-in, serving a tiny checkpoint under each paper id and a gated one."""
    repos = build_paper_checkpoints(tmp_path_factory.mktemp("hub-repos"))
    with HubStandin(repos, gated=[GATED_ID]) as standin:
        yield standin


def _env(hub: HubStandin, hf_home: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_HOME=str(hf_home), HF_HUB_OFFLINE="0",
                TRANSFORMERS_OFFLINE="0", SPECTRAL_BOOK_REAL_MODELS="1", HF_HUB_DISABLE_TELEMETRY="1",
                OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **extra)  # tiny models: threads only contend


def _probe(hub: HubStandin, hf_home: Path, args: list[str]) -> list[tuple[str, dict]]:
    """``lib.load_model`` of each name in ``args``, in order, in one fresh process pointed at the stand-in:
    ``(name, family or error)``. An argument ``HF_TOKEN=<token>`` sends that token from then on."""
    env = {k: v for k, v in _env(hub, hf_home).items() if k != "HF_TOKEN"}
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    return [tuple(pair) for pair in json.loads(lines[-1].removeprefix("PROBE "))]


def _cached_files(hf_home: Path) -> dict[str, bytes]:
    """Every file in the hub cache (symlinks resolved), by path relative to the cache."""
    cache = hf_home / "hub"
    return {p.relative_to(cache).as_posix(): p.read_bytes() for p in sorted(cache.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def first_loads(hub, tmp_path_factory):
    """Each paper id loaded once into an empty cache: ``(hf_home, results, index of the first request)``."""
    hf_home = tmp_path_factory.mktemp("hf-home")
    start = len(hub.log)
    return hf_home, dict(_probe(hub, hf_home, list(PAPER_FAMILIES))), start


def test_the_standin_serves_exactly_the_papers_ids():
    assert set(PAPER_FAMILIES) == {m.hub_id for m in paper.PAPER_MODELS}


def test_each_paper_id_downloads_into_the_cache_with_its_family(hub, first_loads):
    hf_home, results, start = first_loads
    for name, family in PAPER_FAMILIES.items():
        assert results[name].get("family") == family, results[name]
        assert results[name]["tokens"] > 3  # its own tokenizer came with it
        repo = hub.repos[name]
        snapshot = hf_home / "hub" / f"models--{name.replace('/', '--')}" / "snapshots" / repo.sha
        for path, data in repo.files.items():
            assert (snapshot / path).read_bytes() == data, f"{name}: {path} missing or different in the cache"
    downloaded = hub.file_downloads(start)
    assert any(r.path.startswith("/cdn/") for r in downloaded), "the weights did not come through the LFS redirect"
    assert {r.repo_id for r in downloaded if r.repo_id} == set(PAPER_FAMILIES)


def test_a_second_load_comes_from_the_cache(hub, first_loads):
    hf_home, _, _ = first_loads
    before, start = _cached_files(hf_home), len(hub.log)
    again = dict(_probe(hub, hf_home, list(PAPER_FAMILIES)))
    assert {name: r.get("family") for name, r in again.items()} == PAPER_FAMILIES
    assert hub.file_downloads(start) == []
    assert _cached_files(hf_home) == before


def test_gated_and_missing_ids_give_one_clear_error_and_lose_nothing(hub, first_loads):
    hf_home, _, _ = first_loads
    before, start = _cached_files(hf_home), len(hub.log)
    res = _probe(hub, hf_home, [GATED_ID, MISSING_ID, "HF_TOKEN=hf_a_token_without_access", GATED_ID,
                                "openai-community/gpt2"])
    status = [r.status for r in hub.log[start:] if r.repo_id == GATED_ID and "/resolve/" in r.path]
    assert status[0] == 401 and status[-1] == 403  # anonymous, then a token without access
    assert [name for name, _ in res] == [GATED_ID, MISSING_ID, GATED_ID, "openai-community/gpt2"]
    (_, anonymous), (_, missing), (_, with_token), (_, cached) = res
    for gated in (anonymous, with_token):
        assert gated["error"] == "ModelNotAvailableError" and "gated" in gated["message"]
        assert "licence" in gated["message"] and "HF_TOKEN" in gated["message"]
    assert missing["error"] == "ModelNotAvailableError" and f"Unknown model id '{MISSING_ID}'" in missing["message"]
    assert max(r["seconds"] for r in (anonymous, missing, with_token)) < 20  # no retry loop
    assert cached.get("family") == "gpt2"  # what was cached still loads
    after = _cached_files(hf_home)
    assert {k: after.get(k) for k in before} == before  # nothing lost or changed
    gated_dir = f"models--{GATED_ID.replace('/', '--')}/"
    new = [k for k in after if k not in before]
    # the hub's listing of the gated repo may be remembered (refs/, trees/), but no file of it
    assert all(k.startswith(gated_dir) and not k.startswith((gated_dir + "blobs", gated_dir + "snapshots"))
               for k in new), new
    assert not [p for p in (hf_home / "hub").rglob("*") if p.name.endswith(".incomplete")]


def test_a_hub_checkpoint_loads_its_base_model_quietly_and_an_incomplete_one_is_refused(tmp_path, capfd):
    """Hub checkpoints are saved with their pretraining head: the base model leaves the head unused and
    has no pooler, which is fine (no load report on the page); a missing block weight is not."""
    from hub_standin import build_checkpoint
    from safetensors.torch import load_file, save_file

    import lib

    folder = build_checkpoint("bert", tmp_path / "bert")
    capfd.readouterr()
    assert lib.load_model(str(folder)).family == "bert"
    out, err = capfd.readouterr()
    assert "LOAD REPORT" not in out + err and "UNEXPECTED" not in out + err
    weights = load_file(folder / "model.safetensors")
    del weights[next(k for k in weights if k.endswith("encoder.layer.1.attention.self.value.weight"))]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(lib.CheckpointError, match=r"layer\.1\.attention\.self\.value\.weight missing"):
        lib.load_model(str(folder))


def test_a_strict_run_raises_what_a_page_would_print(monkeypatch, tiny_dir):
    """``run_paper_model(strict=True)``: the load or analysis failure, with the loader's advice, as an error."""
    import lib

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert rm.run_paper_model(MISSING_ID, ["A prompt."]).startswith(f"⚠ {MISSING_ID} could not be loaded")
    with pytest.raises(lib.errors.RealModelRunError) as err:
        rm.run_paper_model(MISSING_ID, ["A prompt."], strict=True)
    msg = str(err.value)
    assert msg.startswith(f"{MISSING_ID} could not be loaded (ModelNotAvailableError)") and "HF_HUB_OFFLINE" in msg
    assert "build stops" in msg and paper.MODEL_LIST_ENV in msg
    assert isinstance(err.value.__cause__, lib.ModelNotAvailableError)

    def boom(F):
        raise MemoryError("out of memory in eig")

    monkeypatch.setattr(rm.als, "eigen_bases", boom)
    with pytest.raises(lib.errors.RealModelRunError, match="was loaded but its analysis failed .MemoryError."):
        rm.run_paper_model(str(tiny_dir("bert")), ["A prompt."], strict=True)


# -- chapter 3 with the switch on ------------------------------------------------------------------------
def _real_model_cells() -> tuple[list, nbformat.NotebookNode]:
    """Chapter 3's code cells up to the one that sets ``texts`` (setup, models, prompts), and its
    real-model cell (section 3.5), as a notebook."""
    nb = jupytext.read(ROOT / "book" / "03_real_models.md")
    code = [c for c in nb.cells if c.cell_type == "code"]
    upto = next(i for i, c in enumerate(code) if "texts = load_prompts(" in c.source)
    real = [c for c in code if "paper.selected_models()" in c.source]
    assert len(real) == 1, "chapter 3 should have one cell that runs paper.selected_models()"
    nb.cells = code[: upto + 1] + real
    return nb.cells, real[0]


def _outputs_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
        else:
            parts.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(parts)


@pytest.mark.slow
def test_chapter_3_runs_every_paper_checkpoint_from_the_hub_and_stops_on_a_missing_one(hub, tmp_path):
    cells, real = _real_model_cells()
    failing = nbformat.v4.new_code_cell(
        f"import os\nos.environ[{paper.MODEL_LIST_ENV!r}] = 'openai-community/gpt2,{MISSING_ID}'\n" + real.source,
        metadata={"tags": ["raises-exception"]},
    )
    nb = nbformat.v4.new_notebook(cells=[*cells, failing])
    start = len(hub.log)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "book")}}).execute(env=_env(hub, tmp_path / "hf"))
    errors = [(i, o) for i, c in enumerate(nb.cells) for o in c.get("outputs", []) if o.output_type == "error"]
    assert [i for i, _ in errors] == [len(nb.cells) - 1], [o.evalue for _, o in errors]

    page = _outputs_text(nb.cells[-2])
    assert "Offline build" not in page and "⚠" not in page and "LOAD REPORT" not in page
    for name in PAPER_FAMILIES:
        assert f"{name}: " in page, f"no chart of {name} in chapter 3's real-model cell"
        assert name in page.split(f"{name}: ", 1)[1], f"no spectrum table of {name}"
    assert {r.repo_id for r in hub.file_downloads(start) if r.repo_id} == set(PAPER_FAMILIES)

    err = errors[0][1]
    assert err.ename == "RealModelRunError"
    assert f"Unknown model id '{MISSING_ID}'" in err.evalue and paper.MODEL_LIST_ENV in err.evalue
    assert "build stops" in err.evalue
    assert "openai-community/gpt2: " in _outputs_text(nb.cells[-1])  # the models before it still ran
